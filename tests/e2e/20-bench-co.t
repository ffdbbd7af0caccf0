#!/usr/bin/env bash
# zerohop bench: coordinated omission. A server that holds every answer for
# 200 ms once per second, loaded at a fixed 1000 req/s for 5 s over 4
# connections: the corrected p99 must show the stall (>= 100 ms: about 20 %
# of the intended sends fall into a stall), the uncorrected p99 must not
# (only the ~4 requests in flight per stall wait, 0.4 %), and the uncorrected
# p99.9 must (proving the server did stall).
source "$(dirname "$0")/../lib/tap.sh"
source "$(dirname "$0")/../lib/loopback.sh"
loopback_setup bench-co
command -v jq >/dev/null || skip_all "jq not installed (scripts/deps.sh installs it)"
loopback_tools bench_srv

"$TOOLS/bench_srv" stall --stall-ms 200 --period-ms 1000 --max-time 60 >"$TMP/port" &
PIDS+=($!)
wait_for_file 5 "$TMP/port"
PORT=$(head -1 "$TMP/port")
ok $([ -n "$PORT" ]; echo $?) "stalling server listens on 127.0.0.1:$PORT"

timeout 30 "$ZH" bench -qps 1000 -c 4 -t 5s --quiet --json "$TMP/co.json" \
	"http://127.0.0.1:$PORT/" 2>"$TMP/err"
ok $? "bench ran 5 s at 1000 req/s"
[ -s "$TMP/err" ] && diag "$(cat "$TMP/err")"

J="$TMP/co.json"
val() { jq -r "$1" "$J"; }
ge() { awk -v a="$1" -v b="$2" 'BEGIN { exit !(a >= b) }'; }
lt() { awk -v a="$1" -v b="$2" 'BEGIN { exit !(a < b) }'; }
P99=$(val '.DurationHistogram.Percentiles[] | select(.Percentile == 99) | .Value')
UP99=$(val '.UncorrectedDurationHistogram.Percentiles[] | select(.Percentile == 99) | .Value')
UP999=$(val '.UncorrectedDurationHistogram.Percentiles[] | select(.Percentile == 99.9) | .Value')
COUNT=$(val '.DurationHistogram.Count')
diag "corrected p99 ${P99}s, uncorrected p99 ${UP99}s, uncorrected p99.9 ${UP999}s, count $COUNT"
ge "$P99" 0.1; ok $? "corrected p99 reflects the stall (>= 100 ms)"
lt "$UP99" 0.05; ok $? "uncorrected p99 does not (< 50 ms, a quarter of the stall)"
ge "$UP999" 0.1; ok $? "uncorrected p99.9 does (the server really stalled)"
ge "$COUNT" 4900; ok $? "open loop kept the rate: >= 4900 of 5000 requests answered"
lt "$COUNT" 5001; ok $? "and not more than scheduled (no extra sends)"
is "$(val '.RequestedQPS')" "1000" "RequestedQPS recorded"
is "$(val '.Loop')" "open" "labelled open loop"
is "$(val '[.Errors[]] | add')" "0" "no errors"
done_testing
