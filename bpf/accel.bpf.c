// SPDX-License-Identifier: GPL-2.0
/* accel.bpf.c — same-node sockets without the TCP/IP stack (sock_ops + sk_msg).
 *
 * Design note
 * -----------
 * zh_accel_sockops runs on the node's cgroup (so for every pod of the node, in
 * the pods' own network namespaces), and on the node proxy's cgroup
 * (invariant 9). When a TCP socket becomes
 * established and both of its ends are on this node — both addresses in
 * accel_local / accel_local6 (this node's pods), or loopback inside one
 * netns — it gets a
 * per-socket record (accel_sk) and goes into accel_sockhash under its own key
 * (bpf/lib/accel_key.h). zh_accel_msg, attached to the sockhash, then runs on
 * every sendmsg of such a socket: it looks up the peer's key (the same
 * connection seen from the other end) and moves the message straight into the
 * peer socket's receive queue (bpf_msg_redirect_hash, BPF_F_INGRESS). With no
 * peer in the map, the message takes the normal TCP path.
 *
 * Invariants
 *  1. Only established TCP sockets with both ends on this node are in
 *     accel_sockhash (IPv4) or accel_sockhash6 (native IPv6, invariant 10);
 *     each has an accel_sk record created before the insert.
 *  2. Per direction, bytes are delivered in order: a socket that once sent a
 *     message on the normal path (no peer yet, peer gone, demoted) carries
 *     ZH_ACCEL_SK_PASS and never redirects again — TCP-path bytes may still be
 *     in flight and redirected bytes would overtake them. The reverse change
 *     (redirect, then normal path) is safe: a redirect is synchronous, the
 *     bytes sit in the peer's queue before sendmsg returns, so later TCP bytes
 *     and the FIN arrive after them. One exception, backpressure
 *     (invariant 13): its fallback (ZH_ACCEL_SK_BP, not PASS) ends once the
 *     peer has read every byte sent on the normal path, when no TCP byte
 *     can be overtaken any more.
 *  3. Keys never collide across pods: pod addresses are unique on a node; a
 *     loopback key carries the netns cookie (every pod has its own 127.0.0.1).
 *  4. A socket leaves accel_sockhash when it reaches TCP_CLOSE (STATE_CB here,
 *     and the kernel's own sockmap unhash); accel_sk goes with the socket.
 *  5. Policy: a socket records the policy generation at insert. When user
 *     space moves accel_cfg[POLICY_GEN], the socket is demoted (PASS, sticky):
 *     its later messages take the normal path, where the policy datapath judges
 *     every packet as for any connection. Short-circuit never bypasses a
 *     policy change. accel_cfg[DISABLED] (--accel off) demotes every socket
 *     the same way and stops inserts, so turning acceleration off never drops
 *     bytes already queued in a peer's short-circuit queue.
 *  6. Bytes are redirected only while both sockets are ESTABLISHED. The
 *     kernel drops a socket's short-circuit queue when the socket reaches
 *     TCP_CLOSE (sockmap unhash), even if its owner has not read it yet; a
 *     socket that shut down its write side (FIN_WAIT*) or whose peer did
 *     (CLOSE_WAIT, LAST_ACK) can reach TCP_CLOSE while still open, so bytes
 *     for it take the normal path, whose receive queue survives TCP_CLOSE.
 *     Bytes redirected while both were ESTABLISHED may still be unread
 *     when the reader's socket would reach TCP_CLOSE without being closed
 *     by its owner: it shut down writing and then the peer's FIN came
 *     (invariant 11 holds that FIN back), or an RST came (lost, as RST
 *     semantics allow: docs/accel.md, Known limits).
 *  7. Release: a socket that leaves ESTABLISHED, or sets SO_RCVLOWAT > 1,
 *     is published in accel_closing (peers stop redirecting to it). On
 *     leaving ESTABLISHED, if it was never sent a redirected byte (no
 *     accel_rx mark: its short-circuit queue is empty), it is also deleted
 *     from accel_sockhash at once and is a plain TCP socket again: no spurious
 *     EAGAIN from tcp_bpf's wait on a state change, no queue to drop at
 *     TCP_CLOSE. The mark is set by the sender before its first redirect, so
 *     "no mark" means "nothing queued". (cgroup/setsockopt programs may not
 *     delete from a sockhash; an SO_RCVLOWAT socket keeps its empty queue, and
 *     reads and readiness then follow the normal receive queue.)
 *  8. Per-message cost (the sk_msg fast path): one sk_storage lookup and the
 *     redirect. The peer key is built once, at insert, into accel_sk; the
 *     accel_closing lookup is skipped while accel_nclosing is 0; the
 *     backpressure check (invariant 13) is a shift and a compare, and its
 *     lookup runs once per ZH_ACCEL_BP_CHECK bytes, not per message.
 *     accel_nclosing never undercounts accel_closing: it is incremented
 *     before an entry is created (NOEXIST insert), decremented only after an
 *     entry was deleted by us. It may overcount (an LRU eviction, callbacks
 *     lost after --accel off): that only costs the lookup, never a redirect.
 *     A peer that publishes itself while a sender is past the check is the
 *     same race as a sender past the lookup (docs/accel.md, Known limits).
 *  9. Node proxy legs: the agent also attaches this sock_ops program (and
 *     the setsockopt one) to the node L7 proxy's own cgroup (outside the
 *     node's, so the LB's connect4 never captures the proxy's upstream
 *     connections), and lists the proxy's endpoints in accel_proxy: its
 *     capture listener NODE_IP:15001 and its upstream source address (.1
 *     of the node's pod range, any port). A connection between a local pod
 *     and such an endpoint is then short-circuited on both ends: client pod
 *     <-> proxy (the pod connected to a ClusterIP rewritten to the capture
 *     address) and proxy <-> backend pod of this node. Keys are the usual
 *     ones (netns 0: neither end is loopback; the pod address is unique on
 *     the node and the proxy endpoint is the node's), and every other
 *     invariant holds unchanged (policy generation, skip ports, closing).
 *     A proxy endpoint with a socket outside the attached cgroups never
 *     enters the map, so its peer only falls back (no peer key).
 * 10. "IPv4 TCP socket" includes an AF_INET6 socket whose both ends are
 *     v4-mapped (a dual-stack client or server with an IPv4 peer; on the
 *     wire the connection is IPv4): its key is the one an AF_INET socket of
 *     the same connection gets (lib/accel_key.h), so a v6 client and a v4
 *     server (or the reverse) short-circuit like two v4 sockets.
 *     A native IPv6 connection (neither end v4-mapped) goes the same way
 *     through twins of the maps keyed by struct zh_accel_key6:
 *     accel_sockhash6, accel_local6, accel_closing6, accel_rx6, accel_rxq6; its
 *     accel_sk record has ZH_ACCEL_SK_V6 and the peer's key in peer6. The
 *     flag is set at insert and never changes, so every later step
 *     (state callbacks, setsockopt, sk_msg, obs) picks one family's maps
 *     from the record, and the IPv4 path only tests the flag. ::1 keys
 *     carry the netns cookie like 127/8 ones. The node proxy's IPv6
 *     endpoints are in accel_proxy6 (its IPv6 capture listener: the client
 *     leg of an IPv6 client of an L7 Service, invariant 9). accel_nclosing
 *     counts both closing sets (it is an upper bound either way).
 * 11. Half-close: a FIN arriving at a short-circuited socket in FIN_WAIT1/2
 *     (its owner shut down writing) would take it to TIME_WAIT, i.e.
 *     TCP_CLOSE, and the kernel would free its psock with the unread
 *     short-circuit queue. zh_accel_fin (cgroup_skb ingress, node and proxy
 *     cgroups) drops that segment while the queue is not empty — read from
 *     the psock by CO-RE: sk_user_data -> ingress_msg — and the peer's TCP
 *     retransmits the FIN (RTO, 200 ms and up) until the owner has drained
 *     it: every byte, then EOF, as on the normal path. No byte can join the
 *     queue meanwhile (the socket is in accel_closing, invariant 7). The hold
 *     lasts at most ZH_ACCEL_FIN_HOLD_NS per socket, after which the FIN
 *     passes: an owner that does not read for 30 s loses the bytes rather
 *     than the peer giving up on the FIN and leaving the reader waiting
 *     for an EOF forever. RST segments are never held. Counted in
 *     ZH_ACCEL_ST_FIN_HELD.
 *     The other order: the peer closed first (its FIN took the socket to
 *     CLOSE_WAIT with the answer still queued), then the owner shut down
 *     writing (LAST_ACK) before reading, or both closed at once (CLOSING).
 *     There the segment that would end the socket is the peer's ACK of the
 *     owner's FIN; zh_accel_fin holds every non-RST segment in those states
 *     the same way, and the owner's TCP retransmits its FIN until the queue
 *     is drained (busybox nc, whose HTTP/1.0 answer and FIN arrive before
 *     it reads its stdin's EOF and shuts down: tests/e2e/45-accel-halfclose.t).
 * 12. The short-circuit has no backpressure: a redirected message joins the
 *     receiver's queue (psock ingress_msg) whatever its length, which only
 *     TCP memory pressure bounds, and then the sender's send() fails with
 *     ENOMEM (measured: iperf3 into the node proxy's HBONE tunnel, whose
 *     reader is slower than the writer by design). So the legs between a
 *     pod and the node proxy that the proxy carries into the HBONE tunnel
 *     (the capture record has ZH_L7CAP_DST_HBONE: connect4's cookie entry,
 *     or zh_l7cap_orig under the client's address) are never inserted:
 *     TCP's window paces the pod as the tunnel drains. (Since invariant 13
 *     bounds every queue these legs could be short-circuited again; kept
 *     out until measured.)
 * 13. Backpressure: no short-circuit queue grows much past what TCP would
 *     have let the sender have outstanding. When a socket enters the
 *     sockhash, sock_ops publishes in accel_rxq (accel_rxq6) under its key
 *     the address of its psock and its bound, sk_rcvbuf + ZH_ACCEL_BP_SLACK
 *     (4 MiB: the largest send buffer TCP autotuning gives by default).
 *     Each time a sender's sc_tx crosses a multiple of ZH_ACCEL_BP_CHECK
 *     (1 MiB), its sk_msg looks the peer up there and reads the psock's
 *     msg_tot_len with bpf_probe_read_kernel (the address is never
 *     dereferenced: a psock freed meanwhile reads as garbage, not a fault,
 *     and its socket has left the sockhash, so the redirect would fail
 *     anyway). Deeper than the bound, the sender sets ZH_ACCEL_SK_BP and
 *     counts ZH_ACCEL_ST_BACKPRESSURE: its messages take the normal path,
 *     where TCP's window blocks it, and the queued bytes are read before
 *     the TCP ones (tcp_bpf reads the psock queue first). On each later
 *     message it asks whether the peer has read every byte it sent on the
 *     normal path (the peer's copied_seq == its own write_seq, and the
 *     psock queue empty): then no TCP byte can be overtaken, it clears the
 *     flag, counts ZH_ACCEL_ST_BP_RESUMED and redirects again. So a queue
 *     holds at most bound + ZH_ACCEL_BP_CHECK + one sk_msg chunk, whatever
 *     the sender's rate, and a reader that lagged once gets the
 *     short-circuit back as soon as it has caught up. Only that direction
 *     of that connection is affected. An iter/sockmap sweep by the agent
 *     was the first plan: every map iterator fails to load here (EPERM on
 *     this kernel), and a sweep bounds a queue only at rate x period.
 *
 * Socket states (per socket; "peer" = the other end of its connection)
 *
 *   connect/accept ──ESTABLISHED_CB, both ends local──► IN MAP (redirect)
 *        │ (else, or port opted out)                      │  │
 *        ▼                                                │  │ no peer / peer closing /
 *   NOT IN MAP (normal path, sk_msg never runs) ◄──┐      │  │ own state not ESTABLISHED /
 *                                                  │      │  │ policy gen moved / disabled
 *        leaves ESTABLISHED, never sent to (inv. 7)└──────┤  ▼
 *                                                         │ IN MAP, PASS (normal path, sticky)
 *                                                         │  │
 *                   STATE_CB TCP_CLOSE / kernel unhash ───┴──┴──► GONE (deleted from map)
 *
 *   (IN MAP, own side shut down, queue not empty: a FIN from the peer is
 *    dropped and retransmitted until the queue is empty; inv. 11)
 *
 *   IN MAP (redirect) ──peer's queue past its bound──► IN MAP, BP (normal
 *        ▲                                              path, not sticky)
 *        └─────────peer has read every TCP byte of ours─────┘  (inv. 13)
 *
 * Functions: accel_insert does IN MAP (on ESTABLISHED); accel_state does the
 * release (accel_release) and GONE (on TCP_CLOSE); zh_accel_setsockopt
 * publishes an SO_RCVLOWAT socket as closing; zh_accel_msg redirects and
 * moves a socket to PASS; accel_bp moves it to BP and back (inv. 13);
 * accel_rxq_put publishes a socket's queue for its peer's check (inv. 13);
 * zh_accel_fin holds FINs (inv. 11). Every write to accel_closing goes through
 * accel_closing_add / accel_closing_del, which keep accel_nclosing (inv. 8).
 */
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>
#include <bpf/bpf_core_read.h>
#include "zerohop/abi/accel.h"
#include "zerohop/abi/l7cap.h"	/* with __bpf__: the shared capture maps (invariant 12) */
#include "lib/accel_key.h"
#include "lib/accel_maps.h"

