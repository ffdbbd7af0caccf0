#!/usr/bin/env bash
# 08-lab-ipv6-only.t — an IPv6-only cluster (docs/ipv6.md "The IPv6-only
# lab"): a Cluster whose pod and service CIDRs are IPv6 only. Pods get an
# IPv6 and no IPv4 (eth0 has no inet address, status.podIPs one IPv6),
# Services an IPv6 ClusterIP only, the cluster DNS answers at an IPv6
# ClusterIP (resolv.conf) with AAAA; curl by Service name reaches both
# backends across nodes, getpeername gives the ClusterIP back, a
# NetworkPolicy by label holds between IPv6-only pods, an HTTPRoute is
# routed by the node proxy to IPv6 backends, the same-node
# short-circuit takes their connections; an IPv4-only Service is refused
# naming the field. The same Cluster with `--runtime podman` (zerohop-cni's
# ipv6Only): containers with the IPv6 alone reach a Service by name.
source "$(dirname "$0")/../lib/tap.sh"
source "$(dirname "$0")/../lib/lab_test.sh"
lab_test_setup t08 curl
lab_test_tools accel_ctl

cluster6() {
	cat <<YAML
apiVersion: zerohop.io/v1alpha1
kind: Cluster
metadata: {name: t08}
spec:
  nodes: [node-a, node-b]
  podCIDRs: ["fd00:10:244::/56"]
  serviceCIDRs: ["fd00:10:96::/112"]
---
YAML
}
{
	cluster6
	m_pod web-a node-a "app: web" "$(m_ctr e http:8080 "$ZH" echo --http "[::]:8080")"
	m_pod web-b node-b "app: web" "$(m_ctr e http:8080 "$ZH" echo --http "[::]:8080")"
	m_pod solo node-b "app: solo" "$(m_ctr e http:8080 "$ZH" echo --http "[::]:8080")"
	m_pod cli node-a "" "$(m_ctr c "" sleep 100000)"
	m_pod friend node-a "role: friend" "$(m_ctr c "" sleep 100000)"
	m_svc web "app: web" "http=80:http"
	m_svc solo "app: solo" "http=80:http"
	cat <<'YAML'
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: web7}
spec:
  parentRefs: [{group: "", kind: Service, name: web7, port: 80}]
  rules:
  - matches: [{path: {type: PathPrefix, value: /b}}]
    backendRefs: [{name: solo, port: 80}]
  - backendRefs: [{name: web, port: 80}]
---
YAML
	m_svc web7 "app: web" "http=80:http"
} >"$TMP/app.yaml"
lab_up "an IPv6-only Cluster, --accel on" --accel on -f "$TMP/app.yaml"
wait_until 30 lab_running 6 && wait_until 30 lab_synced node-a && wait_until 30 lab_synced node-b
ok $? "pods run (the cluster DNS too), both agents applied the state"

case_addresses() {
	local st cli6 pods
	st=$("$ZH" lab status --lab "$LAB" -o json)
	is "$(echo "$st" | jq -r .ipv6Only)" true "lab status: ipv6Only"
	cli6=$(echo "$st" | jq -r '.pods[] | select(.name=="cli") | .ip')
	case "$cli6" in fd00:10:244::*) r=0 ;; *) r=1 ;; esac
	ok $r "a pod's address is an IPv6 of its node's /64 ($cli6)"
	is "$(lab_exec cli ip -4 -o addr show dev eth0 | wc -l)" 0 "  its eth0 has no IPv4 address"
	lab_exec cli ip -6 -o addr show dev eth0 | grep -q "inet6 $cli6/128"
	ok $? "  and its IPv6 /128"
	pods=$("$ZH" get pods --lab "$LAB" -o json)
	is "$(echo "$pods" | jq -r '.[] | select(.name=="cli") | .ips | join(",")')" "$cli6" \
		"status.podIPs: the IPv6 alone"
	is "$(lab_svc_ips web | tr ' ' '\n' | grep -c .)" 1 "the Service has one ClusterIP ..."
	V6=$(lab_svc_ips web)
	case "$V6" in fd00:10:96::*) r=0 ;; *) r=1 ;; esac
	ok $r "  ... an IPv6 one from the service CIDR ($V6)"
}

