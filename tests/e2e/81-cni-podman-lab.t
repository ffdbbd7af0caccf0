#!/usr/bin/env bash
# Real containers under the mesh: a two-node lab whose pods are OCI
# containers run by Debian's podman (runc) inside each node's network
# namespace (`zerohop lab podman`), networked by zerohop-cni, from an image
# built here from local files (busybox-static + zerohop; nothing pulled).
# Containers on both nodes reach each other by pod IP and through a Service
# by name (cluster DNS); a TrafficSplit sends everything to its weighted
# backend; a NetworkPolicy allows one client and denies another; same-node
# traffic is short-circuited (counters rise); `podman rm -f` removes the
# endpoint within a second; `lab down` leaves no container, veth, cgroup,
# IPAM record or CNI cache entry behind.
source "$(dirname "$0")/../lib/tap.sh"
source "$(dirname "$0")/../lib/lab_test.sh"
source "$(dirname "$0")/../lib/podman.sh"
lab_test_setup t81 busybox
pm_skip_unless_ready
cat >"$TMP/app.yaml" <<'YAML'
apiVersion: v1
kind: Service
metadata: {name: web}
spec:
  selector: {app: web}
  ports: [{name: http, port: 80, targetPort: 8080}]
---
apiVersion: v1
kind: Service
metadata: {name: web-v1}
spec:
  selector: {app: web, ver: "1"}
  ports: [{name: http, port: 80, targetPort: 8080}]
---
apiVersion: v1
kind: Service
metadata: {name: web-v2}
spec:
  selector: {app: web, ver: "2"}
  ports: [{name: http, port: 80, targetPort: 8080}]
---
apiVersion: split.smi-spec.io/v1alpha1
kind: TrafficSplit
metadata: {name: web-split}
spec:
  service: web
  backends:
    - {service: web-v1, weight: 0}
    - {service: web-v2, weight: 100}
YAML
"$ZH" lab up --lab $LAB >"$TMP/up.log" 2>&1
ok $? "lab up (two nodes, agents on the node cgroups)" || { sed 's/^/#   /' "$TMP/up.log"; done_testing; }
"$ZH" apply --lab $LAB -f "$TMP/app.yaml" >/dev/null
ok $? "apply the Services and the TrafficSplit"
PM_DNS=$("$ZH" get services --lab $LAB -n kube-system -o json | jq -r '.[] | select(.name == "kube-dns") | .clusterIP')

pm_image_tar "$TMP/img.tar"
pm_import "$TMP/img.tar"
ok $? "image built from busybox-static + zerohop, imported on both nodes ($(du -h "$TMP/img.tar" | cut -f1))"
pm_run node-a web-1 app=web,ver=1 zerohop echo --http 8080 --name web-1
pm_run node-b web-2 app=web,ver=2 zerohop echo --http 8080 --name web-2
pm_run node-a client role=friend sleep 100000
pm_run node-b client-b role=friend sleep 100000
pm_run node-a stranger role=stranger sleep 100000
ok $? "five containers started with podman (runc) on the two nodes"
cid=$(pm node-a inspect -f '{{.Id}}' web-1)
ok $(grep -q "zerohop-$LAB/node-a/libpod-$cid" /proc/$(pm node-a inspect -f '{{.State.Pid}}' web-1)/cgroup; echo $?) \
	"web-1's process is under node-a's cgroup (--cgroup-parent)"
ip1=$(pm_ip web-1); ip2=$(pm_ip web-2)
diag "web-1 $ip1 (node-a), web-2 $ip2 (node-b), DNS $PM_DNS"
case "$ip1:$ip2" in 10.244.0.2??:10.244.1.2??) r=0 ;; *) r=1 ;; esac
ok $r "the CNI plugin published both with addresses from their node's range"
two_eps() { [ "$("$ZH" get endpoints --lab $LAB -o json | jq '[.[] | select(.service == "web" or .name == "web") | .endpoints[]?] | length' 2>/dev/null)" -ge 2 ] ||
	"$ZH" get endpoints --lab $LAB | awk '$2 == "web" && $4 ~ /,/' | grep -q .; }
