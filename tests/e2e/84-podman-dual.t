#!/usr/bin/env bash
# A dual-stack lab with `--runtime podman`: pods are OCI containers run by
# Debian's podman + runc, networked by zerohop-cni with podCIDR6, so each
# gets an IPv6 derived from its IPv4 exactly as the lab's process pods do.
# Checked: the address inside the container is the one `lab status` and the
# published pod (podIPs) name; IPv6 pod to pod on the same node and across
# nodes; the Service's IPv6 ClusterIP (and its AAAA name) from a container;
# a container started by hand on the lab's CNI network also gets its IPv6;
# lab down leaves no container netns or CNI cache entry.
source "$(dirname "$0")/../lib/tap.sh"
source "$(dirname "$0")/../lib/lab_test.sh"
source "$(dirname "$0")/../lib/podman.sh"
lab_test_setup t84 busybox
command -v podman >/dev/null && command -v runc >/dev/null || skip_all "no podman/runc"

{
	m_cluster t84 "node-a node-b" dual
	m_pod web-1 node-a "app: web" "$(m_ctr c http:8080 "$ZH" echo --http "[::]:8080" --name web-1)"
	m_pod web-2 node-b "app: web" "$(m_ctr c http:8080 "$ZH" echo --http "[::]:8080" --name web-2)"
	m_pod client node-a "role: client" "$(m_ctr c "" sleep 100000)"
	M_SPEC="ipFamilyPolicy: PreferDualStack" m_svc web "app: web" "http=80:8080"
} >"$TMP/app.yaml"
# get URL from POD with busybox nc ([v6] literal or name); the echo's name
http6() {
	lab_exec "$1" busybox sh -c 'printf "GET / HTTP/1.0\r\nHost: x\r\n\r\n" | nc -w 3 "$0" "$1"' "$2" "$3" 2>/dev/null |
		sed -n '$p' | jq -r .name 2>/dev/null
}
ip6_of() { "$ZH" lab status --lab "$LAB" -o json | jq -r ".pods[] | select(.name==\"$1\") | .ip6"; }

"$ZH" lab up --lab $LAB --runtime podman -f "$TMP/app.yaml" >"$TMP/up.log" 2>&1
ok $? "lab up --runtime podman on a dual-stack Cluster ($(tail -1 "$TMP/up.log"))" || sed 's/^/#   /' "$TMP/up.log"
wait_until 10 lab_running 4
wait_until 20 lab_synced node-a && wait_until 20 lab_synced node-b
w1=$(ip6_of web-1) w2=$(ip6_of web-2)
is "$(lab_exec web-2 busybox ip -6 -o addr show dev eth0 scope global | awk '{print $4}')" "$w2/128" \
	"web-2's container has the IPv6 lab status names ($w2)"
is "$("$ZH" get pods --lab $LAB -o json | jq -r '.[] | select(.name == "web-2") | .ips | join(" ")')" \
	"$(lab_pod_ip web-2) $w2" "the published pod carries both (get pods -o json .ips, from status.podIPs)"
is "$(http6 client "$w2" 8080)" web-2 "node-a container -> node-b container over IPv6 ([$w2]:8080)"
is "$(http6 client "$w1" 8080)" web-1 "same node, over IPv6 ([$w1]:8080)"
v6=$(lab_svc_ips web | tr ' ' '\n' | grep : | head -1)
ok $([ -n "$v6" ]; echo $?) "the Service has an IPv6 ClusterIP ($v6)"
is "$(seen_within 24 "web-1 web-2 " http6 client "$v6" 80)" "web-1 web-2 " \
	"container -> [IPv6 ClusterIP]:80 reaches both backends (new connections, up to 24)"
aaaa=$(lab_exec client busybox nslookup -type=AAAA web.default.svc.cluster.local 2>/dev/null | awk '/^Address/ {a = $2} END {print a}')
is "$aaaa" "$v6" "the cluster DNS answers AAAA with it inside a container"
# by hand, on the lab's CNI network (zhlab-LAB, which publishes the pod)
pm node-b run -d -q --name web-3 -l app=web localhost/zerohop-pod:lab \
	/usr/local/bin/zerohop echo --http "[::]:8080" --name web-3 >/dev/null 2>"$TMP/run3.err"
ok $? "podman run by hand on node-b, on the lab's CNI network" || sed 's/^/#   /' "$TMP/run3.err"
w3=$(pm node-b inspect -f '{{range .NetworkSettings.Networks}}{{.GlobalIPv6Address}}{{end}}' web-3 2>/dev/null)
ok $([ -n "$w3" ] && [[ "$w3" = fd00:10:244:* ]]; echo $?) "  podman shows its IPv6 from zerohop-cni's result ($w3)"
is "$(wait_until 5 test -n "$(http6 client "$w3" 8080)"; http6 client "$w3" 8080)" web-3 "  reached over IPv6 from node-a"
is "$("$ZH" get pods --lab $LAB -o json | jq -r '.[] | select(.name == "web-3") | .ips[1]')" "$w3" \
	"  published by zerohop-cni with its IPv6 (podIPs)"
netns=$(for n in node-a node-b; do for c in $(pm $n ps -q); do pm $n inspect -f '{{.NetworkSettings.SandboxKey}}' "$c"; done; done | sort -u)
"$ZH" lab down --lab $LAB >/dev/null 2>&1
ok $? "lab down"
left=""
for n in $netns; do [ -e "$n" ] && left="$left $n"; done
for c in $(ls /var/lib/cni/results/ 2>/dev/null | grep "^zhlab-$LAB-"); do left="$left cni-cache:$c"; done
ip -br link | grep -q '^zh' && left="$left veth-in-root"
is "$left" "" "lab down left no container netns, CNI cache entry or veth"
done_testing