case_dns_and_service() {
	local ns names
	ns=$(lab_exec cli awk '$1 == "nameserver" { print $2 }' /etc/resolv.conf)
	is "$ns" "fd00:10:96::a" "resolv.conf: the cluster DNS at an IPv6 ClusterIP"
	is "$(lab_exec cli getent ahostsv6 web.default.svc.cluster.local | awk 'NR == 1 { print $1 }')" "$V6" \
		"the Service name resolves (AAAA) to its ClusterIP"
	names=$(for i in $(seq 20); do lab_exec cli curl -s -m 3 http://web/; echo; done |
		jq -r .name | sort | uniq -c | awk '{ print $2 "=" $1 }' | tr '\n' ' ')
	case "$names" in *web-a=*web-b=*) r=0 ;; *) r=1 ;; esac
	ok $r "curl http://web/ 20 times: both backends answer, one per node ($names)"
	is "$(lab_exec cli "$PY" -c "
import socket
s = socket.create_connection(('web.default.svc.cluster.local', 80), timeout=3)
print(s.getpeername()[0])")" "$V6" "getpeername: the Service's IPv6 ClusterIP"
}

case_short_circuit() {
	local PIN=/sys/fs/bpf/zerohop/$LAB/node-a s0 webA
	webA=$("$ZH" lab status --lab "$LAB" -o json | jq -r '.pods[] | select(.name=="web-a") | .ip')
	s0=$("$TOOLS/accel_ctl" stats "$PIN" | awk -F= '$1 == "sockets" { print $2 }')
	is "$(lab_exec cli curl -s -m 3 "http://[$webA]:8080/?size=50000" | wc -c)" 50000 \
		"same node, pod to pod: a 50,000-byte body whole"
	ok $([ $(( $("$TOOLS/accel_ctl" stats "$PIN" | awk -F= '$1 == "sockets" { print $2 }') - s0 )) -ge 2 ]
	     echo $?) "  through the same-node short-circuit"
}

case_policy() {
	cat >"$TMP/np.yaml" <<'YAML'
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: web-from-friends}
spec:
  podSelector: {matchLabels: {app: web}}
  ingress:
  - from: [{podSelector: {matchLabels: {role: friend}}}]
