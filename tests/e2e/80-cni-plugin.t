#!/usr/bin/env bash
# The CNI plugin driven directly, as a runtime drives it: the spec's
# environment (CNI_COMMAND, CNI_CONTAINERID, CNI_NETNS, CNI_IFNAME, CNI_ARGS,
# CNI_PATH) and the network configuration on stdin, run inside a node
# namespace this test makes, for pod namespaces this test makes. Covers
# VERSION, ADD (result JSON, addresses, routes, the pod published to the
# state source with its labels, traffic between two pods), ADD twice,
# CHECK (clean, then after the address is deleted by hand), DEL of an
# unknown id, DEL after a failed and after a crashed ADD, GC, and bad
# inputs each answered with the spec's error JSON and a non-zero exit,
# with nothing left behind. Then Debian's `tuning` plugin, chained after
# ours, reads our result as its prevResult (a real consumer of our JSON).
# A dual-stack network (podCIDR6): each pod gets an IPv6 derived from its
# IPv4, with routes both ways, in the result, the published pod and CHECK.
# An IPv6-only network (ipv6Only): the same IPv6 alone, no IPv4 anywhere.
source "$(dirname "$0")/../lib/tap.sh"
shopt -s lastpipe	# `conf ... | cni ...` sets OUT and RC here
source "$(dirname "$0")/../lib/harness.sh"
test_setup t80 jq nsenter busybox
CNI=$(dirname "$ZH")/zerohop-cni
[ -x "$CNI" ] || skip_all "no $CNI (make first)"
S=${ZH_TEST_LAB_SUFFIX:-}
NODE=zh-t80$S-node
PODS="a b c d e f g h i j"
test_cleanup() {
	local p
	for p in $PODS; do ip netns del zh-t80$S-$p 2>/dev/null; done
	ip netns del $NODE 2>/dev/null
}
test_cleanup
ip netns add $NODE
ip -n $NODE link set lo up
ip -n $NODE addr add 10.250.0.1/32 dev lo	# the node needs an IPv4 address (DESIGN.md 5)
ip netns exec $NODE sysctl -qw net.ipv4.ip_forward=1
ip netns exec $NODE sysctl -qw net.ipv6.conf.all.forwarding=1
for p in $PODS; do ip netns add zh-t80$S-$p; done
mkdir -p "$TMP/state" "$TMP/labels"
printf '# pod a\napp=web\ntier = front\n' >"$TMP/labels/default_a"

conf() {	# conf VERSION [CIDR] [DATADIR]
	jq -n --arg v "$1" --arg cidr "${2:-10.244.0.0/24}" --arg st "$TMP/state" \
		--arg dd "${3:-$TMP/data}" --arg ld "$TMP/labels" \
		'{cniVersion: $v, name: "zh-t80", type: "zerohop-cni", node: "node-a",
		  podCIDR: $cidr, stateDir: $st, dataDir: $dd, labelsDir: $ld}'
}
# cni COMMAND ID POD [extra env...] < conf: runs the plugin in the node
# namespace; output in $OUT, exit status in $RC
cni() {
	local cmd=$1 id=$2 pod=$3
	shift 3
	OUT=$(env -i PATH="$PATH" CNI_COMMAND=$cmd CNI_CONTAINERID=$id \
		CNI_NETNS=${pod:+/run/netns/zh-t80$S-$pod} CNI_IFNAME=eth0 CNI_PATH=/usr/lib/cni \
		CNI_ARGS="IgnoreUnknown=1;K8S_POD_NAMESPACE=default;K8S_POD_NAME=$pod" "$@" \
		nsenter --net=/run/netns/$NODE "$CNI" 2>>"$TMP/stderr")
	RC=$?
}
veths() { ip -n $NODE -br link | awk '$1 ~ /^zh/' | wc -l; }
records() { find "$TMP/data/att" "$TMP/data/ips" -type f 2>/dev/null | wc -l; }
pods() { ls "$TMP/state/pods" 2>/dev/null | wc -l; }
# error CODE NAME: the last output is the spec's error JSON with CODE, and the exit is non-zero
error() {
	local code msg
	code=$(echo "$OUT" | jq -r '.code' 2>/dev/null)
	msg=$(echo "$OUT" | jq -r '.msg + " / " + .details' 2>/dev/null)
	ok $([ "$RC" -ne 0 ] && [ "$code" = "$1" ] && echo "$OUT" | jq -e 'has("cniVersion") and has("msg") and has("details")' >/dev/null; echo $?) \
		"$2: error JSON code $1, exit $RC ($msg)"
}

