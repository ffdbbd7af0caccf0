/* test_etcd_gw.c — the etcd gateway client's parsing (etcd.h): JSON as
 * etcd 3.4's gateway writes it, read by jsonv.h (int64 strings, omitted
 * zero values), base64 both ways against known vectors,
 * chunked de-framing fed byte by byte, the watch stream framing split at
 * every offset, endpoint lists. Texts are real gateway output (captured
 * from etcd 3.4.23, docs/state-etcd.md). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tap.h"
#include "zerohop/etcd.h"
#include "zerohop/jsonv.h"

static const char range_resp[] =
	"{\"header\":{\"cluster_id\":\"12305655293901123197\",\"member_id\":\"15135278523756192325\","
	"\"revision\":\"2\",\"raft_term\":\"2\"},\"kvs\":[{\"key\":\"Zm9v\",\"create_revision\":\"2\","
	"\"mod_revision\":\"2\",\"version\":\"1\",\"value\":\"YmFy\"}],\"count\":\"1\"}";

static const char watch_cancel[] =
	"{\"result\":{\"header\":{\"cluster_id\":\"1\",\"member_id\":\"2\",\"raft_term\":\"2\"},"
	"\"canceled\":true,\"compact_revision\":\"2\"}}";

static void test_json(void)
{
	struct jv *j = NULL;
	const struct jv *kvs, *v;
	char *dec;
	size_t dl;

	ok((j = jv_parse(range_resp, strlen(range_resp), NULL, 0)) != NULL, "range response parses");
	is_int((int)jv_u64(jv_get(jv_get(j, "header"), "revision"), 0), 2,
	       "header.revision is an int64 in a string");
	kvs = jv_get(j, "kvs");
	ok(kvs && kvs->type == JV_ARR && kvs->n == 1, "kvs is an array of one");
	v = kvs ? jv_get(kvs->items[0], "value") : NULL;
	ok(v && !eg_b64_decode(v->str, v->len, &dec, &dl) && dl == 3 && !strcmp(dec, "bar"),
	   "value decodes to bar");
	if (v && dl == 3)
		free(dec);
	ok(!jv_get(j, "succeeded") && !jv_bool(jv_get(j, "succeeded")),
	   "an omitted bool is false (the gateway omits zero values)");
	is_int((int)jv_u64(jv_get(j, "missing"), 7), 7, "absent u64 gives the default");
	jv_free(j);

	ok((j = jv_parse(watch_cancel, strlen(watch_cancel), NULL, 0)) != NULL, "watch cancel parses");
	v = jv_get(j, "result");
	ok(jv_bool(jv_get(v, "canceled")) &&
	   jv_u64(jv_get(v, "compact_revision"), 0) == 2, "canceled with compact_revision 2");
	jv_free(j);

	{
		const char *s = "{\"a\":\"x\\\"\\\\\\/\\n\\u00e9\\ud83d\\ude00\",\"n\":-1.5e3,\"t\":[true,false,null]}";

		ok((j = jv_parse(s, strlen(s), NULL, 0)) != NULL, "escapes, numbers, literals");
		v = jv_get(j, "a");
		ok(v && !strcmp(v->str, "x\"\\/\n\xc3\xa9\xf0\x9f\x98\x80"), "escapes decode to UTF-8");
		v = jv_get(j, "n");
		ok(v && v->type == JV_NUM && !strcmp(v->str, "-1.5e3"), "number kept as text");
		ok(jv_u64(v, 9) == 9, "a negative number is not a u64");
		v = jv_get(j, "t");
		ok(v && v->n == 3 && v->items[0]->b && v->items[1]->type == JV_BOOL && !v->items[1]->b &&
		   v->items[2]->type == JV_NULL, "array of literals");
		jv_free(j);
	}
	{
		static const char *const bad[] = {
			"", "{", "{\"a\"}", "{\"a\":1,}", "[1 2]", "\"\\ud800\"", "\"\\x\"", "01",
			"{\"a\":1} x", "tru", "\"a\tb\"", "-", "1.", "1e",
		};

		for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
			j = NULL;
			ok(!(j = jv_parse(bad[i], strlen(bad[i]), NULL, 0)),
			   "malformed JSON refused: %s", bad[i]);
		}
	}
	{
		char deep[200];

		memset(deep, '[', 100);
		memset(deep + 100, ']', 100);
		ok(!(j = jv_parse(deep, 200, NULL, 0)), "nesting deeper than 64 refused");
	}
}

static void test_b64(void)
{
	static const char *const vec[][2] = {
		{ "", "" }, { "f", "Zg==" }, { "fo", "Zm8=" }, { "foo", "Zm9v" },
		{ "foob", "Zm9vYg==" }, { "fooba", "Zm9vYmE=" }, { "foobar", "Zm9vYmFy" },
		{ "/zerohop/", "L3plcm9ob3Av" }, { "/zerohop0", "L3plcm9ob3Aw" },
	};

	for (size_t i = 0; i < sizeof(vec) / sizeof(vec[0]); i++) {
		char *e = eg_b64_encode(vec[i][0], strlen(vec[i][0])), *d = NULL;
		size_t dl = 0;

		is_str(e, vec[i][1], "base64 of \"%s\"", vec[i][0]);
		ok(!eg_b64_decode(vec[i][1], strlen(vec[i][1]), &d, &dl) && dl == strlen(vec[i][0]) &&
		   !memcmp(d, vec[i][0], dl), "decode %s", vec[i][1]);
		free(e);
		free(d);
	}
	{
		unsigned char all[256];
		char *e, *d = NULL;
		size_t dl;

		for (int i = 0; i < 256; i++)
			all[i] = (unsigned char)i;
		e = eg_b64_encode(all, 256);
		ok(!eg_b64_decode(e, strlen(e), &d, &dl) && dl == 256 && !memcmp(d, all, 256),
		   "every byte value round-trips");
		free(e);
		free(d);
	}
	{
		static const char *const bad[] = { "Zg=", "Z===", "Zg==Zg==", "Zm9v!A==", "=Zg=" };

		for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
			char *d = NULL;
			size_t dl;

			ok(eg_b64_decode(bad[i], strlen(bad[i]), &d, &dl) == -EINVAL,
			   "bad base64 refused: %s", bad[i]);
		}
	}
}

/* A watch stream as the gateway sends it: chunked, one JSON object per
 * message, chunk boundaries anywhere. */