#define AF_INET ZH_AF_INET
#define SOL_SOCKET 1
#define SO_RCVLOWAT 18

char LICENSE[] SEC("license") = "GPL";

/* The kernel objects read here (invariants 11 and 13), by CO-RE: field
 * offsets come from the running kernel's BTF (the "___zh" suffix is
 * ignored when matching). */
struct list_head___zh {
	struct list_head___zh *next;
} __attribute__((preserve_access_index));
struct sk_psock___zh {
	void *sk;		/* its socket (invariant 13) */
	struct list_head___zh ingress_msg;
	__u32 msg_tot_len;	/* bytes in ingress_msg (invariant 13) */
} __attribute__((preserve_access_index));
struct sock___zh {
	void *sk_user_data;
	int sk_rcvbuf;
} __attribute__((preserve_access_index));

/* Sequence numbers (invariant 13): the next TCP byte the owner will read,
 * the next one it will queue for sending. */
struct tcp_sock___zh {
	__u32 copied_seq;
	__u32 write_seq;
} __attribute__((preserve_access_index));

#define ZH_SK_USER_DATA_PSOCK	4UL	/* the kernel sock.h SK_USER_DATA_PSOCK */
#define ZH_SK_USER_DATA_PTRMASK	(~7UL)

/* Upper bound of the number of entries in accel_closing (invariant 8): lets
 * sk_msg skip that hash lookup while no short-circuited socket is closing. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} accel_nclosing SEC(".maps");

static __always_inline __u64 *accel_nclosing_ptr(void)
{
	__u32 zero = 0;

	return bpf_map_lookup_elem(&accel_nclosing, &zero);
}

/* The maps of one family (invariant 10): a socket's key, sockhash, closing
 * and rx sets are all IPv4 (struct zh_accel_key) or all native IPv6
 * (struct zh_accel_key6). The helpers below take them as arguments; every
 * caller passes constant maps, so after inlining the verifier sees a known
 * map on each path. */
