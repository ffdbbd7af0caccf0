/* pol_int.h — internals shared by the policy compiler, evaluator and loader. */
#ifndef ZH_POL_INT_H
#define ZH_POL_INT_H

#include <stdbool.h>
#include <stdint.h>

#include "zerohop/model.h"
#include "zerohop/policy.h"

/* A present selector against labels (absent selectors: caller decides). */
bool pol_sel_match(const struct md_selector *sel, const struct md_labels *labels);

/* MD_PROTO_* -> IPPROTO_* */
uint8_t pol_ipproto(enum md_proto p);

/* Stable ids for policies sorted by ns/name (see pol_compile.c). 0. */
int pol_assign_ids(const struct md_netpol **pols, int n, uint32_t *ids);

/* The orders the compiled arrays are sorted in (qsort comparators). */
int pol_cmp_ipc(const void *a, const void *b);
int pol_cmp_cidr(const void *a, const void *b);
int pol_cmp_rule(const void *a, const void *b);

/* Lookups on compiled tables (user space mirror of the BPF maps). */
const struct pol_ipc_val *pol_ipc_find(const struct pol_compiled *c, uint32_t ip);
uint32_t pol_cidr_find(const struct pol_compiled *c, uint32_t ip);
int pol_cmp_ipc6(const void *a, const void *b);
int pol_cmp_cidr6(const void *a, const void *b);
const struct pol_ipc_val *pol_ipc6_find(const struct pol_compiled *c, const uint8_t ip[16]);
uint32_t pol_cidr6_find(const struct pol_compiled *c, const uint8_t ip[16]);
const struct pol_rule_val *pol_rule_find(const struct pol_compiled *c, uint32_t local,
					 uint32_t peer, int dir, uint8_t proto, uint16_t port);

#endif
