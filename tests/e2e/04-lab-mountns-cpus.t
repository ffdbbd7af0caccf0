#!/usr/bin/env bash
# lab up inside a private mount namespace (as `make demo` runs on a fresh
# machine, or in a container) works whichever CPU made that namespace.
# Why this can fail: the kernel binds a pod's mount namespace file only when
# its id is greater than the binder's, and since 6.18 namespace ids come from
# per-CPU batches, so a pod namespace made on another CPU than the caller's
# own namespace can be refused every time (see lab_pod_ns_create in
# src/lab/lab_net.c). Each round makes the outer namespace on one CPU, then
# lets the lab run on all of them, and wants every pod Running.
source "$(dirname "$0")/../lib/tap.sh"
source "$(dirname "$0")/../lib/lab_test.sh"
lab_test_setup t04 taskset unshare
ROOT=$(cd "$(dirname "$0")/../.." && pwd)

all=$(taskset -pc $$ | sed 's/.*: //')
cpus=$(python3 -c 'import os; print(" ".join(map(str, sorted(os.sched_getaffinity(0)))))')
for cpu in $cpus; do
	taskset -c "$cpu" unshare -m --propagation private taskset -c "$all" bash -c '
		while mountpoint -q /sys/fs/bpf; do umount /sys/fs/bpf || exit 9; done
		"$1" lab up --lab "$2" -f "$3/examples/lab/cluster.yaml" -f "$3/examples/lab/echo.yaml" || exit 1
		"$1" lab status --lab "$2" -o json >"$4/st.$5.json"
		"$1" lab down --lab "$2" >/dev/null' up "$ZH" "$LAB" "$ROOT" "$TMP" "$cpu" \
		>"$TMP/up.$cpu" 2>&1
	rc=$?
	is "$rc" 0 "namespace made on CPU $cpu: lab up and down"
	[ "$rc" -eq 0 ] || tail -5 "$TMP/up.$cpu" | sed 's/^/#   /'
	is "$(jq '[.pods[] | select(.phase == "Running")] | length' "$TMP/st.$cpu.json" 2>/dev/null)" 5 \
		"namespace made on CPU $cpu: all 5 pods Running"
	grep -q "refused on every CPU" "$TMP/up.$cpu"
	is $? 1 "namespace made on CPU $cpu: no pod's namespace refused"
done
done_testing
