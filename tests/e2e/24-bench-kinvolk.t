#!/usr/bin/env bash
# 24-bench-kinvolk.t — a short run of the Kinvolk method
# (scripts/bench-kinvolk.sh, docs/sidecar-baseline.md) with three
# contenders (no mesh, sidecar mesh, zerohop L4) at one constant rate: it
# produces the table, the JSON and the HTML with every contender's
# percentile spectrum overlaid, and the sidecars' CPU and memory are really
# measured (not zero) while the no-mesh contender has none.
source "$(dirname "$0")/../lib/tap.sh"
source "$(dirname "$0")/../lib/lab_test.sh"
lab_test_setup t24 haproxy curl nft
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
OUT=$TMP/out
# The labs are the script's (LAB t24X-bare, -sc, -zh); it takes them down.
LAB=t24X${ZH_TEST_LAB_SUFFIX:-} OUT=$OUT MAXQPS=400 WARMUP=1s CONTENDERS="bare sidecar l4" \
	ZH_TEST_LAB_SUFFIX= bash "$ROOT/scripts/bench-kinvolk.sh" 1 2s 50 >"$TMP/log" 2>&1
ok $? "bench-kinvolk.sh: 3 contenders, 1 repetition, 50 % of 400 req/s" || cat "$TMP/log"

for c in bare sidecar l4; do
	grep -qE "^$c +[0-9]+\.[0-9]{3} " "$OUT/table.txt"
	ok $? "the table has a row for $c"
done
grep -q "latency added over bare" "$OUT/table.txt"
ok $? "the table says the latency added over no mesh"
J=$OUT/kinvolk.json
is "$(jq '.summary | length' "$J")" 3 "kinvolk.json: one summary row per contender"
is "$(jq '[.summary[] | select(.p50 > 0 and .p99 >= .p50 and ."p99.99" >= .p99 and .max >= ."p99.99")] | length' "$J")" 3 \
	"every row has p50 <= p99 <= p99.99 <= max, all > 0"
is "$(jq '[.summary[] | select(.qps == 200 and .actual_qps >= 198)] | length' "$J")" 3 \
	"every contender held 200 req/s"
ok $(jq -e '.summary[] | select(.contender == "sidecar") | .cpu_s_per_1k > 0 and .mem_kib_per_pod > 1000' "$J" >/dev/null; echo $?) \
	"the sidecars' CPU per 1,000 requests and memory per pod are measured"
ok $(jq -e '.summary[] | select(.contender == "bare") | .cpu_s_per_1k == 0 and .mem_kib_per_pod == 0' "$J" >/dev/null; echo $?) \
	"no mesh: no mesh component"
H=$OUT/50.html
ok $([ -s "$H" ]; echo $?) "the HTML report exists"
for c in bare sidecar l4; do
	grep -q ">$c<" "$H"
	ok $? "the HTML names $c"
done
# Well-formed (every element closed and nested right), nothing external,
# per contender a corrected and an uncorrected curve in each of the 2 charts
# (open loop: 22-bench-report.t), 12 in all.
/usr/bin/python3 - "$H" <<'PY'
import sys
from html.parser import HTMLParser
VOID = {"meta", "br", "img", "link", "input", "hr"}
class P(HTMLParser):
    def __init__(s):
        super().__init__(); s.stack = []; s.err = []; s.n = 0
    def handle_starttag(s, t, a):
        s.n += t == "polyline"
        if any(k in ("src", "href") and v and "://" in v for k, v in a): s.err.append("external")
        if t not in VOID: s.stack.append(t)
    def handle_startendtag(s, t, a): s.n += t == "polyline"
    def handle_endtag(s, t):
        if t in VOID: return
        if not s.stack or s.stack[-1] != t: s.err.append("mismatched </%s>" % t)
        else: s.stack.pop()
p = P(); p.feed(open(sys.argv[1]).read()); p.close()
if p.stack or p.err or p.n != 12: print(p.err, p.stack, p.n); sys.exit(1)
PY
ok $? "the HTML is well formed, one curve per contender in each chart"
is "$(ip netns list | grep -c "^t24X")" 0 "the script took its labs down"
done_testing
