/* cni.c — the CNI protocol: environment, stdin configuration, commands,
 * result and error JSON (cni.h; docs/cni.md).
 *
 * ADD, as steps; a failure at any step undoes the earlier ones (undo())
 * and answers the error JSON, so nothing is left behind:
 *
 *	lock ─▶ record? ──no──▶ allocate /32 ─▶ record "adding" ─▶ veth + routes
 *	           │ yes                                  ▲              │
 *	           ├─ ready, same netns, no drift ─▶ same result          ▼
 *	           └─ otherwise (crash, drift) ─▶ remove its veth ─┘   publish pod
 *	              keep its address                                    │
 *	                                                   record "ready" ◀┘ ─▶ result
 *
 * Invariants:
 * 1. The record is written before the veth and the pod, and names
 *    everything they need (address, veth, pod name), so DEL after a crash
 *    at any step removes all of it; without a record DEL still removes the
 *    veth (named from id and ifname, cni_net.c invariant 2) and frees the
 *    id's addresses (cni_ipam.c invariant 2).
 * 2. DEL never fails for a missing container, netns or record (the spec:
 *    DEL must succeed when resources are already gone), and unpublishes a
 *    pod only while it names this container id (cni_pod.c).
 * 3. Everything is done under the data directory's flock (cni_ipam.c 1).
 * 4. stdout carries exactly one JSON document, or nothing (DEL, CHECK, GC,
 *    STATUS succeed silently).
 *
 * Test hook (not part of the protocol): ZH_CNI_CRASH_AFTER=alloc|veth|publish
 * makes ADD _exit(1) right after that step, without undoing anything, as a
 * crash would (tests/e2e/80-cni-plugin.t).
 */
#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "zerohop/cli.h"
#include "zerohop/json.h"
#include "zerohop/lab.h"
#include "zerohop/log.h"
#include "zerohop/paths.h"
#include "cni_int.h"

static const char *const versions[] = { "0.3.0", "0.3.1", "0.4.0", "1.0.0", "1.1.0" };
#define N_VERSIONS (int)(sizeof(versions) / sizeof(versions[0]))

int cni_fail(struct cni_err *e, int code, const char *msg, const char *fmt, ...)
{
	va_list ap;

	if (e->code)	/* the first failure is the one reported */
		return -1;
	e->code = code;
	snprintf(e->msg, sizeof(e->msg), "%s", msg);
	va_start(ap, fmt);
	vsnprintf(e->details, sizeof(e->details), fmt, ap);
	va_end(ap);
	return -1;
}

char *cni_read_all(int fd, size_t *len)
{
	size_t cap = 4096, n = 0;
	char *b = zh_malloc(cap);
	ssize_t got;

	for (;;) {
		if (cap - n < 2)
			b = zh_realloc(b, cap *= 2);
		got = read(fd, b + n, cap - n - 1);
		if (got < 0 && errno == EINTR)
			continue;
		if (got < 0) {
			free(b);
			return NULL;
		}
		if (!got)
			break;
		n += (size_t)got;
	}
	b[n] = 0;
	*len = n;
	return b;
}

static bool version_ok(const char *v)
{
	for (int i = 0; v && i < N_VERSIONS; i++)
		if (!strcmp(v, versions[i]))
			return true;
	return false;
}

/* Results before 1.0.0 carry "version": "4" in each ips entry. */
static bool pre_1_0(const char *v)
{
	return v && v[0] == '0';
}

static void print_versions(const char *v)
{
	printf("{\"cniVersion\":\"%s\",\"supportedVersions\":[", version_ok(v) ? v : CNI_SPEC_VERSION);
	for (int i = 0; i < N_VERSIONS; i++)
		printf("%s\"%s\"", i ? "," : "", versions[i]);
	printf("]}\n");
}

static void print_error(const struct cni_req *r, const struct cni_err *e)
{
	printf("{\"cniVersion\":\"%s\",\"code\":%d,\"msg\":",
	       version_ok(r->version) ? r->version : CNI_SPEC_VERSION, e->code);
	json_put_str(stdout, e->msg);
	printf(",\"details\":");
	json_put_str(stdout, e->details);
	printf("}\n");
	fflush(stdout);
	zh_err("%s %s: %s: %s", r->cmd ? r->cmd : "-", r->id ? r->id : "-", e->msg, e->details);
}

