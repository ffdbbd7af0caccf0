/* test_datapath.c — the policy datapath on real sockets in the real kernel.
 *
 * A private network namespace has "pods" a, b, c (addresses on lo) and a
 * node address; the test process joins a cgroup of its own (zhP-dp-PID) on
 * which pol_open() attaches the cgroup_skb programs, so every socket it makes
 * is policed exactly like a pod's socket under a node cgroup. Checked:
 * allowed/denied TCP connects per direction and port (named ports), replies
 * to an ingress-isolated client, node exemption, UDP flows and replies,
 * generation no-op, revocation of an established connection, drop counters
 * per reason and per policy, all-or-nothing sync on a limit, adoption of pins,
 * and an agent restart that keeps the generation when nothing changed.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "pol_test.h"
#include "zerohop/model.h"
#include "zerohop/policy.h"

#define A "10.250.0.1"
#define B "10.250.0.2"
#define C "10.250.0.3"
#define NODE "10.250.0.9"

static const char *pods_yaml =
	"apiVersion: v1\nkind: Namespace\nmetadata: {name: x}\n---\n"
	"apiVersion: v1\nkind: Pod\nmetadata: {name: a, namespace: x, labels: {app: a}}\n"
	"spec: {nodeName: node-a, containers: [{name: c, ports: [{name: http, containerPort: 8080}]}]}\n"
	"status: {phase: Running, podIP: " A "}\n---\n"
	"apiVersion: v1\nkind: Pod\nmetadata: {name: b, namespace: x, labels: {app: b}}\n"
	"spec: {nodeName: node-a, containers: [{name: c, ports: [{name: http, containerPort: 8080},"
	" {name: dns, containerPort: 8081, protocol: UDP}]}]}\n"
	"status: {phase: Running, podIP: " B "}\n---\n"
	"apiVersion: v1\nkind: Pod\nmetadata: {name: c, namespace: x, labels: {app: c}}\n"
	"spec: {nodeName: node-a, containers: [{name: c}]}\n"
	"status: {phase: Running, podIP: " C "}\n---\n"
	"apiVersion: networking.k8s.io/v1\nkind: NetworkPolicy\n"
	"metadata: {name: a-deny-ingress, namespace: x}\n"
	"spec: {podSelector: {matchLabels: {app: a}}, policyTypes: [Ingress]}\n---\n"
	"apiVersion: networking.k8s.io/v1\nkind: NetworkPolicy\n"
	"metadata: {name: c-deny-egress, namespace: x}\n"
	"spec: {podSelector: {matchLabels: {app: c}}, policyTypes: [Egress]}\n---\n"
	/* CIDR classes in the tables (the restart check reads them back too);
	 * reaches nothing the probes use */
	"apiVersion: networking.k8s.io/v1\nkind: NetworkPolicy\n"
	"metadata: {name: c-egress-doc, namespace: x}\n"
	"spec: {podSelector: {matchLabels: {app: c}}, policyTypes: [Egress], egress: [{to: "
	"[{ipBlock: {cidr: 192.0.2.0/24, except: [192.0.2.128/25]}}], ports: [{port: 9}]}]}\n---\n";

static const char *allow_v1 =
	"apiVersion: networking.k8s.io/v1\nkind: NetworkPolicy\n"
	"metadata: {name: b-allow, namespace: x}\n"
	"spec:\n  podSelector: {matchLabels: {app: b}}\n"
	"  ingress:\n  - from: [{podSelector: {matchLabels: {app: a}}}]\n"
	"    ports: [{port: http}, {port: dns, protocol: UDP}]\n";

static const char *allow_v2 =	/* http removed: revokes a -> b:8080 */
	"apiVersion: networking.k8s.io/v1\nkind: NetworkPolicy\n"
	"metadata: {name: b-allow, namespace: x}\n"
	"spec:\n  podSelector: {matchLabels: {app: b}}\n"
	"  ingress:\n  - from: [{podSelector: {matchLabels: {app: a}}}]\n"
	"    ports: [{port: dns, protocol: UDP}]\n";