# ---- VERSION
case_version() {
	OUT=$(echo '{"cniVersion":"1.0.0"}' | CNI_COMMAND=VERSION "$CNI"); RC=$?
	is "$RC:$(echo "$OUT" | jq -c '[.cniVersion, (.supportedVersions | index("0.4.0") != null), (.supportedVersions | index("1.0.0") != null)]')" \
		'0:["1.0.0",true,true]' "VERSION lists 0.4.0 and 1.0.0"
	OUT=$(CNI_COMMAND=VERSION "$ZH" cni </dev/null); RC=$?
	is "$RC:$(echo "$OUT" | jq -r .cniVersion)" "0:1.0.0" "'zerohop cni' is the same plugin; VERSION without stdin"
}

# ---- ADD
case_add() {
	conf 1.0.0 | cni ADD ida a
	is "$RC" 0 "ADD a exits 0"
	ipa=$(echo "$OUT" | jq -r '.ips[0].address')
	is "$(echo "$OUT" | jq -c '[.cniVersion, .ips[0].gateway, .ips[0].interface, .interfaces[1].name, .interfaces[1].sandbox, .routes[0].dst, (.ips[0] | has("version"))]')" \
		"[\"1.0.0\",\"169.254.1.1\",1,\"eth0\",\"/run/netns/zh-t80$S-a\",\"0.0.0.0/0\",false]" "ADD a: 1.0.0 result (gateway, interface index, sandbox, default route)"
	case "$ipa" in 10.244.0.*/32) r=0 ;; *) r=1 ;; esac
	ok $r "ADD a: a /32 from podCIDR ($ipa)"
	is "$(ip -n zh-t80$S-a -br -4 addr show dev eth0 | awk '{print $3}')" "$ipa" "the address is on eth0 in the pod namespace"
	is "$(ip -n zh-t80$S-a route show default)" "default via 169.254.1.1 dev eth0 " "the pod's default route via the lab gateway"
	is "$(ip -n $NODE route show ${ipa%/32} | awk '{print $2, $3}')" "dev $(echo "$OUT" | jq -r '.interfaces[0].name')" "the node routes the /32 to the host veth"
	y="$TMP/state/pods/default_a.yaml"
	ok $([ -f "$y" ] && grep -q "podIP: ${ipa%/32}" "$y" && grep -q 'nodeName: node-a' "$y" && grep -q '"app": "web"' "$y" && grep -q '"tier": "front"' "$y"; echo $?) \
		"pod default/a published to the state source with its IP, node and labels from labelsDir"
	"$ZH" get pods --state "$TMP/state" >"$TMP/get" 2>&1
	ok $(grep -q "a .*${ipa%/32}" "$TMP/get"; echo $?) "zerohop get pods reads it ($(grep -c . "$TMP/get") lines)"

	conf 0.4.0 | cni ADD idb b
	ipb=$(echo "$OUT" | jq -r '.ips[0].address')
	is "$RC:$(echo "$OUT" | jq -c '[.cniVersion, .ips[0].version]')" '0:["0.4.0","4"]' "ADD b with a 0.4.0 config: a 0.4.0 result (ips carry version 4)"
	ok $([ "$ipa" != "$ipb" ]; echo $?) "a and b got different addresses ($ipa, $ipb)"
	nsenter --net=/run/netns/zh-t80$S-a busybox ping -c1 -W2 -q ${ipb%/32} >/dev/null
	ok $? "pod a pings pod b through the node (plain L3 via the gateway)"
}

# ---- ADD twice with the same id
case_add_twice() {
	first=$OUT
	conf 0.4.0 | cni ADD idb b
	is "$RC:$OUT" "0:$first" "ADD b again: the same result, exit 0"
	is "$(veths):$(records)" "2:4" "still two veths and two address + two attachment records"
}

