/* pol_model.h — the model side of the policy compiler's unit tests: a
 * model built from YAML texts, and IPv4 addresses in network order.
 * Header-only, for test_compile.c, test_compile6.c and test_l7.c. */
#ifndef ZH_POL_MODEL_H
#define ZH_POL_MODEL_H

#include <stdint.h>
#include <string.h>
#include <arpa/inet.h>

#include "tap.h"
#include "zerohop/model.h"

/* A finished model of BASE then POLICIES (either may be NULL), or NULL
 * with the model's error as a TAP diagnostic. The caller frees it. */
static inline struct md_state *pm_load(const char *base, const char *policies)
{
	struct md_state *st = md_state_new();
	struct md_err err;
	char buf[900];

	if ((base && md_state_add_buf(st, "base.yaml", base, strlen(base), &err)) ||
	    (policies && md_state_add_buf(st, "np.yaml", policies, strlen(policies), &err)) ||
	    md_state_finish(st, &err)) {
		diag("model: %s", md_err_str(&err, buf, sizeof(buf)));
		md_state_free(st);
		return NULL;
	}
	return st;
}

/* The IPv4 address S in network byte order (0 when S is not one). */
static inline uint32_t pm_ip(const char *s)
{
	uint32_t v = 0;

	inet_pton(AF_INET, s, &v);
	return v;
}

#endif
