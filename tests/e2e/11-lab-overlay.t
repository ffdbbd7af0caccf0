#!/usr/bin/env bash
# The lab over VXLAN (--overlay vxlan, Flannel's layout): the same reachability
# as plain L3 — HTTP and TCP echo by pod IP on one node and across nodes — but
# node-to-node pod traffic is encapsulated: it leaves through vxlan0 (whose
# counters move), pods get MTU 1450, and a large transfer survives the smaller
# MTU. Three nodes here, so routes to two peers are exercised. The Cluster is
# dual-stack: IPv6 between pods crosses nodes through vxlan0 too (the
# peer's /64 routed to its VTEP, the network address of that /64), and no
# IPv6 route goes over the fabric either.
source "$(dirname "$0")/../lib/tap.sh"
source "$(dirname "$0")/../lib/lab_test.sh"
lab_test_setup t11 curl

{
	cat <<EOF
apiVersion: zerohop.io/v1alpha1
kind: Cluster
metadata:
  name: t11
spec:
  podCIDRs: [10.32.0.0/16, "fd00:32::/56"]
  serviceCIDRs: [10.96.0.0/12, "fd00:10:96::/112"]
  nodes:
  - name: n1
  - name: n2
  - name: n3
---
EOF
	m_idle client n1
	# fortio's server mode: `zerohop echo`
	REPLICAS=3 m_deploy echo "" "app: echo" "$(m_img echo fortio/fortio "8080 8078")"
	m_pod web6 n3 "app: web6" "$(m_http_dir web6)"
} >"$TMP/lab.yaml"

"$ZH" lab up --lab $LAB --no-mesh --overlay vxlan -f "$TMP/lab.yaml" >"$TMP/up.out" 2>&1
ok $? "lab up --overlay vxlan: $(head -1 "$TMP/up.out")"
"$ZH" lab status --lab $LAB -o json >"$TMP/st.json"
J() { jq -r "$1" "$TMP/st.json"; }
is "$(J '.overlay')" "vxlan" "status reports the overlay"
is "$(J '[.pods[] | select(.owner=="echo") | .node] | sort | join(",")')" "n1,n2,n3" \
	"Deployment replicas spread one per node"
is "$(J '.nodes[2].podCIDR')" "10.32.2.0/24" "pod CIDR from the Cluster object"

X() { "$ZH" lab exec --lab $LAB "$@"; }
is "$(X client -- cat /sys/class/net/eth0/mtu)" "1450" "pod MTU leaves room for VXLAN"
X --node n2 -- ip -d link show vxlan0 | grep -q "vxlan id 42 local 10.250.0.2"
ok $? "node n2 has vxlan0 (VNI 42) over its fabric IP"
X --node n1 -- ip route show 10.32.3.0/24 >/dev/null
X --node n1 -- ip route | grep -q "^10.32.2.0/24 via 10.32.2.0 dev vxlan0 onlink"
ok $? "n1 routes n3's pod CIDR into vxlan0"
X --node n1 -- ip route | grep -q "via 10.250.0"
ok $((! $?)) "no plain L3 route over the fabric in overlay mode"
X --node n1 -- ip -6 route | grep -q "^fd00:32:0:2::/64 via fd00:32:0:2:: dev vxlan0"
ok $? "n1 routes n3's IPv6 /64 into vxlan0, to n3's VTEP"
X --node n1 -- ip -6 route | grep -q "via fd7a:fab"
ok $((! $?)) "no IPv6 route over the fabric either"

# /proc/net/dev is per network namespace (a node's has no sysfs of its own).
tx() { X --node n1 -- awk '$1 == "vxlan0:" {print $11}' /proc/net/dev; }
TX0=$(tx)
for n in n1 n2 n3; do
	ip=$(J ".pods[] | select(.owner==\"echo\" and .node==\"$n\") | .ip")
	name=$(J ".pods[] | select(.owner==\"echo\" and .node==\"$n\") | .name")
	R=$(X client -- curl -s -m 5 "http://$ip:8080/")
	echo "$R" | grep -q "$name"
	ok $? "HTTP client(n1) -> $name on $n ($ip)"
	R=$(X client -- bash -c "exec 3<>/dev/tcp/$ip/8078 && echo hi-$n >&3 && read -t 5 l <&3 && echo \$l")
	is "$R" "hi-$n" "TCP echo client(n1) -> $n"
done
TX1=$(tx)
ok $((TX1 - TX0 < 10)) "cross-node traffic went through vxlan0 ($((TX1 - TX0)) packets)"
W6=$(J '.pods[] | select(.name=="web6") | .ip6')
wait_until 10 X client -- curl -6 -s -o /dev/null -m 2 "http://[$W6]:8080/index.html"
is "$(X client -- curl -6 -s -m 5 "http://[$W6]:8080/index.html")" srv-web6 \
	"HTTP over IPv6 client(n1) -> web6 on n3 ([$W6])"
TX2=$(tx)
ok $((TX2 - TX1 < 3)) "... through vxlan0 too ($((TX2 - TX1)) packets)"

IP3=$(J '.pods[] | select(.owner=="echo" and .node=="n3") | .ip')
head -c 2000000 /dev/urandom >"$TMP/blob"
X client -- bash -c "exec 3<>/dev/tcp/$IP3/8078; cat $TMP/blob >&3 & head -c 2000000 <&3" >"$TMP/back"
cmp -s "$TMP/blob" "$TMP/back"
ok $? "2 MB through TCP echo over VXLAN comes back intact"

"$ZH" lab down --lab $LAB >/dev/null
ok $? "lab down"
ip netns list | grep -q "^$LAB-"
ok $((! $?)) "no network namespace of the lab left"
done_testing
