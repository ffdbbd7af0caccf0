# etcd_test.sh — a small cluster for the etcd state source tests (source it
# after tap.sh): N etcd members (Debian's etcd) and node network namespaces
# on one fabric bridge, all namespaces and cgroups of the test's own, no
# lab, nothing in the root network namespace. Each node has an agent
# started from flags (--state etcd://...), its pods' addresses on its lo
# and a route to the other nodes' pod ranges over the fabric.
#
#	et_setup TAG N_MEMBERS N_NODES   namespaces, cgroups, members started
#	et_member_start I / et_member_stop I   (SIGTERM, data kept)
#	et_agent_start NODE / et_agent_stop NODE
#	et_pod NODE I                    the address of pod I of NODE: 10.244.NODE.I
#	et_run NODE CMD...               CMD in NODE's netns and its pod cgroup
#	et_bg NODE CMD...                the same in the background (daemons cgroup)
#	et_cut NODE / et_heal NODE       blackhole / restore NODE's routes to etcd
#	et_health NODE                   the agent's health "state" line value
#	et_gen NODE                      the agent's published generation
#	ETCD_SPEC                        etcd://m1,m2,... as the nodes reach them
#	ZHE ARGS                         zerohop with --state $ETCD_SPEC, run in node 1
[ "$(id -u)" -eq 0 ] || skip_all "needs root"
[ -x "$ZH" ] || skip_all "no $ZH (make first)"
for c in etcd etcdctl jq curl nsenter; do command -v $c >/dev/null || skip_all "no $c"; done

et_setup() {
	ET_TAG=zh-$1${ZH_TEST_LAB_SUFFIX:+-$ZH_TEST_LAB_SUFFIX}
	ET_M=$2
	ET_N=$3
	TMP=$(mktemp -d /tmp/$ET_TAG.XXXXXX)
	CG2=$(awk '$9 == "cgroup2" {print $5; exit}' /proc/self/mountinfo)
	ET_CG=$CG2/$ET_TAG
	ET_SPEC_LIST=""
	trap 'et_teardown; rm -rf "$TMP"' EXIT
	et_teardown
	ip netns add $ET_TAG-fab
	ip -n $ET_TAG-fab link add br0 type bridge
	ip -n $ET_TAG-fab link set br0 up
	mkdir -p $ET_CG/daemons $ET_CG/etcd
	local i
	for i in $(seq "$ET_M"); do
		et_port $ET_TAG-m$i 10.252.0.$((10 + i))
		ET_SPEC_LIST+="${ET_SPEC_LIST:+,}10.252.0.$((10 + i)):2379"
		mkdir -p $ET_CG/etcd/m$i
	done
	ETCD_SPEC=etcd://$ET_SPEC_LIST
	for i in $(seq "$ET_N"); do
		et_port $ET_TAG-n$i 10.252.0.$i
		mkdir -p $ET_CG/node$i
		ip -n $ET_TAG-n$i link set lo up
		local k
		for k in 1 2 3 4; do ip -n $ET_TAG-n$i addr add 10.244.$i.$k/32 dev lo; done
		for k in $(seq "$ET_N"); do
			[ "$k" = "$i" ] || ip -n $ET_TAG-n$i route add 10.244.$k.0/24 via 10.252.0.$k
		done
	done
	for i in $(seq "$ET_M"); do et_member_start $i; done
	wait_until 20 et_healthy || { diag "etcd did not come up"; cat "$TMP"/etcd-m*.log | tail -20; }
}