void cni_ip6_of(const struct cni_req *r, uint32_t ip, struct in6_addr *out)
{
	uint32_t host = htonl(ntohl(ip) & ((1u << (32 - r->plen)) - 1)), low;

	*out = r->net6;
	memcpy(&low, &out->s6_addr[12], 4);
	low |= host;
	memcpy(&out->s6_addr[12], &low, 4);
}

static void print_result(const struct cni_req *r, const struct cni_rec *rec)
{
	char a[16], a6[INET6_ADDRSTRLEN], mac[18];
	struct in6_addr ip6;

	cni_pod_mac(rec->ip, mac);
	inet_ntop(AF_INET, &rec->ip, a, sizeof(a));
	printf("{\"cniVersion\":\"%s\",\"interfaces\":[{\"name\":\"%s\",\"mac\":\"%s\"},"
	       "{\"name\":", r->version, rec->veth, LAB_GW_MAC);
	json_put_str(stdout, rec->ifname);
	printf(",\"mac\":\"%s\",\"sandbox\":", mac);
	json_put_str(stdout, rec->netns);
	printf("}],\"ips\":[");
	if (!r->v6only)
		printf("{%s\"address\":\"%s/32\",\"gateway\":\"%s\",\"interface\":1}",
		       pre_1_0(r->version) ? "\"version\":\"4\"," : "", a, LAB_GW);
	if (r->plen6) {	/* dual-stack: the IPv6 beside it, IPv4 first (the lab's primary) */
		cni_ip6_of(r, rec->ip, &ip6);
		inet_ntop(AF_INET6, &ip6, a6, sizeof(a6));
		printf("%s{%s\"address\":\"%s/128\",\"gateway\":\"%s\",\"interface\":1}",
		       r->v6only ? "" : ",", pre_1_0(r->version) ? "\"version\":\"6\"," : "", a6,
		       LAB_GW6);
	}
	printf("],\"routes\":[");
	if (!r->v6only)
		printf("{\"dst\":\"0.0.0.0/0\",\"gw\":\"%s\"}", LAB_GW);
	if (r->plen6)
		printf("%s{\"dst\":\"::/0\",\"gw\":\"%s\"}", r->v6only ? "" : ",", LAB_GW6);
	printf("],\"dns\":{}}\n");
}

static void crash_hook(const char *step)
{
	const char *c = getenv("ZH_CNI_CRASH_AFTER");

	if (c && !strcmp(c, step)) {
		fprintf(stderr, "zerohop-cni: ZH_CNI_CRASH_AFTER=%s: exiting without cleanup\n", step);
		_exit(1);
	}
}

/* ---- environment and configuration ------------------------------------- */

/* Container ids: alphanumeric, '_', '.', '-' (the spec); ifnames: what the
 * kernel takes (dev_valid_name): 1-15 bytes, no '/', ':' or space. */
static bool id_ok(const char *s)
{
	if (!s || !*s || strlen(s) > 200)
		return false;
	for (; *s; s++)
		if (!isalnum((unsigned char)*s) && *s != '_' && *s != '.' && *s != '-')
			return false;
	return true;
}

static bool ifname_ok(const char *s)
{
	if (!s || !*s || strlen(s) > 15 || !strcmp(s, ".") || !strcmp(s, ".."))
		return false;
	for (; *s; s++)
		if (*s == '/' || *s == ':' || isspace((unsigned char)*s))
			return false;
	return true;
}

/* A DNS-1123 label (namespaces, max 63) or subdomain (pod names, max 253). */
static bool dns_ok(const char *s, size_t max, bool dots)
{
	size_t n = strlen(s);

	if (!n || n > max || !isalnum((unsigned char)s[0]) || !isalnum((unsigned char)s[n - 1]))
		return false;
	for (; *s; s++)
		if (!(islower((unsigned char)*s) || isdigit((unsigned char)*s) || *s == '-' ||
		      (dots && *s == '.')))
			return false;
	return true;
}

/* CNI_ARGS: "K=V;K=V". Read: the Kubernetes pod names and IP (the address
 * the runtime asks for: host-local's convention, what podman --ip sends);
 * others are ignored (as IgnoreUnknown asks). */
