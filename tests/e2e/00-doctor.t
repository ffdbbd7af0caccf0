#!/usr/bin/env bash
# `zerohop doctor` on this machine (healthy: exit 0, no FAIL line, valid
# JSON) and on broken variants of it: a needed command missing from PATH
# gives exactly one FAIL line naming the Debian package; no BPF filesystem
# (a private mount namespace without one) gives the bpffs line with its
# fix, and is not a failure since the agent mounts it itself.
source "$(dirname "$0")/../lib/tap.sh"
source "$(dirname "$0")/../lib/harness.sh"
test_setup t00 jq

"$ZH" doctor >"$TMP/out" 2>&1
is $? 0 "doctor: exit 0 on this machine (make deps ran)"
grep -q '^  FAIL' "$TMP/out"
is $? 1 "no FAIL line"
for item in "root" "kernel" "bpf cgroup/sock_addr" "bpf sock_ops" "bpf sk_msg" "bpf sockhash" \
	"bpffs" "cgroup2" "namespaces" "command ip" "command nft" "command nginx" "command haproxy"; do
	grep -Eq "^  (ok|note|warn) +$item " "$TMP/out"
	ok $? "checks $item"
done
tail -1 "$TMP/out" | grep -q "ready for make demo"
ok $? "last line: ready for make demo"
"$ZH" doctor -o json >"$TMP/json"
is "$(jq -r '.failed' "$TMP/json")" 0 "-o json: valid, failed 0"
is "$(jq -r '[.checks[] | select(.verdict == "ok")] | length > 10' "$TMP/json")" true "-o json: the checks"

# Broken: nft missing. A PATH with every command the doctor looks for
# (its own list, from -o json) but nft.
mkdir "$TMP/bin"
for c in $(jq -r '.checks[].check | select(startswith("command ")) | .[8:]' "$TMP/json"); do
	[ "$c" = nft ] || ln -s "$(command -v "$c")" "$TMP/bin/$c"
done
PATH="$TMP/bin" "$ZH" doctor >"$TMP/out" 2>&1
is $? 1 "without nft: exit 1"
is "$(grep -c '^  FAIL' "$TMP/out")" 1 "exactly one FAIL line"
grep -q '^  FAIL  command nft ' "$TMP/out"
ok $? "naming nft"
grep -A1 '^  FAIL  command nft' "$TMP/out" | grep -q 'fix: apt-get install nftables (or: make deps)'
ok $? "with the fix: the Debian package"
tail -1 "$TMP/out" | grep -q "^not ready"
ok $? "last line: not ready"

# No bpffs: a private mount namespace without one.
unshare -m --propagation private sh -c 'while mountpoint -q /sys/fs/bpf; do umount /sys/fs/bpf || exit 9; done; "$1" doctor' x "$ZH" >"$TMP/out" 2>&1
is $? 0 "without bpffs: still exit 0 (the agent mounts it)"
grep -q '^  note  bpffs  .*not mounted at /sys/fs/bpf: zerohop agent mounts it when it starts' "$TMP/out"
ok $? "the bpffs line says it is not mounted and who mounts it"
grep -A1 '^  note  bpffs' "$TMP/out" | grep -q 'fix: mount -t bpf bpf /sys/fs/bpf'
ok $? "and how to mount it by hand"
done_testing
