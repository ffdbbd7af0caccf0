#!/usr/bin/env bash
# 05-fuzz-h1.t — build the libFuzzer targets for the HTTP/1 parser (requests
# with their chunked bodies, responses) and run each for a bounded time from
# the seed corpus. Any crash, sanitizer report or broken parser promise
# (the targets abort when feeding in pieces decides differently) fails.
source "$(dirname "$0")/../lib/tap.sh"
source "$(dirname "$0")/../lib/fuzz.sh"
fuzz_init h1

for t in request response; do
	fuzz_build "fuzz_h1_$t" "$ROOT/tests/fuzz/fuzz_h1_$t.c" \
		"$ROOT/src/lib/h1.c" "$ROOT/src/lib/log.c" || continue
	fuzz_run "fuzz_h1_$t" "h1_$t"
done
done_testing
