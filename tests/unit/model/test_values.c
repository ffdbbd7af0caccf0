/* test_values.c — value grammars: quantities, durations, IPv4/CIDR, label
 * selectors (table-driven). */
#include <errno.h>
#include <stdint.h>
#include <arpa/inet.h>

#include "tap.h"
#include "zerohop/model.h"

struct qcase {
	const char *in;
	int ret;
	uint64_t milli;
};

static const struct qcase quantities[] = {
	{ "1", 0, 1000 },
	{ "500m", 0, 500 },
	{ "2k", 0, 2000000 },
	{ "1.5", 0, 1500 },
	{ "1Ki", 0, 1024000 },
	{ "1Mi", 0, 1048576000 },
	{ "0", 0, 0 },
	{ "+3", 0, 3000 },
	{ ".5", 0, 500 },
	{ "1e3", 0, 1000000 },
	{ "1E-3", 0, 1 },
	{ "0.0001", 0, 1 },	/* rounds up like Kubernetes */
	{ "250m", 0, 250 },
	{ "1.5m", 0, 2 },
	{ "3M", 0, 3000000000ULL },
	{ "-1", -EINVAL, 0 },
	{ "", -EINVAL, 0 },
	{ "abc", -EINVAL, 0 },
	{ "1x", -EINVAL, 0 },
	{ "m", -EINVAL, 0 },
	{ "1 ", -EINVAL, 0 },
	{ "1.2.3", -EINVAL, 0 },
	{ "1Ei", -EINVAL, 0 },	/* 2^60 * 1000 overflows 64 bits */
	{ "99999999999999999999", -EINVAL, 0 },
	{ "1ki", -EINVAL, 0 },
};

struct dcase {
	const char *in;
	int ret;
	uint64_t ms;
};

static const struct dcase durations[] = {
	{ "500ms", 0, 500 },
	{ "10s", 0, 10000 },
	{ "1h2m", 0, 3720000 },
	{ "1m30s", 0, 90000 },
	{ "0s", 0, 0 },
	{ "1h1m1s1ms", 0, 3661001 },
	{ "", -EINVAL, 0 },
	{ "10", -EINVAL, 0 },
	{ "1d", -EINVAL, 0 },
	{ "123456s", -EINVAL, 0 },	/* at most 5 digits */
	{ "1h1m1s1ms1h", -EINVAL, 0 },	/* at most 4 parts */
	{ "-1s", -EINVAL, 0 },
	{ "1.5s", -EINVAL, 0 },
};

struct ccase {
	const char *in;
	int ret;
	const char *net;
	int len;
};

static const struct ccase cidrs[] = {
	{ "10.0.0.0/8", 0, "10.0.0.0", 8 },
	{ "0.0.0.0/0", 0, "0.0.0.0", 0 },
	{ "192.168.1.7/32", 0, "192.168.1.7", 32 },
	{ "10.0.0.1/8", -EINVAL, NULL, 0 },	/* host bits set: not canonical */
	{ "10.0.0.0/33", -EINVAL, NULL, 0 },
	{ "10.0.0.0", -EINVAL, NULL, 0 },
	{ "10.0.0/8", -EINVAL, NULL, 0 },
	{ "10.0.0.0/08", -EINVAL, NULL, 0 },
	{ "256.0.0.0/8", -EINVAL, NULL, 0 },
	{ "010.0.0.0/8", -EINVAL, NULL, 0 },
	{ "10.0.0.0/", -EINVAL, NULL, 0 },
};

static const char *const bad_ips[] = { "1.2.3", "1.2.3.4.5", "1.2.3.256", "a.b.c.d", "01.2.3.4",
				       "1.2.3.4 ", "", "1..2.3" };

static struct md_kv kv(const char *k, const char *v)
{
	struct md_kv x = { (char *)k, (char *)v };

	return x;
}

