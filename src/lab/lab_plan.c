/* lab_plan.c — pod spec -> processes, mounts and ports (see lab_plan.h). */
#include <arpa/inet.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "zerohop/log.h"
#include "lab_plan.h"

#define NGINX_BIN "/usr/sbin/nginx"
#define NGINX_ETC "/etc/nginx"

static int plan_err(char *err, size_t len, const char *file, int line, const char *fmt, ...)
	__attribute__((format(printf, 5, 6)));

static int plan_err(char *err, size_t len, const char *file, int line, const char *fmt, ...)
{
	va_list ap;
	int n = lab_fmt(err, len, "%s:%d: ", file ? file : "<unknown>", line);

	va_start(ap, fmt);
	if (n >= 0 && (size_t)n < len)
		vsnprintf(err + n, len - n, fmt, ap);
	va_end(ap);
	return -EINVAL;
}

/* "docker.io/library/nginx:1.25@sha256:..." -> "nginx" */
static void image_repo(const char *image, char *buf, size_t len)
{
	const char *s = image;
	char *p;

	if (!strncmp(s, "docker.io/", 10))
		s += 10;
	else if (!strncmp(s, "index.docker.io/", 16))
		s += 16;
	if (!strncmp(s, "library/", 8))
		s += 8;
	lab_fmt(buf, len, "%s", s);
	p = strchr(buf, '@');
	if (p)
		*p = 0;
	p = strrchr(buf, ':');
	if (p && !strchr(p, '/'))
		*p = 0;
}

static char **argv_new(int n)
{
	return zh_calloc(n + 1, sizeof(char *));
}

int lab_plan_image(const char *zerohop, const struct md_container *c, char ***argv,
		   int *nginx, char *err, size_t errlen)
{
	char repo[256];
	char **v;
	int n = 0;

	*nginx = 0;
	if (!c->image || !*c->image) {
		lab_fmt(err, errlen, "container %s has neither command nor image", c->name);
		return -EINVAL;
	}
	image_repo(c->image, repo, sizeof(repo));
	if (!strcmp(repo, "mendhak/http-https-echo") || !strcmp(repo, "fortio/fortio")) {
		/* fortio's image runs `fortio server` by default; other fortio
		 * modes (load, curl) are clients we do not emulate. */
		if (!strcmp(repo, "fortio/fortio") && c->n_args > 0 &&
		    strcmp(c->args[0], "server")) {
			lab_fmt(err, errlen,
				"container %s: image %s with args '%s': only 'server' has a built-in command; give spec.containers[].command",
				c->name, c->image, c->args[0]);
			return -EINVAL;
		}
		v = argv_new(2);
		v[n++] = zh_strdup(zerohop);
		v[n++] = zh_strdup("echo");
		*argv = v;
		return 0;
	}
	if (!strcmp(repo, "nginx")) {
		*nginx = 1;
		if (c->n_args > 0) {
			/* The image's entrypoint execs args; "nginx ..." is Debian's. */
			v = argv_new(c->n_args);
			for (int i = 0; i < c->n_args; i++)
				v[n++] = zh_strdup(i == 0 && !strcmp(c->args[0], "nginx") ? NGINX_BIN
											: c->args[i]);
		} else {
			v = argv_new(3);
			v[n++] = zh_strdup(NGINX_BIN);
			v[n++] = zh_strdup("-g");
			v[n++] = zh_strdup("daemon off;");
		}
		*argv = v;
		return 0;
	}
	lab_fmt(err, errlen,
		"container %s: image %s has no built-in command in the lab (built in: mendhak/http-https-echo, fortio/fortio, nginx); give spec.containers[].command",
		c->name, c->image);
	return -EINVAL;
}

static void plan_mount(struct lab_plan *p, const char *src, const char *dst, bool tmpfs)
{
	struct lab_mount *m;

	p->mounts = zh_realloc(p->mounts, (p->n_mounts + 1) * sizeof(*p->mounts));
	m = &p->mounts[p->n_mounts++];
	memset(m, 0, sizeof(*m));
	lab_fmt(m->src, sizeof(m->src), "%s", src ? src : "tmpfs");
	lab_fmt(m->dst, sizeof(m->dst), "%s", dst);
	m->tmpfs = tmpfs;
}

