#!/usr/bin/env bash
# 07-fuzz-h2-upstream.t — build the libFuzzer target for the proxy's HTTP/2
# upstream input path (tests/fuzz/fuzz_h2_upstream.c: src/proxy/h2up.c
# with libnghttp2, whatever a backend sends after the proxy's preface and
# SETTINGS; the stream layer, loop and socket stood in) and run it for a
# bounded time from the seed corpus (typical backend answers made with
# python3-h2: tests/fuzz/h2_upstream_seeds.py). Any crash, sanitizer
# report or leak fails.
source "$(dirname "$0")/../lib/tap.sh"
source "$(dirname "$0")/../lib/fuzz.sh"
pkg-config --exists libnghttp2 || skip_all "libnghttp2-dev missing (make deps)"
fuzz_init h2up

# (h2up.c is #included by the target, not linked)
fuzz_build fuzz_h2_upstream "$ROOT/tests/fuzz/fuzz_h2_upstream.c" \
	"$ROOT/src/lib/buf.c" "$ROOT/src/lib/h1.c" "$ROOT/src/lib/log.c" \
	"$ROOT/src/proxy/h2mem.c" $(pkg-config --libs libnghttp2) || done_testing
fuzz_run fuzz_h2_upstream h2_upstream
# (clang 14: the harness's tries with no answer reach 321, the seeds 417)
ok $([ "${FUZZ_COV:-0}" -ge 380 ]; echo $?) "the seeds reach our callbacks (coverage ${FUZZ_COV:-0} at start)"
done_testing
