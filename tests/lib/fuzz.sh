# fuzz.sh — build and run the libFuzzer targets of tests/fuzz/ for the
# e2e fuzz tests (05, 06, 07). Source after tap.sh.
#
#   fuzz_init TAG      skip_all without clang or its libFuzzer runtime; sets
#                      ROOT, CLANG, SECS (ZH_FUZZ_SECS, 20) and TMP (removed
#                      at exit)
#   fuzz_build NAME ARG...
#                      one check: $TMP/NAME built from ARG... (sources and
#                      link flags) with ASan + UBSan, no recovery; the
#                      compiler's messages as diagnostics when it fails
#   fuzz_run NAME CORPUS
#                      one check: NAME ran SECS from tests/fuzz/corpus/CORPUS
#                      (only read: new inputs go to a scratch corpus) with
#                      no finding; a finding's report lines and its input
#                      (base64) as diagnostics. Sets FUZZ_COV, the coverage
#                      libFuzzer reports after loading the seeds.

fuzz_init() {
	ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
	SECS=${ZH_FUZZ_SECS:-20}
	CLANG=${CLANG:-clang}
	command -v "$CLANG" >/dev/null || skip_all "clang missing (make deps)"
	TMP=$(mktemp -d "/tmp/zh-fuzz-$1.XXXXXX")
	trap 'rm -rf "$TMP"' EXIT
	printf 'int LLVMFuzzerTestOneInput(const char *d, unsigned long n) { return 0; }\n' >"$TMP/probe.c"
	"$CLANG" -fsanitize=fuzzer "$TMP/probe.c" -o "$TMP/probe" 2>/dev/null ||
		skip_all "clang's libFuzzer runtime is missing (Debian: libclang-rt-14-dev)"
}

fuzz_build() {
	local name=$1
	shift
	"$CLANG" -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
		-std=gnu11 -D_GNU_SOURCE -I"$ROOT/include" "$@" -o "$TMP/$name" 2>"$TMP/build_$name.log"
	ok $? "build $name" || { sed 's/^/# /' "$TMP/build_$name.log"; return 1; }
}

fuzz_run() {
	local name=$1 corpus=$2 log="$TMP/run_$1.log" rc c
	mkdir -p "$TMP/corpus_$name"
	"$TMP/$name" -max_total_time="$SECS" -timeout=10 -rss_limit_mb=1024 \
		-artifact_prefix="$TMP/" "$TMP/corpus_$name" "$ROOT/tests/fuzz/corpus/$corpus" \
		>"$log" 2>&1
	rc=$?
	ok $rc "$name ran ${SECS}s without a finding ($(grep -o 'Done [0-9]* runs' "$log"))"
	if [ $rc -ne 0 ]; then
		grep -E 'ERROR|SUMMARY|runtime error|#[0-9] .*(h1|h2|fuzz)' "$log" | head -20 | sed 's/^/# /'
		for c in "$TMP"/crash-* "$TMP"/leak-* "$TMP"/timeout-*; do
			[ -f "$c" ] && diag "input (base64): $(base64 -w0 "$c")"
		done
	fi
	FUZZ_COV=$(grep -o 'INITED cov: [0-9]*' "$log" | grep -o '[0-9]*$')
	return $rc
}
