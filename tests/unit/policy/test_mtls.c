/* test_mtls.c — PeerAuthentication STRICT in the policy datapath
 * (bpf/policy.bpf.c invariant 11, pol_compile.c invariant 8), on real
 * sockets in the real kernel, set up as test_datapath.c: "pods" on lo of a
 * private network namespace, our own cgroup with the programs attached.
 * Pod a (node-a) is STRICT with port 9187 DISABLE; b is another pod of
 * node-a; r is a pod of node-b (its address here stands for a peer on
 * another node); NODE is an address of this node. Checked: STRICT is not
 * enforced while the node's proxy does not carry HBONE (zh_l7cap_cfg
 * flags); then plain text from r is refused on a STRICT port and counted
 * as mtls_plaintext, charged to no NetworkPolicy; the port exception
 * passes; pods and addresses of this node pass; a NetworkPolicy allowing
 * r does not open STRICT; a pod without STRICT is untouched; removing the
 * PeerAuthentication admits r again. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <bpf/bpf.h>

#include "pol_test.h"
#include "zerohop/abi/l7cap.h"
#include "zerohop/model.h"
#include "zerohop/policy.h"

#define A "10.250.1.1"
#define B "10.250.1.2"
#define R "10.250.1.3"
#define NODE "10.250.1.9"

#define POD(n, node, ip) \
	"apiVersion: v1\nkind: Pod\nmetadata: {name: " n ", namespace: x, labels: {app: " n "}}\n" \
	"spec: {nodeName: " node ", containers: [{name: c}]}\n" \
	"status: {phase: Running, podIP: " ip "}\n---\n"

static const char *pods = POD("a", "node-a", A) POD("b", "node-a", B) POD("r", "node-b", R);

static const char *strict =
	"apiVersion: security.istio.io/v1\nkind: PeerAuthentication\n"
	"metadata: {name: a, namespace: x}\n"
	"spec:\n  selector: {matchLabels: {app: a}}\n  mtls: {mode: STRICT}\n"
	"  portLevelMtls: {9187: {mode: DISABLE}}\n---\n";

static const char *allow_r =	/* a NetworkPolicy that admits r to a */
	"apiVersion: networking.k8s.io/v1\nkind: NetworkPolicy\n"
	"metadata: {name: a-from-r, namespace: x}\n"
	"spec:\n  podSelector: {matchLabels: {app: a}}\n"
	"  ingress:\n  - from: [{podSelector: {matchLabels: {app: r}}}]\n---\n";

static int sync_to(struct pol *p, const char *a, const char *b)
{
	struct md_state *st = md_state_new();
	struct md_err err;
	char buf[900];
	int ret;

	if (md_state_add_buf(st, "pods.yaml", pods, strlen(pods), &err) ||
	    (a && md_state_add_buf(st, "a.yaml", a, strlen(a), &err)) ||
	    (b && md_state_add_buf(st, "b.yaml", b, strlen(b), &err)) ||
	    md_state_finish(st, &err)) {
		diag("model: %s", md_err_str(&err, buf, sizeof(buf)));
		md_state_free(st);
		return -EINVAL;
	}
	ret = pol_sync(p, st, "node-a", &err);
	if (ret)
		diag("sync: %s", md_err_str(&err, buf, sizeof(buf)));
	md_state_free(st);
	return ret;
}

/* The node proxy's published capabilities (what `zerohop proxy --hbone`
 * writes into the capture config). */
static int set_hbone(const char *pin, bool on)
{
	struct zh_l7cap_cfg c = { .proxy_ip = inet_addr(NODE), .proxy_port = htons(ZH_L7CAP_PORT),
				  .flags = on ? ZH_L7CAP_CFG_HBONE : 0 };
	char path[400];
	uint32_t zero = 0;
	int fd, ret;

	snprintf(path, sizeof(path), "%s/%s", pin, ZH_L7CAP_CFG_MAP);
	fd = bpf_obj_get(path);
	if (fd < 0)
		return -errno;
	ret = bpf_map_update_elem(fd, &zero, &c, BPF_ANY) ? -errno : 0;
	close(fd);
	return ret;
}