static const struct md_configmap *find_cm(const struct md_state *st, const char *ns,
					  const char *name)
{
	for (int i = 0; st && i < st->n_configmaps; i++)
		if (!strcmp(st->configmaps[i].meta.ns, ns) &&
		    !strcmp(st->configmaps[i].meta.name, name))
			return &st->configmaps[i];
	return NULL;
}

static int write_cm_dir(const struct md_configmap *cm, const char *dir)
{
	char p[LAB_PATH];
	int ret = lab_mkdirs(dir, 0755);

	for (int i = 0; !ret && i < cm->data.n; i++) {
		lab_fmt(p, sizeof(p), "%s/%s", dir, cm->data.v[i].key);
		ret = lab_write_str(p, cm->data.v[i].value);
	}
	return ret;
}

static bool path_is(const char *path, bool dir)
{
	struct stat st;

	return stat(path, &st) == 0 && (dir ? S_ISDIR(st.st_mode) : S_ISREG(st.st_mode));
}

/* A pod-private copy of /etc/nginx where ConfigMap files are laid over.
 * sites-enabled is emptied so the pod serves its own config only, as the
 * nginx image does. */
static int nginx_etc_copy(const char *pod_dir, char *out, size_t len)
{
	char se[LAB_PATH + 32];
	char *cp[] = { "cp", "-a", NGINX_ETC, out, NULL };
	int ret;

	lab_fmt(out, len, "%s/etc-nginx", pod_dir);
	if (path_is(out, true))
		return 0;
	ret = lab_run(cp, false);
	if (ret)
		return ret;
	lab_fmt(se, sizeof(se), "%s/sites-enabled", out);
	lab_rm_tree(se);
	return mkdir(se, 0755) ? -errno : 0;
}

static int plan_volume(const struct md_state *st, const char *ns, const struct md_pod_spec *spec,
		       const struct md_volume_mount *vm, const char *pod_dir, struct lab_plan *p,
		       char *etc_copy, size_t etc_len, bool *etc_whole, const char *file,
		       int line, char *err, size_t errlen)
{
	const struct md_volume *vol = NULL;
	const struct md_configmap *cm;
	char cmdir[LAB_PATH], src[LAB_PATH * 2];
	const char *mp = vm->mount_path;
	bool under_etc = !strncmp(mp, NGINX_ETC "/", strlen(NGINX_ETC) + 1);

	for (int i = 0; i < spec->n_volumes; i++)
		if (!strcmp(spec->volumes[i].name, vm->name))
			vol = &spec->volumes[i];
	if (!vol)
		return plan_err(err, errlen, file, line, "volumeMounts %s: no volume of that name",
				vm->name);
	if (!vol->configmap)
		return 0;	/* other volume kinds: nothing to mount in the lab */
	cm = find_cm(st, ns, vol->configmap);
	if (!cm)
		return plan_err(err, errlen, file, line, "volume %s: configMap %s/%s not found",
				vol->name, ns, vol->configmap);
	if (vm->sub_path && !md_labels_get(&cm->data, vm->sub_path))
		return plan_err(err, errlen, file, line, "volumeMounts %s: subPath %s: no such key in configMap %s",
				vm->name, vm->sub_path, cm->meta.name);
	for (int i = 0; i < cm->data.n; i++)
		if (strchr(cm->data.v[i].key, '/') || !strcmp(cm->data.v[i].key, ".."))
			return plan_err(err, errlen, file, line, "configMap %s: key '%s' is not a file name",
					cm->meta.name, cm->data.v[i].key);
	if (!under_etc && strcmp(mp, NGINX_ETC) &&
	    !path_is(mp, !vm->sub_path))
		return plan_err(err, errlen, file, line,
				"volumeMounts %s: mountPath %s must exist on this machine as a %s (the lab cannot create paths in the host's file system)",
				vm->name, mp, vm->sub_path ? "file" : "directory");
	if (!pod_dir)
		return 0;
	lab_fmt(cmdir, sizeof(cmdir), "%s/cm/%s", pod_dir, vol->name);
	if (write_cm_dir(cm, cmdir))
		return plan_err(err, errlen, file, line, "volume %s: cannot write %s", vol->name, cmdir);
	if (!strcmp(mp, NGINX_ETC) && !vm->sub_path) {
		/* The ConfigMap is all of /etc/nginx, as in Kubernetes. */
		*etc_whole = true;
		plan_mount(p, cmdir, NGINX_ETC, false);
		return 0;
	}
	if (under_etc) {
		const char *rel = mp + strlen(NGINX_ETC) + 1;
		char dst[LAB_PATH * 2], parent[LAB_PATH * 2], *sl;

		if (nginx_etc_copy(pod_dir, etc_copy, etc_len))
			return plan_err(err, errlen, file, line, "cannot copy %s", NGINX_ETC);
		lab_fmt(dst, sizeof(dst), "%s/%s", etc_copy, rel);
		lab_fmt(parent, sizeof(parent), "%s", dst);
		sl = strrchr(parent, '/');
		*sl = 0;
		lab_mkdirs(parent, 0755);
		if (vm->sub_path) {
			if (lab_write_str(dst, md_labels_get(&cm->data, vm->sub_path)))
				return plan_err(err, errlen, file, line, "cannot write %s", dst);
		} else {
			lab_rm_tree(dst);
			if (write_cm_dir(cm, dst))
				return plan_err(err, errlen, file, line, "cannot write %s", dst);
		}
		return 0;
	}
	if (vm->sub_path)
		lab_fmt(src, sizeof(src), "%s/%s", cmdir, vm->sub_path);
	else
		lab_fmt(src, sizeof(src), "%s", cmdir);
	plan_mount(p, src, mp, false);
	return 0;
}