static struct md_state *state_of(const char *policy)
{
	struct md_state *st = md_state_new();
	struct md_err err;
	char buf[900];

	if (md_state_add_buf(st, "pods.yaml", pods_yaml, strlen(pods_yaml), &err) ||
	    md_state_add_buf(st, "allow.yaml", policy, strlen(policy), &err) ||
	    md_state_finish(st, &err)) {
		diag("model: %s", md_err_str(&err, buf, sizeof(buf)));
		md_state_free(st);
		return NULL;
	}
	return st;
}

static int sync_to(struct pol *p, const char *policy, struct md_err *err)
{
	struct md_state *st = state_of(policy);
	int ret;

	if (!st)
		return -EINVAL;
	ret = pol_sync(p, st, "node-a", err);
	md_state_free(st);
	return ret;
}

/* UDP datagram from src to dst:port; 1 if it arrived at rfd. */
static int udp_through(int sfd, int rfd, const char *dst, int port)
{
	char buf[64];

	if (pt_sendto(sfd, dst, port, "hello"))
		return 0;
	return pt_recv(rfd, buf, sizeof(buf), 300) == 5;
}

static uint64_t drops_of(const char *pin, uint32_t reason, const char *policy)
{
	struct pol_drops d;
	uint64_t n = 0;

	if (pol_read_drops(pin, &d))
		return 0;
	if (!policy)
		n = d.by_reason[reason];
	for (int i = 0; policy && i < d.n_by_policy; i++)
		if (d.by_policy[i].reason == reason && strcmp(d.by_policy[i].name, policy) == 0)
			n += d.by_policy[i].packets;
	pol_drops_free(&d);
	return n;
}

