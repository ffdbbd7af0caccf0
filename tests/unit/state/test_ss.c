/* test_ss.c — the directory state source in a temporary directory: apply,
 * replace, delete, load, runtime pods, watch; all-or-nothing on errors;
 * stored files parse back to the same objects. */
#include <dirent.h>
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>

#include "tap.h"
#include "zerohop/state.h"

static char tmp[] = "/tmp/zh-ss-test-XXXXXX";
static char ebuf[512];

static char *write_file(const char *name, const char *text)
{
	static char path[4][512];
	static int i;
	FILE *f;

	i = (i + 1) % 4;
	snprintf(path[i], sizeof(path[i]), "%s/in/%s", tmp, name);
	f = fopen(path[i], "w");
	fputs(text, f);
	fclose(f);
	return path[i];
}

static int exists(const char *rel)
{
	char p[512];

	snprintf(p, sizeof(p), "%s/state/%s", tmp, rel);
	return access(p, F_OK) == 0;
}

static int count_files(const char *rel)
{
	char p[512];
	struct dirent *de;
	int n = 0;
	DIR *d;

	snprintf(p, sizeof(p), "%s/state/%s", tmp, rel);
	d = opendir(p);
	if (!d)
		return -1;
	while ((de = readdir(d)))
		n += de->d_name[0] != '.';
	closedir(d);
	return n;
}

static int readable(int fd, int ms)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };

	return poll(&p, 1, ms) == 1;
}

static int apply1(struct ss *s, const char *path, struct md_err *err)
{
	char *paths[] = { (char *)path };

	return ss_apply(s, paths, 1, err);
}

static int delete1(struct ss *s, const char *path, struct md_err *err)
{
	char *paths[] = { (char *)path };

	return ss_delete(s, paths, 1, err);
}

static const char app[] =
	"# the SMI example, in one multi-document file\n"
	"apiVersion: v1\nkind: Service\nmetadata: {name: web, labels: {port: \"80\"}}\n"
	"spec: {selector: {app: web}, ports: [{port: 80, targetPort: http}]}\n"
	"---\n"
	"apiVersion: v1\nkind: Service\nmetadata: {name: web-v2}\n"
	"spec: {selector: {app: web, v: \"2\"}, ports: [{port: 80}]}\n"
	"---\n"
	"apiVersion: split.smi-spec.io/v1alpha1\nkind: TrafficSplit\nmetadata: {name: s}\n"
	"spec: {service: web, backends: [{service: web, weight: 1}, {service: web-v2, weight: 500m}]}\n"
	"---\n"
	"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: conf, namespace: other}\n"
	"data:\n  nginx.conf: |\n    events {}\n    http { server { listen 80; } }\n"
	"---\n"
	"apiVersion: zerohop.io/v1alpha1\nkind: Cluster\nmetadata: {name: c1}\n"
	"spec: {nodes: [n1, n2]}\n";

static const char runtime_pod[] =
	"apiVersion: v1\nkind: Pod\nmetadata: {name: web-1, labels: {app: web, v: \"2\"}}\n"
	"spec:\n  nodeName: n2\n  containers: [{name: c, ports: [{name: http, containerPort: 8080}]}]\n"
	"status: {podIP: 10.244.1.7, phase: Running}\n";

