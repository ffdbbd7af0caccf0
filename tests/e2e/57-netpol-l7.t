#!/usr/bin/env bash
# 57-netpol-l7.t — NetworkPolicy for traffic through the node L7 proxy (lab
# t57, 2 nodes, mesh on). An L7 Service `web` (HTTPRoute: /near -> the
# backend on the client's node, /far -> the backend on the other node);
# web pods admit only app=good on ingress; clients on node-a:
#   good (app=good), bad (app=bad), egok (app=good, egress only to
#   app=web:8080), egno (app=good, egress only to app=web:9999).
# Checked:
#   - the proxy judges each request: good gets 200 from both backends, bad
#     gets 403 from both (the local one used to pass: "the node may reach its
#     pods" admitted the proxy), egok gets 200, egno 403; the proxy's
#     zerohop_proxy_policy_denied_total counts them per direction;
#   - the kernel admits exactly the redirected sockets to the proxy: egno's
#     connection through the L7 Service reaches the proxy (403 comes from
#     it), while egno connecting to NODE_IP:15001 by hand is denied (EPERM),
#     counted in `get policy-drops`;
#   - a keep-alive connection through the proxy survives a policy change
#     (the generation moves) and its next request is judged by the new
#     policy (403 on the same connection);
#   - plain L4 Services and direct pod IPs keep their verdicts;
#   - explicit mode (--service) judges a non-pod client too, and the access
#     log names the denial.
#   - the cross-node leg: the proxy's upstream connections leave from
#     node-a's proxy address (.1 of its pod range), which every node admits
#     on ingress: the far backend answers good clients although its policy
#     names no node address; nothing else gains from it (a host process of
#     node-a from its fabric IP is still an outside address for node-b).
source "$(dirname "$0")/../lib/tap.sh"

source "$(dirname "$0")/../lib/lab_test.sh"
lab_test_setup "${ZH_T57_LAB:-t57}" curl
lab_test_tools netpol_probe
CG=$(awk '$3 == "cgroup2" {print $2; exit}' /proc/mounts)

backend() {	# NAME NODE WHERE
	cat <<YAML
apiVersion: v1
kind: Pod
metadata: {name: $1, labels: {app: web, where: $3}}
spec:
  nodeName: $2
  containers: [{name: echo, image: mendhak/http-https-echo, ports: [{name: http, containerPort: 8080}]}]
---
YAML
}
client() {	# NAME LABELS
	m_pod "$1" node-a "$2" "$(m_ctr c "" sleep 100000)"
}
svc() {	# NAME CLUSTERIP SELECTOR
	m_svc "$1" "$3" "http=80:http" "$2"
}
egress() {	# NAME EG PORT: pods eg=EG may only open app=web:PORT
	echo ---
	m_egress_only "$1" "eg: $2" "app: web" "$3"
}
{
	backend web-near node-a near
	backend web-far node-b far
	client good "app: good"
	client bad "app: bad"
	client egok "app: good, eg: ok"
	client egno "app: good, eg: no"
	svc web 10.96.0.57 "app: web"
	svc web-near 10.96.0.58 "where: near"
	svc web-far 10.96.0.59 "where: far"
	m_route web web <<'YAML'
  - matches: [{path: {type: PathPrefix, value: /near}}]
    backendRefs: [{name: web-near, port: 80}]
  - matches: [{path: {type: PathPrefix, value: /far}}]
    backendRefs: [{name: web-far, port: 80}]
YAML
} >"$TMP/m.yaml"

lab_up "with the mesh" -f "$TMP/m.yaml"

st() { "$ZH" lab status --lab $LAB -o json; }
STJ=$(st)
node_ip() { echo "$STJ" | jq -r ".nodes[] | select(.name==\"$1\") | .ip"; }
NODE_A=$(node_ip node-a)
NEAR=$(lab_pod_ip web-near) FAR=$(lab_pod_ip web-far)
diag "node-a $NODE_A, web-near $NEAR, web-far $FAR"

