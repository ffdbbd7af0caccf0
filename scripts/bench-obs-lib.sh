# bench-obs-lib.sh — sourced by scripts/bench-obs-bpfcost.sh and
# scripts/bench-obs-flagcost.sh (after tests/lib/lab_test.sh): their one
# topology and how they find the lab's cgroups.

# a client pod on node-a, an echo Service (10.96.0.90:80) on node-b
obs_bench_app() {
	m_deploy far node-b "app: far" "$(m_ctr echo "http:8080" "$ZH" echo --http 8080 --tcp 0 --udp 0)"
	m_svc far "app: far" "http=80:8080" 10.96.0.90
	m_pod client node-a "" "$(m_ctr c "" sleep 100000)"
}

# the node cgroups of lab $LAB: where the agents attached policy's sock_ops
obs_node_cgroups() {
	bpftool cgroup tree -j | jq -r --arg l "$LAB" '.[] | select(.cgroup | test("/zerohop-" + $l + "/")) | select(any(.programs[]; .name == "pol_sockops")) | .cgroup' | sort -u
}

# the lab's own cgroup v2 directory (pods, agents, proxies)
lab_cgroup_v2() { local d; for d in /sys/fs/cgroup/unified /sys/fs/cgroup; do [ -d "$d/zerohop-$LAB" ] && { echo "$d/zerohop-$LAB"; return; }; done; }
