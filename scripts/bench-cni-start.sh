#!/usr/bin/env bash
# bench-cni-start.sh — pod start to first request served through a Service:
# podman + zerohop-cni vs podman + Debian's bridge plugin (host-local IPAM,
# zerohop-cni chained after it only to publish the pod), N starts each,
# interleaved A B A B. Both use the same lab, image, Service (zerohop's
# connect-time balancing) and client; the difference is the network plugin.
#	scripts/bench-cni-start.sh [N]        (default 20; as root, after make)
# One start: a poller in a client pod asks the Service `web` (no other
# endpoint) every 5 ms; t0 = just before `podman run -d`; t1 = when the
# poller got an answer from the new container. Prints each pair, the
# medians and the median of the pair ratios (bridge / zerohop-cni).
set +u
N=${1:-20}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
ZH=${ZH:-$ROOT/build/zerohop}
LAB=bcni${ZH_TEST_LAB_SUFFIX:-}
TMP=$(mktemp -d /tmp/zh-bcni.XXXXXX)
source "$ROOT/tests/lib/tap.sh" >/dev/null
source "$ROOT/tests/lib/manifests.sh"
source "$ROOT/tests/lib/podman.sh"
[ -n "${KEEP:-}" ] || trap '"$ZH" lab down --lab $LAB >/dev/null 2>&1; rm -rf "$TMP"' EXIT
"$ZH" lab down --lab $LAB >/dev/null 2>&1
{
	m_pod client node-a "" "$(m_ctr c "" sleep 100000)"
	m_svc web "app: web" "http=80:8080"
} >"$TMP/app.yaml"
"$ZH" lab up --lab $LAB -f "$TMP/app.yaml" >/dev/null || exit 1
pm_image_tar "$TMP/img.tar"
pm_import "$TMP/img.tar" || exit 1
# the bridge network beside zerohop-cni's, in node-a's podman config
D=/run/zerohop/$LAB/podman/node-a
ln -sf /usr/lib/cni/bridge "$D/bin/bridge"
ln -sf /usr/lib/cni/host-local "$D/bin/host-local"
cat >"$D/net.d/bridge.conflist" <<JSON
{"cniVersion": "1.0.0", "name": "bench-bridge", "plugins": [
  {"type": "bridge", "bridge": "cni-bench", "isGateway": true,
   "ipam": {"type": "host-local", "subnet": "10.244.0.128/26", "dataDir": "$D/hostlocal",
            "routes": [{"dst": "0.0.0.0/0"}]}},
  {"type": "zerohop-cni", "node": "node-a", "podCIDR": "10.244.0.0/24",
   "stateDir": "/run/zerohop/$LAB/state", "dataDir": "$D/ipam", "labelsDir": "$D/labels"}]}
JSON
start() {	# start NET NAME: ms from podman run to the first answer via the Service
	local net=$1 name=$2 t0 t1
	"$ZH" lab exec --lab $LAB client -- busybox sh -c '
		while :; do
			r=$(printf "GET / HTTP/1.0\r\n\r\n" | nc -w 1 web 80 2>/dev/null | tail -n 1)
			case "$r" in *"\"$0\""*) exit 0 ;; esac
			usleep 5000
		done' "$name" &
	local poller=$!
	sleep 0.2
	t0=$(date +%s%N)
	pm node-a run -d -q --name "$name" --network "$net" -l app=web $PM_IMAGE \
		/usr/local/bin/zerohop echo --http 8080 --name "$name" >/dev/null
	timeout 20 tail --pid=$poller -f /dev/null
	t1=$(date +%s%N)
	kill $poller 2>/dev/null
	pm node-a rm -f -t 0 "$name" >/dev/null
	echo $(((t1 - t0) / 1000000))
}
med() { sort -n | awk '{a[NR] = $1} END {print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2}'; }
: >"$TMP/pairs"
for i in $(seq "$N"); do
	z=$(start "zhlab-$LAB" z$i)
	b=$(start bench-bridge b$i)
	echo "$z $b" | tee -a "$TMP/pairs"
done
zm=$(cut -d' ' -f1 "$TMP/pairs" | med)
bm=$(cut -d' ' -f2 "$TMP/pairs" | med)
rm=$(awk '{printf "%.3f\n", $1 / $2}' "$TMP/pairs" | med)
lo=$(awk '{printf "%.3f\n", $1 / $2}' "$TMP/pairs" | sort -n | head -1)
hi=$(awk '{printf "%.3f\n", $1 / $2}' "$TMP/pairs" | sort -n | tail -1)
echo "starts: $N each, interleaved; load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "zerohop-cni median ${zm} ms; bridge + host-local median ${bm} ms"
echo "zerohop-cni / bridge: median of pair ratios ${rm} (${lo}-${hi})"
