#!/usr/bin/env bash
# 60-proxy-http-alt.t — test 60 again with the proxy's other ways of doing
# its socket I/O: the send(2)/recv(2) fallback of the batched I/O
# (ZEROHOP_NO_URING=1: what a kernel without io_uring, or with it disabled,
# gets) and busy polling before each wait (ZEROHOP_PROXY_BUSY_POLL=50us, the
# default of --busy-poll), so every behaviour is checked on those paths too.
ZEROHOP_NO_URING=1 ZEROHOP_PROXY_BUSY_POLL=50us exec bash "$(dirname "$0")/60-proxy-http.t"
