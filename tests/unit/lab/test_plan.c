/* test_plan.c — the lab's pod planning: image mapping, validation errors,
 * the pod-template hash, and the runtime Pod object read back by the real
 * model parser. */
#include <arpa/inet.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "tap.h"
#include "zerohop/log.h"
#include "zerohop/model.h"
#include "../../../src/lab/lab_plan.h"

static struct md_state *parse(const char *yaml)
{
	struct md_state *st = md_state_new();
	struct md_err err = { 0 };
	char buf[512];

	if (md_state_add_buf(st, "t.yaml", yaml, strlen(yaml), &err) ||
	    md_state_finish(st, &err)) {
		diag("parse: %s", md_err_str(&err, buf, sizeof(buf)));
		md_state_free(st);
		return NULL;
	}
	return st;
}

static const char *pods_yaml =
	"apiVersion: v1\nkind: Pod\nmetadata:\n  name: e1\nspec:\n  containers:\n"
	"  - name: c\n    image: mendhak/http-https-echo:31\n"
	"---\napiVersion: v1\nkind: Pod\nmetadata:\n  name: f1\nspec:\n  containers:\n"
	"  - name: c\n    image: fortio/fortio\n    args: [\"load\", \"-c\", \"8\"]\n"
	"---\napiVersion: v1\nkind: Pod\nmetadata:\n  name: n1\nspec:\n  containers:\n"
	"  - name: c\n    image: docker.io/library/nginx:1.25\n"
	"---\napiVersion: v1\nkind: Pod\nmetadata:\n  name: x1\nspec:\n  containers:\n"
	"  - name: c\n    image: redis:7\n"
	"---\napiVersion: v1\nkind: Pod\nmetadata:\n  name: c1\nspec:\n  containers:\n"
	"  - name: c\n    image: redis:7\n    command: [\"/bin/sleep\"]\n    args: [\"5\"]\n"
	"    ports:\n    - containerPort: 6379\n      name: redis\n"
	"---\napiVersion: v1\nkind: Pod\nmetadata:\n  name: v1\nspec:\n  containers:\n"
	"  - name: c\n    image: nginx\n    volumeMounts:\n    - name: conf\n      mountPath: /etc/nginx/conf.d\n"
	"  volumes:\n  - name: conf\n    configMap:\n      name: missing\n";

static void test_images(const struct md_state *st)
{
	struct lab_topo t = { 0 };
	struct lab_plan plan;
	char err[1024];
	const struct md_pod *p;
	int r;

	strcpy(t.zerohop, "/opt/zh/zerohop");
	inet_pton(AF_INET, "10.96.0.0", &t.svc_cidr);

	p = md_find_pod(st, NULL, "e1");
	r = lab_plan_pod(&t, st, "default", "e1", 0, &p->spec, p->meta.file, p->meta.line, NULL,
			 &plan, err, sizeof(err));
	is_int(r, 0, "http-https-echo is built in");
	if (!r) {
		is_str(plan.cmds[0].argv[0], "/opt/zh/zerohop", "... runs the running zerohop binary");
		is_str(plan.cmds[0].argv[1], "echo", "... as `zerohop echo`");
		ok(plan.cmds[0].argv[2] == NULL, "... with no extra arguments");
		lab_plan_free(&plan);
	}

	p = md_find_pod(st, NULL, "f1");
	r = lab_plan_pod(&t, st, "default", "f1", 0, &p->spec, p->meta.file, p->meta.line, NULL,
			 &plan, err, sizeof(err));
	is_int(r, -EINVAL, "fortio in load mode has no built-in command");
	ok(strstr(err, "t.yaml:") && strstr(err, "fortio/fortio") && strstr(err, "command"),
	   "... error names the file, the image and the way out: %s", err);

	p = md_find_pod(st, NULL, "n1");
	r = lab_plan_pod(&t, st, "default", "n1", 0, &p->spec, p->meta.file, p->meta.line, NULL,
			 &plan, err, sizeof(err));
	is_int(r, 0, "docker.io/library/nginx:1.25 maps to Debian's nginx");
	if (!r) {
		is_str(plan.cmds[0].argv[0], "/usr/sbin/nginx", "... /usr/sbin/nginx");
		is_str(plan.cmds[0].argv[2], "daemon off;", "... in the foreground");
		ok(plan.n_mounts == 3 && plan.mounts[0].tmpfs && !strcmp(plan.mounts[0].dst, "/run"),
		   "... with private /run, /var/log/nginx, /var/lib/nginx");
		lab_plan_free(&plan);
	}

	p = md_find_pod(st, NULL, "x1");
	r = lab_plan_pod(&t, st, "default", "x1", 0, &p->spec, p->meta.file, p->meta.line, NULL,
			 &plan, err, sizeof(err));
	is_int(r, -EINVAL, "an unknown image without command is an error");
	{
		char want[64];

		snprintf(want, sizeof(want), "t.yaml:%d:", p->meta.line);
		ok(strstr(err, want) && strstr(err, "redis:7") && strstr(err, "default/x1"),
		   "... naming file:line, pod and image: %s", err);
	}

	p = md_find_pod(st, NULL, "c1");
	r = lab_plan_pod(&t, st, "default", "c1", 0, &p->spec, p->meta.file, p->meta.line, NULL,
			 &plan, err, sizeof(err));
	is_int(r, 0, "an explicit command runs whatever the image");
	if (!r) {
		ok(!strcmp(plan.cmds[0].argv[0], "/bin/sleep") && !strcmp(plan.cmds[0].argv[1], "5") &&
		   !plan.cmds[0].argv[2], "... command + args");
		ok(plan.n_ports == 1 && plan.ports[0].port == 6379 && plan.ports[0].proto == MD_PROTO_TCP,
		   "... declared ports kept for the readiness check");
		lab_plan_free(&plan);
	}

	p = md_find_pod(st, NULL, "v1");
	r = lab_plan_pod(&t, st, "default", "v1", 0, &p->spec, p->meta.file, p->meta.line, NULL,
			 &plan, err, sizeof(err));
	is_int(r, -EINVAL, "a ConfigMap volume that does not exist is an error");
	ok(strstr(err, "configMap default/missing not found") != NULL, "... saying which: %s", err);
}