int main(void)
{
	struct pt_env e;
	struct pol *p = NULL, *p2 = NULL;
	struct md_err err;
	char buf[900];
	int lb80, lb90, la80, ua, ub, uc, fd, sfd, ret;
	uint32_t gen;

	if (pt_setup(&e, "dp", A " " B " " C " " NODE)) {
		ok(0, "test environment (netns, cgroup)");
		return done_testing();
	}
	ret = pol_open(e.cg, e.pin, &p);
	is_int(ret, 0, "pol_open attaches to our cgroup");
	if (ret)
		goto out;
	is_int(pol_generation(p), 0, "generation 0 before the first sync");

	lb80 = pt_listen(B, 8080, SOCK_STREAM);
	lb90 = pt_listen(B, 9090, SOCK_STREAM);
	la80 = pt_listen(A, 8080, SOCK_STREAM);
	ok(lb80 >= 0 && lb90 >= 0 && la80 >= 0, "listeners on b:8080, b:9090, a:8080");

	fd = pt_connect(C, B, 8080, 500);
	ok(fd >= 0, "before any sync everything passes (c -> b:8080)");
	if (fd >= 0)
		close(fd);
	ret = pt_accept(lb80, 200);
	if (ret >= 0)
		close(ret);

	ret = sync_to(p, allow_v1, &err);
	is_int(ret, 0, "sync v1: %s", ret ? md_err_str(&err, buf, sizeof(buf)) : "ok");
	gen = pol_generation(p);
	is_int(gen, 1, "generation 1 after the first sync");

	/* 1: allowed by b's named port; the reply reaches a, which is ingress-isolated */
	fd = pt_connect(A, B, 8080, 500);
	ok(fd >= 0, "a -> b:8080 (named port http) connects");
	sfd = pt_accept(lb80, 500);
	ok(sfd >= 0, "b accepts it");
	if (fd >= 0 && sfd >= 0) {
		ok(send(fd, "ping", 4, 0) == 4 && pt_recv(sfd, buf, sizeof(buf), 500) == 4,
		   "a -> b data passes");
		ok(send(sfd, "pong", 4, 0) == 4 && pt_recv(fd, buf, sizeof(buf), 500) == 4,
		   "b -> a reply passes although a denies all ingress");
	}

	/* 2-4: denials in each direction */
	{
		struct timespec t0, t1;
		long ms;

		clock_gettime(CLOCK_MONOTONIC, &t0);
		ret = pt_connect(C, B, 8080, 300);
		clock_gettime(CLOCK_MONOTONIC, &t1);
		ms = (t1.tv_sec - t0.tv_sec) * 1000 + (t1.tv_nsec - t0.tv_nsec) / 1000000;
		ok(ret == -EPERM && ms < 100,
		   "c -> b:8080 denied by c's egress policy: connect fails fast with EPERM (%s, %ld ms)",
		   strerror(-ret), ms);
		if (ret >= 0)
			close(ret);
	}
	ok(drops_of(e.pin, POL_DROP_EGRESS_DENIED, "x/c-deny-egress") >= 1,
	   "drop counted as egress_denied, charged to x/c-deny-egress");
	ret = pt_connect(A, B, 9090, 300);
	ok(ret < 0, "a -> b:9090 denied by b's ingress policy (port)");
	if (ret >= 0)
		close(ret);
	ok(drops_of(e.pin, POL_DROP_INGRESS_DENIED, "x/b-allow") >= 1,
	   "drop counted as ingress_denied, charged to x/b-allow");
	ret = pt_connect(B, A, 8080, 300);
	ok(ret < 0, "b -> a:8080 denied (a isolated for ingress)");
	if (ret >= 0)
		close(ret);

	/* 5: the node may always reach its pods */
	ret = pt_connect(NODE, A, 8080, 500);
	ok(ret >= 0, "node address -> a:8080 passes (node exemption)");
	if (ret >= 0)
		close(ret);
	ret = pt_accept(la80, 200);
	if (ret >= 0)
		close(ret);

	/* 6-7: UDP per flow, replies */
	ua = pt_udp(A, 0);
	ub = pt_udp(B, 8081);
	uc = pt_udp(C, 0);
	ok(ua >= 0 && ub >= 0 && uc >= 0, "UDP sockets");
	ok(udp_through(ua, ub, B, 8081), "UDP a -> b:8081 (named port dns/UDP) delivered");
	{
		struct sockaddr_in aa;
		socklen_t al = sizeof(aa);

		getsockname(ua, (struct sockaddr *)&aa, &al);
		ok(udp_through(ub, ua, A, ntohs(aa.sin_port)),
		   "UDP reply b -> a delivered although a denies all ingress");
	}
	ret = pt_sendto(uc, B, 8081, "x");
	ok(ret == -EPERM, "UDP from c fails at once with EPERM (egress denied): %s",
	   strerror(-ret));
	{
		int ub2 = pt_udp(B, 8082);

		ok(ub2 >= 0 && !udp_through(ua, ub2, B, 8082), "UDP a -> b:8082 not delivered");
		if (ub2 >= 0)
			close(ub2);
	}

	/* 8: same state again: no generation bump */
	ret = sync_to(p, allow_v1, &err);
	ok(ret == 0 && pol_generation(p) == gen, "re-sync of the same state keeps generation %u", gen);

	/* adoption by a second opener (agent restart) */
	ret = pol_open(e.cg, e.pin, &p2);
	ok(ret == 0 && pol_generation(p2) == gen, "pol_open adopts the pins: generation %u kept",
	   gen);

	/* 9: revocation of the established a -> b connection */
	ret = sync_to(p, allow_v2, &err);
	ok(ret == 0 && pol_generation(p) == gen + 1, "sync v2 (http removed): generation %u",
	   pol_generation(p));
	if (fd >= 0 && sfd >= 0) {
		ok(send(fd, "again", 5, 0) == 5, "a can still write into its socket");
		is_int(pt_recv(sfd, buf, sizeof(buf), 400), 0,
		       "but b receives nothing: the connection is revoked");
		ok(drops_of(e.pin, POL_DROP_REVOKED, NULL) >= 1, "drop counted as revoked");
	}
	ok(udp_through(ua, ub, B, 8081), "UDP a -> b:8081 still allowed by v2");

	/* 10: all or nothing on a limit */
	{
		struct pol_limits lim = pol_default_limits;

		lim.rules = 1;
		pol_set_limits(p, &lim);
		ret = sync_to(p, allow_v1, &err);
		is_int(ret, -E2BIG, "sync over the rule limit fails with E2BIG");
		ok(strstr(err.msg, "limit") != NULL, "error says why: %s",
		   md_err_str(&err, buf, sizeof(buf)));
		is_int(pol_generation(p), gen + 1, "generation unchanged");
		ok(udp_through(ua, ub, B, 8081), "previous state still enforced (a -> b:8081/UDP ok)");
		ret = pt_connect(A, B, 9090, 300);
		ok(ret < 0, "and still denies (a -> b:9090)");
		if (ret >= 0)
			close(ret);
		pol_set_limits(p, NULL);
	}
	{
		struct pol_drops d;
		char *text = NULL;
		size_t tlen = 0;

		ret = pol_read_drops(e.pin, &d);
		is_int(ret, 0, "pol_read_drops from the pins");
		if (ret == 0) {
			FILE *f = open_memstream(&text, &tlen);

			pol_drops_print(&d, f);
			fclose(f);
			ok(strstr(text, "x/b-allow") && strstr(text, "revoked"),
			   "policy-drops table names policies and reasons");
			for (char *l = strtok(text, "\n"); l; l = strtok(NULL, "\n"))
				diag("%s", l);
			free(text);
			pol_drops_free(&d);
		}
	}
	/* 11: agent restart. The adopter reads the tables in force back from the
	 * kernel: its first sync of unchanged state keeps the generation (so
	 * nothing is re-judged, short-circuited sockets stay), a real change
	 * still moves it, through a diff of the read-back inactive slot. */
	pol_close(p2, 0);
	p2 = NULL;
	gen = pol_generation(p);
	ret = pol_open(e.cg, e.pin, &p2);
	ok(ret == 0 && pol_generation(p2) == gen, "restart: adopter sees generation %u", gen);
	if (ret == 0) {
		ret = sync_to(p2, allow_v2, &err);
		ok(ret == 0 && pol_generation(p2) == gen,
		   "restart: first sync of unchanged state keeps generation %u (got %u)", gen,
		   pol_generation(p2));
		ok(udp_through(ua, ub, B, 8081), "restart: v2 still enforced (a -> b:8081/UDP ok)");
		ret = pt_connect(A, B, 8080, 300);
		ok(ret < 0, "restart: v2 still denies a -> b:8080");
		if (ret >= 0)
			close(ret);
		ret = sync_to(p2, allow_v1, &err);
		ok(ret == 0 && pol_generation(p2) == gen + 1,
		   "restart: a real change moves the generation to %u (got %u)", gen + 1,
		   pol_generation(p2));
		ret = pt_connect(A, B, 8080, 500);
		ok(ret >= 0, "restart: the change is in force (a -> b:8080 connects again)");
		if (ret >= 0)
			close(ret);
		ret = pt_accept(lb80, 200);
		if (ret >= 0)
			close(ret);
		ret = sync_to(p2, allow_v1, &err);
		ok(ret == 0 && pol_generation(p2) == gen + 1, "restart: and a re-sync is a no-op again");
	}
	if (fd >= 0)
		close(fd);
	if (sfd >= 0)
		close(sfd);
	close(ua);
	close(ub);
	close(uc);
	close(lb80);
	close(lb90);
	close(la80);
out:
	pol_close(p2, 0);
	pol_close(p, 1);
	{
		char path[400];

		snprintf(path, sizeof(path), "%s/pol_cfg", e.pin);
		ok(access(path, F_OK) != 0, "pol_close(unpin) removed the pins");
	}
	pt_teardown(&e);
	return done_testing();
}
