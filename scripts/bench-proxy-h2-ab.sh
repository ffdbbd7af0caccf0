#!/usr/bin/env bash
# bench-proxy-h2-ab.sh — zerohop binaries against each other (and HAProxy
# 2.6), HTTP/2 both sides: each binary's proxy and HAProxy (`proto h2`
# both sides) in front of one nginx h2c origin (1 KiB, scripts/lib/nginx.sh),
# h2load 64 streams over 4 connections, the contenders interleaved round by
# round. Per run: req/s, requests per proxy CPU-second (schedstat: ns of
# CPU), user and system µs per request, voluntary context switches per
# request; PERF=1 adds perf stat counts per request (PERFEV, default
# raw_syscalls:sys_enter). Then the medians per contender and, for the
# first binary against each other contender, the median (spread) of the
# per-round ratios.
#
#   scripts/bench-proxy-h2-ab.sh PAIRS REQUESTS BINARY...
#   Contenders are named by their file name: copy the binaries to
#   different names (e.g. /tmp/ab/zh-main, /tmp/ab/zh-new), at most 7.
#   HAP=0: without HAProxy. A wrapper script that execs a binary with an
#   environment (e.g. ZEROHOP_PROXY_NO_GATHER=1) is a contender too.
#   P99RPS=N: instead of the rounds above, p50 and p99 (h2load --rps, N
#   req/s in total, P99_SECS each, default 5) per round; not corrected for
#   coordinated omission (h2load times from the send).
# Every process is ours, bounded by timeout, stopped by its PID.
set -euo pipefail
[ $# -ge 3 ] || { echo "usage: $0 PAIRS REQUESTS BINARY..." >&2; exit 2; }
PAIRS=$1; N=$2; shift 2
BINS=("$@")
ROOT=$(cd "$(dirname "$0")/.." && pwd)
source "$ROOT/scripts/lib/haproxy.sh"; source "$ROOT/scripts/lib/nginx.sh"; source "$ROOT/scripts/lib/stats.sh"
source "$ROOT/scripts/lib/loopback.sh"	# bench_web_manifest only
TMP=$(mktemp -d /tmp/zh-px-h2-ab.XXXXXX)
for i in $(seq 0 30); do
	B=$((26000 + ($$ + i * 37) % 2000 / 10 * 10))
	[ -z "$(ss -Htln "( sport >= :$B and sport <= :$((B + 9)) )" 2>/dev/null)" ] && break
done
EP=$((B + 1)); HP=$((B + 2))
PIDS=()
cleanup() {
	for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
	for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
	rm -rf "$TMP"
}
trap cleanup EXIT
mkdir -p "$TMP/be"
nginx_h2c_origin_cfg "$TMP/be" "127.0.0.1:$EP" >"$TMP/be/nginx.conf"
timeout 3600 nginx -c "$TMP/be/nginx.conf" -e "$TMP/be/error.log" >/dev/null 2>&1 & PIDS+=($!)
bench_web_manifest http2 "$EP" >"$TMP/m.yaml"
mkdir -p "$TMP/state"
"${BINS[0]}" apply --state "$TMP/state" -f "$TMP/m.yaml" >/dev/null
ZP=(); ZPID=(); NAMES=()
for i in "${!BINS[@]}"; do
	p=$((B + 3 + i))
	timeout 3600 env ${ZHENV:-} "${BINS[$i]}" proxy --listen "127.0.0.1:$p" --service default/web --state "$TMP/state" ${ZHARGS:-} 2>"$TMP/zp$i.err" &
	PIDS+=($!); sleep 0.3; ZPID+=($(pgrep -P $!)); ZP+=($p); NAMES+=("${BINS[$i]##*/}")
done
if [ "${HAP:-1}" = 1 ]; then
	haproxy_cfg "127.0.0.1:$HP proto h2" "127.0.0.1:$EP proto h2" >"$TMP/haproxy.cfg"
	timeout 3600 haproxy -db -f "$TMP/haproxy.cfg" >"$TMP/hp.out" 2>&1 & PIDS+=($!)
	sleep 0.3; ZP+=($HP); ZPID+=($(pgrep -P $!)); NAMES+=(haproxy)
fi
sleep 1
rt() { awk '{print $1}' "/proc/$1/schedstat"; }
cs() { awk '/^voluntary_ctxt_switches/ {s += $2} END {print s}' "/proc/$1/status"; }
run() { # PORT PID NAME
	local t0 t1 u0 s0 u1 s1 c0 c1 out rps ok pp
	t0=$(rt "$2"); read -r u0 s0 < <(awk '{print $14, $15}' "/proc/$2/stat"); c0=$(cs "$2")
	if [ "${PERF:-0}" = 1 ]; then
		perf stat -e "${PERFEV:-raw_syscalls:sys_enter}" -p "$2" -x, -o "$TMP/perf" &
		pp=$!; sleep 0.2
	fi
	out=$(h2load -n "$N" -c 4 -m 16 "http://127.0.0.1:$1/?size=1024" 2>&1)
	if [ "${PERF:-0}" = 1 ]; then
		kill -INT $pp; wait $pp || true
		awk -F, -v n="$N" -v w="${3:-warm}" 'NF > 2 && $1 ~ /^[0-9]/ {sub(/.*:/, "", $3); sub(/sys_enter_/, "", $3); printf "%s %s=%.3f ", w, $3, $1 / n} END {print ""}' "$TMP/perf" >>"$TMP/perfall"
	fi
	t1=$(rt "$2"); read -r u1 s1 < <(awk '{print $14, $15}' "/proc/$2/stat"); c1=$(cs "$2")
	rps=$(sed -n 's/^finished in [^,]*, \([0-9.]*\) req\/s.*/\1/p' <<<"$out")
	ok=$(sed -n 's/^requests: .* \([0-9]*\) succeeded.*/\1/p' <<<"$out")
	[ "${ok:-0}" -eq "$N" ] || { echo "run on :$1: $ok of $N succeeded" >&2; exit 1; }
	awk -v r="$rps" -v n="$N" -v d=$((t1 - t0)) -v u=$((u1 - u0)) -v s=$((s1 - s0)) -v c=$((c1 - c0)) \
		'BEGIN { printf "%.0f %.0f %.2f %.2f %.3f\n", r, n / (d / 1e9), u * 1e4 / n, s * 1e4 / n, c / n }'
}
for i in "${!ZP[@]}"; do run "${ZP[$i]}" "${ZPID[$i]}" >/dev/null; done
if [ -n "${P99RPS:-}" ]; then	# p99 mode: rounds at P99RPS req/s in total
	p99() {
		rm -f "$TMP/lat"
		h2load -c 4 -m 16 --rps=$((P99RPS / 4)) -D "${P99_SECS:-5}" --log-file="$TMP/lat" \
			"http://127.0.0.1:$1/?size=1024" >/dev/null 2>&1
		awk '{print $3}' "$TMP/lat" | sort -n | awk '{a[NR] = $1} END {print a[int(NR * 0.5 + 0.5)], a[int(NR * 0.99 + 0.5)]}'
	}
	echo "# p99 at $P99RPS req/s: round name p50-us p99-us (load $(cut -d' ' -f1-3 /proc/loadavg))"
	for r in $(seq "$PAIRS"); do
		for i in "${!ZP[@]}"; do echo "$r ${NAMES[$i]} $(p99 "${ZP[$i]}")" | tee -a "$TMP/p99"; done
	done
	echo "# load $(cut -d' ' -f1-3 /proc/loadavg)"
	for i in "${!ZP[@]}"; do
		n=${NAMES[$i]}
		echo "$n median p50 $(awk -v n=$n '$2==n {print $3}' $TMP/p99 | median) p99 $(awk -v n=$n '$2==n {print $4}' $TMP/p99 | median) ($(awk -v n=$n '$2==n {print $4}' $TMP/p99 | spread))"
	done
	exit 0
fi
: >"$TMP/perfall"
echo "# round name req/s req-per-cpu-s user-us/req sys-us/req ctxsw/req   (load $(cut -d' ' -f1-3 /proc/loadavg))"
for r in $(seq "$PAIRS"); do
	for i in "${!ZP[@]}"; do
		echo "$r ${NAMES[$i]} $(run "${ZP[$i]}" "${ZPID[$i]}" "${NAMES[$i]}")" | tee -a "$TMP/all"
	done
done
echo "# load $(cut -d' ' -f1-3 /proc/loadavg)"
for i in "${!ZP[@]}"; do
	n=${NAMES[$i]}
	printf "%s median: req/s %s  per-cpu-s %s  user %s sys %s us/req  ctxsw/req %s\n" "$n" \
		"$(awk -v n=$n '$2==n {print $3}' $TMP/all | median)" "$(awk -v n=$n '$2==n {print $4}' $TMP/all | median)" \
		"$(awk -v n=$n '$2==n {print $5}' $TMP/all | median)" "$(awk -v n=$n '$2==n {print $6}' $TMP/all | median)" \
		"$(awk -v n=$n '$2==n {print $7}' $TMP/all | median)"
done
for i in "${!ZP[@]}"; do
	[ $i = 0 ] && continue
	n=${NAMES[$i]}; a=${NAMES[0]}
	awk -v a=$a -v n=$n '$2==a {ra[$1]=$3; ca[$1]=$4} $2==n {rn[$1]=$3; cn[$1]=$4} END {for (k in ra) print ra[k]/rn[k], ca[k]/cn[k]}' $TMP/all > $TMP/rat$i
	echo "$a/$n req/s $(cut -d' ' -f1 $TMP/rat$i | median) ($(cut -d' ' -f1 $TMP/rat$i | spread)); per CPU-s $(cut -d' ' -f2 $TMP/rat$i | median) ($(cut -d' ' -f2 $TMP/rat$i | spread))"
done
[ -s "$TMP/perfall" ] && cat "$TMP/perfall"
true