# ---- CHECK
case_check() {
	prev=$(conf 1.0.0 | jq --arg a "$ipa" '. + {prevResult: {cniVersion: "1.0.0", ips: [{address: $a}]}}')
	echo "$prev" | cni CHECK ida a
	is "$RC:$OUT" "0:" "CHECK a: clean, exit 0, no output"
	ip -n zh-t80$S-a addr del $ipa dev eth0
	echo "$prev" | cni CHECK ida a
	error 101 "CHECK after deleting the address by hand"
	echo "$OUT" | jq -r .details | grep -q "address ${ipa} is missing"
	ok $? "CHECK names the missing address"
	conf 1.0.0 | cni ADD ida a
	is "$RC:$(echo "$OUT" | jq -r '.ips[0].address')" "0:$ipa" "ADD a again repairs it on the same address"
	echo "$prev" | cni CHECK ida a
	is "$RC" 0 "CHECK a: clean again"
	echo "$prev" | jq 'del(.prevResult)' | cni CHECK ida a
	error 7 "CHECK without prevResult"
	echo "$prev" | cni CHECK nosuchid a
	error 3 "CHECK of an unknown container"
}

# ---- DEL of an unknown id
case_del_unknown_id() {
	conf 1.0.0 | cni DEL nosuchid c
	is "$RC:$OUT" "0:" "DEL of an unknown id: exit 0, no output"
	conf 1.0.0 | env -u CNI_NETNS true
	OUT=$(conf 1.0.0 | env -i PATH="$PATH" CNI_COMMAND=DEL CNI_CONTAINERID=nosuchid CNI_IFNAME=eth0 CNI_PATH=/x nsenter --net=/run/netns/$NODE "$CNI" 2>/dev/null)
	is "$?:$OUT" "0:" "DEL without CNI_NETNS (the namespace is gone): exit 0"
}

# ---- DEL after a failed ADD: eth0 already exists in the pod
case_del_after_failed_add() {
	ip -n zh-t80$S-c link add eth0 type veth peer name squat0
	conf 1.0.0 | cni ADD idc c
	error 102 "ADD into a namespace whose eth0 exists fails"
	is "$(veths):$(records):$(pods)" "2:4:2" "the failed ADD left no veth, record or pod behind"
	conf 1.0.0 | cni DEL idc c
	is "$RC:$OUT" "0:" "DEL after the failed ADD: exit 0"
	ip -n zh-t80$S-c link del eth0
}

# ---- DEL after crashed ADDs (the process dies between two steps)
case_del_after_crashed_adds() {
	for step in alloc veth publish; do
		conf 1.0.0 | cni ADD idc c ZH_CNI_CRASH_AFTER=$step
		left="$(veths):$(records):$(pods)"
		conf 1.0.0 | cni DEL idc c
		is "$RC:$left -> $(veths):$(records):$(pods)" "0:$left -> 2:4:2" "crash after '$step' left some state; DEL removes all of it"
	done
	conf 1.0.0 | cni ADD idc c ZH_CNI_CRASH_AFTER=veth
	conf 1.0.0 | cni ADD idc c
	ipc=$(echo "$OUT" | jq -r '.ips[0].address')
	is "$RC:$(veths):$(pods)" "0:3:3" "ADD after a crash between veth and publish finishes the job ($ipc)"
	nsenter --net=/run/netns/zh-t80$S-c busybox ping -c1 -W2 -q ${ipa%/32} >/dev/null
	ok $? "and pod c reaches pod a"
}

# ---- bad inputs: error JSON, non-zero exit, nothing left behind
case_bad_inputs() {
	before="$(veths):$(records):$(pods)"
	echo '{"cniVersion": "1.0.0", "name": ' | cni ADD idd d
	error 6 "invalid JSON"
	conf 9.9.9 | cni ADD idd d
	error 1 "unknown cniVersion"
	conf 1.0.0 | jq 'del(.podCIDR)' | cni ADD idd d
	error 7 "config without podCIDR"
	conf 1.0.0 | cni ADD idd ""
	error 4 "missing CNI_NETNS"
	conf 1.0.0 | cni ADD "id/d" d
	error 4 "a container id with a '/'"
	OUT=$(conf 1.0.0 | env -i PATH="$PATH" nsenter --net=/run/netns/$NODE "$CNI" 2>/dev/null); RC=$?
	error 4 "no CNI_COMMAND"
	conf 1.0.0 | cni FROB idd d
	error 4 "unknown CNI_COMMAND"
	conf 1.0.0 | jq '.mtu = 10' | cni ADD idd d
	error 7 "mtu out of range"
	conf 1.0.0 | cni ADD idd d CNI_ARGS="K8S_POD_NAME=Bad_Name"
	error 4 "K8S_POD_NAME that is no DNS name"
	printf 'app=web\n=x\n' >"$TMP/labels/default_d"
	conf 1.0.0 | cni ADD idd d
	error 7 "a labels file with a bad line"
	echo "$OUT" | jq -r .details | grep -q "default_d:2"
	ok $? "the error names the labels file and line"
	rm "$TMP/labels/default_d"
	is "$(veths):$(records):$(pods)" "$before" "no bad input left anything behind"
}