#define ACCEL_MAPS4 &accel_sockhash, &accel_closing, &accel_rx, &accel_rxq
#define ACCEL_MAPS6 &accel_sockhash6, &accel_closing6, &accel_rx6, &accel_rxq6

/* Publish `key` in `closing`; count it first if the entry is new. */
static __always_inline void accel_closing_add(void *closing, const void *key, __u32 state)
{
	__u64 *n = accel_nclosing_ptr();

	if (bpf_map_lookup_elem(closing, key)) {
		bpf_map_update_elem(closing, key, &state, BPF_EXIST);
		return;
	}
	if (n)	/* always there (array); without it sk_msg always looks up */
		__sync_fetch_and_add(n, 1);
	if (bpf_map_update_elem(closing, key, &state, BPF_NOEXIST))
		bpf_map_update_elem(closing, key, &state, BPF_ANY);	/* raced: still counted once more, harmless */
}

/* Forget `key` in `closing`; uncount it only if we deleted an entry. */
static __always_inline void accel_closing_del(void *closing, const void *key)
{
	__u64 *n = accel_nclosing_ptr();

	if (bpf_map_delete_elem(closing, key) == 0 && n)
		__sync_fetch_and_add(n, -1);
}

/* One of the node proxy's endpoints (invariant 9): exactly ip:port, or ip
 * with any port (port 0 in the map: the proxy's upstream source address). */