static int write_net_files(const struct lab_topo *t, const char *ns, const char *name,
			   uint32_t ip, const char *pod_dir, struct lab_plan *p)
{
	char path[LAB_PATH + 16], buf[1024], a[INET6_ADDRSTRLEN];
	const struct lab_node *node = NULL;
	int ret;

	/* the pod's node: the one whose pod range holds ip (an IPv6-only
	 * lab's pod is named by its IPv6, derived from it) */
	for (int i = 0; i < t->n_nodes && !node; i++)
		if (((ip ^ t->nodes[i].pod_net) & htonl(~0U << (32 - t->nodes[i].pod_len))) == 0)
			node = &t->nodes[i];
	lab_fmt(path, sizeof(path), "%s/resolv.conf", pod_dir);
	lab_fmt(buf, sizeof(buf),
		"nameserver %s\nsearch %s.svc.cluster.local svc.cluster.local cluster.local\noptions ndots:5\n",
		lab_dns_str(t, a), ns);
	ret = lab_write_str(path, buf);
	if (ret)
		return ret;
	plan_mount(p, path, "/etc/resolv.conf", false);
	lab_fmt(path, sizeof(path), "%s/hosts", pod_dir);
	lab_fmt(buf, sizeof(buf),
		"127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n%s\t%s\n",
		lab_pod_addr_str(t, node, ip, a), name);
	ret = lab_write_str(path, buf);
	if (ret)
		return ret;
	plan_mount(p, path, "/etc/hosts", false);
	return 0;
}

