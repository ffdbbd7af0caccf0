#!/usr/bin/env bash
# 05-fuzz-h1.t — build the libFuzzer targets for the HTTP/1 parser (requests
# with their chunked bodies, responses) and run each for a bounded time from
# the seed corpus. Any crash, sanitizer report or broken parser promise
# (the targets abort when feeding in pieces decides differently) fails.
source "$(dirname "$0")/../lib/tap.sh"
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
SECS=${ZH_FUZZ_SECS:-20}
CLANG=${CLANG:-clang}

command -v "$CLANG" >/dev/null || skip_all "clang missing (make deps)"
TMP=$(mktemp -d /tmp/zh-fuzz-h1.XXXXXX)
trap 'rm -rf "$TMP"' EXIT
printf 'int LLVMFuzzerTestOneInput(const char *d, unsigned long n) { return 0; }\n' >"$TMP/probe.c"
"$CLANG" -fsanitize=fuzzer "$TMP/probe.c" -o "$TMP/probe" 2>/dev/null ||
	skip_all "clang's libFuzzer runtime is missing (Debian: libclang-rt-14-dev)"

for t in request response; do
	"$CLANG" -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
		-std=gnu11 -D_GNU_SOURCE -I"$ROOT/include" "$ROOT/tests/fuzz/fuzz_h1_$t.c" \
		"$ROOT/src/lib/h1.c" "$ROOT/src/lib/log.c" -o "$TMP/fuzz_h1_$t" 2>"$TMP/build_$t.log"
	ok $? "build fuzz_h1_$t" || { sed 's/^/# /' "$TMP/build_$t.log"; continue; }
	mkdir -p "$TMP/corpus_$t"
	# New inputs go to the scratch corpus; the seed corpus is only read.
	"$TMP/fuzz_h1_$t" -max_total_time="$SECS" -timeout=10 -rss_limit_mb=1024 \
		-artifact_prefix="$TMP/" "$TMP/corpus_$t" "$ROOT/tests/fuzz/corpus/h1_$t" \
		>"$TMP/run_$t.log" 2>&1
	rc=$?
	ok $rc "fuzz_h1_$t ran ${SECS}s without a finding ($(grep -o 'Done [0-9]* runs' "$TMP/run_$t.log"))"
	if [ $rc -ne 0 ]; then
		grep -E 'ERROR|SUMMARY|#[0-9] .*(h1|fuzz)' "$TMP/run_$t.log" | head -20 | sed 's/^/# /'
		for c in "$TMP"/crash-* "$TMP"/leak-* "$TMP"/timeout-*; do
			[ -f "$c" ] && diag "input (base64): $(base64 -w0 "$c")"
		done
	fi
done
done_testing