static void test_stream(void)
{
	const char *msgs[] = {
		"{\"result\":{\"header\":{\"revision\":\"2\"},\"created\":true}}\n",
		"{\"result\":{\"header\":{\"revision\":\"3\"},\"events\":[{\"kv\":{\"key\":\"Zm9v\","
		"\"mod_revision\":\"3\",\"value\":\"e30=\"}},{\"type\":\"DELETE\",\"kv\":{\"key\":"
		"\"YmFy\",\"mod_revision\":\"3\"}}]}}\n",
		"{\"result\":{\"note\":\"a } and { and \\\" in a string\"}}\n",
	};
	struct buf wire, out;
	int n_msgs = (int)(sizeof(msgs) / sizeof(msgs[0]));

	buf_init(&wire, 0);
	for (int i = 0; i < n_msgs; i++)
		buf_printf(&wire, "%zx\r\n%s\r\n", strlen(msgs[i]), msgs[i]);
	buf_printf(&wire, "0\r\n\r\n");
	/* feed the wire in pieces of every size 1..17 */
	for (size_t step = 1; step <= 17; step++) {
		struct eg_dechunk dc = {};
		int got = 0, bad = 0, evs = 0;

		buf_init(&out, 0);
		for (size_t off = 0; off < wire.data; off += step) {
			size_t k = wire.data - off < step ? wire.data - off : step;
			long l;

			bad |= eg_dechunk(&dc, buf_head(&wire) + off, k, &out) != 0;
			while ((l = jv_next(buf_head(&out), out.data)) > 0) {
				struct jv *j = NULL;
				const struct jv *e;

				if (!(j = jv_parse(buf_head(&out), (size_t)l, NULL, 0)))
					bad = 1;
				e = jv_get(jv_get(j, "result"), "events");
				evs += e ? e->n : 0;
				jv_free(j);
				buf_consume(&out, (size_t)l);
				got++;
			}
			bad |= l < 0;
		}
		ok(!bad && got == n_msgs && evs == 2 && dc.done,
		   "chunked watch stream fed %zu bytes at a time: %d messages, %d events, end seen",
		   step, got, evs);
		buf_free(&out);
	}
	buf_free(&wire);
	{
		struct eg_dechunk dc = {};

		buf_init(&out, 0);
		ok(eg_dechunk(&dc, "zz\r\n", 4, &out) == -EINVAL, "bad chunk size refused");
		dc = (struct eg_dechunk){};
		ok(eg_dechunk(&dc, "2\r\nabX", 6, &out) == -EINVAL, "missing CRLF after data refused");
		buf_free(&out);
	}
	ok(jv_next("  {\"a\":", 7) == 0, "incomplete object: wait");
	ok(jv_next("x{}", 3) == -EINVAL, "garbage before an object refused");
	ok(jv_next(" {}{}", 5) == 3, "first of two objects framed");
}

