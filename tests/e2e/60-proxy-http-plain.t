#!/usr/bin/env bash
# 60-proxy-http-plain.t — test 60 again with the proxy's batched socket I/O
# on its send(2)/recv(2) fallback (ZEROHOP_NO_URING=1: what a kernel without
# io_uring, or with it disabled, gets), so both ways stay covered.
ZEROHOP_NO_URING=1 exec bash "$(dirname "$0")/60-proxy-http.t"
