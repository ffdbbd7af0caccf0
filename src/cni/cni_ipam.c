/* cni_ipam.c — the plugin's own IPAM and attachment records (docs/cni.md
 * "IPAM").
 *
 * Layout of DATADIR (one per network name, default CNI_DATA_ROOT/NAME):
 *   lock                 flock(LOCK_EX) around every ADD, DEL, CHECK, GC
 *   ips/A.B.C.D          one file per address in use: "ID IFNAME\n"
 *                        (host-local's layout, so an operator reads it the
 *                        same way)
 *   att/ID:IFNAME        the attachment record (struct cni_rec): address,
 *                        host veth, netns, pod name, adding|ready
 *   last                 the last address handed out (next-fit)
 *
 * Invariants:
 * 1. Every change happens under the lock, so two runtimes calling ADD at
 *    once never get one address, and DEL never races an ADD of the same id.
 * 2. An address file is created (O_EXCL) before the record that names it,
 *    and removed after it: a crash leaves at most an address file whose
 *    owner is written in it, which DEL of that id (or GC) frees.
 * 3. podCIDR's network address, .1 (the node proxy's source, lab_net.c
 *    invariant 6) and the broadcast address are never handed out.
 */
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>

#include "zerohop/fileio.h"
#include "zerohop/paths.h"
#include "cni_int.h"

static int write_file(const char *path, const char *text, bool excl)
{
	int fd, ret = 0;
	size_t n = strlen(text);

	if (excl) {
		fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
		if (fd < 0)
			return -errno;
		if (write(fd, text, n) != (ssize_t)n)
			ret = -EIO;
		close(fd);
		return ret;
	}
	return zh_write_atomic(path, text, n, 0644, false);
}