static int parse_args(struct cni_req *r, struct cni_err *e)
{
	char buf[2048], *save = NULL;

	snprintf(r->pod_ns, sizeof(r->pod_ns), "default");
	/* no pod name given: the container id, made a DNS subdomain */
	snprintf(r->pod_name, sizeof(r->pod_name), "%s", r->id ? r->id : "");
	for (char *p = r->pod_name; *p; p++)
		*p = *p == '_' ? '-' : (char)tolower((unsigned char)*p);
	if (!r->args || !*r->args)
		return 0;
	if (strlen(r->args) >= sizeof(buf))
		return cni_fail(e, CNI_ERR_ENV, "CNI_ARGS is too long", "%zu bytes", strlen(r->args));
	snprintf(buf, sizeof(buf), "%s", r->args);
	for (char *kv = strtok_r(buf, ";", &save); kv; kv = strtok_r(NULL, ";", &save)) {
		char *eq = strchr(kv, '=');

		if (!eq)
			return cni_fail(e, CNI_ERR_ENV, "invalid CNI_ARGS",
					"'%s' is not KEY=VALUE", kv);
		*eq = 0;
		/* names matter only to a publishing ADD: DEL must not fail on
		 * them (invariant 2), and a runtime that publishes itself may
		 * pass any container name */
		if (!strcmp(kv, "K8S_POD_NAMESPACE") || !strcmp(kv, "K8S_POD_NAME")) {
			bool label = !strcmp(kv, "K8S_POD_NAMESPACE");

			if (!dns_ok(eq + 1, label ? 63 : 253, !label)) {
				if (!r->publish || strcmp(r->cmd, "ADD"))
					continue;
				return cni_fail(e, CNI_ERR_ENV, "invalid CNI_ARGS",
						"%s '%s' is not a DNS-1123 %s", kv, eq + 1,
						label ? "label" : "subdomain");
			}
		}
		if (!strcmp(kv, "IP")) {	/* host-local's convention; podman --ip */
			char a[32], *sl;

			snprintf(a, sizeof(a), "%s", eq + 1);
			sl = strchr(a, '/');
			if (sl)
				*sl = 0;
			if (inet_pton(AF_INET, a, &r->want_ip) != 1)
				return cni_fail(e, CNI_ERR_ENV, "invalid CNI_ARGS",
						"IP '%s' is not an IPv4 address", eq + 1);
			continue;
		}
		if (!strcmp(kv, "K8S_POD_NAMESPACE")) {
			if (!dns_ok(eq + 1, 63, false))
				return cni_fail(e, CNI_ERR_ENV, "invalid CNI_ARGS",
						"K8S_POD_NAMESPACE '%s' is not a DNS-1123 label", eq + 1);
			snprintf(r->pod_ns, sizeof(r->pod_ns), "%s", eq + 1);
			r->k8s_names = true;
		} else if (!strcmp(kv, "K8S_POD_NAME")) {
			if (!dns_ok(eq + 1, 253, true))
				return cni_fail(e, CNI_ERR_ENV, "invalid CNI_ARGS",
						"K8S_POD_NAME '%s' is not a DNS-1123 subdomain", eq + 1);
			snprintf(r->pod_name, sizeof(r->pod_name), "%s", eq + 1);
			r->k8s_names = true;
		}
	}
	return 0;
}

static int conf_str(const struct cni_req *r, const char *key, bool required, const char **out,
		    struct cni_err *e)
{
	const struct jv *v = jv_get(r->conf, key);

	*out = NULL;
	if (!v && !required)
		return 0;
	if (!jv_str(v) || !*jv_str(v))
		return cni_fail(e, CNI_ERR_CONFIG, "invalid network config",
				"field '%s': %s", key, v ? "expected a non-empty string" : "required");
	*out = jv_str(v);
	return 0;
}

/* rangeStart/rangeEnd (host-local's names): a part of podCIDR, when
 * something else hands out the rest (the lab's own process pods). */
static int parse_range(struct cni_req *r, struct cni_err *e)
{
	static const char *const keys[] = { "rangeStart", "rangeEnd" };
	uint32_t *out[] = { &r->range_lo, &r->range_hi }, base = ntohl(r->net);
	uint32_t size = 1u << (32 - r->plen);

	for (int i = 0; i < 2; i++) {
		const char *v;
		uint32_t h;

		if (conf_str(r, keys[i], false, &v, e))
			return -1;
		if (!v)
			continue;
		if (inet_pton(AF_INET, v, out[i]) != 1 || (h = ntohl(*out[i]) - base) < 2 ||
		    h > size - 2)
			return cni_fail(e, CNI_ERR_CONFIG, "invalid network config",
					"field '%s': '%s' is not a pod address of podCIDR (not its first two or last)",
					keys[i], v);
	}
	if (r->range_lo && r->range_hi && ntohl(r->range_lo) > ntohl(r->range_hi))
		return cni_fail(e, CNI_ERR_CONFIG, "invalid network config",
				"field 'rangeStart' is after 'rangeEnd'");
	return 0;
}