static void test_selectors(void)
{
	struct md_kv pod_kv[] = { kv("app", "web"), kv("tier", "front") };
	struct md_labels pod = { pod_kv, 2 };
	struct md_labels none = { NULL, 0 };
	char *vals_web[] = { "web", "api" };
	char *vals_db[] = { "db" };
	struct md_kv ml_kv[] = { kv("app", "web") };
	struct md_kv ml_bad[] = { kv("app", "db") };
	struct md_sel_expr in = { "app", MD_SEL_IN, vals_web, 2 };
	struct md_sel_expr in_db = { "app", MD_SEL_IN, vals_db, 1 };
	struct md_sel_expr notin_db = { "app", MD_SEL_NOT_IN, vals_db, 1 };
	struct md_sel_expr notin_web = { "app", MD_SEL_NOT_IN, vals_web, 2 };
	struct md_sel_expr exists = { "tier", MD_SEL_EXISTS, NULL, 0 };
	struct md_sel_expr exists_x = { "x", MD_SEL_EXISTS, NULL, 0 };
	struct md_sel_expr dne = { "x", MD_SEL_DOES_NOT_EXIST, NULL, 0 };
	struct md_sel_expr dne_tier = { "tier", MD_SEL_DOES_NOT_EXIST, NULL, 0 };
	struct md_selector s = { .present = true };

	ok(md_selector_matches(&s, &pod), "empty selector matches everything");
	ok(md_selector_matches(&s, &none), "empty selector matches a pod without labels");
	s.match_labels.v = ml_kv;
	s.match_labels.n = 1;
	ok(md_selector_matches(&s, &pod), "matchLabels app=web");
	ok(!md_selector_matches(&s, &none), "matchLabels needs the label");
	s.match_labels.v = ml_bad;
	ok(!md_selector_matches(&s, &pod), "matchLabels app=db does not match");
	s.match_labels.n = 0;
	s.n_exprs = 1;
	s.exprs = &in;
	ok(md_selector_matches(&s, &pod), "In [web api]");
	s.exprs = &in_db;
	ok(!md_selector_matches(&s, &pod), "In [db]");
	ok(!md_selector_matches(&s, &none), "In on a missing key does not match");
	s.exprs = &notin_db;
	ok(md_selector_matches(&s, &pod), "NotIn [db]");
	ok(md_selector_matches(&s, &none), "NotIn matches a missing key");
	s.exprs = &notin_web;
	ok(!md_selector_matches(&s, &pod), "NotIn [web api]");
	s.exprs = &exists;
	ok(md_selector_matches(&s, &pod), "Exists tier");
	s.exprs = &exists_x;
	ok(!md_selector_matches(&s, &pod), "Exists x");
	s.exprs = &dne;
	ok(md_selector_matches(&s, &pod), "DoesNotExist x");
	s.exprs = &dne_tier;
	ok(!md_selector_matches(&s, &pod), "DoesNotExist tier");
	{
		struct md_sel_expr both[] = { in, exists };

		s.exprs = both;
		s.n_exprs = 2;
		s.match_labels.v = ml_kv;
		s.match_labels.n = 1;
		ok(md_selector_matches(&s, &pod), "matchLabels AND expressions");
		both[1] = exists_x;
		ok(!md_selector_matches(&s, &pod), "one failing expression fails the selector");
	}
}

int main(void)
{
	for (size_t i = 0; i < sizeof(quantities) / sizeof(quantities[0]); i++) {
		const struct qcase *q = &quantities[i];
		uint64_t v = 12345;
		int r = md_quantity_milli(q->in, &v);

		is_int(r, q->ret, "quantity \"%s\" -> %s", q->in, q->ret ? "error" : "ok");
		if (!q->ret)
			is_int(v, q->milli, "quantity \"%s\" = %llu milli", q->in,
			       (unsigned long long)q->milli);
	}
	for (size_t i = 0; i < sizeof(durations) / sizeof(durations[0]); i++) {
		const struct dcase *d = &durations[i];
		uint64_t v = 0;
		int r = md_duration_ms(d->in, &v);

		is_int(r, d->ret, "duration \"%s\" -> %s", d->in, d->ret ? "error" : "ok");
		if (!d->ret)
			is_int(v, d->ms, "duration \"%s\" = %llu ms", d->in, (unsigned long long)d->ms);
	}
	for (size_t i = 0; i < sizeof(cidrs) / sizeof(cidrs[0]); i++) {
		const struct ccase *c = &cidrs[i];
		uint32_t net = 0, want = 0;
		int len = -1, r = md_parse_cidr(c->in, &net, &len);

		is_int(r, c->ret, "cidr \"%s\" -> %s", c->in, c->ret ? "error" : "ok");
		if (!c->ret) {
			inet_pton(AF_INET, c->net, &want);
			ok(net == want && len == c->len, "cidr \"%s\" = %s/%d", c->in, c->net, c->len);
		}
	}
	{
		uint32_t ip = 0, want;

		inet_pton(AF_INET, "10.96.0.10", &want);
		is_int(md_parse_ipv4("10.96.0.10", &ip), 0, "ipv4 10.96.0.10 parses");
		ok(ip == want, "ipv4 in network order");
		for (size_t i = 0; i < sizeof(bad_ips) / sizeof(bad_ips[0]); i++)
			is_int(md_parse_ipv4(bad_ips[i], &ip), -EINVAL, "ipv4 \"%s\" rejected",
			       bad_ips[i]);
	}
	test_selectors();
	{
		struct md_err e = { "f.yaml", 3, "spec.ports[1].port", "bad" };
		char buf[256];

		is_str(md_err_str(&e, buf, sizeof(buf)), "f.yaml:3: spec.ports[1].port: bad",
		       "error format FILE:LINE: FIELD: MESSAGE");
	}
	is_str(md_proto_name(MD_PROTO_UDP), "UDP", "proto name");
	return done_testing();
}