/* 1 when src -> dst:port connects (and the listener accepts), else 0. */
static int reaches(int lfd, const char *src, const char *dst, int port)
{
	int fd = pt_connect(src, dst, port, 400), sfd;

	if (fd < 0)
		return 0;
	sfd = pt_accept(lfd, 400);
	close(fd);
	if (sfd < 0)
		return 0;
	close(sfd);
	return 1;
}

static uint64_t mtls_drops(const char *pin, const char *charged)
{
	struct pol_drops d;
	uint64_t n = 0;

	if (pol_read_drops(pin, &d))
		return 0;
	if (!charged)
		n = d.by_reason[POL_DROP_MTLS_PLAINTEXT];
	for (int i = 0; charged && i < d.n_by_policy; i++)
		if (d.by_policy[i].reason == POL_DROP_MTLS_PLAINTEXT &&
		    !strcmp(d.by_policy[i].name, charged))
			n += d.by_policy[i].packets;
	pol_drops_free(&d);
	return n;
}

int main(void)
{
	struct pt_env e;
	struct pol *p = NULL;
	int la, la2, lb, ret;
	uint64_t d0;

	if (pt_setup(&e, "mt", A " " B " " R " " NODE)) {
		ok(0, "test environment (netns, cgroup)");
		return done_testing();
	}
	ret = pol_open(e.cg, e.pin, &p);
	is_int(ret, 0, "pol_open attaches to our cgroup");
	if (ret)
		goto out;
	la = pt_listen(A, 8080, SOCK_STREAM);
	la2 = pt_listen(A, 9187, SOCK_STREAM);
	lb = pt_listen(B, 8080, SOCK_STREAM);
	ok(la >= 0 && la2 >= 0 && lb >= 0, "listeners on a:8080, a:9187, b:8080");

	is_int(sync_to(p, strict, NULL), 0, "sync: a STRICT (9187 DISABLE), no NetworkPolicy");
	is_int(set_hbone(e.pin, false), 0, "the node's proxy does not carry HBONE");
	ok(reaches(la, R, A, 8080), "no tunnel on the node: STRICT recorded, not enforced (r -> a:8080)");

	is_int(set_hbone(e.pin, true), 0, "the node's proxy carries HBONE (ZH_L7CAP_CFG_HBONE)");
	d0 = mtls_drops(e.pin, NULL);
	ok(!reaches(la, R, A, 8080), "r (another node) -> a:8080 in plain text: refused");
	ok(mtls_drops(e.pin, NULL) > d0, "counted as mtls_plaintext (%llu packets)",
	   (unsigned long long)(mtls_drops(e.pin, NULL) - d0));
	ok(mtls_drops(e.pin, "(PeerAuthentication STRICT)") > 0,
	   "charged to no NetworkPolicy: named (PeerAuthentication STRICT)");
	ok(reaches(la2, R, A, 9187), "r -> a:9187: portLevelMtls DISABLE passes");
	ok(reaches(la, B, A, 8080), "b (a pod of this node) -> a:8080 passes");
	ok(reaches(la, NODE, A, 8080), "this node's address -> a:8080 passes (the tunnel delivers from it)");
	ok(reaches(lb, R, B, 8080), "r -> b:8080: a pod without STRICT is untouched");

	is_int(sync_to(p, strict, allow_r), 0, "sync: plus a NetworkPolicy admitting r to a");
	ok(!reaches(la, R, A, 8080), "r -> a:8080 still refused: STRICT is on top of NetworkPolicy");
	ok(reaches(la, B, A, 8080) == 0, "b -> a:8080 now denied by the NetworkPolicy (only r admitted)");
	is_int(sync_to(p, NULL, allow_r), 0, "sync: PeerAuthentication removed");
	ok(reaches(la, R, A, 8080), "r -> a:8080 admitted again (by the NetworkPolicy)");
	close(la);
	close(la2);
	close(lb);
out:
	pol_close(p, 1);
	pt_teardown(&e);
	return done_testing();
}