/* podCIDR6 (optional): a dual-stack network. Each pod's IPv6 is derived
 * from its IPv4 (cni_ip6_of), so the prefix leaves at least 32 host bits
 * and is one pod CIDR per node as podCIDR is (a /64 in the lab). */
static int parse_cidr6(struct cni_req *r, struct cni_err *e)
{
	char net[64], *slash;
	const char *v;

	if (conf_str(r, "podCIDR6", false, &v, e))
		return -1;
	if (!v)
		return 0;
	snprintf(net, sizeof(net), "%s", v);
	slash = strchr(net, '/');
	if (slash)
		*slash++ = 0;
	r->plen6 = slash ? atoi(slash) : -1;
	if (!slash || inet_pton(AF_INET6, net, &r->net6) != 1 || r->plen6 < 16 || r->plen6 > 96)
		goto bad;
	for (int bit = r->plen6; bit < 128; bit++)
		if (r->net6.s6_addr[bit / 8] & (0x80 >> (bit % 8)))
			goto bad;
	return 0;
bad:
	r->plen6 = 0;
	return cni_fail(e, CNI_ERR_CONFIG, "invalid network config",
			"field 'podCIDR6': '%s' is not an IPv6 network from /16 to /96 (host bits zero; the low 32 bits carry the pod's IPv4 host part)",
			v);
}

/* ipv6Only (optional, needs podCIDR6): an IPv6-only network. Addresses
 * are still handed out from podCIDR, as an index space: the pod's IPv6 is
 * derived from that index (cni_ip6_of) and its IPv4 is configured nowhere,
 * as the lab numbers its IPv6-only process pods (lab.h v6only). */
static int parse_v6only(struct cni_req *r, struct cni_err *e)
{
	const struct jv *v = jv_get(r->conf, "ipv6Only");

	if (!v)
		return 0;
	if (!jv_is(v, JV_BOOL))
		return cni_fail(e, CNI_ERR_CONFIG, "invalid network config",
				"field 'ipv6Only': expected true or false");
	if (v->b && !r->plen6)
		return cni_fail(e, CNI_ERR_CONFIG, "invalid network config",
				"field 'ipv6Only': needs 'podCIDR6' (the pods' IPv6 range)");
	r->v6only = v->b;
	return 0;
}