wait_until 5 two_eps
ok $? "Service web has both containers as endpoints"

is "$(pm_http node-a client "$ip2" 8080)" web-2 "node-a container -> node-b container by pod IP"
is "$(pm_http node-b client-b "$ip1" 8080)" web-1 "node-b container -> node-a container by pod IP"
wait_until 5 lab_synced node-a
seen=$(for _ in $(seq 12); do pm_http node-a client web-v1 80; pm_http node-a client web-v2 80; done | sort | uniq -c | awk '{print $2}' | tr '\n' ' ')
is "$seen" "web-1 web-2 " "through Services by name (cluster DNS): web-v1 and web-v2 answer"
seen=$(for _ in $(seq 10); do pm_http node-b client-b web 80; done | sort -u | tr '\n' ' ')
is "$seen" "web-2 " "TrafficSplit web: 10 requests all go to the weight-100 backend"

# same-node short-circuit: client -> web-1 on node-a
acc() { "$ZH" get stats --lab $LAB | awk -v n="node $1:" '$0 ~ "^node" {on = index($0, n) == 1} on && $1 == "accel_sockets" {print $2}'; }
a0=$(acc node-a)
for _ in $(seq 5); do pm_http node-a client "$ip1" 8080 >/dev/null; done
a1=$(acc node-a)
[ "${a1:-0}" -gt "${a0:-0}" ]
ok $? "same-node container traffic short-circuited (node-a accel_sockets $a0 -> $a1)"

# NetworkPolicy: web admits role=friend only
cat >"$TMP/pol.yaml" <<'YAML'
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: web-friends}
spec:
  podSelector: {matchLabels: {app: web}}
  policyTypes: [Ingress]
  ingress:
    - from: [{podSelector: {matchLabels: {role: friend}}}]
YAML
"$ZH" apply --lab $LAB -f "$TMP/pol.yaml" >/dev/null
wait_until 5 lab_synced node-a; wait_until 5 lab_synced node-b
is "$(pm_http node-a client "$ip2" 8080)" web-2 "policy allow: role=friend still reaches web-2"
is "$(pm_http node-a stranger "$ip2" 8080)" "" "policy deny: role=stranger cannot reach web-2"
is "$(pm_http node-a stranger web-v1 80)" "" "policy deny: nor web-1 through its Service"

# podman rm -f: the endpoint goes within a second
has_ep() { "$ZH" get endpoints --lab $LAB | grep -q "$1:8080"; }
has_ep "$ip2"; ok $? "web-2 is an endpoint before rm"
t0=$(date +%s%N)
pm node-b rm -f -t 0 web-2 >/dev/null
wait_until 1 eval '! has_ep '"$ip2"
r=$?; ms=$((($(date +%s%N) - t0) / 1000000))
ok $r "podman rm -f web-2: its endpoint is gone ${ms} ms after rm was started"
ok $([ ! -e /run/zerohop/$LAB/podman/node-b/ipam/ips/$ip2 ]; echo $?) "its address record is freed"

# lab down: nothing left
netns=$(for n in node-a node-b; do pm $n ps -q | while read -r c; do pm $n inspect -f '{{.NetworkSettings.SandboxKey}}' "$c"; done; done | sort -u)
"$ZH" lab down --lab $LAB >/dev/null 2>&1
ok $? "lab down"
left=""
for n in $netns; do [ -e "$n" ] && left="$left $n"; done
ls /var/lib/cni/results/ 2>/dev/null | grep -q "^zhlab-$LAB-" && left="$left cni-cache"
ls -d /sys/fs/cgroup/*/zerohop-$LAB 2>/dev/null | grep -q . && left="$left cgroups"
[ -e /run/zerohop/$LAB ] && left="$left rundir"
ip -br link | grep -q '^zh' && left="$left veth-in-root"
pgrep -f "conmon.*zerohop/$LAB/" >/dev/null && left="$left conmon"
is "$left" "" "lab down left no container netns, CNI cache entry, cgroup (v1 or v2), IPAM record, conmon"
done_testing