int lab_plan_pod(const struct lab_topo *t, const struct md_state *st, const char *ns,
		 const char *name, uint32_t ip, const struct md_pod_spec *spec,
		 const char *file, int line, const char *pod_dir, struct lab_plan *out,
		 char *err, size_t errlen)
{
	char etc_copy[LAB_PATH] = "";
	bool any_nginx = false, etc_whole = false;
	int ret = 0;

	memset(out, 0, sizeof(*out));
	if (strlen(ns) > 63 || strlen(name) > 100)
		return plan_err(err, errlen, file, line, "pod %s/%s: name too long for the lab (namespace <= 63, name <= 100)",
				ns, name);
	if (spec->n_containers == 0)
		return plan_err(err, errlen, file, line, "pod %s/%s: spec.containers: none given",
				ns, name);
	if (pod_dir) {
		ret = lab_mkdirs(pod_dir, 0755);
		if (ret)
			return plan_err(err, errlen, file, line, "pod %s/%s: mkdir %s: %s", ns, name,
					pod_dir, strerror(-ret));
		ret = write_net_files(t, ns, name, ip, pod_dir, out);
		if (ret)
			goto fail_io;
	}
	out->cmds = zh_calloc(spec->n_containers, sizeof(*out->cmds));
	for (int i = 0; i < spec->n_containers; i++) {
		const struct md_container *c = &spec->containers[i];
		struct lab_cmd *cmd = &out->cmds[out->n_cmds++];
		int nginx = 0, n = 0;

		lab_fmt(cmd->name, sizeof(cmd->name), "%s", c->name ? c->name : "main");
		if (c->n_command > 0) {
			cmd->argv = argv_new(c->n_command + c->n_args);
			for (int k = 0; k < c->n_command; k++)
				cmd->argv[n++] = zh_strdup(c->command[k]);
			for (int k = 0; k < c->n_args; k++)
				cmd->argv[n++] = zh_strdup(c->args[k]);
		} else {
			char why[512];

			ret = lab_plan_image(t->zerohop, c, &cmd->argv, &nginx, why, sizeof(why));
			if (ret) {
				plan_err(err, errlen, file, line, "pod %s/%s: spec.containers[%d]: %s",
					 ns, name, i, why);
				goto fail;
			}
		}
		any_nginx |= nginx;
		for (int k = 0; k < c->n_ports; k++) {
			out->ports = zh_realloc(out->ports, (out->n_ports + 1) * sizeof(*out->ports));
			out->ports[out->n_ports].port = c->ports[k].port;
			out->ports[out->n_ports].proto = c->ports[k].proto;
			out->n_ports++;
		}
	}
	for (int i = 0; i < spec->n_containers; i++) {
		const struct md_container *c = &spec->containers[i];

		for (int k = 0; k < c->n_mounts; k++) {
			ret = plan_volume(st, ns, spec, &c->mounts[k], pod_dir, out, etc_copy,
					  sizeof(etc_copy), &etc_whole, file, line, err, errlen);
			if (ret)
				goto fail;
		}
	}
	if (etc_copy[0] && !etc_whole)
		plan_mount(out, etc_copy, NGINX_ETC, false);
	if (any_nginx) {
		/* Pods never share nginx's pid file, logs or temp files. Last,
		 * because a tmpfs on /run hides the sources of the binds above. */
		plan_mount(out, NULL, "/run", true);
		plan_mount(out, NULL, "/var/log/nginx", true);
		plan_mount(out, NULL, "/var/lib/nginx", true);
	}
	return 0;
fail_io:
	ret = plan_err(err, errlen, file, line, "pod %s/%s: cannot write files in %s", ns, name,
		       pod_dir);
fail:
	lab_plan_free(out);
	return ret;
}

void lab_plan_free(struct lab_plan *p)
{
	for (int i = 0; i < p->n_cmds; i++) {
		for (int k = 0; p->cmds[i].argv && p->cmds[i].argv[k]; k++)
			free(p->cmds[i].argv[k]);
		free(p->cmds[i].argv);
	}
	free(p->cmds);
	free(p->mounts);
	free(p->ports);
	memset(p, 0, sizeof(*p));
}

/* ---- runtime object pieces --------------------------------------------------- */

static void yq(FILE *f, const char *s)
{
	fputc('"', f);
	for (; s && *s; s++) {
		if (*s == '"' || *s == '\\')
			fprintf(f, "\\%c", *s);
		else if ((unsigned char)*s < 0x20)
			fprintf(f, "\\x%02x", (unsigned char)*s);
		else
			fputc(*s, f);
	}
	fputc('"', f);
}

