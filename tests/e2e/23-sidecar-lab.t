#!/usr/bin/env bash
# 23-sidecar-lab.t — `lab up --mesh sidecar` (docs/sidecar-baseline.md):
# every pod gets an HAProxy sidecar with istio-init's capture in its own
# network namespace. Traffic really goes through both sidecars (their own
# stats counters move by exactly the requests sent, and the backend sees the
# inbound sidecar's source 127.0.0.6, not the client pod), HTTP is balanced
# per request on one keep-alive connection, a TrafficSplit's weights hold,
# endpoint changes reach the sidecars, a pod's own connections are not
# looped, and `lab down` leaves no rule, process or namespace behind.
source "$(dirname "$0")/../lib/tap.sh"
source "$(dirname "$0")/../lib/lab_test.sh"
lab_test_setup t23 haproxy curl nft

echo_ctr() { m_ctr e http:8080 "$ZH" echo --http 8080 --tcp 8078 --udp 127.0.0.1:0; }
app_yaml() {
	REPLICAS=$1 m_deploy web node-b "app: web, version: v1" "$(echo_ctr)"
	m_deploy canary node-a "app: web, version: v2" "$(echo_ctr)"
	m_pod client node-a "" "$(echo_ctr)"
	m_svc web "version: v1" "80:8080 tcp=8078:8078"
	m_svc web-v2 "version: v2" "80:8080"
	m_svc split "app: web" "80:8080"
	cat <<YAML
apiVersion: split.smi-spec.io/v1alpha1
kind: TrafficSplit
metadata: {name: split}
spec:
  service: split
  backends:
    - {service: web, weight: 1}
    - {service: web-v2, weight: 500m}
YAML
}
app_yaml 2 >"$TMP/app.yaml"

lab_up "--mesh sidecar" --mesh sidecar -f "$TMP/app.yaml"
st=$("$ZH" lab status --lab $LAB -o json)
is "$(echo "$st" | jq -r .meshMode)" sidecar "lab status says meshMode sidecar"

# --- the layout: a sidecar in every pod's cgroup, workers as uid 1337, capture rules
CG=$(awk '$3 == "cgroup2" {print $2; exit}' /proc/mounts)
[ -d "$CG/zerohop-$LAB" ] || CG=/run/zerohop/cgroup2
# HAProxy -W binds in the master, then forks the worker: a pod is Running
# (its sidecar listens) a moment before the worker exists.
sidecars_whole() {
	local row p n
	bad=""
	for row in $(echo "$st" | jq -r '.pods[] | select(.namespace == "default") | "\(.node)/\(.namespace)_\(.name)"'); do
		n=0
		for p in $(cat "$CG/zerohop-$LAB/${row%%/*}/${row#*/}/cgroup.procs"); do
			[ "$(cat /proc/$p/comm 2>/dev/null)" = haproxy ] && n=$((n + 1))
		done
		[ "$n" -ge 2 ] || bad+=" $row($n)"
	done
	[ -z "$bad" ]
}
wait_until 10 sidecars_whole
is "$bad" "" "every default pod has HAProxy master + worker in its own cgroup"
# (a reload right after lab up replaces the worker: take one that is there)
client_worker() {
	wpid=$(ps -o pid= --ppid "$(pgrep -o -f "/run/zerohop/$LAB/pods/default_client/sidecar.cfg")" | head -1)
	[ -n "$wpid" ] && [ "$(ps -o uid= -p $wpid | tr -d ' ')" = 1337 ]
}
wait_until 5 client_worker || { pgrep -a -f "/run/zerohop/$LAB/pods/default_client/" | sed 's/^/# /' >&2; ps -eo pid,ppid,uid,comm,args | grep "pods/default_client" | sed 's/^/# ps /' >&2; }
is "$(ps -o uid= -p $wpid | tr -d ' ')" 1337 "the client sidecar's worker runs as uid 1337"
ip netns exec $LAB-p-default-client nft list table ip zerohop_sidecar >"$TMP/rules" 2>&1
ok $? "the client pod's netns has istio-init's nat table"
grep -q "redirect to :15001" "$TMP/rules" && grep -q "redirect to :15006" "$TMP/rules" &&
	grep -q "skuid 1337" "$TMP/rules"
