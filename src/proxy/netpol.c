/* netpol.c — NetworkPolicy for the requests the node proxy forwards.
 *
 * Design note (docs/policy.md "L7 Services", docs/proxy.md "NetworkPolicy")
 * --------------------------------------------------------------------------
 * A captured connection has two legs (client pod -> proxy, proxy -> backend
 * pod) and no kernel hook ever sees {client pod, backend pod} on one packet:
 * the backend is chosen per request, here. So the proxy judges the pair the
 * user's policies talk about, per request, with the compiler's own tables:
 *
 *   route reload: md_state --pol_compile(st, NULL)--> struct pol_compiled
 *                 (every pod counts as local, so both the client's egress and
 *                 the backend's ingress are answerable for any pair)
 *   each try:     endpoint chosen (router + balancer) --px_netpol_check-->
 *                   pol_eval(client ip -> endpoint ip:port, TCP)
 *                   allowed --> px_stream_try (pooled or new upstream)
 *                   denied  --> 403, counted by direction, logged; the
 *                               request is never forwarded
 *
 * Invariants:
 *  1. The tables are built from the same md_state as the route table, in
 *     the same reload, all or nothing: a state that does not compile keeps
 *     the last good route table AND the last good tables (px_load fails).
 *  2. The check runs per request (and per retry try, whose endpoint may
 *     differ) BEFORE any upstream is taken from the pool or connected. Pools
 *     are per endpoint, shared by all clients; since no request reaches a
 *     pooled upstream without its own check, one client's allowed upstream
 *     can never carry a denied client's request.
 *  3. A denied pick is not re-routed to another endpoint (as Cilium and
 *     Istio: policy applies to the backend the balancer chose, exactly as
 *     on the direct path where the connect-time LB picks and the policy
 *     then drops). The 403 is not a backend failure: no try was started, so
 *     neither retries, the retry budget nor outlier detection see it.
 *  4. The client is the accepted connection's peer address: in capture mode
 *     the pod's real IP (the kernel admitted exactly that redirected socket
 *     to the proxy, bpf/policy.bpf.c invariant 6). The endpoint port is the
 *     targetPort (endpoints hold pod ports), as policy wants after Service
 *     translation.
 *  5. A client that is not a pod (explicit --service mode, from the node or
 *     loopback) has no egress policy; the backend's ingress is judged with
 *     its address as the peer (ipBlock rules may match it). The node
 *     exemption ("the node may reach its pods") is not granted here: the
 *     proxy relays for someone else.
 *  6. Upstream connections leave from this node's proxy address (capture
 *     mode, when the namespace has it: the lab puts .1 of the node's pod
 *     range on lo, pol_node_proxy_ip), which every node's policy datapath
 *     admits on ingress (bpf/policy.bpf.c invariant 7): the request was
 *     judged here, so a backend on another node must not judge the proxy
 *     as an outside address. Explicit-mode proxies keep the node's address.
 *     IPv6 endpoints (an IPv6 single-stack Service's pods) are reached
 *     from the proxy's IPv6 address the same way (::1 of the node's /64 on
 *     lo, pol_node_proxy_ip6, POL_F_PROXY in every node's IPv6 ipcache),
 *     else from the address the kernel picks.
 *  7. An IPv6 endpoint is judged with the IPv6 tables (pol_eval6, the same
 *     identities: pol_compile.c invariant 7): the client by the address it
 *     came from when that is IPv6, else by its pod's IPv6 (the same
 *     identity), else (no such pod) v4-mapped, which only an IPv6 ipBlock
 *     could name, as no IPv4 address matches an IPv6 block.
 */
#include <errno.h>
#include <ifaddrs.h>
#include <stdlib.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include "zerohop/log.h"
#include "zerohop/net.h"
#include "zerohop/policy.h"
#include "px_int.h"

const char px_err_policy_egress[] = "denied by egress policy";
const char px_err_policy_ingress[] = "denied by ingress policy";

int px_netpol_compile(const struct md_state *st, struct pol_compiled **out)
{
	struct md_err e;
	char eb[1024];
	int rc;

	*out = NULL;
	rc = pol_compile(st, NULL, NULL, out, &e);
	if (rc)
		zh_err("proxy: network policy: %s", md_err_str(&e, eb, sizeof(eb)));
	return rc;
}