char *lab_plan_yaml_meta(const struct md_labels *labels, const char *owner, const char *hash)
{
	char *y = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&y, &len);

	if (labels->n || owner[0]) {
		fprintf(f, "  labels:\n");
		for (int i = 0; i < labels->n; i++) {
			fprintf(f, "    ");
			yq(f, labels->v[i].key);
			fprintf(f, ": ");
			yq(f, labels->v[i].value);
			fprintf(f, "\n");
		}
		if (owner[0])
			fprintf(f, "    pod-template-hash: \"%s\"\n", hash);
	}
	if (owner[0]) {
		fprintf(f, "  ownerReferences:\n  - apiVersion: apps/v1\n    kind: Deployment\n    name: ");
		yq(f, owner);
		fprintf(f, "\n");
	}
	fclose(f);
	return y;
}

char *lab_plan_yaml_spec(const struct md_pod_spec *spec)
{
	char *y = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&y, &len);

	if (spec->service_account) {	/* the pod's workload identity (docs/identity.md) */
		fprintf(f, "  serviceAccountName: ");
		yq(f, spec->service_account);
		fprintf(f, "\n");
	}
	fprintf(f, "  containers:\n");
	for (int i = 0; i < spec->n_containers; i++) {
		const struct md_container *c = &spec->containers[i];

		fprintf(f, "  - name: ");
		yq(f, c->name ? c->name : "main");
		fprintf(f, "\n");
		if (c->image) {
			fprintf(f, "    image: ");
			yq(f, c->image);
			fprintf(f, "\n");
		}
		if (c->n_ports)
			fprintf(f, "    ports:\n");
		for (int k = 0; k < c->n_ports; k++) {
			fprintf(f, "    - containerPort: %u\n      protocol: %s\n", c->ports[k].port,
				md_proto_name(c->ports[k].proto));
			if (c->ports[k].name) {
				fprintf(f, "      name: ");
				yq(f, c->ports[k].name);
				fprintf(f, "\n");
			}
		}
	}
	fclose(f);
	return y;
}

static uint64_t fnv(uint64_t h, const char *s)
{
	for (; s && *s; s++)
		h = (h ^ (unsigned char)*s) * 1099511628211ULL;
	return (h ^ 0xff) * 1099511628211ULL;	/* field separator */
}

static uint64_t fnv_int(uint64_t h, long v)
{
	char b[32];

	lab_fmt(b, sizeof(b), "%ld", v);
	return fnv(h, b);
}

void lab_plan_hash(const struct md_pod_spec *spec, const struct md_labels *labels, char out[16])
{
	uint64_t h = 1469598103934665603ULL;

	for (int i = 0; i < labels->n; i++)
		h = fnv(fnv(h, labels->v[i].key), labels->v[i].value);
	h = fnv(h, spec->node_name);
	for (int i = 0; i < spec->n_containers; i++) {
		const struct md_container *c = &spec->containers[i];

		h = fnv(fnv(h, c->name), c->image);
		h = fnv_int(h, c->n_command);
		for (int k = 0; k < c->n_command; k++)
			h = fnv(h, c->command[k]);
		h = fnv_int(h, c->n_args);
		for (int k = 0; k < c->n_args; k++)
			h = fnv(h, c->args[k]);
		for (int k = 0; k < c->n_ports; k++)
			h = fnv_int(fnv_int(fnv(h, c->ports[k].name), c->ports[k].port),
				    c->ports[k].proto);
		for (int k = 0; k < c->n_mounts; k++)
			h = fnv(fnv(fnv(h, c->mounts[k].name), c->mounts[k].mount_path),
				c->mounts[k].sub_path);
	}
	for (int i = 0; i < spec->n_volumes; i++)
		h = fnv(fnv(h, spec->volumes[i].name), spec->volumes[i].configmap);
	lab_fmt(out, 16, "%010llx", (unsigned long long)(h & 0xffffffffffULL));
}
