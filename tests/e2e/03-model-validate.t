#!/usr/bin/env bash
# 03-model-validate.t — `zerohop validate` on the example manifests: every
# good example passes with its object count, every bad example fails with
# exit status 1 and the exact "FILE:LINE: FIELD: MESSAGE" error. No lab needed.
source "$(dirname "$0")/../lib/tap.sh"
cd "$(dirname "$0")/../.." || exit 1
[ -x "$ZH" ] || skip_all "no $ZH (run make first)"
EX=examples/manifests
TMP=$(mktemp -d /tmp/zh-model-e2e-XXXXXX)
trap 'rm -rf "$TMP"' EXIT

# good examples: "ok: N objects" on stdout, exit 0, nothing on stderr
while read -r file n; do
	out=$("$ZH" validate -f "$EX/$file" 2>"$TMP/err"); rc=$?
	is "$rc" 0 "$file: exit 0"
	is "$out" "ok: $n objects" "$file: $n objects"
	is "$(cat "$TMP/err")" "" "$file: nothing on stderr"
done <<'LIST'
cluster.yaml 1
echo.yaml 3
flaskapp-split.yaml 6
httproute-split.yaml 5
netpol.yaml 4
LIST

# the whole directory at once (non-recursive: bad/ is not read)
out=$("$ZH" validate -f "$EX" 2>&1); rc=$?
is "$rc" 0 "directory input: exit 0"
is "$out" "ok: 19 objects" "directory input: every file, one state"

# several -f at once form one state: the split needs the services of another file
head -n 35 "$EX/flaskapp-split.yaml" >"$TMP/deploys.yaml"
tail -n +36 "$EX/flaskapp-split.yaml" >"$TMP/rest.yaml"
out=$("$ZH" validate -f "$TMP/deploys.yaml" -f "$TMP/rest.yaml" 2>&1); rc=$?
is "$rc" 0 "two -f inputs validate together"
is "$out" "ok: 6 objects" "two -f inputs: 6 objects"

# bad examples: exit 1, the error on stderr, nothing on stdout
while IFS='|' read -r file want; do
	out=$("$ZH" validate -f "$EX/bad/$file" 2>"$TMP/err"); rc=$?
	is "$rc" 1 "bad/$file: exit 1"
	is "$(cat "$TMP/err")" "$EX/bad/$file:$want" "bad/$file: error names file, line, field"
	is "$out" "" "bad/$file: nothing on stdout"
done <<'LIST'
unknown-kind.yaml|8: kind: unknown kind "Gizmo" (Cluster, Namespace, ConfigMap, Pod, Deployment, Service, TrafficSplit, HTTPRoute, NetworkPolicy)
port-range.yaml|11: spec.ports[1].port: must be between 1 and 65535, got 70000
split-missing-backend.yaml|15: spec.backends[1].service: backend Service default/nowhere does not exist
bad-weight.yaml|14: spec.backends[0].weight: invalid weight "-1": must be a non-negative quantity such as 1, 500m or 2k
bad-selector.yaml|7: spec.podSelector.matchExpressions[0].values: must be non-empty when operator is In
duplicate.yaml|7: metadata.name: duplicate Service default/twice (also defined at examples/manifests/bad/duplicate.yaml:1)
netpol-except.yaml|10: spec.egress[0].to[0].ipBlock.except[0]: "10.1.0.0/24" is not strictly within cidr 10.0.0.0/16
LIST

# JSON is YAML
printf '{"apiVersion":"v1","kind":"Service","metadata":{"name":"j"},"spec":{"ports":[{"port":80}]}}\n' >"$TMP/s.json"
out=$("$ZH" validate -f "$TMP/s.json" 2>&1); rc=$?
is "$rc" 0 "JSON input: exit 0"
is "$out" "ok: 1 objects" "JSON input: 1 object"

# I/O and usage errors
"$ZH" validate -f "$TMP/missing.yaml" 2>"$TMP/err"; rc=$?
is "$rc" 1 "missing file: exit 1"
is "$(cat "$TMP/err")" "$TMP/missing.yaml:0: cannot read: No such file or directory" "missing file named"
"$ZH" validate 2>/dev/null; rc=$?
is "$rc" 2 "no input: usage, exit 2"
"$ZH" validate --bogus 2>/dev/null; rc=$?
is "$rc" 2 "unknown option: exit 2"

done_testing
