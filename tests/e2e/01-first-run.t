#!/usr/bin/env bash
# A fresh machine, the first time: what a new user gets from `make demo`.
# The tour (scripts/tour.sh, the README's five minutes) runs in a private
# mount namespace where /sys/fs/bpf is not mounted, as on a freshly
# installed Debian 12. The product must mount what it needs itself (the
# agent mounts bpffs) and the tour must give its real answers: the echo
# JSON from a pod, new connections spread over the Service's three pods,
# the SMI split near 2:1, the load generator without errors, and counters
# that show the kernel translated the connections.
source "$(dirname "$0")/../lib/tap.sh"
source "$(dirname "$0")/../lib/lab_test.sh"
lab_test_setup t01tour curl unshare

# The fresh machine: a private mount namespace without any bpffs mount
# (mounts may be stacked: unmount until none is left).
unshare -m --propagation private bash -c '
	while mountpoint -q /sys/fs/bpf; do umount /sys/fs/bpf || exit 9; done
	echo "bpffs before: $(mountpoint -q /sys/fs/bpf && echo mounted || echo none)"
	ZH="$1" ZH_LAB="$2" timeout 300 bash "$3/scripts/tour.sh"
	rc=$?
	echo "bpffs after: $(mountpoint -q /sys/fs/bpf && echo mounted || echo none)"
	exit $rc' tour "$ZH" "$LAB" "$ROOT" >"$TMP/tour.out" 2>&1
rc=$?
sed 's/\x1b\[[0-9;]*m//g' "$TMP/tour.out" >"$TMP/t"
is "$rc" 0 "the tour runs to the end from a fresh machine's state"
[ "$rc" -eq 0 ] || { diag "tour output (tail):"; tail -30 "$TMP/t" | sed 's/^/#   /'; }
grep -q '^bpffs before: none' "$TMP/t"
ok $? "it started with no BPF filesystem mounted"
grep -q '^bpffs after: mounted' "$TMP/t"
ok $? "the product mounted one (nobody else did)"
grep -Eq "^lab $LAB up: 2 nodes, 5 pods" "$TMP/t"
ok $? "lab up: 2 nodes, 5 pods"
# lab status: every agent and proxy Running
n=$(grep -Ec '^node-[ab] .* Running +[0-9]+ +Running +[0-9]+$' "$TMP/t")
is "$n" 2 "lab status: both nodes' agent and proxy Running"
# The echo answer: JSON from an echo pod, with the client's own address
json=$(grep -m1 '^{"method"' "$TMP/t")
host=$(echo "$json" | jq -r .hostname 2>/dev/null)
case "$host" in echo-*) r=0 ;; *) r=1 ;; esac
ok $r "curl http://echo/ from a pod: echo JSON from $host"
is "$(echo "$json" | jq -r '.headers.host')" "echo" "the request went to the Service name"
# 30 new connections: spread over the three pods (all on one: p = 3^-29)
pods=$(grep -Ec '^ +[0-9]+ echo-[0-9a-f]+-[a-z0-9]+$' "$TMP/t")
total=$(grep -E '^ +[0-9]+ echo-[0-9a-f]+-[a-z0-9]+$' "$TMP/t" | awk '{s+=$1} END {print s+0}')
is "$total" 30 "30 answers to 30 connections"
[ "$pods" -ge 2 ]
ok $? "spread over $pods Service pods"
# The SMI split 1 : 500m -> v1 2/3 of 300 = 200 (sd 8.2; 6 sd band)
v1=$(awk '$2 == "flaskapp-v1" {print $1}' "$TMP/t")
v2=$(awk '$2 == "flaskapp-v2" {print $1}' "$TMP/t")
is "$((v1 + v2))" 300 "300 answers to the split ($v1 v1, $v2 v2)"
[ "${v1:-0}" -ge 150 ] && [ "${v1:-0}" -le 250 ]
ok $? "split near 2:1 ($v1 of 300 to v1, expected 200)"
grep -q '^Errors: 0 ' "$TMP/t"
ok $? "the load generator saw no errors"
grep -Eq '^Requests/sec: +[1-9]' "$TMP/t"
ok $? "and served requests"
tr=$(awk '$1 == "connect_translated" {s += $2} END {print s+0}' "$TMP/t")
[ "$tr" -gt 0 ]
ok $? "get stats: the kernel translated $tr connects"
grep -q "^lab $LAB is down" "$TMP/t"
ok $? "lab down at the end"
[ ! -e "/run/zerohop/$LAB" ] && ! ip netns list | grep -q "^$LAB-"
ok $? "nothing of the lab left behind"
done_testing
