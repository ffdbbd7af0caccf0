#!/usr/bin/env bash
# zerohop bench: outputs read back. Two runs write --json/--hgrm/--html;
# `bench report` reads them and a plain fortio JSON file, prints the table
# and overlays them in one HTML page; the pages are well-formed and render
# in headless Chromium where the machine has it.
source "$(dirname "$0")/../lib/tap.sh"
source "$(dirname "$0")/../lib/loopback.sh"
loopback_setup bench-rep
command -v jq >/dev/null || skip_all "jq not installed (scripts/deps.sh installs it)"
command -v python3 >/dev/null || skip_all "python3 not installed (scripts/deps.sh installs it)"
loopback_tools bench_srv

"$TOOLS/bench_srv" ok --max-time 60 >"$TMP/port" &
PIDS+=($!)
wait_for_file 5 "$TMP/port"
PORT=$(head -1 "$TMP/port")

timeout 30 "$ZH" bench -qps 500 -c 4 -t 1s --label "open 500" --json "$TMP/a.json" \
	--hgrm "$TMP/a.hgrm" --html "$TMP/a.html" "http://127.0.0.1:$PORT/" >"$TMP/a.txt" 2>&1
ok $? "open-loop run with --json --hgrm --html"
grep -q "open loop at 500 req/s (latency corrected for coordinated omission)" "$TMP/a.txt"
ok $? "text output names the open-loop mode"
timeout 30 "$ZH" bench -c 2 -n 2000 --label closed --json - "http://127.0.0.1:$PORT/" \
	>"$TMP/b.json" 2>"$TMP/b.txt"
ok $? "closed-loop run with --json - (JSON on stdout, text on stderr)"
grep -q "closed loop, maximum rate" "$TMP/b.txt"; ok $? "text on stderr names the closed-loop mode"
is "$(jq -r .RequestedQPS "$TMP/b.json")" max "fortio field RequestedQPS is \"max\" for closed loop"
is "$(jq -r .RequestedDuration "$TMP/b.json")" "exactly 2000 calls" "RequestedDuration for -n"
for f in RunType Labels StartTime ActualQPS ActualDuration NumThreads DurationHistogram RetCodes Sizes; do
	jq -e "has(\"$f\")" "$TMP/a.json" >/dev/null; ok $? "fortio field $f present"
done
is "$(jq '.DurationHistogram.Data | last | .Percent' "$TMP/a.json")" 100 "Data ends at 100 percent"
is "$(jq '[.DurationHistogram.Data[].Count] | add' "$TMP/a.json")" \
	"$(jq .DurationHistogram.Count "$TMP/a.json")" "Data counts sum to Count"
ok $(jq -e '.DurationHistogram.Max < 1 and .DurationHistogram.Min > 0' "$TMP/a.json" >/dev/null; echo $?) \
	"latencies are in seconds"

# .hgrm: HdrHistogram percentile distribution
head -1 "$TMP/a.hgrm" | grep -q 'Value.*Percentile.*TotalCount.*1/(1-Percentile)'
ok $? "hgrm header"
grep -q '^#\[Max *= *[0-9.]*, Total count *= *[0-9]*\]' "$TMP/a.hgrm"; ok $? "hgrm footer"
awk 'NF == 4 && $1 ~ /^[0-9.]+$/ { if ($2 < p || $1 < v) bad = 1; p = $2; v = $1; n++ }
     END { exit !(n > 10 && !bad && p == 1) }' "$TMP/a.hgrm"
ok $? "hgrm rows: percentile and value never decrease, end at 1.0"

# a plain fortio result (as fortio 1.x writes it, abridged to common fields)
cat >"$TMP/fortio.json" <<'JSON'
{
  "RunType": "HTTP", "Labels": "fortio baseline", "StartTime": "2024-05-01T10:00:00.000000000Z",
  "RequestedQPS": "8", "RequestedDuration": "5s", "ActualQPS": 7.99, "ActualDuration": 5006000000,
  "NumThreads": 4, "Version": "1.63.0",
  "DurationHistogram": {"Count": 40, "Min": 0.000412, "Max": 0.0021, "Sum": 0.03, "Avg": 0.00075,
    "StdDev": 0.0003, "Data": [
      {"Start": 0.000412, "End": 0.0005, "Percent": 25, "Count": 10},
      {"Start": 0.0005, "End": 0.001, "Percent": 90, "Count": 26},
      {"Start": 0.001, "End": 0.0021, "Percent": 100, "Count": 4}],
    "Percentiles": [{"Percentile": 50, "Value": 0.00062}, {"Percentile": 75, "Value": 0.00081},
      {"Percentile": 90, "Value": 0.001}, {"Percentile": 99, "Value": 0.0019},
      {"Percentile": 99.9, "Value": 0.00209}]},
  "ErrorsDurationHistogram": {"Count": 0, "Min": 0, "Max": 0, "Sum": 0, "Avg": 0, "StdDev": 0, "Data": null},
  "Exactly": 0, "Jitter": false, "Uniform": false, "NoCatchUp": false, "RunID": 0,
  "AccessLoggerInfo": "", "ID": "2024-05-01-100000", "RetCodes": {"200": 38, "503": 2},
  "IPCountMap": {"127.0.0.1:8080": 4}, "URL": "http://localhost:8080/echo",
  "NumConnections": 1, "Compression": false, "DisableFastClient": false, "HTTP10": false,
  "Payload": null, "Sizes": {"Count": 40, "Min": 1100, "Max": 1100, "Sum": 44000, "Avg": 1100,
    "StdDev": 0, "Data": [{"Start": 1100, "End": 1100, "Percent": 100, "Count": 40}]},
  "HeaderSizes": {"Count": 40, "Min": 76, "Max": 76, "Sum": 3040, "Avg": 76, "StdDev": 0,
    "Data": [{"Start": 76, "End": 76, "Percent": 100, "Count": 40}]},
  "Sockets": [1, 1, 1, 1], "SocketCount": 4, "AbortOn": 0
}
JSON

