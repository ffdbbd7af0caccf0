#!/usr/bin/env bash
# 90-etcd-state.t — the etcd state source (docs/state-etcd.md) end to end:
# a 3-member etcd cluster (Debian's etcd) and two nodes in namespaces of
# this test; apply / change / delete through etcd reach both agents'
# kernel maps (the published generation is etcd's revision) and real
# connections to the ClusterIP; a multi-object apply with one bad object
# changes nothing in etcd; a stale resourceVersion is refused naming the
# object; the key layout is what the docs say, checked with etcdctl.
source "$(dirname "$0")/../lib/tap.sh"
source "$(dirname "$0")/../lib/etcd_test.sh"
et_setup t90 3 2
et_healthy
ok $? "3-member etcd cluster up in its own namespaces"

{ et_svc "app: web, ver: a"; et_podm 1 2 a; et_podm 2 2 b; } >"$TMP/m.yaml"
ZHE apply -f "$TMP/m.yaml" >"$TMP/apply.out" 2>&1
ok $? "apply through etcd ($(tr '\n' ' ' <"$TMP/apply.out"))"
keys=$(ETCDCTL get --prefix /zerohop/ --keys-only | grep . | tr '\n' ' ')
is "$keys" "/zerohop/v1/pod/default/web-1-2 /zerohop/v1/pod/default/web-2-2 /zerohop/v1/service/default/web " \
	"one key per object, /zerohop/v1/KIND/NAMESPACE/NAME"

et_echo 1 2
et_echo 2 2
for n in 1 2; do et_agent_start $n; done
in_sync() { [ "$(et_health "$1")" = ready ] && [ "$(et_gen "$1")" = "$(et_rev)" ]; }
wait_until 15 in_sync 1 && wait_until 5 in_sync 2
ok $? "both agents ready at etcd's revision $(et_rev)"
wait_until 5 who_is 2 web-1-2
is "$(et_who 2)" web-1-2 "node 2 reaches the ClusterIP: answered by web-1-2 on node 1"
is "$(et_who 1)" web-1-2 "node 1 too"
bpftool map dump pinned /sys/fs/bpf/$ET_TAG-n2/lb_svc 2>/dev/null | grep -q 'value'
ok $? "node 2's service map has entries"

# change: the selector moves to ver b; both kernels follow
et_svc "app: web, ver: b" >"$TMP/svc-b.yaml"
t0=$(date +%s%N)
ZHE apply -f "$TMP/svc-b.yaml" >/dev/null
wait_until 5 who_is 1 web-2-2
is "$(et_who 1)" web-2-2 "change via etcd: node 1 now reaches web-2-2 ($(( ($(date +%s%N) - t0) / 1000000 )) ms)"
wait_until 5 in_sync 2
is "$(et_who 2)" web-2-2 "node 2 too, its generation is etcd's revision $(et_gen 2)"
grep -q "incremental" "$TMP/agent1.log"
ok $? "the selector change took the incremental path (shared event layer)"

# resourceVersion: shown by get -o yaml, a stale one is refused
ZHE get svc -o yaml >"$TMP/get.yaml"
rv=$(awk '/resourceVersion:/ {gsub(/"/, "", $2); print $2}' "$TMP/get.yaml")
is "$rv" "$(ETCDCTL get /zerohop/v1/service/default/web -w json | jq -r '.kvs[0].mod_revision')" \
	"get -o yaml shows the mod revision as metadata.resourceVersion"
sed 's/ver: b/ver: a/' "$TMP/get.yaml" >"$TMP/edit.yaml"
ZHE apply -f "$TMP/edit.yaml" >/dev/null 2>&1
ok $? "apply with the current resourceVersion succeeds"
rev0=$(et_rev)
ZHE apply -f "$TMP/edit.yaml" >"$TMP/stale.out" 2>&1
is $? 1 "apply with a stale resourceVersion fails"
grep -q "conflict: Service default/web has been modified" "$TMP/stale.out"
ok $? "the conflict names the object ($(head -1 "$TMP/stale.out"))"
is "$(et_rev)" "$rev0" "nothing written by the refused apply"

# a multi-object apply with one bad object changes nothing
{ et_svc "app: web" web2 10.96.90.11; et_podm 1 3 a
  printf 'apiVersion: v1\nkind: Service\nmetadata: {name: bad}\nspec: {ports: [{port: 70000}]}\n'; } >"$TMP/bad.yaml"
before=$(ETCDCTL get --prefix /zerohop/ -w json | jq -c '[.kvs[] | [.key, .mod_revision]]')
ZHE apply -f "$TMP/bad.yaml" >"$TMP/bad.out" 2>&1
is $? 1 "a multi-object apply with one bad object fails"
grep -q "bad.yaml:.*70000" "$TMP/bad.out"
ok $? "the error names the bad object's file and field"
after=$(ETCDCTL get --prefix /zerohop/ -w json | jq -c '[.kvs[] | [.key, .mod_revision]]')
is "$after" "$before" "no key of the good objects was written (all or nothing)"

# the same file without the bad object: one txn, one revision for both
head -n -4 "$TMP/bad.yaml" >"$TMP/good.yaml"
ZHE apply -f "$TMP/good.yaml" >/dev/null
ok $? "the good objects apply"
is "$(ETCDCTL get --prefix /zerohop/ -w json | jq '[.kvs[] | select(.key | @base64d | test("web2|web-1-3")) | .mod_revision] | unique | length')" 1 \
	"both written at one revision (one transaction)"

# delete through etcd: the ClusterIP stops answering on both nodes
ZHE delete -f "$TMP/svc-b.yaml" >/dev/null
ok $? "delete through etcd"
gone() { ! et_run "$1" curl -s -m 1 http://10.96.90.10/ >/dev/null 2>&1; }
wait_until 5 gone 1 && wait_until 5 gone 2
ok $? "after the delete neither node reaches the old ClusterIP"
wait_until 5 in_sync 1 && wait_until 5 in_sync 2
ok $? "both agents at revision $(et_rev)"
done_testing