# exhausted range: a /30 has one usable address (.0 network, .1 node proxy, .3 broadcast)
case_exhausted_range() {
	conf 1.0.0 10.244.9.0/30 "$TMP/data30" | cni ADD idd d
	is "$RC:$(echo "$OUT" | jq -r '.ips[0].address')" "0:10.244.9.2/32" "a /30 range hands out its one address"
	conf 1.0.0 10.244.9.0/30 "$TMP/data30" | cni ADD ide e
	error 100 "exhausted range"
	ok $([ -z "$(ip -n zh-t80$S-e -br link | grep -v '^lo')" ] && [ ! -f "$TMP/state/pods/default_e.yaml" ] && [ "$(ls "$TMP/data30/att")" = "idd:eth0" ]; echo $?) \
		"the refused ADD left no interface, pod or record"
	conf 1.0.0 10.244.9.0/30 "$TMP/data30" | cni DEL idd d
	conf 1.0.0 10.244.9.0/30 "$TMP/data30" | cni ADD ide e
	is "$RC:$(echo "$OUT" | jq -r '.ips[0].address')" "0:10.244.9.2/32" "after DEL the address is free again"
	conf 1.0.0 10.244.9.0/30 "$TMP/data30" | cni DEL ide e
}

# rangeStart/rangeEnd: a part of podCIDR (the rest is someone else's)
case_range_start_end() {
	conf 1.0.0 10.244.7.0/24 "$TMP/data7" | jq '.rangeStart = "10.244.7.77" | .rangeEnd = "10.244.7.77"' | cni ADD idd d
	is "$RC:$(echo "$OUT" | jq -r '.ips[0].address')" "0:10.244.7.77/32" "rangeStart..rangeEnd bounds the addresses"
	conf 1.0.0 10.244.7.0/24 "$TMP/data7" | cni DEL idd d
	conf 1.0.0 10.244.7.0/24 "$TMP/data7" | jq '.rangeStart = "10.244.8.1"' | cni ADD idd d
	error 7 "rangeStart outside podCIDR"
}

# the "ips" capability and publish=false (the lab's kubelet publishes itself)
case_ips_capability() {
	conf 1.0.0 10.244.7.0/24 "$TMP/data7" | jq '.publish = false | .runtimeConfig = {ips: ["10.244.7.9/24"]}' | cni ADD idd d
	is "$RC:$(echo "$OUT" | jq -r '.ips[0].address'):$(pods)" "0:10.244.7.9/32:3" "runtimeConfig.ips gives the requested address; publish=false writes no pod"
	conf 1.0.0 10.244.7.0/24 "$TMP/data7" | jq '.runtimeConfig = {ips: ["10.244.7.9"]}' | cni ADD ide e
	error 100 "a requested address another attachment holds"
	conf 1.0.0 10.244.7.0/24 "$TMP/data7" | cni DEL idd d
	conf 1.0.0 10.244.7.0/24 "$TMP/data7" | cni ADD idd d CNI_ARGS="IgnoreUnknown=1;K8S_POD_NAME=d;IP=10.244.7.33"
	is "$RC:$(echo "$OUT" | jq -r '.ips[0].address')" "0:10.244.7.33/32" "CNI_ARGS IP= (what podman --ip sends) gives that address"
	conf 1.0.0 10.244.7.0/24 "$TMP/data7" | cni DEL idd d
}

