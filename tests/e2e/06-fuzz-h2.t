#!/usr/bin/env bash
# 06-fuzz-h2.t — build the libFuzzer target for the proxy's HTTP/2 input
# path (tests/fuzz/fuzz_h2_client.c: src/proxy/h2conn.c with libnghttp2,
# the stream layer stood in) and run it for a bounded time from the seed
# corpus (valid client frames made with python3-h2). Any crash, sanitizer
# report or leak fails.
source "$(dirname "$0")/../lib/tap.sh"
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
SECS=${ZH_FUZZ_SECS:-20}
CLANG=${CLANG:-clang}

command -v "$CLANG" >/dev/null || skip_all "clang missing (make deps)"
pkg-config --exists libnghttp2 || skip_all "libnghttp2-dev missing (make deps)"
TMP=$(mktemp -d /tmp/zh-fuzz-h2.XXXXXX)
trap 'rm -rf "$TMP"' EXIT
printf 'int LLVMFuzzerTestOneInput(const char *d, unsigned long n) { return 0; }\n' >"$TMP/probe.c"
"$CLANG" -fsanitize=fuzzer "$TMP/probe.c" -o "$TMP/probe" 2>/dev/null ||
	skip_all "clang's libFuzzer runtime is missing (Debian: libclang-rt-14-dev)"

"$CLANG" -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
	-std=gnu11 -D_GNU_SOURCE -I"$ROOT/include" "$ROOT/tests/fuzz/fuzz_h2_client.c" \
	"$ROOT/src/proxy/h2conn.c" "$ROOT/src/proxy/h2flood.c" "$ROOT/src/proxy/h2mem.c" \
	"$ROOT/src/lib/buf.c" \
	"$ROOT/src/lib/h1.c" "$ROOT/src/lib/log.c" \
	$(pkg-config --libs libnghttp2) -o "$TMP/fuzz_h2_client" 2>"$TMP/build.log"
ok $? "build fuzz_h2_client" || { sed 's/^/# /' "$TMP/build.log"; done_testing; }
mkdir -p "$TMP/corpus"
# New inputs go to the scratch corpus; the seed corpus is only read.
"$TMP/fuzz_h2_client" -max_total_time="$SECS" -timeout=10 -rss_limit_mb=1024 \
	-artifact_prefix="$TMP/" "$TMP/corpus" "$ROOT/tests/fuzz/corpus/h2_client" \
	>"$TMP/run.log" 2>&1
rc=$?
ok $rc "fuzz_h2_client ran ${SECS}s without a finding ($(grep -o 'Done [0-9]* runs' "$TMP/run.log"))"
if [ $rc -ne 0 ]; then
	grep -E 'ERROR|SUMMARY|#[0-9] .*(h2|fuzz)' "$TMP/run.log" | head -20 | sed 's/^/# /'
	for c in "$TMP"/crash-* "$TMP"/leak-* "$TMP"/timeout-*; do
		[ -f "$c" ] && diag "input (base64): $(base64 -w0 "$c")"
	done
fi
cov=$(grep -o 'INITED cov: [0-9]*' "$TMP/run.log" | grep -o '[0-9]*$')
ok $([ "${cov:-0}" -ge 200 ]; echo $?) "the seeds reach our callbacks (coverage ${cov:-0} at start)"
done_testing