static void test_apply_load(struct ss *s)
{
	struct md_state *st = NULL;
	struct md_err err;
	const struct md_service *svc;
	uint64_t g0 = ss_generation(s);
	int r;

	r = apply1(s, write_file("app.yaml", app), &err);
	is_int(r, 0, "apply a multi-document file");
	if (r)
		diag("%s", md_err_str(&err, ebuf, sizeof(ebuf)));
	is_int(ss_generation(s), g0 + 1, "generation bumped once");
	is_int(count_files("manifests"), 5, "one file per object");
	ok(exists("manifests/service_default_web.yaml"), "service_default_web.yaml");
	ok(exists("manifests/trafficsplit_default_s.yaml"), "trafficsplit_default_s.yaml");
	ok(exists("manifests/configmap_other_conf.yaml"), "configmap_other_conf.yaml");
	ok(exists("manifests/cluster.yaml"), "the Cluster is cluster.yaml");
	r = ss_load(s, &st, &err);
	is_int(r, 0, "load");
	if (r) {
		diag("%s", md_err_str(&err, ebuf, sizeof(ebuf)));
		return;
	}
	is_int(md_state_n_objects(st), 5, "five objects back");
	svc = md_find_service(st, NULL, "web");
	ok(svc != NULL, "service back");
	is_str(md_labels_get(&svc->meta.labels, "port"), "80", "quoted label value stays a string");
	is_str(svc->ports[0].target.name, "http", "named targetPort back");
	ok(strstr(svc->meta.file, "/manifests/service_default_web.yaml") != NULL,
	   "object file is the stored file");
	is_int(svc->meta.line, 1, "object line in the stored file");
	is_int(st->splits[0].backends[1].weight_milli, 500, "quantity weight back");
	is_str(md_labels_get(&md_find_configmap(st, "other", "conf")->data, "nginx.conf"),
	       "events {}\nhttp { server { listen 80; } }\n", "multi-line data back byte for byte");
	is_str(st->cluster.name, "c1", "cluster back");
	is_int(svc->endpoints[0].n, 0, "no pods yet");
	md_state_free(st);

	/* runtime pods */
	is_int(ss_put_pod(s, "default", "web-1", runtime_pod), 0, "put runtime pod");
	ok(exists("pods/default_web-1.yaml"), "pods/default_web-1.yaml");
	is_int(ss_generation(s), g0 + 2, "generation bumped by put_pod");
	is_int(ss_put_pod(s, "default", "other-name", runtime_pod), -EINVAL,
	       "put_pod refuses a YAML of another name");
	is_int(ss_put_pod(s, "default", "x", "kind: [\n"), -EINVAL, "put_pod refuses bad YAML");
	is_int(ss_put_pod(s, "default", "../x", runtime_pod), -EINVAL, "put_pod refuses a bad name");
	r = ss_load(s, &st, &err);
	is_int(r, 0, "load with pod");
	if (!r) {
		svc = md_find_service(st, NULL, "web");
		is_int(svc->endpoints[0].n, 1, "the runtime pod is an endpoint");
		is_int(svc->endpoints[0].v[0].port, 8080, "named port resolved");
		md_state_free(st);
	}
	is_int(ss_del_pod(s, "default", "web-1"), 0, "delete runtime pod");
	ok(!exists("pods/default_web-1.yaml"), "pod file gone");
	is_int(ss_del_pod(s, "default", "web-1"), 0, "deleting it again is fine");
	is_int(ss_generation(s), g0 + 3, "only the real delete bumped the generation");
}

static void test_all_or_nothing(struct ss *s)
{
	struct md_err err;
	uint64_t g = ss_generation(s);
	int before = count_files("manifests"), r;
	const char *bad_split =
		"apiVersion: v1\nkind: Service\nmetadata: {name: new-svc}\nspec: {ports: [{port: 1}]}\n"
		"---\n"
		"apiVersion: split.smi-spec.io/v1alpha1\nkind: TrafficSplit\nmetadata: {name: s}\n"
		"spec:\n  service: web\n  backends:\n    - {service: web, weight: 1}\n"
		"    - {service: gone, weight: -1}\n";
	const char *bad_port =
		"apiVersion: v1\nkind: Service\nmetadata: {name: web}\nspec: {ports: [{port: 0}]}\n";

	r = apply1(s, write_file("bad.yaml", bad_split), &err);
	is_int(r, -EINVAL, "apply with a split with a bad weight fails");
	ok(strstr(err.file, "bad.yaml") != NULL, "error names the input file");
	is_int(err.line, 13, "error line");
	is_str(err.field, "spec.backends[1].weight", "error field");
	ok(!exists("manifests/service_default_new-svc.yaml"), "the valid Service of that file was not written");
	is_int(count_files("manifests"), before, "no file added");
	is_int(ss_generation(s), g, "generation unchanged");
	r = apply1(s, write_file("bad2.yaml", bad_port), &err);
	is_int(r, -EINVAL, "apply with port 0 fails");
	is_str(err.field, "spec.ports[0].port", "port error field");
	r = delete1(s, write_file("del2.yaml", "apiVersion: v1\nkind: Service\nmetadata: {name: nope}\n"),
		    &err);
	is_int(r, -ENOENT, "deleting a missing object fails");
	ok(strstr(err.msg, "Service default/nope not found") != NULL, "not found message");
	is_int(ss_generation(s), g, "generation unchanged by failed deletes");
	r = apply1(s, "/nonexistent.yaml", &err);
	is_int(r, -ENOENT, "missing input file");
}