# ---- a real consumer: Debian's tuning plugin chained after ours reads our
# result as prevResult (Go's CNI library decodes it) and passes it on
case_chained_tuning() {
	TUNING=/usr/lib/cni/tuning
	[ -x $TUNING ] || { diag "no $TUNING (containernetworking-plugins): chained check skipped"; return; }
	res=$(conf 1.0.0 | cni ADD idb b; echo "$OUT")
	tconf=$(jq -n --argjson prev "$res" '{cniVersion: "1.0.0", name: "zh-t80", type: "tuning",
		sysctl: {"net.ipv4.conf.eth0.accept_local": "1"}, prevResult: $prev}')
	tout=$(echo "$tconf" | env -i PATH="$PATH" CNI_COMMAND=ADD CNI_CONTAINERID=idb CNI_NETNS=/run/netns/zh-t80$S-b \
		CNI_IFNAME=eth0 CNI_PATH=/usr/lib/cni nsenter --net=/run/netns/$NODE $TUNING 2>&1)
	is "$?:$(echo "$tout" | jq -r '.ips[0].address')" "0:$ipb" "tuning (Debian, Go libcni) accepts our result and passes it on"
	is "$(ip netns exec zh-t80$S-b sysctl -n net.ipv4.conf.eth0.accept_local)" 1 "tuning found our eth0 in the pod"
	tconf=$(echo "$tconf" | jq '.cniVersion = "0.4.0" | .prevResult = '"$(conf 0.4.0 | cni ADD idb b; echo "$OUT")")
	tout=$(echo "$tconf" | env -i PATH="$PATH" CNI_COMMAND=CHECK CNI_CONTAINERID=idb CNI_NETNS=/run/netns/zh-t80$S-b \
		CNI_IFNAME=eth0 CNI_PATH=/usr/lib/cni nsenter --net=/run/netns/$NODE $TUNING 2>&1)
	is "$?" 0 "tuning CHECK with our 0.4.0 result as prevResult ($tout)"
}

# ---- chained after Debian's bridge + host-local: bridge makes the
# interface and address, zerohop-cni publishes the pod and passes the result on
case_chained_bridge() {
	BRIDGE=/usr/lib/cni/bridge
	[ -x $BRIDGE ] || return
	bconf=$(jq -n --arg d "$TMP/hl" '{cniVersion: "1.0.0", name: "zh-t80b", type: "bridge", bridge: "br80t",
		isGateway: true, ipam: {type: "host-local", subnet: "10.244.50.0/24", dataDir: $d}}')
	benv=(env -i PATH="$PATH" CNI_CONTAINERID=idf CNI_NETNS=/run/netns/zh-t80$S-f CNI_IFNAME=eth0 CNI_PATH=/usr/lib/cni)
	bres=$(echo "$bconf" | "${benv[@]}" CNI_COMMAND=ADD nsenter --net=/run/netns/$NODE $BRIDGE)
	ipf=$(echo "$bres" | jq -r '.ips[0].address')
	conf 1.0.0 | jq --argjson p "$bres" '.prevResult = $p' | cni ADD idf f
	is "$RC:$(echo "$OUT" | jq -r '.ips[0].address'):$(echo "$OUT" | jq -r '.interfaces | length')" "0:$ipf:$(echo "$bres" | jq -r '.interfaces | length')" \
		"chained after bridge: ADD passes bridge's result on ($ipf)"
	grep -q "podIP: ${ipf%/*}" "$TMP/state/pods/default_f.yaml" 2>/dev/null
	ok $? "chained: the pod is published with bridge's address"
	conf 1.0.0 | jq --argjson p "$OUT" '.prevResult = $p' | cni CHECK idf f
	is "$RC:$OUT" "0:" "chained: CHECK clean"
	conf 1.0.0 | cni DEL idf f
	echo "$bconf" | "${benv[@]}" CNI_COMMAND=DEL nsenter --net=/run/netns/$NODE $BRIDGE
	ok $([ ! -e "$TMP/state/pods/default_f.yaml" ] && [ -z "$(ip -n zh-t80$S-f -br link | grep -v '^lo')" ]; echo $?) \
		"chained: DEL of ours then bridge's leaves no pod and no interface"
}

