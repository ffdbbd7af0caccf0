#!/usr/bin/env bash
# bench-runtime-rates.sh — request rates between pods, podman containers
# (--runtime podman) vs processes (--runtime process), same-node and
# cross-node, both labs up at once and measured interleaved.
#	scripts/bench-runtime-rates.sh [PAIRS] [DURATION]   (default 5 3s; root, after make)
# Each measurement: `zerohop bench -c 16 -t DURATION` (closed loop, HTTP
# keep-alive) from a client pod on node-a to `zerohop echo` on node-a (same
# node, short-circuited) or node-b (cross node), by pod IP. Prints every
# pair and the median ratio podman / process per path.
set +u
PAIRS=${1:-5}
DUR=${2:-3s}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
ZH=${ZH:-$ROOT/build/zerohop}
S=${ZH_TEST_LAB_SUFFIX:-}
TMP=$(mktemp -d /tmp/zh-brr.XXXXXX)
source "$ROOT/tests/lib/manifests.sh"
trap 'for l in brrp$S brrc$S; do "$ZH" lab down --lab $l >/dev/null 2>&1; done; rm -rf "$TMP"' EXIT
{
	m_pod web-a node-a "app: web" "$(m_ctr c http:8080 "$ZH" echo --http 8080 --name web-a)"
	m_pod web-b node-b "app: web" "$(m_ctr c http:8080 "$ZH" echo --http 8080 --name web-b)"
	m_pod client node-a "" "$(m_ctr c "" sleep 100000)"
} >"$TMP/app.yaml"
"$ZH" lab up --lab brrp$S --runtime process -f "$TMP/app.yaml" >/dev/null || exit 1
"$ZH" lab up --lab brrc$S --runtime podman -f "$TMP/app.yaml" >/dev/null || exit 1
ip() { "$ZH" lab status --lab "$1" -o json | jq -r ".pods[] | select(.name==\"$2\") | .ip"; }
rate() {	# rate LAB POD: req/s
	"$ZH" lab exec --lab "$1" client -- "$ZH" bench -c 16 -t "$DUR" --json - "http://$(ip "$1" "$2"):8080/" 2>/dev/null |
		jq -r '.ActualQPS | floor'
}
med() { sort -n | awk '{a[NR] = $1} END {print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2}'; }
for i in $(seq "$PAIRS"); do
	for path in web-a web-b; do
		p=$(rate brrp$S $path); c=$(rate brrc$S $path)
		echo "$path $p $c" | tee -a "$TMP/pairs"
	done
done
echo "pairs: $PAIRS per path, $DUR each, interleaved; load $(cut -d' ' -f1-3 /proc/loadavg)"
for path in web-a web-b; do
	r=$(awk -v p=$path '$1 == p {printf "%.3f\n", $3 / $2}' "$TMP/pairs" | med)
	lo=$(awk -v p=$path '$1 == p {printf "%.3f\n", $3 / $2}' "$TMP/pairs" | sort -n | head -1)
	hi=$(awk -v p=$path '$1 == p {printf "%.3f\n", $3 / $2}' "$TMP/pairs" | sort -n | tail -1)
	echo "$([ $path = web-a ] && echo same-node || echo cross-node): podman / process req/s median ratio $r ($lo-$hi)"
done