/* Invariant 6: this node's proxy address, when the namespace has one. */
static uint32_t px_netpol_find_src(const struct pol_compiled *c)
{
	struct ifaddrs *ifa, *i;
	uint32_t found = 0;

	if (getifaddrs(&ifa))
		return 0;
	for (i = ifa; i && !found; i = i->ifa_next) {
		uint32_t ip;

		if (!i->ifa_addr || i->ifa_addr->sa_family != AF_INET)
			continue;
		ip = ((const struct sockaddr_in *)i->ifa_addr)->sin_addr.s_addr;
		for (int k = 0; k < c->n_ipc; k++)
			if (c->ipc[k].ip == ip && (c->ipc[k].val.flags & POL_F_PROXY)) {
				found = ip;
				break;
			}
	}
	freeifaddrs(ifa);
	return found;
}

/* The same for IPv6: an IPv6 address of this namespace that pc's IPv6
 * ipcache maps to POL_F_PROXY (pol_node_proxy_ip6), into out; else zero. */
static void px_netpol_find_src6(const struct pol_compiled *c, uint8_t out[16])
{
	struct ifaddrs *ifa, *i;

	memset(out, 0, 16);
	if (getifaddrs(&ifa))
		return;
	for (i = ifa; i; i = i->ifa_next) {
		const uint8_t *ip;

		if (!i->ifa_addr || i->ifa_addr->sa_family != AF_INET6)
			continue;
		ip = ((const struct sockaddr_in6 *)i->ifa_addr)->sin6_addr.s6_addr;
		for (int k = 0; k < c->n_ipc6; k++)
			if (!memcmp(c->ipc6[k].ip, ip, 16) && (c->ipc6[k].val.flags & POL_F_PROXY)) {
				memcpy(out, ip, 16);
				freeifaddrs(ifa);
				return;
			}
	}
	freeifaddrs(ifa);
}

void px_netpol_swap(struct px_server *s, struct pol_compiled *pc)
{
	uint32_t src = pc && !s->explicit_mode ? px_netpol_find_src(pc) : 0;
	uint8_t src6[16] = { 0 };
	bool changed;

	if (src != s->src_ip) {
		char a[INET_ADDRSTRLEN];

		inet_ntop(AF_INET, &src, a, sizeof(a));
		zh_info("proxy: upstream source address %s", src ? a : "(the node's)");
	}

	if (pc && !s->explicit_mode)
		px_netpol_find_src6(pc, src6);
	changed = src != s->src_ip || memcmp(src6, s->src_ip6, 16);
	if (memcmp(src6, s->src_ip6, 16)) {
		char a[INET6_ADDRSTRLEN];
		static const uint8_t none[16];

		inet_ntop(AF_INET6, src6, a, sizeof(a));
		zh_info("proxy: upstream IPv6 source address %s", memcmp(src6, none, 16) ? a : "(the kernel's)");
		memcpy(s->src_ip6, src6, 16);
	}
	/* idle upstreams opened from the previous source would keep it (a
	 * Cluster's IPv6 CIDR can arrive after the first requests): closed,
	 * the next request opens one from the new source */
	if (changed) {
		px_pool_close_all(s);
		px_h2up_close_idle(s, UINT64_MAX, false);
	}
	s->src_ip = src;
	pol_compiled_free(s->pol);
	s->pol = pc;
}