static int parse_conf(struct cni_req *r, const char *text, size_t len, struct cni_err *e)
{
	const char *cidr, *dd, *want;
	const struct jv *mtu, *pub;
	char err[160], net[32], *slash;
	int ret;

	r->conf = jv_parse(text, len, err, sizeof(err));
	if (!r->conf)
		return cni_fail(e, CNI_ERR_DECODE, "failed to decode the network configuration",
				"stdin: %s", err);
	if (!jv_is(r->conf, JV_OBJ))
		return cni_fail(e, CNI_ERR_DECODE, "failed to decode the network configuration",
				"stdin: expected a JSON object");
	r->version = jv_str(jv_get(r->conf, "cniVersion"));
	if (!r->version)
		return cni_fail(e, CNI_ERR_CONFIG, "invalid network config",
				"field 'cniVersion': required");
	if (!version_ok(r->version))
		return cni_fail(e, CNI_ERR_VERSION, "incompatible CNI version",
				"config has cniVersion '%s'; this plugin supports 0.3.0, 0.3.1, 0.4.0, 1.0.0, 1.1.0",
				r->version);
	if (conf_str(r, "name", true, &r->name, e))
		return -1;
	if (!id_ok(r->name))
		return cni_fail(e, CNI_ERR_CONFIG, "invalid network config",
				"field 'name': '%s' must be alphanumeric, '_', '.' or '-'", r->name);
	if (!strcmp(r->cmd, "STATUS") || !strcmp(r->cmd, "GC")) {
		if (conf_str(r, "stateDir", true, &r->state_dir, e))
			return -1;
	} else if (conf_str(r, "node", true, &r->node, e) ||
		   conf_str(r, "podCIDR", true, &cidr, e) ||
		   conf_str(r, "stateDir", true, &r->state_dir, e)) {
		return -1;
	} else {
		snprintf(net, sizeof(net), "%s", cidr);
		slash = strchr(net, '/');
		if (slash)
			*slash++ = 0;
		r->plen = slash ? atoi(slash) : -1;
		if (!slash || inet_pton(AF_INET, net, &r->net) != 1 || r->plen < 8 || r->plen > 30 ||
		    (ntohl(r->net) & ((1u << (32 - r->plen)) - 1)))
			return cni_fail(e, CNI_ERR_CONFIG, "invalid network config",
					"field 'podCIDR': '%s' is not an IPv4 network from /8 to /30 (A.B.C.D/N, host bits zero)",
					cidr);
	}
	if (conf_str(r, "labelsDir", false, &r->labels_dir, e) || conf_str(r, "dataDir", false, &dd, e))
		return -1;
	ret = snprintf(r->data_dir, sizeof(r->data_dir), "%s/%s", CNI_DATA_ROOT, r->name);
	if (dd)
		ret = snprintf(r->data_dir, sizeof(r->data_dir), "%s", dd);
	if (ret >= (int)sizeof(r->data_dir) - 64)
		return cni_fail(e, CNI_ERR_CONFIG, "invalid network config", "field 'dataDir': too long");
	mtu = jv_get(r->conf, "mtu");
	if (mtu && (!jv_is(mtu, JV_NUM) || mtu->num < 68 || mtu->num > 65535 ||
		    mtu->num != (int)mtu->num))
		return cni_fail(e, CNI_ERR_CONFIG, "invalid network config",
				"field 'mtu': expected an integer from 68 to 65535");
	r->mtu = mtu ? (int)mtu->num : 0;
	pub = jv_get(r->conf, "publish");
	if (pub && !jv_is(pub, JV_BOOL))
		return cni_fail(e, CNI_ERR_CONFIG, "invalid network config",
				"field 'publish': expected true or false");
	r->publish = !pub || pub->b;
	/* the "ips" capability (CNI conventions): the runtime asks for an address */
	want = jv_str(jv_at(jv_get(jv_get(r->conf, "runtimeConfig"), "ips"), 0));
	if (want) {
		snprintf(net, sizeof(net), "%s", want);
		slash = strchr(net, '/');
		if (slash)
			*slash = 0;
		if (inet_pton(AF_INET, net, &r->want_ip) != 1)
			return cni_fail(e, CNI_ERR_CONFIG, "invalid network config",
					"runtimeConfig.ips: '%s' is not an IPv4 address", want);
	}
	if (r->plen && (parse_range(r, e) || parse_cidr6(r, e) || parse_v6only(r, e)))
		return -1;
	return 0;
}

/* The variables each command needs (spec "Parameters"). */
static int parse_env(struct cni_req *r, struct cni_err *e)
{
	bool add = !strcmp(r->cmd, "ADD"), check = !strcmp(r->cmd, "CHECK");

	r->id = getenv("CNI_CONTAINERID");
	r->netns = getenv("CNI_NETNS");
	r->ifname = getenv("CNI_IFNAME");
	r->args = getenv("CNI_ARGS");
	if (r->netns && !*r->netns)
		r->netns = NULL;
	if (!r->id || !*r->id)
		return cni_fail(e, CNI_ERR_ENV, "CNI_CONTAINERID is not set", "required by %s", r->cmd);
	if (!id_ok(r->id))
		return cni_fail(e, CNI_ERR_ENV, "invalid CNI_CONTAINERID",
				"'%s': alphanumeric, '_', '.' or '-' only", r->id);
	if (!r->ifname || !*r->ifname)
		return cni_fail(e, CNI_ERR_ENV, "CNI_IFNAME is not set", "required by %s", r->cmd);
	if (!ifname_ok(r->ifname))
		return cni_fail(e, CNI_ERR_ENV, "invalid CNI_IFNAME",
				"'%s': 1-15 bytes, no '/', ':' or white space", r->ifname);
	if ((add || check) && !r->netns)
		return cni_fail(e, CNI_ERR_ENV, "CNI_NETNS is not set", "required by %s", r->cmd);
	if ((add || check) && access(r->netns, R_OK))
		return cni_fail(e, CNI_ERR_CONTAINER, "the container's network namespace does not exist",
				"CNI_NETNS %s: %s", r->netns, strerror(errno));
	cni_veth_name(r->id, r->ifname, r->veth);
	return parse_args(r, e);
}

/* ---- commands ---------------------------------------------------------- */

/* Remove everything an attachment may have (invariant 1): veth, pod,
 * addresses, record. Used by DEL, GC and a failed ADD. */
