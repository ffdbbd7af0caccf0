#!/usr/bin/env bash
# 03-model-validate.t — `zerohop validate` on the example manifests: every
# good example passes with its object count, every bad example fails with
# exit status 1 and the exact "FILE:LINE: FIELD: MESSAGE" error. No lab needed.
source "$(dirname "$0")/../lib/tap.sh"
source "$(dirname "$0")/../lib/harness.sh"
test_setup model-e2e --user
cd "$ROOT" || exit 1
EX=examples/manifests

# good examples: "ok: N objects" on stdout, exit 0, nothing on stderr
case_good_examples() {
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
}

# the whole directory at once (non-recursive: bad/ is not read)
case_directory_input() {
	out=$("$ZH" validate -f "$EX" 2>&1); rc=$?
	is "$rc" 0 "directory input: exit 0"
	is "$out" "ok: 19 objects" "directory input: every file, one state"
}

# several -f at once form one state: the split needs the services of another file
case_inputs_form_one_state() {
	head -n 35 "$EX/flaskapp-split.yaml" >"$TMP/deploys.yaml"
	tail -n +36 "$EX/flaskapp-split.yaml" >"$TMP/rest.yaml"
	out=$("$ZH" validate -f "$TMP/deploys.yaml" -f "$TMP/rest.yaml" 2>&1); rc=$?
	is "$rc" 0 "two -f inputs validate together"
	is "$out" "ok: 6 objects" "two -f inputs: 6 objects"
}

# bad examples: exit 1, the error on stderr, nothing on stdout
case_bad_examples() {
	while IFS='|' read -r file want; do
		out=$("$ZH" validate -f "$EX/bad/$file" 2>"$TMP/err"); rc=$?
		is "$rc" 1 "bad/$file: exit 1"
		is "$(cat "$TMP/err")" "$EX/bad/$file:$want" "bad/$file: error names file, line, field"
		is "$out" "" "bad/$file: nothing on stdout"
	done <<'LIST'
unknown-kind.yaml|8: kind: unknown kind "Gizmo" (Cluster, Namespace, ConfigMap, Pod, Deployment, Service, ServiceAccount, TrafficSplit, HTTPRoute, HTTPRouteGroup, NetworkPolicy; v1 kinds with no data-plane meaning are skipped)
port-range.yaml|11: spec.ports[1].port: must be between 1 and 65535, got 70000
redirect-code.yaml|15: spec.rules[0].filters[0].requestRedirect.statusCode: must be 301, 302, 303, 307 or 308, got 304
bad-weight.yaml|14: spec.backends[0].weight: invalid weight "-1": must be a non-negative quantity such as 1, 500m or 2k
bad-selector.yaml|7: spec.podSelector.matchExpressions[0].values: must be non-empty when operator is In
duplicate.yaml|7: metadata.name: duplicate Service default/twice (also defined at examples/manifests/bad/duplicate.yaml:1)
netpol-except.yaml|10: spec.egress[0].to[0].ipBlock.except[0]: "10.1.0.0/24" is not strictly within cidr 10.0.0.0/16
LIST
}

# JSON is YAML
case_json_input() {
	printf '{"apiVersion":"v1","kind":"Service","metadata":{"name":"j"},"spec":{"ports":[{"port":80}]}}\n' >"$TMP/s.json"
	out=$("$ZH" validate -f "$TMP/s.json" 2>&1); rc=$?
	is "$rc" 0 "JSON input: exit 0"
	is "$out" "ok: 1 objects" "JSON input: 1 object"
}

# references resolve eventually: a split naming a Service that does not
# exist yet validates, with a warning naming file:line: field
case_references_resolve_later() {
	cat >"$TMP/early.yaml" <<'YAML'
apiVersion: v1
kind: Service
metadata: {name: root}
spec:
  ports: [{port: 80}]
---
apiVersion: split.smi-spec.io/v1alpha4
kind: TrafficSplit
metadata: {name: s}
spec:
  service: root
  backends:
    - service: root
      weight: 100
    - service: later
      weight: 0
YAML
	out=$("$ZH" validate -f "$TMP/early.yaml" 2>"$TMP/err"); rc=$?
	is "$rc" 0 "split before its backend Service: valid"
	is "$out" "ok: 2 objects" "... 2 objects"
	is "$(cat "$TMP/err")" "warning: $TMP/early.yaml:15: spec.backends[1].service: backend Service default/later does not exist (yet): its weight is not served" \
		"... a warning names the missing Service"
}

# kinds with no data-plane meaning are skipped and listed; --strict refuses
case_skipped_kinds_and_strict() {
	cat >"$TMP/mixed.yaml" <<'YAML'
apiVersion: v1
kind: ServiceAccount
metadata: {name: reviews}
---
apiVersion: v1
kind: Service
metadata: {name: reviews}
spec:
  ports: [{port: 9080, name: http}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: edge}
spec:
  gatewayClassName: x
  listeners: [{name: http, port: 80, protocol: HTTP}]
---
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: reviews}
spec:
  hosts: [reviews]