static void test_replace_delete(struct ss *s)
{
	struct md_state *st;
	struct md_err err;
	const char *v2 =
		"apiVersion: split.smi-spec.io/v1alpha1\nkind: TrafficSplit\nmetadata: {name: s}\n"
		"spec: {service: web, backends: [{service: web, weight: 200m}, {service: web-v2, weight: 800m}]}\n";
	const char *del = "apiVersion: split.smi-spec.io/v1alpha1\nkind: TrafficSplit\nmetadata: {name: s}\n"
			  "---\napiVersion: v1\nkind: Service\nmetadata: {name: web-v2}\n";
	int r, fd = ss_watch_fd(s);

	ok(fd >= 0, "watch fd");
	ss_watch_drain(s);
	ok(!readable(fd, 0), "not readable after drain");
	{
		struct ss *other = NULL;
		struct md_state *st2 = NULL;

		if (ss_open(ss_dir(s), &other) == 0) {
			if (ss_load(other, &st2, &err) == 0)
				md_state_free(st2);
			ss_close(other);
		}
		ok(!readable(fd, 200), "another reader opening, loading, closing wakes nobody");
	}
	r = apply1(s, write_file("v2.yaml", v2), &err);
	is_int(r, 0, "apply changed weights");
	ok(readable(fd, 1000), "watch fd readable after apply");
	ss_watch_drain(s);
	ok(!readable(fd, 0), "drained");
	{
		uint64_t g = ss_generation(s);

		r = apply1(s, write_file("v2.yaml", v2), &err);
		is_int(r, 0, "apply the same file again");
		is_int(ss_generation(s), g, "an unchanged apply leaves the generation alone");
		ok(!readable(fd, 200), "and wakes no watcher");
	}
	r = ss_load(s, &st, &err);
	is_int(r, 0, "load");
	if (!r) {
		is_int(st->n_splits, 1, "still one split (replaced, not added)");
		is_int(st->splits[0].backends[0].weight_milli, 200, "new weight");
		md_state_free(st);
	}
	r = delete1(s, write_file("del3.yaml", del), &err);
	is_int(r, 0, "delete split and backend together");
	ok(readable(fd, 1000), "watch fd readable after delete");
	ok(!exists("manifests/trafficsplit_default_s.yaml") &&
	   !exists("manifests/service_default_web-v2.yaml"), "both files removed");
	ss_watch_drain(s);
	is_int(ss_put_pod(s, "default", "web-1", runtime_pod), 0, "put pod");
	ok(readable(fd, 1000), "watch fd readable after put_pod");
	r = ss_load(s, &st, &err);
	is_int(r, 0, "load after delete");
	if (!r) {
		is_int(st->n_services, 1, "one service left");
		is_int(st->n_splits, 0, "no split");
		md_state_free(st);
	}
}

/* ---- reports, -n, --strict, eventual references (issue 21) ------------- */

static char rep[2048];

static void report(void *arg, enum ss_event ev, const char *what, const char *ns,
		   const char *detail)
{
	static const char *const n[] = { "created", "configured", "unchanged", "deleted",
					 "ignored", "warning" };
	size_t l = strlen(rep);

	(void)arg;
	snprintf(rep + l, sizeof(rep) - l, "%s %s%s%s%s|", what, n[ev], ns ? " @" : "",
		 ns ? ns : "", ev == SS_IGNORED ? " (reason)" : "");
	(void)detail;
}