# ---- dual-stack: podCIDR6
case_dual_stack() {
	local c6 ipg ipg6 ipg6b want h6
	c6() { conf "${1:-1.0.0}" | jq '.podCIDR6 = "fd00:10:244::/64"'; }
	c6 | cni ADD idg g
	ipg=$(echo "$OUT" | jq -r '.ips[0].address') ipg6=$(echo "$OUT" | jq -r '.ips[1].address')
	want=$(printf 'fd00:10:244::%x/128' "$(echo "${ipg%/32}" | cut -d. -f4)")
	is "$RC:$ipg6:$(echo "$OUT" | jq -c '[.ips[1].gateway, .ips[1].interface, .routes[1].dst, .routes[1].gw]')" \
		"0:$want:[\"fe80::1\",1,\"::/0\",\"fe80::1\"]" "ADD g (podCIDR6): IPv6 $ipg6 beside $ipg, its host part, with gateway and default route"
	is "$(ip -n zh-t80$S-g -br -6 addr show dev eth0 scope global | awk '{print $3}')" "$ipg6" "the IPv6 is on eth0 in the pod namespace"
	is "$(ip -n zh-t80$S-g -6 route show default | awk '{print $1, $2, $3}')" "default via fe80::1" "the pod's IPv6 default route via the lab gateway"
	is "$(ip -n $NODE -6 route show ${ipg6%/128} | awk '{for (i = 1; i < NF; i++) if ($i == "dev") print $(i + 1)}')" "$(echo "$OUT" | jq -r '.interfaces[0].name')" "the node routes the /128 to the host veth"
	grep -q "podIPs: \[{ip: ${ipg%/32}}, {ip: \"${ipg6%/128}\"}\]" "$TMP/state/pods/default_g.yaml"
	ok $? "pod default/g published with both podIPs, IPv4 first"
	c6 0.4.0 | cni ADD idh h
	is "$RC:$(echo "$OUT" | jq -c '[.ips[0].version, .ips[1].version]')" '0:["4","6"]' "ADD h with a 0.4.0 config: ips carry version 4 and 6"
	h6=$(echo "$OUT" | jq -r '.ips[1].address')
	nsenter --net=/run/netns/zh-t80$S-g busybox ping -6 -c1 -W2 -q ${h6%/128} >/dev/null
	ok $? "pod g pings pod h over IPv6 through the node"
	prev=$(c6 | jq --arg a "$ipg" '. + {prevResult: {cniVersion: "1.0.0", ips: [{address: $a}]}}')
	echo "$prev" | cni CHECK idg g
	is "$RC:$OUT" "0:" "CHECK g: clean"
	ip -n zh-t80$S-g addr del $ipg6 dev eth0
	echo "$prev" | cni CHECK idg g
	error 101 "CHECK after deleting the IPv6 by hand"
	echo "$OUT" | jq -r .details | grep -q "address ${ipg6} is missing"
	ok $? "CHECK names the missing IPv6"
	for bad in fd00:10:244::/120 fd00:10:244::1/64 10.0.0.0/8; do
		conf 1.0.0 | jq --arg c "$bad" '.podCIDR6 = $c' | cni ADD idd d
		error 7 "podCIDR6 '$bad'"
	done
	c6 | cni DEL idg g
	c6 | cni DEL idh h
	is "$RC:$(ip -n $NODE -6 route show ${ipg6%/128})" "0:" "DEL: the node's /128 route went with the veth"
}

