#!/usr/bin/env bash
# zerohop bench: every request ends once, as a response or as one error of
# the right kind. Servers (tests/tools/bench_srv) that reset, close early,
# answer 503, never answer, are not there at all; plus well-behaved ones
# (Content-Length, chunked, TCP echo) that must give no error at all.
source "$(dirname "$0")/../lib/tap.sh"
source "$(dirname "$0")/../lib/loopback.sh"
loopback_setup bench-err
command -v jq >/dev/null || skip_all "jq not installed (scripts/deps.sh installs it)"
loopback_tools bench_srv

# srv MODE: start bench_srv MODE, set PORT (not in a subshell: PIDS must grow)
srv() {
	"$TOOLS/bench_srv" "$1" --max-time 60 >"$TMP/$1.port" &
	PIDS+=($!)
	wait_for_file 5 "$TMP/$1.port"
	PORT=$(head -1 "$TMP/$1.port")
}
# run NAME ARGS...: bench with --json to $TMP/NAME.json
run() {
	local name=$1; shift
	timeout 30 "$ZH" bench --quiet --json "$TMP/$name.json" "$@" 2>"$TMP/$name.err"
	ok $? "$name: bench exits 0"
	[ -s "$TMP/$name.err" ] && diag "$(head -5 "$TMP/$name.err")"
}
j() { jq -r "$2" "$TMP/$1.json"; }
# every measured request is exactly one response or one non-status error
accounted() {
	is "$(j "$1" '.Responses + .Errors.connect + .Errors.timeout + .Errors.short_read + .Errors.reset + .Errors.other')" \
		"$(j "$1" '.Requests')" "$1: responses + errors == requests"
}

srv ok
run ok -n 500 -c 4 "http://127.0.0.1:$PORT/"
is "$(j ok .Requests)" 500 "ok: -n 500 sends exactly 500"
is "$(j ok '.RetCodes["200"]')" 500 "ok: 500 answers 200"
is "$(j ok '[.Errors[]] | add')" 0 "ok: no errors"
is "$(j ok .BytesRead)" $((500 * 70)) "ok: bytes read counted (70 per response: head + body)"
run threads -n 1001 -c 5 --threads 2 "http://127.0.0.1:$PORT/"
is "$(j threads .Responses)" 1001 "2 threads: -n 1001 split across threads, exactly 1001 answered"
run openthreads -t 1s -qps 400 -c 4 --threads 2 "http://127.0.0.1:$PORT/"
N=$(j openthreads .Responses)
ok $([ "$N" -ge 396 ] && [ "$N" -le 400 ]; echo $?) "2 threads open loop at 400 req/s for 1 s: $N answered (396..400)"
run nokeep -n 200 -c 2 --keepalive=false "http://127.0.0.1:$PORT/"
is "$(j nokeep .SocketCount)" 200 "keepalive=false: one connection per request"
is "$(j nokeep '.RetCodes["200"]')" 200 "keepalive=false: 200 answers"
run post -n 50 -c 1 -X POST -H 'X-Test: 1' --body 'hello body' "http://127.0.0.1:$PORT/p?q=1"
is "$(j post '.RetCodes["200"]')" 50 "POST with body and header: 50 answers on one connection"
is "$(j post .SocketCount)" 1 "POST: keep-alive reused one connection"

srv chunked
run chunked -n 300 -c 3 "http://127.0.0.1:$PORT/"
is "$(j chunked '.RetCodes["200"]')" 300 "chunked: 300 answers"
is "$(j chunked '[.Errors[]] | add')" 0 "chunked: no errors"

srv echo
run tcp -n 400 -c 4 --payload-size 100 "tcp://127.0.0.1:$PORT"
is "$(j tcp .Responses)" 400 "tcp echo: 400 round trips"
is "$(j tcp .BytesRead)" 40000 "tcp echo: 100 bytes each"
is "$(j tcp '[.Errors[]] | add')" 0 "tcp echo: no errors (content verified)"
is "$(j tcp .RunType)" TCP "tcp echo: RunType TCP"

srv 503
run e503 -t 1s -qps 200 -c 2 "http://127.0.0.1:$PORT/"
N=$(j e503 .Responses)
ok $([ "$N" -ge 150 ]; echo $?) "503: answered ($N)"
is "$(j e503 '.RetCodes["503"]')" "$N" "503: every answer counted under RetCodes 503"
is "$(j e503 .Errors.status)" "$N" "503: counted as status errors"
is "$(j e503 '.Errors.connect + .Errors.timeout + .Errors.short_read + .Errors.reset + .Errors.other')" 0 \
	"503: no other error kind"

srv reset
run reset -t 1s -qps 100 -c 2 "http://127.0.0.1:$PORT/"
ok $([ "$(j reset .Errors.reset)" -ge 50 ]; echo $?) "reset: counted as reset ($(j reset .Errors.reset))"
is "$(j reset .Responses)" 0 "reset: no responses"
is "$(j reset '.Errors.short_read + .Errors.timeout + .Errors.other + .Errors.connect')" 0 "reset: no other kind"
accounted reset

srv short
run short -t 1s -qps 100 -c 2 "http://127.0.0.1:$PORT/"
ok $([ "$(j short .Errors.short_read)" -ge 50 ]; echo $?) "short: counted as short read ($(j short .Errors.short_read))"
is "$(j short .Responses)" 0 "short: no responses"
is "$(j short '.Errors.reset + .Errors.timeout + .Errors.other + .Errors.connect')" 0 "short: no other kind"
accounted short

srv hang
run hang -t 1s -qps 20 -c 2 --timeout 200ms "http://127.0.0.1:$PORT/"
T=$(j hang .Errors.timeout)
ok $([ "$T" -ge 4 ] && [ "$T" -le 20 ]; echo $?) "hang: timeouts counted per request ($T in 1 s at 200 ms)"
is "$(j hang .Responses)" 0 "hang: no responses"
accounted hang
ok $([ "$(j hang .SocketCount)" -ge "$T" ]; echo $?) "hang: a timeout closes the connection and reconnects"

# a port nobody listens on: start a server, note its port, stop it
srv ok
kill "${PIDS[-1]}"; wait "${PIDS[-1]}" 2>/dev/null
run refused -t 500ms -qps 100 -c 2 "http://127.0.0.1:$PORT/"
ok $([ "$(j refused .Errors.connect)" -ge 20 ]; echo $?) "refused: counted as connect errors ($(j refused .Errors.connect))"
accounted refused

# bad input is named
"$ZH" bench -c x "http://127.0.0.1:1/" 2>"$TMP/bad"; RC=$?
ok $([ $RC -ne 0 ] && grep -q -- "-c: bad value 'x'" "$TMP/bad"; echo $?) "bad -c value named in the error"
"$ZH" bench "ftp://127.0.0.1/" 2>"$TMP/bad"; RC=$?
ok $([ $RC -ne 0 ] && grep -q "scheme must be http:// or tcp://" "$TMP/bad"; echo $?) "bad scheme named"
done_testing