static __always_inline int accel_is_proxy(__u32 ip, __u32 port)
{
	struct zh_accel_proxy_ep ep = { .ip4 = ip, .port = port };

	if (bpf_map_lookup_elem(&accel_proxy, &ep))
		return 1;
	ep.port = 0;
	return bpf_map_lookup_elem(&accel_proxy, &ep) != NULL;
}

/* Which connections may be short-circuited: 0 none, 1 both ends local
 * (pods of this node, or loopback), 2 a local pod and the node proxy
 * (invariant 9). Symmetric: both sockets of one connection agree. */
static __always_inline int accel_pair(const struct zh_accel_key *k)
{
	int l, r;

	/* loopback is always one netns, hence local */
	if (accel_is_loopback(k->local_ip4) || accel_is_loopback(k->remote_ip4))
		return 1;
	/* each end looked up once: every new connection of the node's pods
	 * comes here, most of them with one end elsewhere */
	l = bpf_map_lookup_elem(&accel_local, &k->local_ip4) != NULL;
	r = bpf_map_lookup_elem(&accel_local, &k->remote_ip4) != NULL;
	if (l && r)
		return 1;
	if (l && accel_is_proxy(k->remote_ip4, k->remote_port))
		return 2;
	if (r && accel_is_proxy(k->local_ip4, k->local_port))
		return 2;
	return 0;
}

/* Invariant 12: is this connection between a pod and the node proxy's
 * capture listener one the proxy carries into the HBONE tunnel? The
 * capture record is the cookie's (connect4 wrote it) until the proxy's
 * sock_ops moves it under the client's address, whichever of the two
 * programs runs first; the proxy's end finds it under the client's. */
static __always_inline int accel_hbone_leg(struct bpf_sock_ops *skops, const struct zh_accel_key *k)
{
	struct zh_l7cap_client c = {};
	struct zh_l7cap_dst *d = NULL;
	__u64 cookie;

	if (bpf_map_lookup_elem(&accel_local, &k->local_ip4)) {	/* the client pod's end */
		cookie = bpf_get_socket_cookie(skops);
		d = bpf_map_lookup_elem(&zh_l7cap_sock, &cookie);
		c.ip = k->local_ip4;
		c.port = bpf_htons((__u16)k->local_port);
	} else {	/* the proxy's end: the client is the remote */
		c.ip = k->remote_ip4;
		c.port = bpf_htons((__u16)k->remote_port);
	}
	if (!d)
		d = bpf_map_lookup_elem(&zh_l7cap_orig, &c);
	return d && (d->flags & ZH_L7CAP_DST_HBONE);
}

static __always_inline int accel_skipped_port(__u32 lport, __u32 rport)
{
	return bpf_map_lookup_elem(&accel_skip, &lport) ||
	       bpf_map_lookup_elem(&accel_skip, &rport);
}

/* accel_is_proxy for an IPv6 endpoint (accel_proxy6). */
static __always_inline int accel_is_proxy6(const __u32 *ip6, __u32 port)
{
	struct zh_accel_proxy_ep6 ep = { .port = port };

	__builtin_memcpy(ep.ip6, ip6, 16);
	if (bpf_map_lookup_elem(&accel_proxy6, &ep))
		return 1;
	ep.port = 0;
	return bpf_map_lookup_elem(&accel_proxy6, &ep) != NULL;
}

/* accel_pair for a native IPv6 connection: both ends pods of this node
 * (accel_local6), or ::1 (1); a pod of this node and one of the node
 * proxy's IPv6 endpoints (2: the client leg of an IPv6 client of an L7
 * Service, invariant 9). */
static __always_inline int accel_pair6(const struct zh_accel_key6 *k)
{
	int l, r;

	if (accel_is_loopback6(k->local_ip6) || accel_is_loopback6(k->remote_ip6))
		return 1;
	l = bpf_map_lookup_elem(&accel_local6, k->local_ip6) != NULL;
	r = bpf_map_lookup_elem(&accel_local6, k->remote_ip6) != NULL;
	if (l && r)
		return 1;
	if (l && accel_is_proxy6(k->remote_ip6, k->remote_port))
		return 2;
	if (r && accel_is_proxy6(k->local_ip6, k->local_port))
		return 2;
	return 0;
}

/* The per-socket record, fresh (invariant 1: created before the insert,
 * sk_msg relies on it for the sticky flag). NULL: counted as skipped. */
static __always_inline struct zh_accel_sk *accel_sk_new(struct bpf_sock_ops *skops, __u32 flags)
{
	struct zh_accel_sk *st;

	if (!skops->sk)
		return NULL;
	st = bpf_sk_storage_get(&accel_sk, skops->sk, 0, BPF_SK_STORAGE_GET_F_CREATE);
	if (!st) {
		accel_count(ZH_ACCEL_ST_SKIPPED, 1);
		return NULL;
	}
	st->policy_gen = accel_cfg_get(ZH_ACCEL_CFG_POLICY_GEN);
	st->flags = flags;
	st->sc_tx = 0;
	st->fin_held_ns = 0;
	return st;
}