# netns NAME with one veth to the fabric bridge, address ADDR/24
et_port() {
	ip netns add $1
	ip -n $1 link set lo up
	ip link add eth0 netns $1 type veth peer name p-${1##*-} netns $ET_TAG-fab
	ip -n $ET_TAG-fab link set p-${1##*-} master br0 up
	ip -n $1 addr add $2/24 dev eth0
	ip -n $1 link set eth0 up
}

et_quorum() { ETCDCTL --command-timeout=2s get /zerohop/probe >/dev/null 2>&1; }
et_healthy() { ip netns exec $ET_TAG-n1 etcdctl --endpoints "$ET_SPEC_LIST" endpoint health >/dev/null 2>&1; }

et_member_start() {
	local i=$1 cluster="" k
	for k in $(seq "$ET_M"); do cluster+="${cluster:+,}m$k=http://10.252.0.$((10 + k)):2380"; done
	nsenter --net=/run/netns/$ET_TAG-m$i sh -c 'echo $$ > "$0"/cgroup.procs && exec "$@"' \
		$ET_CG/etcd/m$i etcd --name m$i --data-dir "$TMP/m$i.etcd" \
		--listen-client-urls http://10.252.0.$((10 + i)):2379 \
		--advertise-client-urls http://10.252.0.$((10 + i)):2379 \
		--listen-peer-urls http://10.252.0.$((10 + i)):2380 \
		--initial-advertise-peer-urls http://10.252.0.$((10 + i)):2380 \
		--initial-cluster "$cluster" --initial-cluster-state new \
		--heartbeat-interval 50 --election-timeout 500 \
		--max-txn-ops 20000 --max-request-bytes 33554432 >>"$TMP/etcd-m$i.log" 2>&1 &
	disown	# a member SIGKILLed on purpose is no news for the job table
}

et_member_stop() {
	local p
	for p in $(cat $ET_CG/etcd/m$1/cgroup.procs 2>/dev/null); do kill "$p" 2>/dev/null; done
	wait_until 10 et_cg_empty $ET_CG/etcd/m$1
}

# (cgroup files report size 0: read them)
et_cg_empty() { [ -z "$(cat "$1/cgroup.procs" 2>/dev/null)" ]; }

et_agent_start() {
	local n=$1
	nsenter --net=/run/netns/$ET_TAG-n$n sh -c 'echo $$ > "$0"/cgroup.procs && exec "$@"' \
		$ET_CG/daemons "$ZH" agent --node node-$n --cgroup $ET_CG/node$n --pin-dir /sys/fs/bpf/$ET_TAG-n$n \
		--state "$ETCD_SPEC" --accel off --health-file "$TMP/agent$n.health" ${ET_AGENT_ARGS:-} \
		>>"$TMP/agent$n.log" 2>&1 &
	echo $! >"$TMP/agent$n.pid"
}

et_agent_stop() {
	local p
	p=$(cat "$TMP/agent$1.pid" 2>/dev/null) || return 0
	kill "$p" 2>/dev/null
	wait_pid_gone 10 "$p"
}

et_pod() { echo 10.244.$1.$2; }
et_run() {
	local n=$1
	shift
	nsenter --net=/run/netns/$ET_TAG-n$n sh -c 'echo $$ > "$0"/cgroup.procs && exec "$@"' $ET_CG/node$n "$@"
}
et_bg() {
	local n=$1
	shift
	nsenter --net=/run/netns/$ET_TAG-n$n sh -c 'echo $$ > "$0"/cgroup.procs && exec "$@"' $ET_CG/daemons "$@" &
}
ZHE() { nsenter --net=/run/netns/$ET_TAG-n1 "$ZH" "$@" --state "$ETCD_SPEC"; }
ETCDCTL() { nsenter --net=/run/netns/$ET_TAG-n1 etcdctl --endpoints "$ET_SPEC_LIST" "$@"; }

et_cut() {
	local i
	for i in $(seq "$ET_M"); do ip -n $ET_TAG-n$1 route add blackhole 10.252.0.$((10 + i))/32; done
}
et_heal() {
	local i
	for i in $(seq "$ET_M"); do ip -n $ET_TAG-n$1 route del blackhole 10.252.0.$((10 + i))/32; done
}

et_health() { awk '$1 == "state" {print $2}' "$TMP/agent$1.health" 2>/dev/null; }
et_gen() { awk '$1 == "generation" {print $2}' "$TMP/agent$1.health" 2>/dev/null; }

# The etcd revision now (what an agent in sync publishes as its generation).
et_rev() { ETCDCTL get --prefix /zerohop/ -w json --limit 1 | jq -r .header.revision; }

et_teardown() {
	local cg p n
	[ -n "$ET_TAG" ] || return 0
	for cg in $ET_CG/daemons $ET_CG/node*; do
		[ -f $cg/cgroup.procs ] || continue
		for p in $(cat $cg/cgroup.procs); do kill "$p" 2>/dev/null; done
	done
	# members: their data goes with TMP, no graceful stop needed (a
	# leader's SIGTERM shutdown can take seconds)
	for cg in $ET_CG/etcd/m*; do
		[ -f $cg/cgroup.procs ] || continue
		for p in $(cat $cg/cgroup.procs); do kill -9 "$p" 2>/dev/null; done
	done
	for cg in $ET_CG/daemons $ET_CG/node* $ET_CG/etcd/m* $ET_CG/etcd; do
		[ -d $cg ] || continue
		wait_until 5 et_cg_empty $cg
		rmdir $cg 2>/dev/null
	done
	rmdir $ET_CG 2>/dev/null
	for p in /sys/fs/bpf/$ET_TAG-n*; do
		[ -e "$p" ] || continue
		"$ZH" agent --cleanup --node "node-${p##*-n}" --pin-dir "$p" >/dev/null 2>&1
		rm -rf "$p"
	done
	for n in $(ip netns list | awk '{print $1}' | grep "^$ET_TAG-"); do ip netns del "$n"; done
}

# Manifests: a Service web (ClusterIP 10.96.90.10:80 -> 8080) selecting
# SELECTOR, and pod web-NODE-I (labels app: web, ver: V) on each given node.
et_svc() {
	cat <<YAML
apiVersion: v1
kind: Service
metadata: {name: ${2:-web}}
spec:
  clusterIP: ${3:-10.96.90.10}
  selector: {$1}
  ports: [{name: http, port: 80, targetPort: 8080}]
---
YAML
}
et_podm() {
	local n=$1 i=$2 ver=$3
	cat <<YAML
apiVersion: v1
kind: Pod
metadata: {name: web-$n-$i, labels: {app: web, ver: "$ver"}}
spec: {nodeName: node-$n, containers: [{name: c}]}
status: {podIP: 10.244.$n.$i, phase: Running}
---
YAML
}
# a backend named web-NODE-I answering HTTP on its pod address :8080
et_echo() { et_bg "$1" "$ZH" echo --http 10.244.$1.$2:8080 --name web-$1-$2 >"$TMP/echo-$1-$2.log" 2>&1; }
# the .name of the backend that answers NODE's pod cgroup at VIP
et_who() { et_run "$1" curl -s -m 2 "http://${2:-10.96.90.10}/" | jq -r .name 2>/dev/null; }
# conditions for wait_until (evaluated on every try)
who_is() { [ "$(et_who "$1")" = "$2" ]; }
health_is() { [ "$(et_health "$1")" = "$2" ]; }
