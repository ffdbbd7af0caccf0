#!/usr/bin/env bash
# One script, both pod runtimes: the same manifests (Services, a
# TrafficSplit, five pods on two nodes) run with `lab up --runtime process`
# (pods are processes in namespaces) and `lab up --runtime podman` (pods are
# OCI containers run by Debian's podman + runc inside the node namespaces,
# networked by zerohop-cni, from an image the lab builds from local files:
# busybox-static + zerohop, nothing pulled). For each runtime: pods reach
# each other by pod IP across nodes, Services by name (cluster DNS), the
# TrafficSplit sends everything to its weight-100 backend, same-node traffic
# is short-circuited (counters rise), a NetworkPolicy allows one client and
# denies another. With podman also: a container started by hand (`zerohop lab
# podman ... run --label`) is published by the CNI plugin with its labels and
# its endpoint is gone within a second of `podman rm -f`; and after a crash
# (supervisor and every process of the lab killed), `lab down` leaves no
# container, netns, veth, cgroup, IPAM record or CNI cache entry.
source "$(dirname "$0")/../lib/tap.sh"
source "$(dirname "$0")/../lib/lab_test.sh"
source "$(dirname "$0")/../lib/podman.sh"
lab_test_setup t81 busybox
RUNTIMES="process podman"
command -v podman >/dev/null && command -v runc >/dev/null || { RUNTIMES=process; diag "no podman/runc: process runtime only"; }

{
	m_pod web-1 node-a "app: web, ver: \"1\"" "$(m_ctr c http:8080 "$ZH" echo --http 8080 --name web-1)"
	m_pod web-2 node-b "app: web, ver: \"2\"" "$(m_ctr c http:8080 "$ZH" echo --http 8080 --name web-2)"
	m_pod client node-a "role: friend" "$(m_ctr c "" sleep 100000)"
	m_pod client-b node-b "role: friend" "$(m_ctr c "" sleep 100000)"
	m_pod stranger node-a "role: stranger" "$(m_ctr c "" sleep 100000)"
	# numeric targetPort: a container made by hand has no named ports
	m_svc web "app: web" "http=80:8080"
	m_svc web-v1 "app: web, ver: \"1\"" "http=80:8080"
	m_svc web-v2 "app: web, ver: \"2\"" "http=80:8080"
	cat <<'YAML'
apiVersion: split.smi-spec.io/v1alpha1
kind: TrafficSplit
metadata: {name: web-split}
spec:
  service: web
  backends:
    - {service: web-v1, weight: 0}
    - {service: web-v2, weight: 100}
YAML
} >"$TMP/app.yaml"
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
# http POD HOST PORT: GET / from POD with busybox nc; prints the echo's name
# (`lab exec` enters a process pod, or runs `podman exec` in a container)
http() {
	lab_exec "$1" busybox sh -c 'printf "GET / HTTP/1.0\r\nHost: $0\r\n\r\n" | nc -w 3 "$0" "$1"' "$2" "$3" 2>/dev/null |
		sed -n '$p' | jq -r .name 2>/dev/null
}
acc() { "$ZH" get stats --lab $LAB | awk -v n="node $1:" '$0 ~ "^node" {on = index($0, n) == 1} on && $1 == "accel_sockets" {print $2}'; }
has_ep() { "$ZH" get endpoints --lab $LAB | grep -q "$1:8080"; }
no_ep() { ! has_ep "$1"; }