static void undo(const struct cni_req *r, const char *id, const char *ifname)
{
	struct cni_rec rec;
	char veth[16];

	cni_veth_name(id, ifname, veth);
	if (!cni_rec_load(r, id, ifname, &rec)) {
		if (rec.veth[0] && strcmp(rec.veth, veth))
			cni_net_del(rec.veth);
		if (rec.published && r->state_dir)
			cni_pod_unpublish(r->state_dir, rec.ns, rec.name, id);
	} else if (r->state_dir && r->k8s_names && r->id && !strcmp(id, r->id)) {
		/* no record: the names the runtime gave, if the pod still
		 * names this container */
		cni_pod_unpublish(r->state_dir, r->pod_ns, r->pod_name, id);
	}
	cni_net_del(veth);
	cni_ip_release(r, id, ifname);
	cni_rec_remove(r, id, ifname);
}

/* A fresh record of this invocation's attachment (state "adding"). */
static void rec_init(struct cni_rec *rec, const struct cni_req *r, uint32_t ip)
{
	memset(rec, 0, sizeof(*rec));
	snprintf(rec->id, sizeof(rec->id), "%s", r->id);
	snprintf(rec->ifname, sizeof(rec->ifname), "%s", r->ifname);
	snprintf(rec->netns, sizeof(rec->netns), "%s", r->netns);
	snprintf(rec->ns, sizeof(rec->ns), "%s", r->pod_ns);
	snprintf(rec->name, sizeof(rec->name), "%s", r->pod_name);
	rec->ip = ip;
}

/* Chained after an interface plugin (bridge, ptp, ...): its prevResult
 * has the address; publish the pod with it and pass the result on. No veth,
 * no address of ours (so no podCIDR6 address either, and ipv6Only does
 * not apply: its IPv4 is published alone). */
static int add_chained(struct cni_req *r, const struct jv *prev, struct cni_err *e)
{
	const char *paddr = jv_str(jv_get(jv_at(jv_get(prev, "ips"), 0), "address"));
	struct cni_rec rec;
	char a[48], *sl;
	uint32_t ip;

	r->plen6 = 0;
	r->v6only = false;
	snprintf(a, sizeof(a), "%s", paddr ? paddr : "");
	sl = strchr(a, '/');
	if (sl)
		*sl = 0;
	if (!paddr || inet_pton(AF_INET, a, &ip) != 1)
		return cni_fail(e, CNI_ERR_CONFIG, "invalid network config",
				"prevResult: no IPv4 ips[0].address to publish (chained after a plugin that gave none)");
	if (!cni_rec_load(r, r->id, r->ifname, &rec) && rec.published &&
	    (strcmp(rec.ns, r->pod_ns) || strcmp(rec.name, r->pod_name)))
		cni_pod_unpublish(r->state_dir, rec.ns, rec.name, r->id);
	rec_init(&rec, r, ip);
	rec.chained = true;
	rec.published = r->publish;
	if (cni_rec_save(r, &rec) || (r->publish && cni_pod_publish(r, ip, e)) ||
	    (rec.ready = true, cni_rec_save(r, &rec))) {
		cni_fail(e, CNI_ERR_IO, "cannot write the attachment record", "%s", r->data_dir);
		undo(r, r->id, r->ifname);
		return -1;
	}
	printf("{\"cniVersion\":\"%s\"", r->version);	/* prevResult, in our version */
	for (int i = 0; i < prev->n; i++) {
		if (!strcmp(prev->keys[i], "cniVersion"))
			continue;
		printf(",");
		json_put_str(stdout, prev->keys[i]);
		printf(":");
		jv_print(stdout, prev->items[i]);
	}
	printf("}\n");
	return 0;
}