YAML
	out=$("$ZH" validate -f "$TMP/mixed.yaml" 2>"$TMP/err"); rc=$?
	is "$rc" 0 "ServiceAccount, Gateway and VirtualService beside a Service: valid"
	is "$out" "gateway.gateway.networking.k8s.io/edge ignored (no ingress gateway in zerohop)
virtualservice.networking.istio.io/reviews ignored (no data-plane meaning for zerohop)
ok: 2 objects, 2 ignored" "... the skipped objects are listed"
	out=$("$ZH" validate --strict -f "$TMP/mixed.yaml" 2>&1); rc=$?
	is "$rc" 1 "--strict: refused"
	is "$out" "$TMP/mixed.yaml:12: kind: Gateway (gateway.networking.k8s.io/v1) is not acted on by zerohop (no ingress gateway in zerohop); refused with --strict" \
		"--strict: the first skipped object is the error"
}

# -n: the default namespace; a conflicting namespace is an error
case_namespace_flag() {
	printf 'apiVersion: v1\nkind: Service\nmetadata: {name: a}\nspec: {ports: [{port: 80}]}\n' >"$TMP/nons.yaml"
	out=$("$ZH" validate -n shop -f "$TMP/nons.yaml" 2>&1); rc=$?
	is "$rc" 0 "-n shop: valid"
	printf 'apiVersion: v1\nkind: Service\nmetadata: {name: a, namespace: prod}\nspec: {ports: [{port: 80}]}\n' >"$TMP/prod.yaml"
	out=$("$ZH" validate -n shop -f "$TMP/prod.yaml" 2>&1); rc=$?
	is "$rc" 1 "-n shop on an object of namespace prod: error"
	is "$out" "$TMP/prod.yaml:3: metadata.namespace: the object's namespace \"prod\" does not match the namespace \"shop\" given with -n" \
		"... naming file:line"
}

# a directory with a trailing slash names DIR/file, not DIR//file
case_dir_trailing_slash() {
	out=$("$ZH" validate -f "$EX/bad/" 2>&1)
	is "$out" "$EX/bad/bad-selector.yaml:7: spec.podSelector.matchExpressions[0].values: must be non-empty when operator is In" \
		"DIR/ names DIR/file"
}

# every subcommand answers --help and -h with its usage on stdout, exit 0
case_help_everywhere() {
	for c in apply delete get validate lab proxy echo bench dns ca; do
		for h in --help -h; do
			out=$("$ZH" $c $h 2>/dev/null); rc=$?
			ok $([ $rc -eq 0 ] && echo "$out" | grep -q "usage: zerohop $c"; echo $?) "zerohop $c $h: usage, exit 0"
		done
	done
	for r in $("$ZH" get --help | head -1 | awk '{print $3}' | tr '|' ' '); do
		"$ZH" --help | grep -E "^  get " | grep -q "$r"
		ok $? "top-level help lists get resource $r"
	done
}

# manifests written like the published demo applications (tests/e2e/manifests21)
case_demo_app_manifests() {
	M21=tests/e2e/manifests21
	while IFS='|' read -r file want; do
		out=$("$ZH" validate -f "$M21/$file" 2>/dev/null | tail -1); rc=$?
		is "$out" "$want" "$file: $want"
	done <<'LIST'
bookinfo-like.yaml|ok: 14 objects
emojivoto-like.yaml|ok: 8 objects
boutique-like.yaml|ok: 9 objects, 5 ignored
mixed.yaml|ok: 3 objects, 5 ignored
LIST
	out=$("$ZH" validate -f "$M21/" 2>&1 | tail -1)
	is "$out" "ok: 34 objects, 10 ignored" "the four files together (a directory)"
}

# I/O and usage errors
case_io_and_usage_errors() {
	"$ZH" validate -f "$TMP/missing.yaml" 2>"$TMP/err"; rc=$?
	is "$rc" 1 "missing file: exit 1"
	is "$(cat "$TMP/err")" "$TMP/missing.yaml:0: cannot read: No such file or directory" "missing file named"
	"$ZH" validate 2>/dev/null; rc=$?
	is "$rc" 2 "no input: usage, exit 2"
	"$ZH" validate --bogus 2>/dev/null; rc=$?
	is "$rc" 2 "unknown option: exit 2"
}

run_cases case_good_examples case_directory_input case_inputs_form_one_state \
	case_bad_examples case_json_input case_references_resolve_later \
	case_skipped_kinds_and_strict case_namespace_flag case_dir_trailing_slash \
	case_help_everywhere case_demo_app_manifests case_io_and_usage_errors
done_testing