"$ZH" bench report "$TMP/a.json" "$TMP/b.json" "$TMP/fortio.json" --html "$TMP/r.html" \
	--title "before / after" >"$TMP/r.txt" 2>"$TMP/r.err"
ok $? "bench report reads our two runs and a fortio file"
[ -s "$TMP/r.err" ] && diag "$(cat "$TMP/r.err")"
grep -q "^open 500 " "$TMP/r.txt"; ok $? "report: open-loop run labelled"
grep -q "^open 500 (uncorrected)" "$TMP/r.txt"; ok $? "report: its uncorrected latency beside it"
grep -q "^closed " "$TMP/r.txt"; ok $? "report: closed-loop run labelled"
grep -q "^fortio baseline .* 40 .* 0.620 " "$TMP/r.txt"; ok $? "report: fortio file's count and p50 (0.620 ms)"
grep -Eq "^fortio baseline .* 2$" "$TMP/r.txt"; ok $? "report: fortio file's 503s counted as errors"
grep -q "^ratio to open 500" "$TMP/r.txt"; ok $? "report: ratios to the first run"
"$ZH" bench report "$TMP/a.json" "$TMP/fortio.json" --labels before,after >"$TMP/l.txt"
grep -q "^before " "$TMP/l.txt" && grep -q "^after " "$TMP/l.txt"; ok $? "report --labels renames runs"

printf '{"RunType": "HTTP", "DurationHistogram": {"Count": 3,, }}' >"$TMP/bad.json"
"$ZH" bench report "$TMP/bad.json" 2>"$TMP/bad.err"; RC=$?
ok $([ $RC -ne 0 ] && grep -q "bad.json: byte 53: invalid JSON" "$TMP/bad.err"; echo $?) \
	"malformed JSON: error names the file and byte ($(cat "$TMP/bad.err"))"
echo '{"RunType": "HTTP"}' >"$TMP/nohist.json"
"$ZH" bench report "$TMP/nohist.json" 2>"$TMP/nohist.err"; RC=$?
ok $([ $RC -ne 0 ] && grep -q "DurationHistogram missing" "$TMP/nohist.err"; echo $?) \
	"JSON without DurationHistogram: clear error"

# HTML: well-formed (every element closed and nested right), two charts,
# one curve per run, nothing fetched from the network.
check_html() {
	python3 - "$1" "$2" <<'PY'
import sys
from html.parser import HTMLParser
VOID = {"meta", "br", "img", "link", "input", "hr"}
class P(HTMLParser):
    def __init__(s):
        super().__init__(); s.stack = []; s.err = []; s.count = {}
    def handle_starttag(s, t, a):
        s.count[t] = s.count.get(t, 0) + 1
        for k, v in a:
            if k in ("src", "href") and v and "://" in v: s.err.append("external " + v)
        if t not in VOID: s.stack.append(t)
    def handle_startendtag(s, t, a): s.count[t] = s.count.get(t, 0) + 1
    def handle_endtag(s, t):
        if t in VOID: return
        if not s.stack or s.stack[-1] != t: s.err.append("mismatched </%s> in %s" % (t, s.stack))
        else: s.stack.pop()
p = P(); p.feed(open(sys.argv[1]).read()); p.close()
want = int(sys.argv[2])
if p.stack: p.err.append("unclosed " + str(p.stack))
if p.count.get("svg", 0) != 2: p.err.append("want 2 svg charts, got %d" % p.count.get("svg", 0))
if p.count.get("polyline", 0) != 2 * want: p.err.append("want %d curves, got %d" % (2 * want, p.count.get("polyline", 0)))
if p.err: print("\n".join(p.err)); sys.exit(1)
PY
}
OUT=$(check_html "$TMP/a.html" 2); ok $? "single-run HTML well-formed, 2 charts x (corrected, uncorrected) ${OUT}"
OUT=$(check_html "$TMP/r.html" 4); ok $? "report HTML well-formed, 2 charts x 4 curves ${OUT}"
if command -v xmllint >/dev/null; then
	xmllint --noout "$TMP/r.html" 2>"$TMP/xml.err"; ok $? "report HTML is also well-formed XML (xmllint)"
fi

CHROME=$(command -v chromium || command -v chromium-browser || command -v google-chrome || true)
if [ -n "$CHROME" ]; then
	timeout 60 "$CHROME" --headless --disable-gpu --no-sandbox --window-size=1000,1400 \
		--screenshot="$TMP/shot.png" "file://$TMP/r.html" >/dev/null 2>&1
	ok $([ "$(stat -c %s "$TMP/shot.png" 2>/dev/null || echo 0)" -gt 20000 ]; echo $?) \
		"headless Chromium renders the report (screenshot $(stat -c %s "$TMP/shot.png" 2>/dev/null) bytes)"
	[ -n "${ZH_KEEP_SCREENSHOT:-}" ] && cp "$TMP/shot.png" "$ZH_KEEP_SCREENSHOT"
else
	ok 0 "headless Chromium screenshot # SKIP chromium is not installed on this machine"
fi
done_testing