static void test_report(struct ss *s)
{
	struct ss_opts o = { .report = report, .ns = "shop" };
	struct md_state *st;
	struct md_err err;
	char *paths[1];
	const char *in =
		"apiVersion: v1\nkind: ServiceAccount\nmetadata: {name: sa}\n"
		"---\napiVersion: v1\nkind: Service\nmetadata: {name: late-root}\n"
		"spec: {ports: [{port: 80}]}\n"
		"---\napiVersion: split.smi-spec.io/v1alpha2\nkind: TrafficSplit\n"
		"metadata: {name: early}\nspec: {service: late-root, backends: [{service: later, weight: 1}]}\n"
		"---\napiVersion: networking.istio.io/v1\nkind: VirtualService\nmetadata: {name: vs}\n";
	const char *later = "apiVersion: v1\nkind: Service\nmetadata: {name: later}\n"
			    "spec: {ports: [{port: 80}]}\n";
	int r;

	rep[0] = 0;
	paths[0] = write_file("r.yaml", in);
	r = ss_apply_opts(s, paths, 1, &o, &err);
	is_int(r, 0, "apply -n shop: a split before its backend, a skipped kind");
	{
		static const char want[] =
			"serviceaccount/sa created @shop|service/late-root created @shop|"
			"trafficsplit.split.smi-spec.io/early created @shop|"
			"virtualservice.networking.istio.io/vs ignored @shop (reason)|";

		ok(!strncmp(rep, want, strlen(want)), "report: one line per object: %s", rep);
		ok(strstr(rep, "/in/r.yaml:13: spec.backends[0].service warning|") != NULL,
		   "report: the warning names the input file:line: field");
	}
	ok(exists("manifests/serviceaccount_shop_sa.yaml") &&
	   exists("manifests/trafficsplit_shop_early.yaml"), "stored under namespace shop");
	ok(!exists("manifests/virtualservice_shop_vs.yaml") && count_files("manifests") > 0,
	   "the skipped kind is not stored");
	r = ss_load(s, &st, &err);	/* the stored file carries the namespace */
	is_int(r, 0, "load");
	if (!r) {
		ok(md_find_service(st, "shop", "late-root") != NULL,
		   "the namespace was written into the stored file");
		ok(st->n_splits && strstr(st->splits[0].not_ready, "shop/later"),
		   "the split is not ready");
		md_state_free(st);
	}
	rep[0] = 0;
	r = ss_apply_opts(s, paths, 1, &o, &err);
	ok(r == 0 && strstr(rep, "serviceaccount/sa unchanged @shop|"), "re-apply: unchanged");
	rep[0] = 0;
	paths[0] = write_file("l.yaml", later);
	r = ss_apply_opts(s, paths, 1, &o, &err);
	is_str(rep, "service/later created @shop|", "the backend Service arrives");
	r = ss_load(s, &st, &err);
	if (!r) {
		is_str(st->splits[0].not_ready, "", "the split is ready now");
		md_state_free(st);
	}
	o.strict = true;
	rep[0] = 0;
	paths[0] = write_file("r.yaml", in);
	r = ss_apply_opts(s, paths, 1, &o, &err);
	is_int(r, -EINVAL, "--strict: the VirtualService refuses the apply");
	is_str(rep, "", "... and nothing is reported");
	o.strict = false;
	rep[0] = 0;
	r = ss_delete_opts(s, paths, 1, &o, &err);
	is_int(r, 0, "delete -n shop");
	is_str(rep, "serviceaccount/sa deleted @shop|service/late-root deleted @shop|"
	       "trafficsplit.split.smi-spec.io/early deleted @shop|"
	       "virtualservice.networking.istio.io/vs ignored @shop (reason)|", "delete report");
	paths[0] = write_file("l.yaml", later);
	is_int(ss_delete_opts(s, paths, 1, &o, &err), 0, "clean up");
}

static void cleanup(void)
{
	char cmd[700];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmp);
	if (system(cmd))
		fprintf(stderr, "cleanup of %s failed\n", tmp);
}

int main(void)
{
	char dir[600];
	struct ss *s = NULL, *s2 = NULL;
	int r;

	if (!mkdtemp(tmp))
		return 1;
	atexit(cleanup);	/* also when a check fails midway */
	snprintf(dir, sizeof(dir), "%s/in", tmp);
	mkdir(dir, 0755);
	snprintf(dir, sizeof(dir), "%s/state", tmp);
	r = ss_open(dir, &s);
	is_int(r, 0, "open creates the layout");
	if (r)
		return done_testing();
	ok(exists("manifests") && exists("pods") && exists("generation"), "manifests/ pods/ generation");
	is_int(ss_generation(s), 0, "generation starts at 0");
	is_str(ss_dir(s), dir, "ss_dir");
	test_apply_load(s);
	test_all_or_nothing(s);
	test_replace_delete(s);
	test_report(s);
	is_int(ss_open(dir, &s2), 0, "a second handle on the same directory");
	ok(s2 && ss_generation(s2) == ss_generation(s), "sees the same generation");
	ss_close(s2);
	ss_close(s);
	return done_testing();
}