/* Invariant 13: publish where this socket's short-circuit queue length is
 * (its psock, created by the sockhash insert just done) and its bound, for
 * its peer's sk_msg. Without it (no psock seen) the peer never checks. */
static __always_inline void accel_rxq_put(struct bpf_sock_ops *skops, void *rxq, const void *key)
{
	struct zh_accel_rxq q = {};
	struct sock___zh *ks;
	unsigned long ud;

	if (!skops->sk)
		return;
	ks = (void *)bpf_skc_to_tcp_sock(skops->sk);
	if (!ks)
		return;
	ud = (unsigned long)BPF_CORE_READ(ks, sk_user_data);
	if (!(ud & ZH_SK_USER_DATA_PSOCK))
		return;
	q.psock = ud & ZH_SK_USER_DATA_PTRMASK;
	q.bound = (__u64)(__u32)BPF_CORE_READ(ks, sk_rcvbuf) + ZH_ACCEL_BP_SLACK;
	bpf_map_update_elem(rxq, key, &q, BPF_ANY);
}

/* Into `sockhash` under `key`, after clearing a reused tuple's marks; then
 * ask for state changes so leaving ESTABLISHED and TCP_CLOSE are seen. */
static __always_inline void accel_hash_in(struct bpf_sock_ops *skops, void *sockhash, void *closing,
					  void *rx, void *rxq, void *key, int pair)
{
	/* A reused 4-tuple must not inherit an old connection's marks. */
	accel_closing_del(closing, key);
	bpf_map_delete_elem(rx, key);
	bpf_map_delete_elem(rxq, key);
	if (bpf_sock_hash_update(skops, sockhash, key, BPF_ANY)) {
		accel_count(ZH_ACCEL_ST_SKIPPED, 1);
		return;
	}
	accel_rxq_put(skops, rxq, key);	/* invariant 13 */
	bpf_sock_ops_cb_flags_set(skops, skops->bpf_sock_ops_cb_flags | BPF_SOCK_OPS_STATE_CB_FLAG);
	accel_count(ZH_ACCEL_ST_SOCKETS, 1);
	if (pair == 2)
		accel_count(ZH_ACCEL_ST_PROXY, 1);
}

static __always_inline void accel_insert6(struct bpf_sock_ops *skops)
{
	struct zh_accel_key6 key = {};
	struct zh_accel_sk *st;
	int pair;

	if (!accel_key6_from_sockops(&key, skops))
		return;
	pair = accel_pair6(&key);
	if (!pair || accel_skipped_port(key.local_port, key.remote_port))
		return;
	st = accel_sk_new(skops, ZH_ACCEL_SK_V6);
	if (!st)
		return;
	accel_key6_peer(&st->peer6, &key);	/* once per socket (invariant 8) */
	accel_hash_in(skops, ACCEL_MAPS6, &key, pair);
}

static __always_inline void accel_insert(struct bpf_sock_ops *skops)
{
	struct zh_accel_key key = {};
	struct zh_accel_sk *st;
	int pair;

	if (accel_cfg_get(ZH_ACCEL_CFG_DISABLED))
		return;
	if (!accel_key_from_sockops(&key, skops)) {
		accel_insert6(skops);	/* native IPv6, or nothing of ours */
		return;
	}
	pair = accel_pair(&key);
	if (!pair || accel_skipped_port(key.local_port, key.remote_port))
		return;
	if (pair == 2 && accel_hbone_leg(skops, &key)) {	/* invariant 12 */
		accel_count(ZH_ACCEL_ST_SKIPPED, 1);
		return;
	}
	st = accel_sk_new(skops, 0);
	if (!st)
		return;
	accel_key_peer(&st->peer, &key);	/* once per socket (invariant 8) */
	accel_hash_in(skops, ACCEL_MAPS4, &key, pair);
}

/* sock_ops only: the verifier allows sockhash deletes in sock_ops, not in
 * cgroup/setsockopt. */
static __always_inline void accel_release_empty(void *sockhash, const void *key)
{
	if (bpf_map_delete_elem(sockhash, key) == 0)
		accel_count(ZH_ACCEL_ST_RELEASED, 1);
}

/* The socket `key` must not receive redirected bytes any more (invariants 6
 * and 7): peers demote on their next message. With an empty short-circuit
 * queue (never sent anything) it also leaves the sockhash at once, so from
 * now on it is a plain TCP socket, with every kernel semantic intact. */
static __always_inline void accel_release(void *sockhash, void *closing, void *rx,
					  const void *key, __u32 state)
{
	accel_closing_add(closing, key, state);
	if (!bpf_map_lookup_elem(rx, key))
		accel_release_empty(sockhash, key);
}

/* The state change of one socket, once its key is built (accel_state). */
static __always_inline void accel_state_key(void *sockhash, void *closing, void *rx, void *rxq,
					    const void *key, __u32 state)
{
	if (state == BPF_TCP_CLOSE) {
		accel_closing_del(closing, key);
		bpf_map_delete_elem(rx, key);
		bpf_map_delete_elem(rxq, key);
		if (bpf_map_delete_elem(sockhash, key) == 0)
			accel_count(ZH_ACCEL_ST_REMOVED, 1);
		return;
	}
	accel_release(sockhash, closing, rx, key, state);
}