# ---- IPv6 only (ipv6Only): the IPv6 alone; the IPv4 index is configured nowhere
case_ipv6_only() {
	local c6 ii6 ij6 idx vi
	c6() { conf "${1:-1.0.0}" | jq '.podCIDR6 = "fd00:10:244::/64" | .ipv6Only = true'; }
	c6 | cni ADD idi i
	ii6=$(echo "$OUT" | jq -r '.ips[0].address')
	vi=$(echo "$OUT" | jq -r '.interfaces[0].name')
	is "$RC:$(echo "$OUT" | jq -c '[(.ips | length), .ips[0].gateway, (.routes | length), .routes[0].dst]')" \
		'0:[1,"fe80::1",1,"::/0"]' "ADD i (ipv6Only): one address, the IPv6 ($ii6), and one route, ::/0"
	idx=$(awk '$1 == "ip" {print $2}' "$TMP/data/att/idi:eth0")
	is "$(printf 'fd00:10:244::%x/128' "${idx##*.}")" "$ii6" "  the IPv6 carries the host part of its index ($idx)"
	is "$(ip -n zh-t80$S-i -4 -o addr show dev eth0 | wc -l):$(ip -n zh-t80$S-i -4 route show | wc -l)" "0:0" \
		"  no IPv4 address or route in the pod namespace"
	is "$(ip -n zh-t80$S-i -br -6 addr show dev eth0 scope global | awk '{print $3}')" "$ii6" "  the IPv6 is on eth0"
	is "$(ip -n $NODE -4 route show dev "$vi" | wc -l):$(ip -n $NODE -6 route show "${ii6%/128}" | grep -c "dev $vi")" \
		"0:1" "  the node routes the /128 to the host veth and no IPv4"
	grep -qx "  podIP: \"${ii6%/128}\"" "$TMP/state/pods/default_i.yaml" &&
		grep -qx "  podIPs: \[{ip: \"${ii6%/128}\"}\]" "$TMP/state/pods/default_i.yaml"
	ok $? "  pod default/i published with its IPv6 alone" || sed 's/^/# /' "$TMP/state/pods/default_i.yaml"
	c6 0.4.0 | cni ADD idj j
	is "$RC:$(echo "$OUT" | jq -c '[.ips[].version]')" '0:["6"]' "ADD j with a 0.4.0 config: one address, version 6"
	ij6=$(echo "$OUT" | jq -r '.ips[0].address')
	nsenter --net=/run/netns/zh-t80$S-i busybox ping -6 -c1 -W2 -q "${ij6%/128}" >/dev/null
	ok $? "pod i pings pod j over IPv6 through the node"
	c6 | jq '. + {prevResult: {cniVersion: "1.0.0", ips: [{address: "'"$ii6"'"}]}}' | cni CHECK idi i
	is "$RC:$OUT" "0:" "CHECK i: clean"
	ip -n zh-t80$S-i addr del "$ii6" dev eth0
	c6 | jq '. + {prevResult: {cniVersion: "1.0.0", ips: [{address: "'"$ii6"'"}]}}' | cni CHECK idi i
	error 101 "CHECK after deleting the IPv6 by hand"
	conf 1.0.0 | jq '.ipv6Only = true' | cni ADD idd d
	error 7 "ipv6Only without podCIDR6"
	conf 1.0.0 | jq '.podCIDR6 = "fd00:10:244::/64" | .ipv6Only = "yes"' | cni ADD idd d
	error 7 "ipv6Only not a boolean"
	c6 | cni DEL idi i
	c6 | cni DEL idj j
	is "$RC:$(ip -n $NODE -6 route show "${ii6%/128}")" "0:" "DEL: the node's /128 route went with the veth"
}

# ---- GC (CNI 1.1): everything but a and b is stale
case_gc_status() {
	conf 1.1.0 | jq '. + {"cni.dev/valid-attachments": [{containerID: "ida", ifname: "eth0"}, {containerID: "idb", ifname: "eth0"}]}' | cni GC "" ""
	is "$RC:$(veths):$(pods)" "0:2:2" "GC removed the attachment of c, kept a and b"
	conf 1.1.0 | cni STATUS "" ""
	is "$RC:$OUT" "0:" "STATUS: available"
	conf 1.1.0 | jq '.stateDir = "/nonexistent"' | cni STATUS "" ""
	error 50 "STATUS without the node's state directory"
}

# ---- DEL everything; nothing left
case_del_everything() {
	for p in a b; do conf 1.0.0 | cni DEL id$p $p; done
	conf 1.0.0 | cni DEL ida a
	is "$RC" 0 "DEL twice: exit 0"
	is "$(veths):$(records):$(pods)" "0:0:0" "after DEL: no veth, no record, no pod"
	is "$(ip -n zh-t80$S-a -br link | grep -vc '^lo')" 0 "no interface left in the pod namespace"
	grep -q "error" "$TMP/stderr"
	ok $? "errors were logged on stderr, never stdout"
}

run_cases case_version case_add case_add_twice case_check case_del_unknown_id \
	case_del_after_failed_add case_del_after_crashed_adds case_bad_inputs \
	case_exhausted_range case_range_start_end case_ips_capability \
	case_chained_tuning case_chained_bridge case_dual_stack case_ipv6_only case_gc_status case_del_everything
done_testing