YAML
	"$ZH" apply --lab "$LAB" -f "$TMP/np.yaml" >/dev/null
	denied() { ! lab_exec cli curl -s -m 1 -o /dev/null http://web/; }
	wait_until 10 denied
	ok $? "NetworkPolicy by label: an IPv6-only pod it does not select is kept out"
	is "$(lab_exec friend curl -s -m 3 -o /dev/null -w '%{http_code}' http://web/)" 200 \
		"  the selected one gets through"
	"$ZH" delete --lab "$LAB" -f "$TMP/np.yaml" >/dev/null
	allowed() { lab_exec cli curl -s -m 1 -o /dev/null http://web/; }
	wait_until 10 allowed
	ok $? "  its removal lets everyone in again"
}

case_refusals() {
	local out
	cat >"$TMP/v4svc.yaml" <<'YAML'
apiVersion: v1
kind: Service
metadata: {name: only4}
spec: {ipFamilies: [IPv4], selector: {app: web}, ports: [{port: 81, targetPort: 8080}]}
YAML
	out=$("$ZH" apply --lab "$LAB" -f "$TMP/v4svc.yaml" 2>&1)
	ok $([ $? -ne 0 ]; echo $?) "an IPv4-only Service on the IPv6-only cluster is refused"
	echo "$out" | grep -q 'v4svc.yaml:[0-9]*.*ipFamilies'
	ok $? "  naming the file and the field ($(echo "$out" | head -1))"
}

case_pod_ip_env() {	# POD_IP is the address the pod has, its IPv6
	local pid
	pid=$("$ZH" lab status --lab "$LAB" -o json | jq -r '.pods[] | select(.name=="cli") | .pid')
	is "$(tr '\0' '\n' </proc/$pid/environ | sed -n 's/^POD_IP=//p')" \
		"$("$ZH" lab status --lab "$LAB" -o json | jq -r '.pods[] | select(.name=="cli") | .ip')" \
		"POD_IP in a pod's environment is its IPv6"
}

case_podman() {	# the same Cluster with --runtime podman: zerohop-cni's ipv6Only
	local L2=${LAB}p v6 w a b c6 envip
	if ! command -v podman >/dev/null || ! command -v runc >/dev/null; then
		ok 0 "# SKIP --runtime podman: no podman/runc"
		return
	fi
	{
		cluster6
		m_pod web-a node-a "app: web" "$(m_ctr e http:8080 "$ZH" echo --http "[::]:8080" --name web-a)"
		m_pod web-b node-b "app: web" "$(m_ctr e http:8080 "$ZH" echo --http "[::]:8080" --name web-b)"
		m_pod cli node-a "" "$(m_ctr c "" sleep 100000)"
		m_svc web "app: web" "http=80:http"
	} >"$TMP/pm.yaml"
	"$ZH" lab up --lab "$L2" --runtime podman -f "$TMP/pm.yaml" >"$TMP/uppm.log" 2>&1
	ok $? "--runtime podman builds the IPv6-only Cluster ($(tail -1 "$TMP/uppm.log"))" ||
		{ sed 's/^/#   /' "$TMP/uppm.log"; "$ZH" lab down --lab "$L2" >/dev/null 2>&1; return; }
	px() { "$ZH" lab exec --lab "$L2" "$@"; }
	running() { [ "$("$ZH" lab status --lab "$L2" -o json | jq '[.pods[] | select(.phase=="Running")] | length')" -ge 4 ]; }
	wait_until 60 running
	a=$("$ZH" lab status --lab "$L2" -o json | jq -r '.pods[] | select(.name=="cli") | .ip')
	is "$(px cli -- busybox ip -4 -o addr show dev eth0 | wc -l):$(px cli -- busybox ip -6 -o addr show dev eth0 scope global | awk '{print $4}')" \
		"0:$a/128" "  a container's eth0: no IPv4, the IPv6 lab status names ($a)"
	is "$("$ZH" get pods --lab "$L2" -o json | jq -r '.[] | select(.name=="cli") | .ips | join(",")')" "$a" \
		"  status.podIPs: the IPv6 alone"
	v6=$("$ZH" get services --lab "$L2" -o json | jq -r '.[] | select(.name=="web") | .clusterIPs | join(" ")')
	w() {	# GET / from cli by NAME or [IPv6] with busybox nc: the echo's name
		px cli -- busybox sh -c 'printf "GET / HTTP/1.0\r\nHost: x\r\n\r\n" | nc -w 3 "$0" 80' "$1" 2>/dev/null |
			sed -n '$p' | jq -r .name 2>/dev/null
	}
	is "$(seen_within 24 "web-a web-b " w web.default.svc.cluster.local)" "web-a web-b " \
		"  container -> Service by name (AAAA, IPv6 ClusterIP $v6) reaches both nodes' backends"
	"$ZH" lab down --lab "$L2" >/dev/null 2>&1
	ok $? "  lab down"
}

case_signals() {	# the L4 signals name IPv6-only pods and Services
	local m
	opened() {	# NODE REPORTER MIN
		m=$(curl -s -m 3 --unix-socket "/run/zerohop/$LAB/nodes/$1/agent.sock" http://x/metrics |
			grep '^istio_tcp_connections_opened_total{' | grep "reporter=\"$2\"" |
			grep 'source_workload="cli"' | grep 'destination_service="web.default.svc.cluster.local"' |
			grep 'destination_workload="web-b"' | awk '{ s += $NF } END { print s + 0 }')
		[ "$m" -ge "$3" ]
	}
	wait_until 10 opened node-a source 1
	ok $? "L4 signals, client side: cli -> Service web -> pod web-b, by name ($m connections)"
	wait_until 10 opened node-b destination 1
	ok $? "  server side on node-b: the same labels ($m)"
}

name_of() { lab_exec "$1" curl -s -m 3 "$2" | jq -r .name 2>/dev/null; }

case_l7() {	# an HTTPRoute over IPv6 only: the node proxy routes by the IPv6 ClusterIP
	local got
	got=$(for i in 1 2 3 4; do lab_exec cli curl -s -m 3 http://web7/b/x | jq -r .name; done | sort -u | tr '\n' ' ')
	is "$got" "solo " "L7: /b goes to Service solo through the node proxy (IPv6 backends)"
	is "$(seen_within 24 "web-a web-b " name_of cli http://web7/)" "web-a web-b " \
		"  the rest is spread over both pods, both nodes"
}

case_overlay() {	# the same Cluster under --overlay vxlan: IPv6 pods across nodes
	local L2=${LAB}x body
	"$ZH" lab up --lab "$L2" --overlay vxlan -f "$TMP/app.yaml" >"$TMP/upx.log" 2>&1
	ok $? "--overlay vxlan builds the IPv6-only Cluster too"
	far() { body=$("$ZH" lab exec --lab "$L2" cli -- curl -s -m 2 "http://[$1]:8080/") && [ -n "$body" ]; }
	wait_until 20 far "$("$ZH" lab status --lab "$L2" -o json | jq -r '.pods[] | select(.name=="web-b") | .ip')"
	ok $? "  a pod on node-a reaches one on node-b through vxlan0 over IPv6"
	"$ZH" lab down --lab "$L2" >/dev/null 2>&1
}

run_cases case_addresses case_pod_ip_env case_dns_and_service case_signals case_short_circuit case_policy case_l7 \
	case_refusals case_overlay case_podman
done_testing