/* STATE_CB: leaving ESTABLISHED -> release; TCP_CLOSE -> forget (inv. 4). */
static __always_inline void accel_state(struct bpf_sock_ops *skops)
{
	struct zh_accel_key6 key6 = {};
	struct zh_accel_key key = {};
	__u32 old = skops->args[0], state = skops->args[1];
	int closing = old == BPF_TCP_ESTABLISHED && state != BPF_TCP_ESTABLISHED;
	struct zh_accel_sk *st;

	/* Other programs on the cgroup (L4 signals, policy) ask for state
	 * callbacks on every socket, so this runs for every transition of
	 * sockets we never inserted too. Only two transitions matter here;
	 * then one storage lookup sends foreign sockets away before any key
	 * is built or any map is written (inserted sockets have a record,
	 * invariant 1). */
	if (state != BPF_TCP_CLOSE && !closing)
		return;
	if (!skops->sk)
		return;
	st = bpf_sk_storage_get(&accel_sk, skops->sk, 0, 0);
	if (!st)
		return;
	if (st->flags & ZH_ACCEL_SK_V6) {
		if (accel_key6_from_sockops(&key6, skops))
			accel_state_key(ACCEL_MAPS6, &key6, state);
		return;
	}
	if (accel_key_from_sockops(&key, skops))
		accel_state_key(ACCEL_MAPS4, &key, state);
}

SEC("sockops")
int zh_accel_sockops(struct bpf_sock_ops *skops)
{
	/* The op first: this runs at every callback of every socket of the
	 * node (~9 a connection, ~17 with the L4 signals' state callbacks:
	 * bpf/obs.bpf.c invariant 8), and only three ops matter here. TCP
	 * of both families: AF_INET, AF_INET6 with v4-mapped ends, native
	 * IPv6 (invariant 10); the key builders return 0 for anything else. */
	switch (skops->op) {
	case BPF_SOCK_OPS_ACTIVE_ESTABLISHED_CB:
	case BPF_SOCK_OPS_PASSIVE_ESTABLISHED_CB:
		if (skops->family == AF_INET || skops->family == ZH_AF_INET6)
			accel_insert(skops);	/* IPv4 or native IPv6 */
		break;
	case BPF_SOCK_OPS_STATE_CB:
		if (skops->family == AF_INET || skops->family == ZH_AF_INET6)
			accel_state(skops);
		break;
	}
	return 1;
}

/* SO_RCVLOWAT > 1 on a short-circuited socket: the short-circuit queue cannot
 * honour it (tcp_bpf wakes and returns on any byte), so the socket is released
 * to the normal path, whose receive queue does (invariant 7). Never changes
 * the option itself: always returns 1 with ctx untouched. */
SEC("cgroup/setsockopt")
int zh_accel_setsockopt(struct bpf_sockopt *ctx)
{
	struct zh_accel_key6 key6 = {};
	struct zh_accel_key key = {};
	struct bpf_sock *sk = ctx->sk;
	__u32 state = BPF_TCP_ESTABLISHED;
	struct zh_accel_sk *st;
	int *val;

	if (!sk || ctx->level != SOL_SOCKET || ctx->optname != SO_RCVLOWAT)
		return 1;
	if ((sk->family != AF_INET && sk->family != ZH_AF_INET6) ||
	    sk->protocol != 6 /* IPPROTO_TCP */ || sk->state != BPF_TCP_ESTABLISHED)
		return 1;
	val = ctx->optval;
	if ((void *)(val + 1) > ctx->optval_end || *val <= 1)
		return 1;
	st = bpf_sk_storage_get(&accel_sk, sk, 0, 0);
	if (!st)
		return 1;	/* not ours */
	/* Peers stop redirecting; the socket keeps its psock (a sockhash
	 * delete is not allowed here), whose queue stays empty, so reads and
	 * readiness follow the normal receive queue and SO_RCVLOWAT. */
	if (st->flags & ZH_ACCEL_SK_V6) {
		if (accel_key6_from_sockopt(&key6, ctx, sk))
			accel_closing_add(&accel_closing6, &key6, state);
	} else if (accel_key_from_sockopt(&key, ctx, sk)) {
		accel_closing_add(&accel_closing, &key, state);
	}
	return 1;
}

/* Normal path for this message and every later one of this socket (inv. 2). */
static __always_inline int accel_fallback(struct zh_accel_sk *st)
{
	if (st)
		st->flags |= ZH_ACCEL_SK_PASS;
	accel_count(ZH_ACCEL_ST_FALLBACKS, 1);
	return SK_PASS;
}

/* Invariant 13: is it time to look at the peer's queue? Once each time this
 * socket's short-circuited byte count crosses a multiple of
 * ZH_ACCEL_BP_CHECK: a shift and a compare on the record already loaded. */
static __always_inline int accel_bp_due(__u64 tx, __u32 size)
{
	return ((tx + size) >> ZH_ACCEL_BP_CHECK_SHIFT) != (tx >> ZH_ACCEL_BP_CHECK_SHIFT);
}

/* Invariant 13: is the peer's short-circuit queue deeper than its bound?
 * The psock address is read, never dereferenced: bpf_probe_read_kernel
 * copes with a psock freed meanwhile (its socket then left the sockhash and
 * the redirect fails anyway). No entry yet (the peer's sock_ops has not run
 * past its insert): not deep, looked at again at the next multiple. */
static __always_inline int accel_bp_deep(void *rxq, const void *peer)
{
	struct zh_accel_rxq *q = bpf_map_lookup_elem(rxq, peer);
	struct sk_psock___zh *psock;
	__u32 depth;

	if (!q)
		return 0;
	psock = (void *)q->psock;
	/* a kernel without the field (before msg_tot_len): no backpressure,
	 * rather than no program at all */
	if (!bpf_core_field_exists(psock->msg_tot_len))
		return 0;
	depth = BPF_CORE_READ(psock, msg_tot_len);
	return depth > q->bound;
}