for RT in $RUNTIMES; do
	t0=$(date +%s)
	"$ZH" lab up --lab $LAB --runtime $RT -f "$TMP/app.yaml" >"$TMP/up-$RT.log" 2>&1
	ok $? "$RT: lab up with the same manifests ($(tail -1 "$TMP/up-$RT.log"))" || { sed 's/^/#   /' "$TMP/up-$RT.log"; continue; }
	if [ $RT = podman ]; then
		cid=$(pm node-a inspect -f '{{.Id}}' default.web-1)
		pid=$(pm node-a inspect -f '{{.State.Pid}}' default.web-1)
		ok $(grep -q "zerohop-$LAB/node-a/default_web-1/libpod-$cid" /proc/$pid/cgroup; echo $?) \
			"podman: web-1 is a runc container under its pod's cgroup in node-a's ($(pm node-a ps -q | wc -l) containers on node-a)"
	fi
	wait_until 10 lab_running 5
	# the Services' endpoints reach the agents just after the pods run:
	# wait until both applied the state (seen flaky once under make check)
	wait_until 20 lab_synced node-a && wait_until 20 lab_synced node-b
	ip1=$(lab_pod_ip web-1); ip2=$(lab_pod_ip web-2)
	is "$(http client "$ip2" 8080)" web-2 "$RT: node-a pod -> node-b pod by pod IP"
	is "$(http client-b "$ip1" 8080)" web-1 "$RT: node-b pod -> node-a pod by pod IP"
	seen=$(for _ in 1 2 3 4; do http client web-v1 80; http client-b web-v2 80; done | sort -u | tr '\n' ' ')
	is "$seen" "web-1 web-2 " "$RT: Services by name (cluster DNS) from both nodes"
	seen=$(for _ in $(seq 8); do http client web 80; done | sort | uniq -c | awk '{print $2 "=" $1}' | tr '\n' ' ')
	is "$seen" "web-2=8 " "$RT: TrafficSplit web: 8 of 8 requests to the weight-100 backend"
	a0=$(acc node-a)
	for _ in 1 2 3 4; do http client "$ip1" 8080 >/dev/null; done
	a1=$(acc node-a)
	[ "${a1:-0}" -ge $((${a0:-0} + 4)) ]
	ok $? "$RT: same-node pod traffic short-circuited (node-a accel_sockets $a0 -> $a1)"
	"$ZH" apply --lab $LAB -f "$TMP/pol.yaml" >/dev/null
	wait_until 5 lab_synced node-a; wait_until 5 lab_synced node-b
	is "$(http client "$ip2" 8080)" web-2 "$RT: NetworkPolicy allows role=friend"
	is "$(http stranger "$ip2" 8080)" "" "$RT: NetworkPolicy denies role=stranger (pod IP)"
	is "$(http stranger web-v1 80)" "" "$RT: NetworkPolicy denies role=stranger (Service)"

	if [ $RT = podman ]; then
		# a container made by hand: the CNI plugin publishes it with its labels
		pm node-b run -d -q --name web-3 -l app=web -l ver=2 localhost/zerohop-pod:lab \
			/usr/local/bin/zerohop echo --http 8080 --name web-3 >/dev/null
		ip3=$(wait_until 5 test -n "$(pm_ip web-3)"; pm_ip web-3)
		wait_until 5 has_ep "$ip3"
		ok $? "podman run by hand: published by zerohop-cni ($ip3), an endpoint of web through its labels"
		# podman itself takes most of a second here (loaded machine) to
		# kill the container: time from the container's death too
		cpid=$(pm node-b inspect -f '{{.State.Pid}}' web-3)
		t1=$(date +%s%N)
		pm node-b rm -f -t 0 web-3 >/dev/null &
		rmpid=$!
		WAIT_STEP=0.01 wait_until 3 eval "! kill -0 $cpid 2>/dev/null"
		td=$(date +%s%N)
		WAIT_STEP=0.01 wait_until 3 no_ep "$ip3"
		te=$(date +%s%N)
		wait "$rmpid"
		ok $([ $(((te - td) / 1000000)) -le 1000 ]; echo $?) \
			"podman rm -f web-3: endpoint gone $(((te - td) / 1000000)) ms after the container died (at most 1000; $(((te - t1) / 1000000)) ms after rm started)"
		netns=$(for n in node-a node-b; do for c in $(pm $n ps -q); do pm $n inspect -f '{{.NetworkSettings.SandboxKey}}' "$c"; done; done | sort -u)
		is "$(echo "$netns" | grep -c .)" 6 "six pod containers (five + the cluster DNS), each with its own netns"
		# a crash: the supervisor, podman, conmon and every container
		# killed at once, so nothing of podman's cleaned up before lab down
		kill -9 "$(cat /run/zerohop/$LAB/supervisor.pid)" 2>/dev/null
		cg2=$(awk '$9 == "cgroup2" {print $5; exit}' /proc/self/mountinfo)
		echo 1 >"$cg2/zerohop-$LAB/cgroup.kill"
		diag "crashed: supervisor and every process of the lab's cgroup killed"
	fi
	"$ZH" lab down --lab $LAB >/dev/null 2>&1
	ok $? "$RT: lab down ($(($(date +%s) - t0)) s for this runtime)"
done
if [[ " $RUNTIMES " = *" podman "* ]]; then
	left=""
	for n in $netns; do [ -e "$n" ] && left="$left $n"; done
	for c in $(ls /var/lib/cni/results/ 2>/dev/null | grep "^zhlab-$LAB-"); do
		left="$left cni-cache:$c($(head -c 80 "/var/lib/cni/results/$c" | tr -c '[:print:]' .))"
	done
	ls -d /sys/fs/cgroup/*/zerohop-$LAB 2>/dev/null | grep -q . && left="$left cgroups"
	[ -e /run/zerohop/$LAB ] && left="$left rundir(ipam)"
	ip -br link | grep -q '^zh' && left="$left veth-in-root"
	pgrep -f "conmon.*zerohop/$LAB/" >/dev/null && left="$left conmon"
	is "$left" "" "podman: lab down left no container netns, CNI cache entry, cgroup (v1 or v2), IPAM record or conmon"
fi
done_testing