int px_netpol_connect(struct px_server *s, struct px_ip ip, uint16_t port)
{
	struct sockaddr_in src = { .sin_family = AF_INET, .sin_addr.s_addr = s->src_ip };
	struct net_addr na = { .len = sizeof(struct sockaddr_in) };
	const struct net_addr *a = &na;
	struct sockaddr_in *sin = (struct sockaddr_in *)&na.ss;
	int fd, one = 1, err;

	static const uint8_t none[16];
	struct sockaddr_in6 src6 = { .sin6_family = AF_INET6 };
	const struct sockaddr *sa = (const struct sockaddr *)&src;
	socklen_t salen = sizeof(src);

	if (ip.family == AF_INET6) {	/* invariant 6: from s->src_ip6 when set */
		struct sockaddr_in6 *sin6 = (struct sockaddr_in6 *)&na.ss;

		na.len = sizeof(*sin6);
		sin6->sin6_family = AF_INET6;
		memcpy(&sin6->sin6_addr, ip.v6, 16);
		sin6->sin6_port = htons(port);
		if (!memcmp(s->src_ip6, none, 16)) {
			fd = net_connect(a);
			if (fd >= 0)
				net_set_nodelay(fd);
			return fd;
		}
		memcpy(&src6.sin6_addr, s->src_ip6, 16);
		sa = (const struct sockaddr *)&src6;
		salen = sizeof(src6);
	} else if (ip.family != AF_INET) {
		return -EAFNOSUPPORT;
	} else {
		sin->sin_family = AF_INET;
		sin->sin_addr.s_addr = ip.v4;
		sin->sin_port = htons(port);
		if (!s->src_ip) {
			fd = net_connect(a);
			if (fd >= 0)
				net_set_nodelay(fd);
			return fd;
		}
	}
	fd = socket(ip.family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	/* the port is chosen at connect() by the whole 4-tuple, not reserved
	 * at bind(): bind-before-connect must not shrink the port space
	 * (IP_BIND_ADDRESS_NO_PORT is an IPPROTO_IP option for both families) */
	if (setsockopt(fd, IPPROTO_IP, IP_BIND_ADDRESS_NO_PORT, &one, sizeof(one)) < 0 ||
	    bind(fd, sa, salen) < 0 ||
	    (connect(fd, (const struct sockaddr *)&a->ss, a->len) < 0 && errno != EINPROGRESS)) {
		err = -errno;
		close(fd);
		return err;
	}
	net_set_nodelay(fd);
	return fd;
}

/* Name of the policy a denial is charged to, for the logs. */
const char *px_netpol_name(const struct pol_compiled *c, uint32_t pol_id)
{
	for (int i = 0; i < c->n_policies; i++)
		if (c->policy_ids[i] == pol_id)
			return c->policy_names[i];
	return "-";
}

bool px_netpol_allows(struct px_server *s, const struct px_conn *c, struct px_ip ip,
		      uint16_t port, uint32_t *reason, uint32_t *pol_id)
{
	static const uint8_t zero[16];
	uint8_t src[16] = { [10] = 0xff, [11] = 0xff };	/* ::ffff:peer_ip */

	if (!s->pol)
		return true;
	if (ip.family != AF_INET6)
		return pol_eval(s->pol, c->peer_ip, ip.v4, port, MD_PROTO_TCP, reason, pol_id);
	/* invariant 7 */
	if (memcmp(c->peer_ip6, zero, 16))
		memcpy(src, c->peer_ip6, 16);
	else if (!px_table_ip6_of4(s->tbl, c->peer_ip, src))
		memcpy(src + 12, &c->peer_ip, 4);
	return pol_eval6(s->pol, src, ip.v6, port, MD_PROTO_TCP, reason, pol_id);
}

bool px_netpol_pair(struct px_server *s, uint32_t src_ip, uint32_t dst_ip, uint16_t port,
		    const char **why)
{
	static char buf[POL_NAME_MAX + 32];	/* one loop, one caller at a time */
	uint32_t reason, pol_id;

	if (!s->pol || pol_eval(s->pol, src_ip, dst_ip, port, MD_PROTO_TCP, &reason, &pol_id))
		return true;
	snprintf(buf, sizeof(buf), "%s of %s", reason == POL_DROP_EGRESS_DENIED ? "egress" : "ingress",
		 px_netpol_name(s->pol, pol_id));
	*why = buf;
	return false;
}

bool px_netpol_check(struct px_stream *st)
{
	struct px_conn *c = st->c;
	struct px_server *s = c->srv;
	uint32_t reason, pol_id;
	int dir;

	if (px_netpol_allows(s, c, st->d.ip, st->d.port, &reason, &pol_id))
		return true;
	dir = reason == POL_DROP_EGRESS_DENIED ? POL_DIR_EGRESS : POL_DIR_INGRESS;
	s->n_pol_denied[dir]++;
	st->err = dir == POL_DIR_EGRESS ? px_err_policy_egress : px_err_policy_ingress;
	{
		/* only denials pay for this (zh_log drops it below --debug) */
		char a[PX_IP_STRLEN], b[PX_IP_STRLEN];

		zh_dbg("proxy: %s -> %s %s (%s)", px_ip_fmt(px_conn_peer(c), 0, a, sizeof(a)),
		       px_ip_fmt(st->d.ip, st->d.port, b, sizeof(b)), st->err,
		       px_netpol_name(s->pol, pol_id));
	}
	return false;	/* the stream answers 403 */
}
