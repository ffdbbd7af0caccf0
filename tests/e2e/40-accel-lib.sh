# 40-accel-lib.sh — a throw-away two-pod "node" for the accel tests (sourced).
#
# Until the lab and the agent call ag_accel_open themselves, the accel tests
# build the smallest set-up that has what a node has: two pod network
# namespaces joined by a veth pair (no path to anything else), one node cgroup
# with a child cgroup per pod, and acceleration loaded through tests/tools/
# accel_ctl (the same src/agent/accel.c the agent links).
#
# Names: zhS<tag>-a, zhS<tag>-b (netns), CGROOT/zhS<tag>-node/{a,b} (cgroups),
# /sys/fs/bpf/zerohop/zhS<tag>/node (pins). ACCEL_TAG defaults to the PID.

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
B=${B:-build}
# The tools beside the zerohop binary under test ($ZH from tap.sh), else $B.
if [ -n "${ZH:-}" ]; then TOOLS=${ZH_TOOLS:-$(dirname "$ZH")/tests/tools}
else TOOLS=${ZH_TOOLS:-$ROOT/$B/tests/tools}; fi
ACCEL_TAG=${ACCEL_TAG:-$$}
NS_A=zhS$ACCEL_TAG-a
NS_B=zhS$ACCEL_TAG-b
IP_A=10.213.0.1
IP_B=10.213.0.2
PIN=/sys/fs/bpf/zerohop/zhS$ACCEL_TAG/node

# accel_test_setup TAG TOOL...: the shared harness (tests/lib/harness.sh:
# root, TMP, cleanup trap) with this file's tools directory; OUT=$TMP.
accel_test_setup() {
	local tools=$TOOLS tag=$1

	shift
	source "$ROOT/tests/lib/harness.sh"
	test_setup "$tag"
	TOOLS=$tools	# this file's choice (B=...) wins over the harness's
	test_tools "$@"
	OUT=$TMP
}

accel_cgroot() {
	local m
	m=$(awk '$3 == "cgroup2" { print $2; exit }' /proc/mounts)
	if [ -z "$m" ]; then
		m=/run/zerohop/cgroup2
		mkdir -p "$m"
		mount -t cgroup2 none "$m" || return 1
	fi
	echo "$m"
}

accel_setup() {
	mountpoint -q /sys/fs/bpf || mount -t bpf bpf /sys/fs/bpf || return 1
	CGROOT=$(accel_cgroot) || return 1
	CG=$CGROOT/zhS$ACCEL_TAG-node
	mkdir -p "$CG/a" "$CG/b" || return 1
	ip netns add "$NS_A" || return 1
	ip netns add "$NS_B" || return 1
	ip link add zhS$ACCEL_TAG-va netns "$NS_A" type veth peer zhS$ACCEL_TAG-vb netns "$NS_B" || return 1
	ip -n "$NS_A" link set zhS$ACCEL_TAG-va name eth0
	ip -n "$NS_B" link set zhS$ACCEL_TAG-vb name eth0
	ip -n "$NS_A" addr add $IP_A/24 dev eth0
	ip -n "$NS_B" addr add $IP_B/24 dev eth0
	for ns in "$NS_A" "$NS_B"; do
		ip -n "$ns" link set lo up
		ip -n "$ns" link set eth0 up
	done
}

# accel_in POD CMD...: run CMD in pod a or b (its netns and its cgroup).
accel_in() {
	local pod=$1 ns
	shift
	[ "$pod" = a ] && ns=$NS_A || ns=$NS_B
	bash -c 'echo $$ > "$0/cgroup.procs" && exec ip netns exec "$1" "${@:2}"' \
		"$CG/$pod" "$ns" "$@"
}

accel_on() { "$TOOLS/accel_ctl" on "$CG" "$PIN" $IP_A $IP_B; }
accel_off() { "$TOOLS/accel_ctl" off "$PIN"; }
accel_stat() { "$TOOLS/accel_ctl" stats "$PIN" | sed -n "s/^$1=//p"; }

accel_teardown() {
	local p
	[ -n "${CG:-}" ] || CG=$(accel_cgroot)/zhS$ACCEL_TAG-node
	"$TOOLS/accel_ctl" cleanup "$PIN" >/dev/null 2>&1
	rmdir "$PIN" "$(dirname "$PIN")" 2>/dev/null
	# Processes we started are still in our cgroups: end them by PID.
	for p in $(cat "$CG"/a/cgroup.procs "$CG"/b/cgroup.procs 2>/dev/null); do
		kill -9 "$p" 2>/dev/null
	done
	sleep 0.1
	ip netns del "$NS_A" 2>/dev/null
	ip netns del "$NS_B" 2>/dev/null
	rmdir "$CG/a" "$CG/b" "$CG" 2>/dev/null
	true
}