/* Invariant 13: may a socket in backpressure redirect again? Only when
 * its peer has read every byte it ever sent on the normal path: the
 * peer's copied_seq (the next TCP byte it will read) has reached our
 * write_seq (the next TCP byte we would queue). Both count TCP bytes only,
 * in the connection's one sequence space (a redirect moves neither; tcp_bpf
 * moves copied_seq only for bytes read from the TCP queue). This runs in
 * our sendmsg, under our socket lock: no TCP byte of ours can appear
 * meanwhile. The peer's short-circuit queue is then empty too (its owner
 * reads it before the TCP queue); checked anyway. Any doubt (no entry, no
 * socket): not yet. */
static __always_inline int accel_bp_drained(struct bpf_sock *sk, void *rxq, const void *peer)
{
	struct tcp_sock___zh *me = (void *)bpf_skc_to_tcp_sock(sk);
	struct zh_accel_rxq *q = bpf_map_lookup_elem(rxq, peer);
	struct sk_psock___zh *psock;
	struct tcp_sock___zh *pt;

	if (!me || !q)
		return 0;
	psock = (void *)q->psock;
	pt = BPF_CORE_READ(psock, sk);
	if (!pt)
		return 0;
	return BPF_CORE_READ(pt, copied_seq) == BPF_CORE_READ(me, write_seq) &&
	       (!bpf_core_field_exists(psock->msg_tot_len) || BPF_CORE_READ(psock, msg_tot_len) == 0);
}

/* This message takes the normal path without making it sticky. */
static __always_inline int accel_pass_once(void)
{
	accel_count(ZH_ACCEL_ST_FALLBACKS, 1);
	return SK_PASS;
}

/* Invariant 13, on every message that got past the closing check: 1 when
 * this message must take the normal path. In backpressure (SK_BP) until
 * the peer has read everything, then back on the short-circuit; else,
 * once per ZH_ACCEL_BP_CHECK bytes, into backpressure when the peer's
 * queue is deeper than its bound. */
static __always_inline int accel_bp(struct bpf_sock *sk, struct zh_accel_sk *st, void *rxq,
				    const void *peer, __u32 size)
{
	if (st->flags & ZH_ACCEL_SK_BP) {
		if (!accel_bp_drained(sk, rxq, peer))
			return 1;
		st->flags &= ~ZH_ACCEL_SK_BP;
		accel_count(ZH_ACCEL_ST_BP_RESUMED, 1);
		return 0;
	}
	if (accel_bp_due(st->sc_tx, size) && accel_bp_deep(rxq, peer)) {
		st->flags |= ZH_ACCEL_SK_BP;
		accel_count(ZH_ACCEL_ST_BACKPRESSURE, 1);
		return 1;
	}
	return 0;
}

/* zh_accel_msg's tail for a native IPv6 socket: the same steps on the ...6
 * maps. Written out rather than shared with the IPv4 tail so that the IPv4
 * fast path stays exactly what it was (invariant 8). */
static __always_inline int accel_msg6(struct sk_msg_md *msg, struct bpf_sock *sk, struct zh_accel_sk *st,
				      __u32 size)
{
	__u64 *nclosing = accel_nclosing_ptr();
	__u8 one = 1;

	if ((!nclosing || *nclosing) && bpf_map_lookup_elem(&accel_closing6, &st->peer6))
		return accel_fallback(st);
	if (accel_bp(sk, st, &accel_rxq6, &st->peer6, size))
		return accel_pass_once();
	if (!(st->flags & ZH_ACCEL_SK_MARKED)) {
		if (bpf_map_update_elem(&accel_rx6, &st->peer6, &one, BPF_ANY))
			return accel_fallback(st);
		st->flags |= ZH_ACCEL_SK_MARKED;
	}
	if (bpf_msg_redirect_hash(msg, &accel_sockhash6, &st->peer6, BPF_F_INGRESS) != SK_PASS)
		return accel_fallback(st);
	st->sc_tx += size;
	accel_count(ZH_ACCEL_ST_MSGS, 1);
	accel_count(ZH_ACCEL_ST_BYTES, size);
	return SK_PASS;
}

/* The fast path (invariant 8): no key build, no netns helper; the closing
 * set is looked up only while it may hold an entry. */
SEC("sk_msg")
int zh_accel_msg(struct sk_msg_md *msg)
{
	struct bpf_sock *sk = msg->sk;
	struct zh_accel_sk *st;
	__u32 size = msg->size;
	__u64 *nclosing;
	__u8 one = 1;

	if (!sk)
		return accel_fallback(NULL);
	st = bpf_sk_storage_get(&accel_sk, sk, 0, 0);
	if (!st || (st->flags & ZH_ACCEL_SK_PASS))
		return accel_fallback(st);
	if (st->policy_gen != accel_cfg_get(ZH_ACCEL_CFG_POLICY_GEN) ||
	    accel_cfg_get(ZH_ACCEL_CFG_DISABLED)) {
		accel_count(ZH_ACCEL_ST_DEMOTED, 1);
		return accel_fallback(st);
	}
	/* Invariant 6: both ends must still be ESTABLISHED. */
	if (sk->state != BPF_TCP_ESTABLISHED)
		return accel_fallback(st);
	if (st->flags & ZH_ACCEL_SK_V6)
		return accel_msg6(msg, sk, st, size);
	nclosing = accel_nclosing_ptr();
	if ((!nclosing || *nclosing) && bpf_map_lookup_elem(&accel_closing, &st->peer))
		return accel_fallback(st);
	/* Backpressure: a look once per ZH_ACCEL_BP_CHECK bytes (inv. 13). */
	if (accel_bp(sk, st, &accel_rxq, &st->peer, size))
		return accel_pass_once();
	/* Mark the peer before its queue can hold anything (invariant 7). */
	if (!(st->flags & ZH_ACCEL_SK_MARKED)) {
		if (bpf_map_update_elem(&accel_rx, &st->peer, &one, BPF_ANY))
			return accel_fallback(st);
		st->flags |= ZH_ACCEL_SK_MARKED;
	}
	if (bpf_msg_redirect_hash(msg, &accel_sockhash, &st->peer, BPF_F_INGRESS) != SK_PASS)
		return accel_fallback(st);
	st->sc_tx += size;	/* own socket's storage: no extra lookup (inv. 8) */
	accel_count(ZH_ACCEL_ST_MSGS, 1);
	accel_count(ZH_ACCEL_ST_BYTES, size);
	return SK_PASS;
}