static int cmd_add(struct cni_req *r, struct cni_err *e)
{
	const struct jv *prev = jv_get(r->conf, "prevResult");
	struct cni_rec rec;
	char drift[1024];
	uint32_t ip = 0;

	if (jv_is(prev, JV_OBJ))
		return add_chained(r, prev, e);

	if (!cni_rec_load(r, r->id, r->ifname, &rec)) {
		/* ADD again for the same attachment */
		if (rec.ready && !strcmp(rec.netns, r->netns)) {
			cni_net_check(r, &rec, drift, sizeof(drift));
			if (!drift[0] && (!r->publish || cni_pod_matches(r, &rec)) &&
			    (!r->want_ip || r->want_ip == rec.ip)) {
				print_result(r, &rec);
				return 0;
			}
		}
		/* half made (a crash) or drifted: rebuild on the same address */
		zh_warn("ADD %s/%s: repairing an earlier attachment (%s)", r->id, r->ifname,
			rec.ready ? "drifted" : "left half made");
		cni_net_del(rec.veth);
		if (rec.published && (strcmp(rec.ns, r->pod_ns) || strcmp(rec.name, r->pod_name)))
			cni_pod_unpublish(r->state_dir, rec.ns, rec.name, r->id);
		if (rec.ip && cni_ip_held(r, rec.ip, r->id, r->ifname) &&
		    (!r->want_ip || r->want_ip == rec.ip))
			ip = rec.ip;
		else if (rec.ip)
			cni_ip_release(r, r->id, r->ifname);
	}
	if (!ip && r->want_ip) {
		if (cni_ip_claim(r, r->id, r->ifname, r->want_ip, e))
			goto fail;
		ip = r->want_ip;
	}
	if (!ip && cni_ip_alloc(r, r->id, r->ifname, &ip, e))
		goto fail;
	rec_init(&rec, r, ip);
	snprintf(rec.veth, sizeof(rec.veth), "%s", r->veth);
	rec.published = r->publish;	/* may be: DEL then looks (it checks the owner) */
	if (cni_rec_save(r, &rec)) {
		cni_fail(e, CNI_ERR_IO, "cannot write the attachment record", "%s: %s", r->data_dir,
			 strerror(errno));
		goto fail;
	}
	crash_hook("alloc");
	if (cni_net_add(r, ip, e))
		goto fail;
	crash_hook("veth");
	if (r->publish && cni_pod_publish(r, ip, e))
		goto fail;
	crash_hook("publish");
	rec.ready = true;
	if (cni_rec_save(r, &rec)) {
		cni_fail(e, CNI_ERR_IO, "cannot write the attachment record", "%s: %s", r->data_dir,
			 strerror(errno));
		goto fail;
	}
	print_result(r, &rec);
	return 0;
fail:
	undo(r, r->id, r->ifname);
	return -1;
}

static int cmd_del(struct cni_req *r, struct cni_err *e)
{
	undo(r, r->id, r->ifname);
	return 0;
}

static int cmd_check(struct cni_req *r, struct cni_err *e)
{
	const struct jv *prev = jv_get(r->conf, "prevResult");
	const char *paddr = jv_str(jv_get(jv_at(jv_get(prev, "ips"), 0), "address"));
	char drift[1024], want[INET6_ADDRSTRLEN + 1], a[INET6_ADDRSTRLEN];
	struct cni_rec rec;
	size_t off;

	if (!jv_is(prev, JV_OBJ))
		return cni_fail(e, CNI_ERR_CONFIG, "invalid network config",
				"field 'prevResult': CHECK needs the result of ADD");
	if (cni_rec_load(r, r->id, r->ifname, &rec))
		return cni_fail(e, CNI_ERR_CONTAINER, "unknown container",
				"no attachment %s/%s in %s (ADD never succeeded, or DEL ran)", r->id,
				r->ifname, r->data_dir);
	if (!rec.ready)
		return cni_fail(e, CNI_ERR_DRIFT, "the attachment has drifted",
				"ADD did not finish for %s/%s", r->id, r->ifname);
	if (rec.chained)	/* its IPv4 alone, whatever the config says (add_chained) */
		r->v6only = false;
	cni_net_check(r, &rec, drift, sizeof(drift));
	off = strlen(drift);
	/* the address, whatever its prefix (chained: the other plugin's /24) */
	snprintf(want, sizeof(want), "%s/", cni_pod_ip(r, rec.ip, a));
	if (paddr && strncmp(paddr, want, strlen(want)) && strcmp(paddr, a))
		off += (size_t)snprintf(drift + off, sizeof(drift) - off,
					"%sprevResult has %s, the attachment %s", off ? "; " : "",
					paddr, a);
	if (off < sizeof(drift) && r->publish && !cni_pod_matches(r, &rec))
		snprintf(drift + off, sizeof(drift) - off,
			 "%spod %s/%s is not published with %s in %s", off ? "; " : "", rec.ns,
			 rec.name, a, r->state_dir);
	if (drift[0])
		return cni_fail(e, CNI_ERR_DRIFT, "the attachment has drifted", "%s", drift);
	return 0;
}

struct gc_ctx {
	struct cni_req *r;
	const struct jv *valid;
	int removed;
};

static int gc_one(void *arg, const char *id, const char *ifname)
{
	struct gc_ctx *g = arg;

	for (int i = 0; g->valid && i < g->valid->n; i++) {
		const struct jv *a = jv_at(g->valid, i);
		const char *vi = jv_str(jv_get(a, "containerID")), *vf = jv_str(jv_get(a, "ifname"));

		if (vi && vf && !strcmp(vi, id) && !strcmp(vf, ifname))
			return 0;
	}
	zh_info("GC: removing stale attachment %s/%s", id, ifname);
	undo(g->r, id, ifname);
	g->removed++;
	return 0;
}

