#!/usr/bin/env bash
# bench-proxy-h2-streams.sh — resident memory per idle HTTP/2 stream of the
# node L7 proxy against HAProxy 2.6 (issue 18: "10,000 idle streams
# bounded"). Each contender on loopback in front of its own cleartext
# HTTP/2 backend that takes every stream and never answers
# (tests/tools/clients/h2_idle.py backend, SETTINGS_MAX_CONCURRENT_STREAMS
# $BMAX, default 1000): zerohop with the Service port named http2 (an h2c
# upstream), HAProxy `bind ... proto h2` and `server ... proto h2`
# (scripts/lib/haproxy.sh, one thread). One python3-h2 client
# (h2_idle.py hold) opens STREAMS request streams and leaves them idle —
# HEADERS of a POST without END_STREAM, no DATA (MODE=get: GETs the
# backend never answers) — over as many connections as the proxy's
# SETTINGS_MAX_CONCURRENT_STREAMS requires (100 for both), waits until the
# backend holds them all, reads the proxy's VmRSS, then closes them.
# ROUNDS (default 4) such rounds per fresh proxy process: round 1 is the
# cost in a fresh process (pages of a buffer never written are not
# resident), the last round's resident size over the size before the
# first round is the cost once the heap is warm (freed buffers that were
# written come back resident), which is what a long-running proxy pays.
# Then one connection sends 150 streams at once past the limit: how many
# are refused (REFUSED_STREAM), and zerohop's counter for it. Contenders
# interleaved Z H Z H ...; prints each run, then the medians and the
# median ratios zerohop/haproxy with their min..max spread.
#
#   scripts/bench-proxy-h2-streams.sh [STREAMS=10000] [PAIRS=3]
#   ROUNDS=4 BMAX=1000 MODE=open|get
# Every process is ours and stopped by its PID; every client run is under
# a timeout.
set -euo pipefail
N=${1:-10000}
PAIRS=${2:-3}
ROUNDS=${ROUNDS:-4}
BMAX=${BMAX:-1000}
MODE=${MODE:-open}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
source "$ROOT/scripts/lib/loopback.sh"
source "$ROOT/scripts/lib/haproxy.sh"
source "$ROOT/scripts/lib/stats.sh"
ZH=${ZH:-$ROOT/build/zerohop}
GPY=/usr/bin/python3
IDLE=$ROOT/tests/tools/clients/h2_idle.py
for t in haproxy "$ZH"; do
	command -v "$t" >/dev/null || { echo "missing $t (make deps; make)" >&2; exit 1; }
done
"$GPY" -c 'import h2' 2>/dev/null || { echo "missing python3-h2 (make deps)" >&2; exit 1; }
bench_setup px-h2-streams 27000
ZP=$B; ZB=$((B + 1)); HP=$((B + 2)); HB=$((B + 3)); ZS=$((B + 9))
ulimit -n "$(ulimit -Hn)"	# (HAProxy sizes its fd table from maxconn 9000)
# each round takes a few seconds per 10,000 streams; bound the backends
LIFE=$(((N / 1000 + 10) * ROUNDS * PAIRS * 4 + 120))
"$GPY" "$IDLE" backend $ZB "$BMAX" "$LIFE" "$TMP/zcount" &
PIDS+=($!)
"$GPY" "$IDLE" backend $HB "$BMAX" "$LIFE" "$TMP/hcount" &
PIDS+=($!)
bench_web_manifest http2 "$ZB" >"$TMP/m.yaml"
mkdir "$TMP/state"
"$ZH" apply --state "$TMP/state" -f "$TMP/m.yaml" >/dev/null
haproxy_cfg "127.0.0.1:$HP proto h2" "127.0.0.1:$HB proto h2" >"$TMP/haproxy.cfg"
metric() { curl -s "http://127.0.0.1:$ZS/metrics" | awk -v m="$1" '$1 == m { print $2 }'; }
field() { sed -n "s/.* $1=\([-0-9]*\).*/\1/p"; }	# KEY: a number of h2_idle.py's line
# one fresh proxy: ROUNDS holds, then the refusal probe. Prints
# "first warm refused open" (bytes per idle stream, round 1 and warm).
contender() { # z|h
	local pid port count r out first=0 rss0=0 rss1=0 open=0 refused cnt="-"
	if [ "$1" = z ]; then
		"$ZH" proxy --listen "127.0.0.1:$ZP" --service default/web --state "$TMP/state" \
			--stats-addr "127.0.0.1:$ZS" 2>>"$TMP/zp.err" &
		pid=$!; port=$ZP; count=$TMP/zcount
	else
		haproxy -db -f "$TMP/haproxy.cfg" >>"$TMP/hp.out" 2>&1 &
		pid=$!; port=$HP; count=$TMP/hcount
	fi
	PIDS+=($pid)
	sleep 1
	for r in $(seq "$ROUNDS"); do
		out=$(timeout $((N / 200 + 60)) "$GPY" "$IDLE" hold "$port" "$N" 0 "$pid" "$count" "$MODE")
		echo "  $1 round $r: $out" >&2
		[ "$(field open <<<"$out")" -eq "$N" ] ||
			echo "  $1 round $r: only $(field open <<<"$out") of $N streams idle" >&2
		[ "$r" = 1 ] && { first=$(field per_stream <<<"$out"); rss0=$(field rss0 <<<"$out"); }
		rss1=$(field rss1 <<<"$out")
		open=$(field open <<<"$out")
	done
	out=$(timeout 30 "$GPY" "$IDLE" over "$port" 150)
	refused=$(field refused <<<" $out")
	[ "$1" = z ] && cnt=$(metric 'zerohop_proxy_h2_defence_total{action="refused_stream"}')
	echo "  $1 past the limit, 150 streams on one connection: $out (counted: $cnt)" >&2
	kill "$pid"
	wait "$pid" 2>/dev/null || true
	awk -v a="$first" -v r0="$rss0" -v r1="$rss1" -v n="$open" -v f="$refused" \
		'BEGIN { printf "%d %.0f %d %d\n", a, (r1 - r0) * 1024 / n, f, n }'
}
: >"$TMP/r"
echo "STREAMS=$N idle ($MODE) over $((N / 100)) connections, backend limit $BMAX," \
	"$ROUNDS rounds per process; load $(cut -d' ' -f1-3 /proc/loadavg)"
for i in $(seq "$PAIRS"); do
	read -r zf zw zr zn < <(contender z)
	read -r hf hw hr hn < <(contender h)
	echo "pair $i: zerohop $zf B/stream fresh, $zw warm, $zr refused;" \
		"haproxy $hf B/stream fresh, $hw warm, $hr refused; load $(cut -d' ' -f1 /proc/loadavg)" |
		tee -a "$TMP/out"
	echo "$zf $zw $hf $hw $(ratio "$zf" "$hf") $(ratio "$zw" "$hw")" >>"$TMP/r"
done
col() { cut -d' ' -f"$1" "$TMP/r"; }
echo "zerohop bytes per idle stream: fresh $(col 1 | median) ($(col 1 | spread)), warm $(col 2 | median) ($(col 2 | spread))"
echo "haproxy bytes per idle stream: fresh $(col 3 | median) ($(col 3 | spread)), warm $(col 4 | median) ($(col 4 | spread))"
echo "zerohop/haproxy: fresh $(col 5 | median)x ($(col 5 | spread)), warm $(col 6 | median)x ($(col 6 | spread))"