/* ---- Holding a FIN that would drop unread short-circuited bytes (inv. 11) ---- */

#define ZH_TCP_FLAG_FIN		0x01
#define ZH_TCP_FLAG_RST		0x04
#define ZH_ACCEL_FIN_HOLD_NS	(30ULL * 1000000000ULL)

/* Has this socket's short-circuit queue (its psock's ingress_msg list)
 * anything left to read? 0 when empty or when it has no psock. */
static __always_inline int accel_queue_nonempty(struct bpf_sock *sk)
{
	struct sock___zh *ks = (void *)bpf_skc_to_tcp_sock(sk);
	struct sk_psock___zh *psock;
	struct list_head___zh *next;
	unsigned long ud;

	if (!ks)
		return 0;
	ud = (unsigned long)BPF_CORE_READ(ks, sk_user_data);
	if (!(ud & ZH_SK_USER_DATA_PSOCK))
		return 0;
	psock = (void *)(ud & ZH_SK_USER_DATA_PTRMASK);
	next = BPF_CORE_READ(psock, ingress_msg.next);
	return next && next != &psock->ingress_msg;
}

/* The peer's FIN reaches a socket that has shut down its own write side
 * (FIN_WAIT1/2), or the peer's ACK of our FIN reaches a socket whose peer
 * had closed first (LAST_ACK, CLOSING): TCP would move it to TIME_WAIT or
 * CLOSE, i.e. TCP_CLOSE, and the kernel would drop its unread short-circuit
 * queue with its psock. Drop that segment while the queue holds bytes; the
 * sender's TCP retransmits (RTO, 200 ms and up: the peer's FIN, or our FIN
 * that the peer ACKs again) and it is accepted once the owner has read the
 * queue, so the owner reads every byte and then EOF, as on the normal path.
 * Bounded: after 30 s of holding, the segment goes through (an owner that
 * does not read for that long gets the loss instead of a peer that gives
 * up). Invariant 11. */
SEC("cgroup_skb/ingress")
int zh_accel_fin(struct __sk_buff *skb)
{
	struct bpf_sock *sk = skb->sk;
	struct zh_accel_sk *st;
	__u8 ip[20], flags;
	__u32 state, thoff;
	__u64 now;

	/* Every ingress packet of the node's pods comes here: the common case
	 * leaves on the state, read from sock_common without a helper call. */
	if (!sk)
		return 1;
	state = sk->state;
	if (state != BPF_TCP_FIN_WAIT1 && state != BPF_TCP_FIN_WAIT2 &&
	    state != BPF_TCP_LAST_ACK && state != BPF_TCP_CLOSING)
		return 1;
	sk = bpf_sk_fullsock(sk);
	if (!sk)
		return 1;
	/* Not a short-circuited socket (the usual case for a socket closing
	 * first): leave before reading the packet. */
	st = bpf_sk_storage_get(&accel_sk, sk, 0, 0);
	if (!st)
		return 1;
	/* The TCP header: after the IPv4 header, or right after the fixed
	 * IPv6 one (a native IPv6 socket, invariant 10; a segment with
	 * extension headers passes unheld, none of the kernel's own TCP
	 * segments carries any). */
	if (bpf_skb_load_bytes(skb, 0, ip, sizeof(ip)))
		return 1;
	if (skb->protocol == bpf_htons(0x0800) && ip[9] == 6 /* TCP */)
		thoff = (ip[0] & 0xf) * 4;
	else if (skb->protocol == bpf_htons(0x86DD) && ip[6] == 6)
		thoff = 40;
	else
		return 1;
	if (bpf_skb_load_bytes(skb, thoff + 13, &flags, 1) || (flags & ZH_TCP_FLAG_RST))
		return 1;
	/* FIN_WAIT: only the peer's FIN ends it; LAST_ACK/CLOSING: any ACK */
	if ((state == BPF_TCP_FIN_WAIT1 || state == BPF_TCP_FIN_WAIT2) &&
	    !(flags & ZH_TCP_FLAG_FIN))
		return 1;
	if (!accel_queue_nonempty(sk))
		return 1;
	now = bpf_ktime_get_ns();
	if (!st->fin_held_ns)
		st->fin_held_ns = now;
	else if (now - st->fin_held_ns > ZH_ACCEL_FIN_HOLD_NS)
		return 1;
	accel_count(ZH_ACCEL_ST_FIN_HELD, 1);
	return 0;
}
