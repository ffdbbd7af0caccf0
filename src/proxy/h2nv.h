/* h2nv.h — an HTTP/1.1 request head as HTTP/2 fields, for the two places
 * that send a request upstream over HTTP/2: a try (h2up.c) and a mirror's
 * copy (mirror_h2.c). */
#ifndef ZH_PROXY_H2NV_H
#define ZH_PROXY_H2NV_H

#include <nghttp2/nghttp2.h>

#include "px_int.h"

/* The pseudo-headers from rq and its Host header, then every field of h but
 * the connection-specific ones (RFC 9113 §8.2.2) and, with drop_length,
 * content-length (the caller frames the body); names lower-cased into
 * names, te: trailers added for gRPC. The fields point into h, rq and
 * names. Returns how many of nv it filled. */
size_t px_h2_request_nv(const struct h1_request *rq, const struct h1_header *h, size_t n,
			bool drop_length, nghttp2_nv nv[PX_MAX_HDRS + 5], char names[PX_BUFSZ]);

#endif
