#!/usr/bin/env bash
# 06-fuzz-h2.t — build the libFuzzer target for the proxy's HTTP/2 input
# path (tests/fuzz/fuzz_h2_client.c: src/proxy/h2conn.c with libnghttp2,
# the stream layer stood in) and run it for a bounded time from the seed
# corpus (valid client frames made with python3-h2). Any crash, sanitizer
# report or leak fails.
source "$(dirname "$0")/../lib/tap.sh"
source "$(dirname "$0")/../lib/fuzz.sh"
pkg-config --exists libnghttp2 || skip_all "libnghttp2-dev missing (make deps)"
fuzz_init h2

fuzz_build fuzz_h2_client "$ROOT/tests/fuzz/fuzz_h2_client.c" \
	"$ROOT/src/proxy/h2conn.c" "$ROOT/src/proxy/h2flood.c" "$ROOT/src/proxy/h2mem.c" \
	"$ROOT/src/lib/buf.c" "$ROOT/src/lib/h1.c" "$ROOT/src/lib/log.c" $(pkg-config --libs libnghttp2) || done_testing
fuzz_run fuzz_h2_client h2_client
ok $([ "${FUZZ_COV:-0}" -ge 200 ]; echo $?) "the seeds reach our callbacks (coverage ${FUZZ_COV:-0} at start)"
done_testing
