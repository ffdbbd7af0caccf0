#!/usr/bin/env bash
# bench-sidecar-accel.sh — Alibaba ASM's experiment on its own terms (seed
# 002): a sidecar mesh with and without the eBPF short-circuit, same node.
# Two labs up at once, `--mesh sidecar` and `--mesh sidecar --accel on`
# (Merbridge's BPF capture + sockmap on all three legs:
# docs/sidecar-baseline.md), measured interleaved.
#	scripts/bench-sidecar-accel.sh [PAIRS] [DURATION]   (default 5 3s; root, after make)
# Each measurement: `zerohop bench -c 64` closed loop (the seed ran fortio
# -c 64 -qps 0), 1 KiB, from a client pod to the echo Service (ClusterIP)
# on the same node: HTTP keep-alive (port named http) and TCP echo (port
# named tcp-echo: the sidecars pass it as TCP). Prints every pair and the
# median ratio accel / plain per protocol.
set +u
PAIRS=${1:-5}
DUR=${2:-3s}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
ZH=${ZH:-$ROOT/build/zerohop}
S=${ZH_TEST_LAB_SUFFIX:-}
TMP=$(mktemp -d /tmp/zh-bsa.XXXXXX)
source "$ROOT/tests/lib/manifests.sh"
trap 'for l in bsap$S bsaa$S; do "$ZH" lab down --lab $l >/dev/null 2>&1; done; rm -rf "$TMP"' EXIT
{
	m_deploy web node-a "app: web" "$(m_ctr e "http:8080 tcp-echo:9000" "$ZH" echo --http 8080 --tcp 9000)"
	m_svc web "app: web" "http=80:8080 tcp-echo=9000:9000"
	m_pod client node-a "" "$(m_ctr c "" sleep 100000)"
} >"$TMP/app.yaml"
"$ZH" lab up --lab bsap$S --mesh sidecar -f "$TMP/app.yaml" >/dev/null || exit 1
"$ZH" lab up --lab bsaa$S --mesh sidecar --accel on -f "$TMP/app.yaml" >/dev/null || exit 1
rate() {	# rate LAB URL: req/s
	"$ZH" lab exec --lab "$1" client -- "$ZH" bench -c 64 -t "$DUR" --warmup 1s --json - "$2" 2>/dev/null |
		jq -r '.ActualQPS | floor'
}
med() { sort -n | awk '{a[NR] = $1} END {print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2}'; }
for i in $(seq "$PAIRS"); do
	for proto in http tcp; do
		url=http://web/?size=1024
		[ $proto = tcp ] && url=tcp://web:9000
		# alternate which contender goes first
		if [ $((i % 2)) = 1 ]; then
			p=$(rate bsap$S "$url"); a=$(rate bsaa$S "$url")
		else
			a=$(rate bsaa$S "$url"); p=$(rate bsap$S "$url")
		fi
		echo "$proto sidecar $p sidecar+accel $a" | tee -a "$TMP/pairs"
	done
done
echo "pairs: $PAIRS per protocol, $DUR each, interleaved; load $(cut -d' ' -f1-3 /proc/loadavg)"
for proto in http tcp; do
	r=$(awk -v p=$proto '$1 == p && $3 > 0 {printf "%.3f\n", $5 / $3}' "$TMP/pairs")
	echo "$proto: sidecar+accel / sidecar req/s median ratio $(echo "$r" | med) ($(echo "$r" | sort -n | head -1)-$(echo "$r" | sort -n | tail -1))"
done