static int cmd_gc(struct cni_req *r, struct cni_err *e)
{
	struct gc_ctx g = { r, jv_get(r->conf, "cni.dev/valid-attachments"), 0 };

	if (g.valid && !jv_is(g.valid, JV_ARR))
		return cni_fail(e, CNI_ERR_CONFIG, "invalid network config",
				"field 'cni.dev/valid-attachments': expected an array");
	return cni_rec_each(r, gc_one, &g);
}

static int cmd_status(struct cni_req *r, struct cni_err *e)
{
	struct stat st;

	if (stat(r->state_dir, &st) || !S_ISDIR(st.st_mode))
		return cni_fail(e, CNI_ERR_UNAVAILABLE, "plugin not available",
				"the node's state directory %s does not exist (is the agent installed?)",
				r->state_dir);
	return 0;
}

static int run(struct cni_req *r, struct cni_err *e)
{
	static const struct {
		const char *name;
		int (*fn)(struct cni_req *, struct cni_err *);
		bool locked, env;
	} cmds[] = {
		{ "ADD", cmd_add, true, true },
		{ "DEL", cmd_del, true, true },
		{ "CHECK", cmd_check, true, true },
		{ "GC", cmd_gc, true, false },
		{ "STATUS", cmd_status, false, false },
	};
	size_t len = 0;
	char *in;
	int i, lock = -1, ret;

	r->cmd = getenv("CNI_COMMAND");
	if (!r->cmd || !*r->cmd)
		return cni_fail(e, CNI_ERR_ENV, "CNI_COMMAND is not set",
				"expected ADD, DEL, CHECK, VERSION, GC or STATUS");
	in = cni_read_all(0, &len);
	if (!in)
		return cni_fail(e, CNI_ERR_IO, "cannot read stdin", "%s", strerror(errno));
	if (!strcmp(r->cmd, "VERSION")) {
		struct jv *v = jv_parse(in, len, NULL, 0);

		print_versions(jv_str(jv_get(v, "cniVersion")));
		jv_free(v);
		free(in);
		return 0;
	}
	for (i = 0; i < (int)(sizeof(cmds) / sizeof(cmds[0])) && strcmp(cmds[i].name, r->cmd); i++)
		;
	if (i == (int)(sizeof(cmds) / sizeof(cmds[0]))) {
		free(in);
		return cni_fail(e, CNI_ERR_ENV, "unknown CNI_COMMAND",
				"'%s': expected ADD, DEL, CHECK, VERSION, GC or STATUS", r->cmd);
	}
	ret = parse_conf(r, in, len, e);
	free(in);
	if (ret || (cmds[i].env && parse_env(r, e)))
		return -1;
	if (cmds[i].locked && cni_lock(r, &lock, e))
		return -1;
	ret = cmds[i].fn(r, e);
	if (lock >= 0)
		close(lock);
	return ret;
}

int cli_cni(int argc, char **argv)
{
	struct cni_req r = { 0 };
	struct cni_err e = { 0 };
	int ret;

	if (argc > 1) {
		bool help = !strcmp(argv[1], "-h") || !strcmp(argv[1], "--help");

		fprintf(help ? stdout : stderr,
			"usage: CNI_COMMAND=ADD|DEL|CHECK|VERSION|GC|STATUS CNI_CONTAINERID=ID CNI_NETNS=PATH\n"
			"       CNI_IFNAME=NAME [CNI_ARGS=K8S_POD_NAMESPACE=NS;K8S_POD_NAME=NAME] zerohop cni < CONFIG.json\n"
			"zerohop as a CNI plugin (spec %s); installed as %s it needs no `cni` word.\n"
			"config: {\"cniVersion\", \"name\", \"type\": \"%s\", \"node\", \"podCIDR\", \"stateDir\",\n"
			"         [\"dataDir\", \"labelsDir\", \"mtu\"]}  (docs/cni.md)\n",
			CNI_SPEC_VERSION, CNI_PLUGIN_NAME, CNI_PLUGIN_NAME);
		return help ? 0 : 2;
	}
	zh_log_init(CNI_PLUGIN_NAME, ZH_WARN);
	ret = run(&r, &e);
	if (ret)
		print_error(&r, &e);
	fflush(stdout);
	jv_free(r.conf);
	return ret ? 1 : 0;
}