int cni_lock(const struct cni_req *r, int *fd, struct cni_err *e)
{
	char p[PATH_MAX + 16];
	int ret;

	for (const char *sub = "ips"; sub; sub = strcmp(sub, "ips") ? NULL : "att") {
		snprintf(p, sizeof(p), "%s/%s", r->data_dir, sub);
		ret = zh_mkdir_p(p, 0755);
		if (ret)
			return cni_fail(e, CNI_ERR_IO, "cannot create the IPAM directory", "%s: %s",
					p, strerror(-ret));
	}
	snprintf(p, sizeof(p), "%s/lock", r->data_dir);
	*fd = open(p, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
	if (*fd < 0)
		return cni_fail(e, CNI_ERR_IO, "cannot open the IPAM lock", "%s: %s", p,
				strerror(errno));
	while (flock(*fd, LOCK_EX) < 0) {
		if (errno == EINTR)
			continue;
		ret = errno;
		close(*fd);
		return cni_fail(e, CNI_ERR_IO, "cannot lock the IPAM directory", "%s: %s", p,
				strerror(ret));
	}
	return 0;
}

static void rec_path(const struct cni_req *r, const char *id, const char *ifname, char *buf,
		     size_t len)
{
	snprintf(buf, len, "%s/att/%s:%s", r->data_dir, id, ifname);
}

int cni_rec_load(const struct cni_req *r, const char *id, const char *ifname,
		 struct cni_rec *out)
{
	char p[PATH_MAX + 600], line[PATH_MAX + 64], k[32], v[PATH_MAX];
	FILE *f;

	rec_path(r, id, ifname, p, sizeof(p));
	f = fopen(p, "re");
	if (!f)
		return -errno;
	memset(out, 0, sizeof(*out));
	snprintf(out->id, sizeof(out->id), "%s", id);
	snprintf(out->ifname, sizeof(out->ifname), "%s", ifname);
	while (fgets(line, sizeof(line), f)) {
		if (sscanf(line, "%31s %4095s", k, v) != 2)
			continue;
		if (!strcmp(k, "ip"))
			inet_pton(AF_INET, v, &out->ip);
		else if (!strcmp(k, "veth"))
			snprintf(out->veth, sizeof(out->veth), "%.15s", v);
		else if (!strcmp(k, "netns"))
			snprintf(out->netns, sizeof(out->netns), "%s", v);
		else if (!strcmp(k, "namespace"))
			snprintf(out->ns, sizeof(out->ns), "%.63s", v);
		else if (!strcmp(k, "name"))
			snprintf(out->name, sizeof(out->name), "%.253s", v);
		else if (!strcmp(k, "state"))
			out->ready = !strcmp(v, "ready");
		else if (!strcmp(k, "published"))
			out->published = !strcmp(v, "yes");
		else if (!strcmp(k, "chained"))
			out->chained = !strcmp(v, "yes");
	}
	fclose(f);
	return 0;
}

int cni_rec_save(const struct cni_req *r, const struct cni_rec *rec)
{
	char p[PATH_MAX + 600], text[PATH_MAX + 1024], a[16];

	rec_path(r, rec->id, rec->ifname, p, sizeof(p));
	snprintf(text, sizeof(text),
		 "ip %s\nveth %s\nnetns %s\nnamespace %s\nname %s\nstate %s\npublished %s\nchained %s\n",
		 inet_ntop(AF_INET, &rec->ip, a, sizeof(a)), rec->veth,
		 rec->netns[0] ? rec->netns : "-", rec->ns, rec->name,
		 rec->ready ? "ready" : "adding", rec->published ? "yes" : "no",
		 rec->chained ? "yes" : "no");
	return write_file(p, text, false);
}

void cni_rec_remove(const struct cni_req *r, const char *id, const char *ifname)
{
	char p[PATH_MAX + 600];

	rec_path(r, id, ifname, p, sizeof(p));
	unlink(p);
}

static bool owner_is(const char *path, const char *id, const char *ifname)
{
	char line[512], want[512];
	FILE *f = fopen(path, "re");
	bool yes = false;

	if (!f)
		return false;
	snprintf(want, sizeof(want), "%s %s\n", id, ifname);
	yes = fgets(line, sizeof(line), f) && !strcmp(line, want);
	fclose(f);
	return yes;
}

bool cni_ip_held(const struct cni_req *r, uint32_t ip, const char *id, const char *ifname)
{
	char p[PATH_MAX + 32], a[16];

	snprintf(p, sizeof(p), "%s/ips/%s", r->data_dir, inet_ntop(AF_INET, &ip, a, sizeof(a)));
	return owner_is(p, id, ifname);
}

int cni_ip_alloc(const struct cni_req *r, const char *id, const char *ifname, uint32_t *ip,
		 struct cni_err *e)
{
	uint32_t base = ntohl(r->net), size = r->plen >= 32 ? 1 : 1u << (32 - r->plen);
	uint32_t last = 0, lo = 2, hi = size - 2;	/* invariant 3 */

	if (r->range_lo)	/* rangeStart/rangeEnd, checked inside lo..hi */
		lo = ntohl(r->range_lo) - base;
	if (r->range_hi)
		hi = ntohl(r->range_hi) - base;
	char p[PATH_MAX + 32], owner[512], a[16], cidr[24];
	FILE *f;

	snprintf(cidr, sizeof(cidr), "%s/%d", inet_ntop(AF_INET, &r->net, a, sizeof(a)), r->plen);
	snprintf(p, sizeof(p), "%s/last", r->data_dir);
	f = fopen(p, "re");
	if (f) {
		if (fscanf(f, "%15s", a) == 1 && inet_pton(AF_INET, a, &last) == 1)
			last = ntohl(last) - base;
		fclose(f);
	}
	snprintf(owner, sizeof(owner), "%s %s\n", id, ifname);
	for (uint32_t k = 0, span = hi - lo + 1, start = last >= lo && last <= hi ? last - lo + 1 : 0;
	     size >= 4 && k < span; k++) {
		uint32_t n = htonl(base + lo + (start + k) % span);
		int ret;

		snprintf(p, sizeof(p), "%s/ips/%s", r->data_dir, inet_ntop(AF_INET, &n, a, sizeof(a)));
		ret = write_file(p, owner, true);
		if (ret == -EEXIST)
			continue;
		if (ret)
			return cni_fail(e, CNI_ERR_IO, "cannot record the address", "%s: %s", p,
					strerror(-ret));
		snprintf(p, sizeof(p), "%s/last", r->data_dir);
		snprintf(owner, sizeof(owner), "%s\n", a);
		write_file(p, owner, false);	/* a hint only */
		*ip = n;
		return 0;
	}
	return cni_fail(e, CNI_ERR_NO_ADDRESS, "no free address in the pod range",
			"every address of podCIDR %s is taken (records in %s/ips)", cidr, r->data_dir);
}

int cni_ip_claim(const struct cni_req *r, const char *id, const char *ifname, uint32_t ip,
		 struct cni_err *e)
{
	uint32_t base = ntohl(r->net), h = ntohl(ip) - base, size = 1u << (32 - r->plen);
	char p[PATH_MAX + 32], owner[512], a[16];
	int ret;

	inet_ntop(AF_INET, &ip, a, sizeof(a));
	if (h < 2 || h > size - 2)	/* invariant 3; also outside podCIDR */
		return cni_fail(e, CNI_ERR_CONFIG, "invalid requested address",
				"runtimeConfig.ips: %s is not a pod address of podCIDR", a);
	if (cni_ip_held(r, ip, id, ifname))
		return 0;
	snprintf(p, sizeof(p), "%s/ips/%s", r->data_dir, a);
	snprintf(owner, sizeof(owner), "%s %s\n", id, ifname);
	ret = write_file(p, owner, true);
	if (ret == -EEXIST)
		return cni_fail(e, CNI_ERR_NO_ADDRESS, "requested address in use",
				"runtimeConfig.ips: %s is held by another attachment (%s)", a, p);
	if (ret)
		return cni_fail(e, CNI_ERR_IO, "cannot record the address", "%s: %s", p,
				strerror(-ret));
	return 0;
}

int cni_ip_release(const struct cni_req *r, const char *id, const char *ifname)
{
	char d[PATH_MAX + 8], p[PATH_MAX + 300];
	struct dirent *de;
	DIR *dir;
	int n = 0;

	snprintf(d, sizeof(d), "%s/ips", r->data_dir);
	dir = opendir(d);
	if (!dir)
		return 0;
	while ((de = readdir(dir))) {
		if (de->d_name[0] == '.')
			continue;
		snprintf(p, sizeof(p), "%s/%s", d, de->d_name);
		if (owner_is(p, id, ifname) && !unlink(p))
			n++;
	}
	closedir(dir);
	return n;
}

int cni_rec_each(const struct cni_req *r, int (*fn)(void *arg, const char *id, const char *ifname),
		 void *arg)
{
	char d[PATH_MAX + 8], id[256];
	struct dirent *de;
	DIR *dir;
	int ret = 0;

	snprintf(d, sizeof(d), "%s/att", r->data_dir);
	dir = opendir(d);
	if (!dir)
		return 0;
	while (!ret && (de = readdir(dir))) {
		/* ID:IFNAME — neither may hold ':' (spec; dev_valid_name) */
		char *us = strchr(de->d_name, ':');

		if (de->d_name[0] == '.' || !us || strstr(de->d_name, ".tmp"))
			continue;
		snprintf(id, sizeof(id), "%.*s", (int)(us - de->d_name), de->d_name);
		ret = fn(arg, id, us + 1);
	}
	closedir(dir);
	return ret;
}
