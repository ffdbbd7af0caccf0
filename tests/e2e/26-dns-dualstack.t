#!/usr/bin/env bash
# The cluster DNS (`zerohop dns`) on a dual-stack state (docs/ipv6.md): A
# answers the IPv4 ClusterIP, AAAA the IPv6 one, a family the Service does
# not have answers NOERROR with no record, as glibc's resolver (getent) and
# busybox nslookup see it. Services get their families and addresses from
# the model as kube-apiserver would give them (given, allocated, IPv6
# single-stack). `zerohop apply` takes the dual-stack Cluster as it is (no
# switch: there was an IPv6 preview switch until every part had an IPv6
# path).
#
# The whole test runs in a network and mount namespace of its own (the
# responder listens on that namespace's loopback, port 53; /etc/resolv.conf
# and /etc/nsswitch.conf are bind-mounted there only).
if [ -z "$ZH_T26_INNER" ]; then
	[ "$(id -u)" -eq 0 ] || { echo "1..0 # SKIP needs root"; exit 0; }
	exec unshare -n -m env ZH_T26_INNER=1 timeout 120 bash "$0" "$@"
fi
source "$(dirname "$0")/../lib/tap.sh"
source "$(dirname "$0")/../lib/harness.sh"
test_setup t26 getent busybox ip jq
TEST_REAP=1

# this namespace only: loopback, and one address of each family on a veth
# link, so getaddrinfo's AI_ADDRCONFIG asks for both families
ip link set lo up
ip link add d0 type veth peer name d1
ip addr add 10.99.0.1/24 dev d0
ip -6 addr add fd00:99::1/64 dev d0 nodad
ip link set d1 up
ip link set d0 up
printf 'nameserver 127.0.0.1\noptions timeout:1 attempts:2\n' >"$TMP/resolv.conf"
printf 'hosts: dns\n' >"$TMP/nsswitch.conf"
mount --bind "$TMP/resolv.conf" /etc/resolv.conf
mount --bind "$TMP/nsswitch.conf" /etc/nsswitch.conf

cat >"$TMP/m.yaml" <<'EOF'
apiVersion: zerohop.io/v1alpha1
kind: Cluster
metadata: {name: t26}
spec:
  podCIDRs: [10.244.0.0/16, "fd00:10:244::/56"]
  serviceCIDRs: [10.96.0.0/12, "fd00:10:96::/112"]
---
apiVersion: v1
kind: Service
metadata: {name: dual}
spec:
  ipFamilyPolicy: PreferDualStack
  clusterIPs: [10.96.0.20, "fd00:10:96::20"]
  ports: [{port: 80}]
---
apiVersion: v1
kind: Service
metadata: {name: six}
spec:
  ipFamilies: [IPv6]
  clusterIP: "fd00:10:96::30"
  ports: [{port: 80}]
---
apiVersion: v1
kind: Service
metadata: {name: four}
spec:
  clusterIP: 10.96.0.40
  ports: [{port: 80}]
---
apiVersion: v1
kind: Service
metadata: {name: alloc, namespace: other}
spec:
  ipFamilyPolicy: RequireDualStack
  ipFamilies: [IPv6]
  ports: [{port: 80}]
EOF

"$ZH" apply --state "$TMP/st" -f "$TMP/m.yaml" >"$TMP/apply.out" 2>&1
ok $? "apply takes the dual-stack Cluster and Services" || sed 's/^/# /' "$TMP/apply.out"

start_dns() {
	"$ZH" dns --state "$TMP/st" --addr 127.0.0.1 --port 53 >"$TMP/dns.log" 2>&1 &
	PIDS+=($!)
	wait_until 10 grep -q "serving port 53" "$TMP/dns.log"
}
addrs() {	# getent DB NAME -> its addresses, sorted, space separated
	getent "$1" "$2" | awk '{print $1}' | sort -u | tr '\n' ' ' | sed 's/ $//'
}

start_dns
ok $? "the responder serves"
is "$(addrs ahostsv4 four.default.svc.cluster.local)" "10.96.0.40" "A of an IPv4 Service"
is "$(addrs ahosts dual.default.svc.cluster.local)" "10.96.0.20 fd00:10:96::20" \
	"a dual-stack Service: both families through getaddrinfo (AF_UNSPEC)"
is "$(addrs ahostsv6 six.default.svc.cluster.local)" "fd00:10:96::30" "AAAA of an IPv6 single-stack Service"
getent ahostsv4 six.default.svc.cluster.local >/dev/null
ok $((! $?)) "no A for the IPv6 single-stack Service"
nsl=$(busybox nslookup -type=aaaa dual.default.svc.cluster.local 127.0.0.1 2>&1)
echo "$nsl" | grep -q 'fd00:10:96::20'
ok $? "busybox nslookup -type=aaaa gets the IPv6 ClusterIP"
nsl=$(busybox nslookup -type=aaaa four.default.svc.cluster.local 127.0.0.1 2>&1)
echo "$nsl" | grep -q 'NXDOMAIN\|fd00'
ok $((! $?)) "AAAA of an IPv4-only Service: no record, not NXDOMAIN"
nsl=$(busybox nslookup -type=a nosuch.default.svc.cluster.local 127.0.0.1 2>&1)
echo "$nsl" | grep -q 'NXDOMAIN'
ok $? "an unknown name is NXDOMAIN"
a6=$(addrs ahostsv6 alloc.other.svc.cluster.local | cut -d' ' -f1)
a4=$(addrs ahostsv4 alloc.other.svc.cluster.local)
case "$a6" in fd00:10:96::*) r=0 ;; *) r=1 ;; esac
ok $r "an allocated IPv6 ClusterIP lies in the IPv6 service CIDR ($a6)"
case "$a4" in 10.9[6-9].* | 10.10[0-9].* | 10.11[01].*) r=0 ;; *) r=1 ;; esac
ok $r "RequireDualStack also gets an IPv4 ClusterIP ($a4)"
is "$("$ZH" get services --state "$TMP/st" -n other -o json |
	jq -r '.[0] | [.ipFamilyPolicy, (.ipFamilies | join(",")), (.clusterIPs | join(" "))] | join(" ")')" \
	"RequireDualStack IPv6,IPv4 $a6 $a4" "zerohop get services: the families and ClusterIPs the DNS serves"
first=$(getent ahosts alloc.other.svc.cluster.local | awk 'NR == 1 {print $1}')
diag "getaddrinfo's first address for alloc: $first"

done_testing
