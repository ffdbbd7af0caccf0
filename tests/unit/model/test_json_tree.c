/* test_json_tree.c — the JSON fast path (src/model/json_tree.c): a JSON
 * text gives the tree libyaml gives for the same text (J1), anything else
 * goes to libyaml with its own errors (J2), and the JSON an object is
 * stored as decodes to the same object, or is refused (J3). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tap.h"
#include "zerohop/model.h"

/* Parse text into a state that keeps trees; 0 or the error. */
static int parse(const char *text, struct md_state **out, struct md_err *err)
{
	struct md_state *st = md_state_new();
	int ret;

	md_state_set_parse(st, MD_PARSE_KEEP_TREE);
	ret = md_state_add_buf(st, "t", text, strlen(text), err);
	*out = st;
	return ret;
}

/* The YAML re-emission of object 0 (styles included) of text. */
static char *yaml_of(const char *text)
{
	struct md_state *st;
	struct md_err err = {};
	char *y = NULL;
	size_t l;

	if (parse(text, &st, &err) || md_state_n_objects(st) != 1 ||
	    md_state_obj_yaml(st, 0, &y, &l))
		y = NULL;
	md_state_free(st);
	return y;
}

static char *json_of(const char *text, int *ret)
{
	struct md_state *st;
	struct md_err err = {};
	char *j = NULL;
	size_t l;

	*ret = parse(text, &st, &err);
	if (!*ret)
		*ret = md_state_n_objects(st) == 1 ? md_state_obj_json(st, 0, &j, &l) : -EINVAL;
	md_state_free(st);
	return *ret ? NULL : j;
}

static const char *const objs[] = {
	"apiVersion: v1\nkind: Service\nmetadata:\n  name: web\n  namespace: shop\n"
	"  labels: {app: web, \"example.com/x\": 'y'}\n  resourceVersion: \"7\"\n"
	"spec:\n  selector: {app: web}\n  ports:\n  - {name: http, port: 80, targetPort: 8080}\n"
	"  - {name: dns, port: 53, protocol: UDP, targetPort: dns}\n",
	"apiVersion: v1\nkind: Pod\nmetadata: {name: p1, labels: {app: web}}\n"
	"spec:\n  nodeName: n1\n  containers: [{name: c, image: \"x:1\", "
	"ports: [{containerPort: 8080}]}]\n"
	"status: {podIP: 10.1.2.3, phase: Running}\n",
	"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: cm}\n"
	"data:\n  a: |\n    line \"one\"\n    tab\there \\ back\n  b: 1.5e3\n  c: 'true'\n",
};

int main(void)
{
	struct md_state *st;
	struct md_err err = {};
	int ret;

	for (size_t i = 0; i < sizeof(objs) / sizeof(objs[0]); i++) {
		char *j = json_of(objs[i], &ret), *j2, *ya, *yb, doc[4096];

		ok(j != NULL, "object %zu: JSON can say it", i);
		if (!j)
			continue;
		ok(!strstr(j, "resourceVersion"), "object %zu: no resourceVersion stored (K2)", i);
		/* J1: the fast path and libyaml ("--- " makes it not start with
		 * '{') read the same object; the YAML shown is the applied one's */
		snprintf(doc, sizeof(doc), "--- %s", j);
		ya = json_of(doc, &ret);
		ok(ya && !strcmp(ya, j), "object %zu: libyaml reads the stored JSON the same", i);
		yb = yaml_of(j);
		free(ya);
		ya = yaml_of(objs[i]);
		ok(yb && ya && strstr(yb, "metadata:\n") && !strstr(yb, "! ") &&
		   (i != 1 || strstr(yb, "app: web\n")),
		   "object %zu: shown as plain YAML:\n%s", i, yb ? yb : "");
		/* J3: parsed back, it says the same again */
		j2 = json_of(j, &ret);
		ok(j2 && !strcmp(j, j2), "object %zu: JSON round trip is a fixpoint", i);
		free(j);
		free(j2);
		free(ya);
		free(yb);
	}

	/* J3: plain scalars JSON cannot say bare */
	json_of("apiVersion: v1\nkind: Service\nmetadata: {name: a}\nspec:\n"
		"  ports: [{port: +80}]\n", &ret);
	is_int(ret, -ENOTSUP, "a plain +80 stays YAML");
	json_of("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\ndata: {x: ~}\n", &ret);
	is_int(ret, -ENOTSUP, "a plain ~ stays YAML");

	/* a quoted number is a string on both paths: the same error */
	ret = parse("{\"apiVersion\":\"v1\",\"kind\":\"Service\",\"metadata\":{\"name\":\"a\"},"
		    "\"spec\":{\"ports\":[{\"port\":\"80\"}]}}", &st, &err);
	ok(ret && strstr(err.msg, "integer"), "JSON \"80\" is not an integer: %s", err.msg);
	md_state_free(st);

	/* J2: not strict JSON or not handled here: libyaml's turn and words */
	ret = parse("{\"apiVersion\": v1, kind: ConfigMap, metadata: {name: a}}", &st, &err);
	ok(!ret && md_state_n_objects(st) == 1, "a YAML flow mapping still parses");
	md_state_free(st);
	ret = parse("{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"kind\":\"Pod\"}", &st, &err);
	ok(ret && strstr(err.msg, "duplicate"), "duplicate key: %s", err.msg);
	md_state_free(st);
	ret = parse("{\"apiVersion\":\"v1\",\n\"kind\":\"ConfigMap\",\n\"metadata\":{\"name\":}}", &st,
		    &err);
	ok(ret && err.line == 3, "a JSON syntax error names its line (%d: %s)", err.line, err.msg);
	md_state_free(st);
	ret = parse("{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{\"name\":\"a\"},"
		    "\"data\":{\"u\":\"\\u00e9\\ud83d\\ude00\",\"n\":\"\\u0000\"}}", &st, &err);
	ok(ret, "\\u0000 refused by libyaml: %s", err.msg);
	md_state_free(st);
	ret = parse("{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{\"name\":\"a\"},"
		    "\"data\":{\"u\":\"\\u00e9\\ud83d\\ude00\"}} {}", &st, &err);
	ok(ret, "trailing text refused");
	md_state_free(st);
	{
		char *a = yaml_of("{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\","
				  "\"metadata\":{\"name\":\"a\"},\"data\":{\"u\":\"\\u00e9\\u4e2d\\n\"}}");
		char *b = yaml_of("--- {\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\","
				  "\"metadata\":{\"name\":\"a\"},\"data\":{\"u\":\"\\u00e9\\u4e2d\\n\"}}");

		ok(a && b && strstr(a, "u: '\u00e9\u4e2d") && strstr(b, "\u00e9\u4e2d"),
		   "\\u escapes decoded: %s / %s", a ? a : "", b ? b : "");
		free(a);
		free(b);
	}
	return done_testing();
}
