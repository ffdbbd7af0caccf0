#!/usr/bin/env bash
# 94-etcd-selfwatch.t — a state handle that watches etcd and writes to it
# (the lab's supervisor: it watches the state and publishes its runtime pods
# on the same handle) sees its own writes and the writes of others queued
# before them (docs/state-etcd.md, ss_etcd.c K3 and K8): its own write's
# revision must not become the base the watcher's events are judged by.
# tests/tools/ss_selfwatch.c does the steps; one member, one node namespace.
source "$(dirname "$0")/../lib/tap.sh"
source "$(dirname "$0")/../lib/etcd_test.sh"
TOOL=$(dirname "$ZH")/tests/tools/ss_selfwatch
[ -x "$TOOL" ] || skip_all "no $TOOL (make first)"
et_setup t94 1 1
et_healthy
ok $? "1-member etcd up in its own namespace"
ip netns exec $ET_TAG-n1 timeout 30 "$TOOL" "$ETCD_SPEC" >"$TMP/tool.out" 2>"$TMP/tool.err"
rc=$?
while read -r line; do
	case "$line" in
	*": ok") ok 0 "$line" ;;
	*) ok 1 "$line" ;;
	esac
done <"$TMP/tool.out"
is "$rc" 0 "ss_selfwatch passed every step ($(tail -1 "$TMP/tool.err"))"
is "$(ETCDCTL get --prefix /zerohop/runtime/v1/pod/default/ --keys-only | grep -c .)" 3 \
	"the three pods are in etcd"
done_testing