PXA=$(echo "$STJ" | jq -r '.nodes[] | select(.name=="node-a") | .podCIDR' | awk -F'[./]' '{print $1"."$2"."$3"."$4+1}')
diag "node-a proxy address $PXA"
# Policies: web admits app=good on 8080, nothing else (no node address);
# egress policies for egok / egno.
{
	m_ingress_from web-from-good "app: web" "app: good" 8080
	egress eg-ok ok 8080
	egress eg-no no 9999
} >"$TMP/np.yaml"
"$ZH" apply --lab $LAB -f "$TMP/np.yaml" >"$TMP/apply.out" 2>&1
ok $? "apply the policies" || sed 's/^/# /' "$TMP/apply.out"
sleep 1.2	# in force within 1 s; the proxy reloads within 20 ms

# The client: HOST PORT, then request paths on stdin, one keep-alive
# connection; a line "sleep S" waits. Prints "status hostname-prefix" per
# request ("000 -" when the connection failed).
cat >"$TMP/cl.py" <<'PY'
import http.client, json, sys, time
host, port = sys.argv[1], int(sys.argv[2])
c = http.client.HTTPConnection(host, port, timeout=4)
for line in sys.stdin:
    line = line.strip()
    if line.startswith("sleep "):
        time.sleep(float(line.split()[1]))
        continue
    try:
        c.request("GET", line)
        r = c.getresponse()
        body = r.read()
    except OSError as e:
        print("000", type(e).__name__)
        c.close()
        continue
    try:
        j = json.loads(body)
        name = j.get("hostname", "-").split("-")[1]
        if sys.argv[3:]:
            name += "@" + j.get("remote", "-").rsplit(":", 1)[0]
    except (ValueError, IndexError, AttributeError):
        name = "-"
    print(r.status, name)
PY
req() {	# POD [remote] then paths on stdin; one line of "status name," pairs
	lab_exec "$1" "$PY" "$TMP/cl.py" 10.96.0.57 80 $2 2>>"$TMP/cl.err" |
		tr '\n' ',' | sed 's/,$//'
}
px_stat() {	# NODE METRIC[{labels}]: the proxy's counter (sum over labels)
	"$ZH" lab exec --lab $LAB --node $1 -- curl -s -m 3 "http://$(node_ip $1):15090/" |
		awk -v m="$2" '$1 == m || index($1, m "{") == 1 { s += $2 } END { print s + 0 }'
}
DEN_I='zerohop_proxy_policy_denied_total{direction="ingress"}'
DEN_E='zerohop_proxy_policy_denied_total{direction="egress"}'
i0=$(px_stat node-a "$DEN_I") e0=$(px_stat node-a "$DEN_E")

# ---- stage 1: the proxy judges each request ----------------------------------
is "$(printf '/near\n/far\n' | req good)" "200 near,200 far" \
	"good client through the L7 Service: 200 from the local and the remote backend"
# (good's upstream connections to both backends now idle in the proxy's
# per-endpoint pool: bad's requests must not ride on them)
is "$(printf '/near\n/far\n/near\n' | req bad)" "403 -,403 -,403 -" \
	"bad client: 403 from the local backend (the hole is closed) and the remote one, on one connection; pooled upstreams not reused"
is "$(printf '/near\n/far\n' | req egok)" "200 near,200 far" \
	"egress-isolated client allowed to app=web:8080: 200 through the L7 Service (the proxy is not its peer)"
is "$(printf '/near\n' | req egno)" "403 -" \
	"egress-isolated client allowed only app=web:9999: 403 (judged by the proxy on targetPort 8080)"
i1=$(px_stat node-a "$DEN_I") e1=$(px_stat node-a "$DEN_E")
is "$((i1 - i0)) $((e1 - e0))" "3 1" "proxy metrics: policy_denied_total ingress +3, egress +1"

# ---- stage 2: the cross-node leg ---------------------------------------------------
is "$(printf '/far\n/near\n' | req good remote)" "200 far@$PXA,200 near@$PXA" \
	"both backends see the request from node-a's proxy address $PXA (admitted on ingress, no node IP in the policy)"
is "$(ip netns exec $LAB-node-a curl -s -m 2 -o /dev/null -w '%{http_code}' http://$FAR:8080/)" "000" \
	"node-a's own address is still an outside address for node-b's pods (dropped)"