static void test_hash(const struct md_state *st)
{
	const struct md_pod *a = md_find_pod(st, NULL, "c1"), *b = md_find_pod(st, NULL, "x1");
	char h1[16], h2[16], h3[16];
	struct md_labels none = { 0 };

	lab_plan_hash(&a->spec, &a->meta.labels, h1);
	lab_plan_hash(&a->spec, &a->meta.labels, h2);
	lab_plan_hash(&b->spec, &b->meta.labels, h3);
	is_int(strlen(h1), 10, "template hash has 10 hex digits");
	is_str(h1, h2, "template hash is stable");
	ok(strcmp(h1, h3) != 0, "different templates hash differently");
	{
		struct md_kv kv = { "v", "2" };
		struct md_labels l = { &kv, 1 };

		lab_plan_hash(&a->spec, &none, h2);
		lab_plan_hash(&a->spec, &l, h3);
		ok(strcmp(h2, h3) != 0, "a label change changes the template hash");
	}
}

/* The runtime object the kubelet writes must read back through the model. */
static void test_runtime_yaml(const struct md_state *st)
{
	const struct md_pod *c1 = md_find_pod(st, NULL, "c1");
	struct md_kv kv[2] = { { "app", "true" }, { "tier", "0123" } };
	struct md_labels l = { kv, 2 };
	char *meta = lab_plan_yaml_meta(&l, "web", "0123456789");
	char *spec = lab_plan_yaml_spec(&c1->spec);
	char doc[4096];
	struct md_state *rt;

	snprintf(doc, sizeof(doc),
		 "apiVersion: v1\nkind: Pod\nmetadata:\n  name: web-0123456789-abcde\n  namespace: default\n%s"
		 "spec:\n  nodeName: node-a\n%sstatus:\n  phase: Running\n  podIP: 10.244.0.7\n",
		 meta, spec);
	rt = parse(doc);
	ok(rt != NULL, "runtime Pod object parses with the model");
	if (rt) {
		const struct md_pod *p = md_find_pod(rt, "default", "web-0123456789-abcde");
		struct in_addr a;

		ok(p && p->has_status && p->phase == MD_PHASE_RUNNING, "... phase Running");
		inet_pton(AF_INET, "10.244.0.7", &a);
		ok(p && p->ip == a.s_addr, "... podIP");
		is_str(p ? md_labels_get(&p->meta.labels, "app") : NULL, "true",
		       "... label value 'true' stays a string (quoted)");
		is_str(p ? md_labels_get(&p->meta.labels, "tier") : NULL, "0123",
		       "... label value '0123' keeps its leading zero");
		is_str(p ? md_labels_get(&p->meta.labels, "pod-template-hash") : NULL, "0123456789",
		       "... pod-template-hash label");
		is_str(p ? p->owner : NULL, "web", "... ownerReferences[0].name");
		is_str(p ? p->spec.node_name : NULL, "node-a", "... spec.nodeName");
		ok(p && p->spec.n_containers == 1 && p->spec.containers[0].n_ports == 1 &&
		   p->spec.containers[0].ports[0].port == 6379 &&
		   p->spec.containers[0].ports[0].name &&
		   !strcmp(p->spec.containers[0].ports[0].name, "redis"),
		   "... containers[].ports with name");
		md_state_free(rt);
	}
	free(meta);
	free(spec);
}

int main(void)
{
	struct md_state *st = parse(pods_yaml);

	ok(st != NULL, "test manifests parse");
	if (st) {
		test_images(st);
		test_hash(st);
		test_runtime_yaml(st);
		md_state_free(st);
	}
	return done_testing();
}