ok $? "outbound -> 15001, inbound -> 15006, uid 1337 exempt"
ok $([ -z "$(ls /sys/fs/bpf/zerohop/$LAB/node-a/lb_* 2>/dev/null)" ]; echo $?) \
	"no BPF service translation under the sidecars (agents in nft mode)"

# --- through both sidecars, counted by HAProxy itself
# The lab is up once pods run; the sidecars follow the endpoints after, and
# a reload starts a worker whose counters begin at 0. So first the client's
# sidecar must know both web pods, and no sidecar's worker may be changing.
both_web() {
	lab_exec client curl -s "http://web/b[1-20]" >"$TMP/b20"
	[ "$(grep -o '"name":"web-[^"]*' "$TMP/b20" | sort -u | wc -l)" = 2 ]
}
wait_until 10 both_web
ok $? "one keep-alive connection, requests balanced over both web pods"
workers() {
	local p m
	for p in $(echo "$st" | jq -r '.pods[] | select(.namespace == "default") | .name'); do
		m=$(pgrep -o -f "/run/zerohop/$LAB/pods/default_$p/sidecar.cfg")
		echo "$p:$(pgrep -P "$m" | sort | tr '\n' ,)"
	done
}
settled() { local a; a=$(workers); sleep 0.5; [ "$a" = "$(workers)" ]; }
wait_until 10 settled
stats() { lab_exec "$1" curl -s "http://127.0.0.1:15090/stats;csv"; }
# stot of BACKEND rows whose proxy name matches $2
stot() { stats "$1" | awk -F, -v re="$2" '$2 == "BACKEND" && $1 ~ re {s += $8} END {print s + 0}'; }
web_pods=$(echo "$st" | jq -r '.pods[] | select(.name | startswith("web-")) | .name')
in_before=0
for p in $web_pods; do in_before=$((in_before + $(stot $p '^in_8080$'))); done
out_before=$(stot client '^o[0-9_]+_h$')
lab_exec client curl -s "http://web/r[1-20]" >"$TMP/r20"
is "$(grep -o '"method":"GET"' "$TMP/r20" | wc -l)" 20 "20 requests to Service web answered"
in_after=0
for p in $web_pods; do in_after=$((in_after + $(stot $p '^in_8080$'))); done
is $(( $(stot client '^o[0-9_]+_h$') - out_before )) 20 "client sidecar's outbound HTTP counters: +20"
is $((in_after - in_before)) 20 "web sidecars' inbound counters: +20"
is "$(grep -o '"remote":"[0-9.]*' "$TMP/r20" | cut -d'"' -f4 | sort -u)" 127.0.0.6 \
	"the backend sees the inbound sidecar's source 127.0.0.6 (no pod bypassed it)"
r=$(lab_exec client /usr/bin/python3 -c "
import socket; s=socket.create_connection(('web', 8078)); s.sendall(b'tcp-through-sidecars'); print(s.recv(100).decode())")
is "$r" tcp-through-sidecars "a TCP (non-HTTP) port passes the sidecars byte for byte"

# --- TrafficSplit: 1 : 500m over one keep-alive connection
lab_exec client curl -s "http://split/s[1-300]" >"$TMP/r300"
v1=$(grep -o '"name":"web-' "$TMP/r300" | wc -l)
v2=$(grep -o '"name":"canary-' "$TMP/r300" | wc -l)
ok $([ $((v1 + v2)) -eq 300 ] && [ "$v1" -ge 180 ] && [ "$v1" -le 220 ]; echo $?) \
	"split 1 : 500m through the sidecar: v1 $v1, v2 $v2 of 300 (v1 180..220)"

# --- reloads: only when a sidecar's configuration changes (SC1)
master=$(pgrep -o -f "/run/zerohop/$LAB/pods/default_client/sidecar.cfg")
worker() { pgrep -n -P "$master"; }
w0=$(worker)
printf 'apiVersion: v1\nkind: ConfigMap\nmetadata: {name: unrelated}\ndata: {a: b}\n' >"$TMP/cm.yaml"
"$ZH" apply --lab $LAB -f "$TMP/cm.yaml" >/dev/null
sleep 1
is "$(worker)" "$w0" "a change no sidecar depends on reloads none (same worker)"

# --- endpoint changes reach the sidecars
app_yaml 3 >"$TMP/app3.yaml"
"$ZH" apply --lab $LAB -f "$TMP/app3.yaml" >/dev/null
ok $? "apply: web scaled to 3"
reloaded() { [ -n "$(worker)" ] && [ "$(worker)" != "$w0" ]; }
wait_until 10 reloaded
ok $? "the endpoint change reloaded the client's sidecar (new worker, same master $master)"
three() { [ "$(lab_exec client curl -s "http://web/t[1-12]" | grep -o '"name":"web-[^"]*' | sort -u | wc -l)" = 3 ]; }
wait_until 30 three
ok $? "the client sidecar balances over the third web pod"
app_yaml 1 >"$TMP/app1.yaml"
"$ZH" apply --lab $LAB -f "$TMP/app1.yaml" >/dev/null
one() { [ "$(lab_exec client curl -s "http://web/o[1-6]" | grep -o '"name":"web-[^"]*' | sort -u | wc -l)" = 1 ]; }
wait_until 30 one
ok $? "scaled to 1: every request reaches the remaining pod"
lab_exec client curl -s -o /dev/null -w '%{http_code}\n' "http://web/e[1-30]" >"$TMP/codes"
is "$(sort -u "$TMP/codes" | tr '\n' ' ')" "200 " "after the scale-down, 30 requests all 200"

# --- no loops: own sidecar, own pod
r=$(lab_exec client /usr/bin/python3 -c "
import socket
try:
    s = socket.create_connection(('127.0.0.1', 15001), timeout=3)
    s.sendall(b'GET / HTTP/1.1\r\nHost: x\r\n\r\n')
    print('closed' if s.recv(100) == b'' else 'answered')
except ConnectionResetError:
    print('closed')
except OSError as e:
    print('error', e)")
is "$r" closed "a connection made straight to the own sidecar's 15001 is refused, not looped"
ip=$(lab_pod_ip client)
r=$(lab_exec client curl -s -m 3 "http://$ip:8080/self")
is "$(echo "$r" | jq -r .remote | cut -d: -f1)" "$ip" "the client reaching its own pod IP goes straight to its app"
scur=$(stats client | awk -F, '$1 == "outbound" && $2 == "FRONTEND" {print $5}')
ok $([ "${scur:-99}" -le 2 ]; echo $?) "the client sidecar holds ${scur:-?} outbound sessions (no loop piling up)"
wp=$(echo "$st" | jq -r '.pods[] | select(.name | startswith("canary-")) | .name')
lab_exec "$wp" curl -s "http://web-v2/c[1-5]" >"$TMP/self"
is "$(grep -c "\"name\":\"$wp\"" "$TMP/self")" 5 "a pod calling a Service whose only endpoint is itself: via its inbound sidecar, 5 of 5"

# --- lab down leaves nothing
"$ZH" lab down --lab $LAB >/dev/null 2>&1
ok $? "lab down"
is "$(pgrep -f "/run/zerohop/$LAB/pods/" | wc -l)" 0 "no sidecar process left"
is "$(ip netns list | grep -c "^$LAB-")" 0 "no namespace (and so no capture rule) left"
ok $([ ! -e "/run/zerohop/$LAB" ]; echo $?) "run dir removed"
done_testing