is "$(ip netns exec $LAB-node-a curl -s -m 2 -o /dev/null -w '%{http_code}' http://$NEAR:8080/)" "200" \
	"node-a still reaches its local pods (the node exemption)"

# ---- the kernel opens exactly the redirected sockets -------------------------
probe() {	# POD TARGET...: "ok"/"fail" per target
	lab_exec "$1" "$TOOLS/netpol_probe" --timeout-ms 700 "${@:2}" |
		awk '{print $2}' | tr '\n' ' ' | sed 's/ $//'
}
is "$(probe egno tcp:$NODE_A:15001)" "fail" \
	"egno connecting to NODE_IP:15001 by hand (no redirect): still denied by its egress policy"
is "$(probe egok tcp:$NODE_A:15001)" "fail" \
	"egok connecting to NODE_IP:15001 by hand: denied too (the proxy is not app=web)"
"$ZH" get --lab $LAB policy-drops >"$TMP/drops.txt" 2>&1
grep -q "eg-no" "$TMP/drops.txt" && grep -q "eg-ok" "$TMP/drops.txt"
ok $? "get policy-drops charges the hand-made connections to eg-no and eg-ok" ||
	sed 's/^/# /' "$TMP/drops.txt"

# ---- direct paths and plain L4 Services keep their verdicts ----------------------
is "$(probe good tcp:$NEAR:8080 tcp:$FAR:8080 tcp:10.96.0.58:80 tcp:10.96.0.59:80)" "ok ok ok ok" \
	"good: direct pod IPs and plain L4 Services (near, far) admitted"
is "$(probe bad tcp:$NEAR:8080 tcp:$FAR:8080 tcp:10.96.0.58:80 tcp:10.96.0.59:80)" "fail fail fail fail" \
	"bad: direct pod IPs and plain L4 Services denied by the backends' ingress"
is "$(probe egok tcp:$NEAR:8080 tcp:10.96.0.59:80)" "ok ok" "egok: direct and L4 to app=web:8080 admitted"
is "$(probe egno tcp:$NEAR:8080 tcp:10.96.0.59:80)" "fail fail" "egno: direct and L4 to app=web:8080 denied (egress)"

# ---- a policy change: the connection to the proxy stays, the next request is
# judged by the new policy ----------------------------------------------------------
m_egress_only eg-ok "eg: ok" "app: web" 9999 >"$TMP/np2.yaml"
( sleep 1; "$ZH" apply --lab $LAB -f "$TMP/np2.yaml" >"$TMP/apply2.out" 2>&1 ) &
APPLY=$!
out=$(printf '/near\nsleep 3\n/near\n/far\n' | req egok)
wait $APPLY
is "$out" "200 near,403 -,403 -" \
	"egok keep-alive connection across a policy change (generation moves): still reaches the proxy, next requests 403"
is "$(printf '/far\n' | req egok)" "403 -" "egok, new connection after the change: 403"

# ---- explicit mode: a non-pod client, the access log ------------------------------
ip netns exec $LAB-node-a timeout 20 "$ZH" proxy --listen 127.0.0.1:15057 --service default/web:80 \
	--lab $LAB --access-log "$TMP/access.log" >"$TMP/xpx.out" 2>&1 &
XPX=$!
BG+=($XPX)
wait_until 3 lab_listening $LAB-node-a 15057
code=$(ip netns exec $LAB-node-a curl -s -m 3 -o "$TMP/body" -w '%{http_code}' http://127.0.0.1:15057/near)
is "$code $(cat "$TMP/body")" "403 403 Forbidden" \
	"explicit mode, client 127.0.0.1 (not a pod): web's ingress (app=good only) denies: 403 with a short body"
kill "$XPX" 2>/dev/null
wait "$XPX" 2>/dev/null
BG=()
grep -q '" 403 .*denied by ingress policy"$' "$TMP/access.log"
ok $? "access log line names the denial" || sed 's/^/# /' "$TMP/access.log"

"$ZH" lab down --lab $LAB >/dev/null 2>&1
ok $? "lab down"
ok $([ ! -e /sys/fs/bpf/zerohop/$LAB ] && [ ! -e "$CG/zerohop-$LAB" ]; echo $?) "no pins or cgroups left"
done_testing