static void test_endpoints(void)
{
	struct eg_ep e[8];

	ok(eg_parse_endpoints("etcd://127.0.0.1:2379,10.0.0.2:32379/", e, 8) == 2 &&
	   !strcmp(e[0].host, "127.0.0.1") && e[0].port == 2379 && !strcmp(e[1].host, "10.0.0.2") &&
	   e[1].port == 32379, "two endpoints");
	ok(eg_parse_endpoints("etcd://unix:/run/x/c.sock:0,h:1", e, 8) == 2 && e[0].unix_sock &&
	   !strcmp(e[0].host, "/run/x/c.sock:0") && !e[1].unix_sock && e[1].port == 1,
	   "a unix socket endpoint keeps its whole path");
	ok(eg_parse_endpoints("etcd://h:0", e, 8) < 0, "port 0 refused");
	ok(eg_parse_endpoints("etcd://h", e, 8) < 0, "missing port refused");
	ok(eg_parse_endpoints("etcd://a:1,", e, 8) < 0, "trailing comma refused");
	ok(eg_parse_endpoints("etcd://", e, 8) < 0, "no endpoint refused");
	ok(eg_parse_endpoints("etcd://a:1,b:2,c:3", e, 2) < 0, "more than the room refused");
	ok(eg_parse_endpoints("etcd://a:1", e, 8) == 1 && !e[0].tls && !e[0].tlsc, "etcd:// is plain");
	ok(eg_parse_endpoints("https://a:1,b:2", e, 8) == 2 && e[0].tls && e[1].tls &&
	   !strcmp(e[1].host, "b") && e[1].port == 2, "https:// is TLS for every endpoint");
	ok(eg_parse_endpoints("https://a:1,https://b:2/", e, 8) == 2 && e[1].tls &&
	   !strcmp(e[1].host, "b") && e[1].port == 2, "each endpoint may repeat https:// (Calico)");
	ok(eg_parse_endpoints("etcds://[::1]:2379", e, 8) == 1 && e[0].tls &&
	   !strcmp(e[0].host, "::1") && e[0].port == 2379, "etcds:// is the alias; [v6]:port");
	ok(eg_parse_endpoints("https://a:1,etcd://b:2", e, 8) < 0, "TLS mixed with plain refused");
	ok(eg_parse_endpoints("etcd://a:1,https://b:2", e, 8) < 0, "plain mixed with TLS refused");
	ok(eg_parse_endpoints("https://unix:/run/c.sock:0", e, 8) < 0, "TLS over unix: refused");
}

static void test_tls_files(void)
{
	struct eg_tls_opts o = { .cacert = "/nonexistent/ca.pem" };
	char err[300] = "";
	struct eg_tls *t;

	t = eg_tls_new(&o, err, sizeof(err));
	ok(!t && strstr(err, "CA file /nonexistent/ca.pem") && strstr(err, "No such file"),
	   "an unreadable CA file is named: %s", err);
	o = (struct eg_tls_opts){ .key = "/etc/hostname" };
	t = eg_tls_new(&o, err, sizeof(err));
	ok(!t && strstr(err, "without its certificate"), "a key without a certificate: %s", err);
	o = (struct eg_tls_opts){ .cacert = "/etc/hostname" };
	t = eg_tls_new(&o, err, sizeof(err));
	ok(!t && strstr(err, "/etc/hostname") && strstr(err, "no PEM certificate"),
	   "a CA file without a certificate is named: %s", err);
	o = (struct eg_tls_opts){ 0 };
	t = eg_tls_new(&o, err, sizeof(err));
	ok(t != NULL, "no files: the system's CAs, no client certificate");
	eg_tls_free(t);
}

int main(void)
{
	test_json();
	test_b64();
	test_stream();
	test_endpoints();
	test_tls_files();
	return done_testing();
}
