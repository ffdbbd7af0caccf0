// SPDX-License-Identifier: GPL-2.0
/* obs.bpf.c — L4 golden signals: one event per connection event, never per
 * packet (docs/observability.md).
 *
 * Design note
 * -----------
 * Attached (pinned bpf_links, src/agent/obs.c) to the node's cgroup, after
 * the load balancer's and the policy's connect hooks, so it sees their
 * verdicts:
 *
 *   cgroup/connect4,6  bpf_get_retval() < 0: an earlier hook refused this
 *                      connect (ECONNREFUSED: Service without endpoints;
 *                      EPERM: NetworkPolicy) -> DROP event with the address
 *                      the application asked for (not rewritten: refused)
 *   sock_ops           ACTIVE/PASSIVE_ESTABLISHED_CB  OPEN (no per-socket
 *                                          record: invariant 9)
 *                      STATE_CB (short-circuited sockets only: accel asks
 *                      for the callbacks on them, we never do; inv. 10)
 *                        ESTABLISHED -> other  publish short-circuit bytes
 *                                          for the peer (obs_scrx)
 *                        -> TCP_CLOSE      CLOSE (bytes, srtt; the agent
 *                                          adds role, duration, Service)
 *   cgroup/sock_release the application closes a TCP socket: CLOSE, or
 *                      FAIL when its SYN was never acked (invariant 10)
 *
 * Bytes: tp->bytes_acked / bytes_received count what went through TCP; the
 * same-node short-circuit (bpf/accel.bpf.c) moves bytes past TCP, counted by
 * its sk_msg in the sender's accel_sk.sc_tx (that program's own storage,
 * no extra lookup). A socket's short-circuit *received* bytes are its peer's
 * sc_tx: the peer publishes it under this socket's key in obs_scrx when it
 * leaves ESTABLISHED, and this socket takes it at TCP_CLOSE.
 *
 * Invariants:
 *  1. Cost per connection, none per packet or message: sock_ops runs a few
 *     times per connection; sk_msg adds one add to a value it already holds.
 *  2. A socket's sc_tx is final when it leaves ESTABLISHED: accel's sk_msg
 *     redirects only while the sender is ESTABLISHED (accel.bpf.c inv. 6).
 *     Its peer reaches TCP_CLOSE only after this socket sent a FIN or RST,
 *     i.e. after it left ESTABLISHED, so the peer finds the value published.
 *  3. An event that finds the ring buffer full is counted (ZH_OBS_ST_LOST),
 *     never retried: metrics may undercount, the datapath never waits.
 *  4. IPv4 connections (AF_INET, or AF_INET6 with v4-mapped ends) fill
 *     saddr/daddr/vip; a native IPv6 one fills saddr6/daddr6/vip6 and
 *     sets ZH_OBS_F_V6 (the IPv4 code path is what it was). Its CLOSE
 *     carries its Service too (vip6 does not fit the agent's pairing
 *     table, invariant 9). Its short-circuit bytes (a native IPv6
 *     connection between two pods of the node) go through obs_scrx6,
 *     keyed like accel's accel_sockhash6.
 *  5. Never changes a verdict: every program returns 1 and touches no
 *     address; connect4/6 only read the retval of the hooks before them.
 *  7. Open and close events are written without waking the agent (one
 *     wakeup per event cost more CPU than everything else here); it drains
 *     the ring buffer every ZH_OBS_DRAIN_MS (abi/obs.h).
 *  6. Bytes are payload bytes, as Istio counts them: the FIN's sequence
 *     number, which the kernel's counters include on some close paths, is
 *     taken off by the state the socket closed from at TCP_CLOSE (sock_ops
 *     runs under the socket's lock there), and as invariant 11 says at
 *     release (measured in tests/e2e/72-obs-l4.t and 83 against the bytes
 *     the client read, exactly).
 *  8. Every sock_ops program on the node's cgroup runs at every callback
 *     of every socket, so state callbacks (BPF_SOCK_OPS_STATE_CB_FLAG: 4
 *     more per end of a connection) would cost every program a run each:
 *     this program never asks for them (invariant 10), and every program
 *     returns on its op first (scripts/bench-obs-bpfcost.sh counts runs
 *     per program and op).
 *  9. No storage of our own on a socket: an sk_storage record (open time,
 *     role) cost ~0.5 us a connection to create, look up and free, a
 *     quarter of this program's time. The agent pairs CLOSE with the OPEN
 *     it drained before by socket cookie (src/agent/obs.c O11) and takes
 *     the open time, role and Service from there; CLOSE carries the
 *     bytes without the short-circuit's and with the active opener's SYN
 *     (ZH_OBS_F_RAW): the agent takes the SYN off by role and adds sc_sent.
 * 10. Close without state callbacks: a socket's CLOSE (or FAIL) is sent
 *     when its application closes it (cgroup/sock_release, one run per
 *     socket, before tcp_close()), from the kernel's counters then:
 *     sent = bytes_acked + (write_seq - snd_una) - our FIN, i.e. what
 *     was acked plus what is written and still to leave (the data a
 *     server writes just before close() counts though not acked yet);
 *     received = bytes_received - the peer's FIN. Our FIN follows from
 *     the state at release (obs_fin_out): a socket still owned by its
 *     application is CLOSE without an error only after both FINs
 *     (FIN_WAIT2 or CLOSING went to a timewait socket, or LAST_ACK was
 *     acked), with an error after a reset; the peer's is SOCK_DONE, and
 *     all of it is one whole read (invariant 11). A socket whose SYN was
 *     never acked (bytes_acked 0) and that
 *     connected (a destination port or address: a failed blocking
 *     connect's tcp_disconnect() zeroes the port) is a FAIL. A socket
 *     that gets state callbacks (tcp_sock's bpf_sock_ops_cb_flags: the
 *     short-circuit asks for them on its sockets) is closed at TCP_CLOSE
 *     by them instead: its peer publishes the short-circuit bytes only
 *     when it leaves ESTABLISHED (invariant 2), which may come after this
 *     end's release. The release context gives no addresses (the kernel
 *     allows src_* fields at post_bind only) and no bpf_skc_to_tcp_sock:
 *     the context is the socket itself, read as the kernel's types
 *     through the bpf_rdonly_cast kfunc (plain guarded loads). Cost: no
 *     callbacks added to any socket; the release runs once per socket of
 *     every kind and returns at once for all but TCP (an accel_sk lookup
 *     there cost ~330 ns a run: the flag is one load).
 * 11. A release's read is whole: no segment's changes half in it. The
 *     release runs without the socket's lock while softirq may be
 *     processing a segment of the socket on the other CPU, and the
 *     kernel changes a counter before what says what it holds:
 *     tcp_rcv_nxt_update() adds the FIN's sequence number to
 *     bytes_received, tcp_fin() sets SOCK_DONE and CLOSE_WAIT after it
 *     (bytes_acked likewise goes before snd_una). A read between the two
 *     counted the FIN as a byte: one too many, 1 in some thousands of
 *     closes (tests 72 and 83 saw it). Reading the state again after the
 *     counters would not close that: the window is the kernel's own,
 *     between two of its stores. What does: tcp_v4_rcv()/tcp_v6_rcv()
 *     take the socket's spinlock and count the segment in segs_in before
 *     changing anything, and hold the lock until done (or, while a
 *     process owns the socket, queue the segment in the backlog, which
 *     the owner's release_sock() processes before it lets go).
 *     obs_rel_read reads segs_in, then busy (the spinlock's word or the
 *     owner), then the fields, then segs_in again: a segment whose
 *     changes overlap the fields began before the first read of segs_in
 *     (then it was busy at the check) or after it (then segs_in moved).
 *     A read that is not whole (ZH_OBS_ST_REREAD) is made again after a
 *     bounded wait for the lock (bpf_loop, OBS_REL_SPIN reads), at most
 *     OBS_REL_TRIES times: cost only when a segment overlapped (1 close
 *     in 40 to 1 in 14,000 at max rate; the common path adds five
 *     loads: segs_in twice, the lock's two halves, sk_flags). Still not
 *     whole (ZH_OBS_ST_TORN), it reports what it read, off only if that
 *     segment carried a FIN or an ACK. The proof needs the loads in
 *     program order (obs_barrier) and the kernel's stores seen in theirs:
 *     x86 gives both; another architecture would need acquire loads.
 *     The peer's FIN is SOCK_DONE, which only tcp_fin() sets and a reset
 *     leaves: a reset after the peer's FIN (CLOSE with an error) no
 *     longer loses it. Our FIN is still read from the state (only the
 *     application's shutdown() sends it before release): a reset after
 *     that shutdown reads as no FIN, one byte too many sent.
 */
#include <linux/bpf.h>
#include <linux/in.h>
#include <linux/errno.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>
#include <bpf/bpf_core_read.h>

#include "zerohop/abi/obs.h"
#include "zerohop/abi/lb.h"
#include "zerohop/abi/accel.h"
#include "lib/v4mapped.h"
#include "lib/accel_key.h"

char LICENSE[] SEC("license") = "GPL";

#define TCP_SYN_SENT_STATE 2	/* BPF_TCP_SYN_SENT */

/* Connection events for the agent (obs.c consumes, aggregates, streams). */
struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, ZH_OBS_RINGBUF_BYTES);
} obs_events SEC(".maps");

/* Short-circuit bytes received: receiver's accel key -> the bytes its peer
 * sent past TCP (invariant 2). LRU: an entry whose receiver never closes is
 * forgotten, never a leak. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 16384);
	__type(key, struct zh_accel_key);
	__type(value, __u64);
} obs_scrx SEC(".maps");

/* The same for native IPv6 sockets (accel's accel_sockhash6 twins). */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 16384);
	__type(key, struct zh_accel_key6);
	__type(value, __u64);
} obs_scrx6 SEC(".maps");

/* Per-CPU counters, enum zh_obs_stat. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, ZH_OBS_ST_MAX);
	__type(key, __u32);
	__type(value, __u64);
} obs_stats SEC(".maps");

/* Shared with bpf/lb.bpf.c (same definition; the agent reuses the pinned
 * map): the Service VIP a client socket asked for. */
struct {
	__uint(type, BPF_MAP_TYPE_SK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct zh_lb_sock_val);
} lb_sock SEC(".maps");

/* Shared with bpf/accel.bpf.c (same definition; the agent reuses the map
 * the pinned accel programs hold): sc_tx and the peer key. */
struct {
	__uint(type, BPF_MAP_TYPE_SK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct zh_accel_sk);
} accel_sk SEC(".maps");

static __always_inline void obs_count(__u32 idx)
{
	__u64 *v = bpf_map_lookup_elem(&obs_stats, &idx);

	if (v)
		*v += 1;	/* per-CPU slot */
}

/* A zeroed record: struct zh_obs_event, or with v6 (a constant the
 * verifier sees on each path: it bounds what the record may be written
 * at) a struct zh_obs_event6 (invariant 4). */
static __always_inline struct zh_obs_event *obs_reserve(const int v6)
{
	struct zh_obs_event *e;

	if (v6) {
		e = bpf_ringbuf_reserve(&obs_events, sizeof(struct zh_obs_event6), 0);
		if (e)
			__builtin_memset(e, 0, sizeof(struct zh_obs_event6));
	} else {
		e = bpf_ringbuf_reserve(&obs_events, sizeof(*e), 0);
		if (e)
			__builtin_memset(e, 0, sizeof(*e));
	}
	if (!e) {
		obs_count(ZH_OBS_ST_LOST);	/* invariant 3 */
		return NULL;
	}
	e->ts_ns = bpf_ktime_get_ns();
	if (v6)
		e->flags = ZH_OBS_F_V6;
	return e;
}

/* Open and close events do not wake the agent (invariant 7): it drains
 * the ring every ZH_OBS_DRAIN_MS. Drops and failures (rare, and what a
 * follower of the flow log waits for) wake it at once. */
static __always_inline void obs_submit(struct zh_obs_event *e)
{
	bpf_ringbuf_submit(e, e->type == ZH_OBS_EV_OPEN || e->type == ZH_OBS_EV_CLOSE ?
				      BPF_RB_NO_WAKEUP : 0);
	obs_count(ZH_OBS_ST_EVENTS);
}

/* ---- sock_ops: open, close, fail ----------------------------------------- */

/* A TCP socket of either family we count (invariant 4)? */
static __always_inline int obs_family_ok(struct bpf_sock_ops *skops)
{
	__u32 f = skops->family;

	return f == ZH_AF_INET || f == ZH_AF_INET6;
}

/* An event of this socket: reserved, addresses and cookie filled; *v6
 * set to 0 or 1 as a constant on each path (invariant 4); NULL for a
 * full ring (invariant 3). */
static __always_inline struct zh_obs_event *obs_reserve_sk(struct bpf_sock_ops *skops, int *v6)
{
	struct zh_obs_event *e;
	__u32 lip, rip;

	if (zh_sockops_v4(skops, &lip, &rip)) {
		*v6 = 0;
		e = obs_reserve(0);
		if (!e)
			return NULL;
		e->saddr = lip;
		e->daddr = rip;
	} else {
		struct zh_obs_event6 *e6;

		*v6 = 1;
		e = obs_reserve(1);
		if (!e)
			return NULL;
		e6 = (struct zh_obs_event6 *)e;
		/* word by word through volatile reads: clang would merge two
		 * context loads into one 8-byte load, which the verifier
		 * refuses */
		for (int i = 0; i < 4; i++) {
			((__u32 *)e6->saddr6)[i] = *(volatile __u32 *)&skops->local_ip6[i];
			((__u32 *)e6->daddr6)[i] = *(volatile __u32 *)&skops->remote_ip6[i];
		}
	}
	e->sport = (__u16)skops->local_port;
	e->dport = (__u16)bpf_ntohl(skops->remote_port);
	e->cookie = bpf_get_socket_cookie(skops);
	return e;
}

/* The Service a client socket asked for (lb_sock, written at connect). */
static __always_inline void obs_svc(struct zh_obs_event *e, struct bpf_sock *sk, const int v6)
{
	struct zh_lb_sock_val *sv = bpf_sk_storage_get(&lb_sock, sk, 0, 0);

	if (!sv)
		return;
	if (v6)
		__builtin_memcpy(((struct zh_obs_event6 *)e)->vip6, sv->vip, 16);
	else
		__builtin_memcpy(&e->vip, &sv->vip[12], 4);
	e->vport = bpf_ntohs(sv->vport);
	e->flags |= ZH_OBS_F_SVC;
}

/* ---- connect: refusals by the hooks before us -------------------------- */

/* dst6: a native IPv6 destination (16 bytes), else NULL and dst. */
static __always_inline int obs_connect(struct bpf_sock_addr *ctx, __u32 dst, const __u32 *dst6)
{
	struct zh_obs_event *e;
	int rv;

	if (ctx->protocol != IPPROTO_TCP)
		return 1;
	rv = bpf_get_retval();
	if (rv >= 0)
		return 1;
	e = obs_reserve(dst6 != NULL);
	if (!e)
		return 1;
	if (dst6)
		__builtin_memcpy(((struct zh_obs_event6 *)e)->daddr6, dst6, 16);
	e->type = ZH_OBS_EV_DROP;
	e->role = ZH_OBS_ROLE_CLIENT;
	e->reason = rv == -ECONNREFUSED ? ZH_OBS_R_NO_BACKEND :
		    rv == -EPERM ? ZH_OBS_R_POLICY : ZH_OBS_R_OTHER;
	e->cookie = bpf_get_socket_cookie(ctx);
	e->cgid = bpf_get_current_cgroup_id();
	e->daddr = dst;
	e->dport = bpf_ntohs((__u16)ctx->user_port);
	if (ctx->sk)	/* the LB translated before policy refused: its VIP */
		obs_svc(e, ctx->sk, dst6 != NULL);
	obs_submit(e);
	return 1;	/* invariant 5 */
}

SEC("cgroup/connect4")
int zh_obs_connect4(struct bpf_sock_addr *ctx)
{
	return obs_connect(ctx, ctx->user_ip4, NULL);
}

SEC("cgroup/connect6")
int zh_obs_connect6(struct bpf_sock_addr *ctx)
{
	if (!zh_is_v4mapped(ctx->user_ip6[0], ctx->user_ip6[1], ctx->user_ip6[2])) {
		__u32 d[4] = { ctx->user_ip6[0], ctx->user_ip6[1], ctx->user_ip6[2],
			       ctx->user_ip6[3] };

		return obs_connect(ctx, 0, d);	/* invariant 4 */
	}
	return obs_connect(ctx, ctx->user_ip6[3], NULL);
}

static __always_inline void obs_open(struct bpf_sock_ops *skops, __u8 role)
{
	struct bpf_sock *sk = skops->sk;
	struct zh_obs_event *e;
	int v6;

	if (!sk || !obs_family_ok(skops))
		return;
	e = obs_reserve_sk(skops, &v6);
	if (!e)
		return;	/* its CLOSE finds no OPEN in the agent: not counted */
	e->type = ZH_OBS_EV_OPEN;
	e->role = role;
	e->srtt_us = skops->srtt_us >> 3;
	if (role == ZH_OBS_ROLE_CLIENT)
		obs_svc(e, sk, v6);
	obs_submit(e);
}

/* Leaving ESTABLISHED: this socket's sc_tx is final (invariant 2); publish
 * it under the peer's key for the peer's CLOSE. */
static __always_inline void obs_publish_sc(struct bpf_sock_ops *skops)
{
	struct zh_accel_sk *as;
	struct bpf_sock *sk = skops->sk;
	__u64 v;

	if (!sk)
		return;
	as = bpf_sk_storage_get(&accel_sk, sk, 0, 0);
	if (!as || !as->sc_tx)
		return;
	v = as->sc_tx;
	if (as->flags & ZH_ACCEL_SK_V6)
		bpf_map_update_elem(&obs_scrx6, &as->peer6, &v, BPF_ANY);
	else
		bpf_map_update_elem(&obs_scrx, &as->peer, &v, BPF_ANY);
}

/* Payload bytes through TCP (invariant 6). bytes_acked counts sequence
 * numbers: the active opener's SYN (acked by the SYN-ACK; a passive
 * socket starts past its SYN-ACK) and our FIN once acked (we closed from
 * FIN_WAIT2, LAST_ACK or CLOSING). bytes_received counts the peer's FIN
 * once it arrived (CLOSE_WAIT and everything after it, FIN_WAIT2 closing
 * through TIME_WAIT). Measured on this kernel: tests/e2e/72-obs-l4.t.
 * The SYN depends on the role, which the agent knows (invariant 9): it
 * is left in, and taken off there (src/agent/obs.c O11). */
static __always_inline __u64 obs_sent_but_syn(struct bpf_sock_ops *skops, __u32 old)
{
	__u64 n = skops->bytes_acked;

	if (n && (old == BPF_TCP_FIN_WAIT2 || old == BPF_TCP_LAST_ACK || old == BPF_TCP_CLOSING))
		n--;
	return n;
}

static __always_inline __u64 obs_payload_recv(struct bpf_sock_ops *skops, __u32 old)
{
	__u64 n = skops->bytes_received;

	if (n && (old == BPF_TCP_CLOSE_WAIT || old == BPF_TCP_LAST_ACK || old == BPF_TCP_CLOSING ||
		  old == BPF_TCP_FIN_WAIT2))
		n--;
	return n;
}

/* CLOSE without the role, open time or Service (invariant 9: the agent
 * has them from the OPEN), or FAIL from SYN_SENT. */
static __always_inline void obs_close(struct bpf_sock_ops *skops, __u32 old)
{
	struct bpf_sock *sk = skops->sk;
	struct zh_accel_key6 key6 = {};
	struct zh_accel_key key = {};
	struct zh_obs_event *e;
	struct zh_accel_sk *as;
	__u64 *rx = NULL;
	int v6;

	if (!sk)
		return;
	e = obs_reserve_sk(skops, &v6);
	if (!e)
		return;
	if (old == TCP_SYN_SENT_STATE) {
		e->type = ZH_OBS_EV_FAIL;
		e->reason = ZH_OBS_R_REFUSED;
		e->role = ZH_OBS_ROLE_CLIENT;
		obs_svc(e, sk, v6);
		obs_submit(e);
		return;
	}
	e->type = ZH_OBS_EV_CLOSE;
	e->flags |= ZH_OBS_F_RAW;
	if (v6)
		obs_svc(e, sk, 1);	/* invariant 4 */
	e->srtt_us = skops->srtt_us >> 3;
	e->bytes_sent = obs_sent_but_syn(skops, old);
	e->bytes_recv = obs_payload_recv(skops, old);
	as = bpf_sk_storage_get(&accel_sk, sk, 0, 0);
	if (as) {
		e->flags |= ZH_OBS_F_SC;
		e->sc_sent = as->sc_tx;	/* the agent adds it to bytes_sent */
		if (as->flags & ZH_ACCEL_SK_V6) {
			if (accel_key6_from_sockops(&key6, skops))
				rx = bpf_map_lookup_elem(&obs_scrx6, &key6);
			if (rx) {
				e->bytes_recv += *rx;
				bpf_map_delete_elem(&obs_scrx6, &key6);
			}
		} else if (accel_key_from_sockops(&key, skops)) {
			rx = bpf_map_lookup_elem(&obs_scrx, &key);
			if (rx) {
				e->bytes_recv += *rx;
				bpf_map_delete_elem(&obs_scrx, &key);
			}
		}
	}
	obs_submit(e);
}

/* ---- sock_release: close and fail without state callbacks (inv. 10) ---- */

/* The kernel objects read at release, by CO-RE (field offsets from the
 * running kernel's BTF; the "___zh" suffix is ignored when matching). */
struct in6_addr___zh {
	union {
		__u32 u6_addr32[4];
	} in6_u;
} __attribute__((preserve_access_index));
struct sock_common___zh {
	__u32 skc_daddr;
	__u32 skc_rcv_saddr;
	__u16 skc_dport;	/* network order */
	__u16 skc_num;		/* host order */
	unsigned char skc_state;
	unsigned long skc_flags;	/* sk_flags: enum sock_flags bits */
	struct in6_addr___zh skc_v6_daddr;
	struct in6_addr___zh skc_v6_rcv_saddr;
} __attribute__((preserve_access_index));
/* The socket lock's two halves (socket_lock_t): the spinlock softirq
 * holds while it processes a segment (its word is non-zero while held or
 * waited for), and the owner flag a process sets with lock_sock(), while
 * which segments wait in the backlog. */
struct qspinlock___zh {
	union {
		struct {
			int counter;
		} val;
	};
} __attribute__((preserve_access_index));
struct raw_spinlock___zh {
	struct qspinlock___zh raw_lock;
} __attribute__((preserve_access_index));
struct spinlock___zh {
	union {
		struct raw_spinlock___zh rlock;
	};
} __attribute__((preserve_access_index));
struct sock___zh {
	struct sock_common___zh __sk_common;
	struct {
		struct spinlock___zh slock;
		int owned;
	} sk_lock;
	int sk_err;
} __attribute__((preserve_access_index));
struct tcp_sock___zh {
	__u64 bytes_received;
	__u64 bytes_acked;
	__u32 segs_in;
	__u32 snd_una;
	__u32 write_seq;
	__u32 srtt_us;
	__u8 bpf_sock_ops_cb_flags;
} __attribute__((preserve_access_index));
/* sk_flags bit set by tcp_fin() only, when the peer's FIN entered
 * rcv_nxt (and bytes_received); a reset leaves it as it was. */
enum sock_flags___zh {
	SOCK_DONE___zh = 1,
};

#define TCP_LISTEN_STATE 10	/* BPF_TCP_LISTEN */

/* kfunc (kernel 6.3+): obj as a read-only pointer to the kernel type
 * btf_id; loads through it are guarded by the verifier. */
extern void *bpf_rdonly_cast(void *obj, __u32 btf_id) __ksym;

/* Has this end's FIN entered the sequence space (write_seq, and
 * bytes_acked once acked)? By the state at release, before tcp_close()
 * adds anything: a socket still owned by its application is CLOSE with no
 * error only after both FINs (FIN_WAIT2 or CLOSING -> TIME_WAIT hands the
 * connection to a timewait socket; LAST_ACK -> CLOSE). Only the
 * application's own shutdown() sends this FIN before release, so only a
 * reset can race it; a reset after that shutdown (CLOSE with an error)
 * reads as no FIN (invariant 11). The peer's FIN is not read from the
 * state: see obs_rel_read. */
static __always_inline int obs_fin_out(__u32 st, int err)
{
	return st == BPF_TCP_FIN_WAIT1 || st == BPF_TCP_FIN_WAIT2 || st == BPF_TCP_CLOSING ||
	       st == BPF_TCP_LAST_ACK || st == BPF_TCP_TIME_WAIT || (st == BPF_TCP_CLOSE && !err);
}

/* What the release reports, read without the socket's lock. */
struct obs_rel {
	__u64 acked, rcvd;
	__u32 st, una, wseq;
	int err;
	int fin_in;	/* the peer's FIN is in rcvd (SOCK_DONE) */
};

/* Keeps clang from moving loads across it: obs_rel_read's order is its
 * proof (invariant 11). x86 keeps loads in order, and the kernel's
 * stores reach us in theirs. */
#define obs_barrier() asm volatile("" ::: "memory")

/* Is a segment of this socket in progress: softirq holds its spinlock
 * (tcp_v4_rcv/tcp_v6_rcv, for the whole of the segment's processing),
 * or a process owns it (lock_sock), while which segments wait in the
 * backlog and its release_sock() processes them? */
static __always_inline int obs_busy(struct sock___zh *s)
{
	return *(volatile int *)&s->sk_lock.slock.rlock.raw_lock.val.counter |
	       *(volatile int *)&s->sk_lock.owned;
}

/* One read of the counters and the FIN flags, and whether it is whole:
 * 1 when no segment's processing overlapped it (invariant 11). The
 * kernel counts every segment in segs_in first thing under the lock,
 * before it changes anything: a segment that began before the first read
 * of segs_in and had not finished shows as busy, one that began after it
 * and changed a counter before the last read moved segs_in. */
static __always_inline int obs_rel_read(struct sock___zh *s, struct tcp_sock___zh *tp,
					struct obs_rel *r)
{
	__u32 seg = *(volatile __u32 *)&tp->segs_in;
	int busy;

	obs_barrier();
	busy = obs_busy(s);
	obs_barrier();
	r->st = s->__sk_common.skc_state;
	r->fin_in = (s->__sk_common.skc_flags >>
		     bpf_core_enum_value(enum sock_flags___zh, SOCK_DONE___zh)) & 1;
	r->err = s->sk_err;
	r->acked = tp->bytes_acked;
	r->rcvd = tp->bytes_received;
	r->una = tp->snd_una;
	r->wseq = tp->write_seq;
	obs_barrier();
	return !busy && *(volatile __u32 *)&tp->segs_in == seg;
}

/* How many times obs_rel_wait reads the lock at most (a few ns a read):
 * a softirq's segment takes a few us; an owner may take longer, and the
 * release then reports what it read (ZH_OBS_ST_TORN). */
#define OBS_REL_SPIN 4096

/* How many more reads after one that was not whole: a segment that
 * lands during the second (an ACK right after the FIN) is read past by
 * the third. */
#define OBS_REL_TRIES 2

struct obs_rel_spin_ctx {
	struct sock___zh *s;
};

static long obs_rel_spin(__u32 i, void *c)
{
	return !obs_busy(((struct obs_rel_spin_ctx *)c)->s);	/* 1: stop */
}

/* Waits, bounded, for a segment in progress to finish. Runs only after
 * a read that was not whole (ZH_OBS_ST_REREAD): no cost otherwise.
 * bpf_loop: the verifier checks the callback once, where a loop of
 * loads would be walked for every iteration. */
static __always_inline void obs_rel_wait(struct sock___zh *s)
{
	struct obs_rel_spin_ctx c = { s };	/* bpf_loop's context is on the stack */

	bpf_loop(OBS_REL_SPIN, obs_rel_spin, &c, 0);
}

/* Did this socket ever connect? A destination port, or, after a blocking
 * connect that failed (the kernel's tcp_disconnect() zeroes the port but
 * keeps the address), a destination address. */
static __always_inline int obs_connected(struct sock_common___zh *skc, __u32 family)
{
	if (skc->skc_dport || skc->skc_daddr)
		return 1;
	if (family != ZH_AF_INET6)
		return 0;
	return skc->skc_v6_daddr.in6_u.u6_addr32[0] | skc->skc_v6_daddr.in6_u.u6_addr32[1] |
	       skc->skc_v6_daddr.in6_u.u6_addr32[2] | skc->skc_v6_daddr.in6_u.u6_addr32[3];
}

/* An event of this socket at release, as obs_reserve_sk does from
 * sock_ops. A cgroup/sock_release context exposes no addresses (the
 * kernel allows src_* only at post_bind), so they are read from the
 * socket itself: sock_common, by CO-RE. IPv4 for AF_INET and for an
 * AF_INET6 socket with v4-mapped ends (skc_daddr and skc_rcv_saddr hold
 * them then, lib/v4mapped.h), else IPv6. */
static __always_inline struct zh_obs_event *obs_reserve_bsk(struct sock_common___zh *skc,
							    __u32 family, int *v6)
{
	__u32 l6[4] = {}, r6[4] = {};
	struct zh_obs_event *e;

	if (family == ZH_AF_INET6)
		for (int i = 0; i < 4; i++) {
			l6[i] = skc->skc_v6_rcv_saddr.in6_u.u6_addr32[i];
			r6[i] = skc->skc_v6_daddr.in6_u.u6_addr32[i];
		}
	if (family == ZH_AF_INET || (zh_is_v4mapped(l6[0], l6[1], l6[2]) &&
				     zh_is_v4mapped(r6[0], r6[1], r6[2]))) {
		*v6 = 0;
		e = obs_reserve(0);
		if (!e)
			return NULL;
		e->saddr = skc->skc_rcv_saddr;
		e->daddr = skc->skc_daddr;
	} else {
		struct zh_obs_event6 *e6;

		*v6 = 1;
		e = obs_reserve(1);
		if (!e)
			return NULL;
		e6 = (struct zh_obs_event6 *)e;
		__builtin_memcpy(e6->saddr6, l6, 16);
		__builtin_memcpy(e6->daddr6, r6, 16);
	}
	e->sport = skc->skc_num;
	e->dport = bpf_ntohs(skc->skc_dport);
	return e;
}

/* The application closes a TCP socket (cgroup/sock_release, before
 * tcp_close): its CLOSE, or its FAIL when it never got established
 * (invariant 10). A short-circuited socket is left to the state
 * callbacks, which the short-circuit asked for on it (its peer's bytes
 * are published only once the peer leaves ESTABLISHED). */
SEC("cgroup/sock_release")
int zh_obs_release(struct bpf_sock *sk)
{
	struct sock_common___zh *skc;
	struct tcp_sock___zh *tp;
	struct zh_obs_event *e;
	struct sock___zh *s;
	struct obs_rel r;
	__u32 st, srtt, family = sk->family;
	int v6;

	if (sk->protocol != IPPROTO_TCP || (family != ZH_AF_INET && family != ZH_AF_INET6))
		return 1;
	/* The context is the kernel's struct sock of a TCP socket (checked
	 * above), which struct sock_common and struct tcp_sock start at: read
	 * as those kernel types through bpf_rdonly_cast (a kfunc: plain loads
	 * the verifier guards, no helper call per field; a cgroup/sock
	 * program has no bpf_skc_to_tcp_sock). */
	skc = bpf_rdonly_cast(sk, bpf_core_type_id_kernel(struct sock_common___zh));
	tp = bpf_rdonly_cast(sk, bpf_core_type_id_kernel(struct tcp_sock___zh));
	st = skc->skc_state;
	if (st == TCP_LISTEN_STATE || !obs_connected(skc, family))
		return 1;	/* a listener, or never connected */
	/* A socket that gets state callbacks (the short-circuit asked for
	 * them) is closed there, at TCP_CLOSE; one load, where an
	 * accel_sk lookup cost ~330 ns a run here. */
	if (tp->bpf_sock_ops_cb_flags & BPF_SOCK_OPS_STATE_CB_FLAG)
		return 1;
	srtt = tp->srtt_us;
	s = bpf_rdonly_cast(sk, bpf_core_type_id_kernel(struct sock___zh));
	if (!obs_rel_read(s, tp, &r)) {
		/* a segment changed the socket while it read: again, after
		 * it, a bounded number of times (invariant 11) */
		obs_count(ZH_OBS_ST_REREAD);
		for (int i = 0;; i++) {
			if (i == OBS_REL_TRIES) {
				obs_count(ZH_OBS_ST_TORN);
				break;
			}
			obs_rel_wait(s);
			if (obs_rel_read(s, tp, &r))
				break;
		}
	}
	e = obs_reserve_bsk(skc, family, &v6);
	if (!e)
		return 1;
	e->cookie = bpf_get_socket_cookie(sk);
	if (!r.acked && (r.st == BPF_TCP_SYN_SENT || r.st == BPF_TCP_CLOSE)) {
		/* the SYN was never acked: a connect that failed */
		e->type = ZH_OBS_EV_FAIL;
		e->reason = ZH_OBS_R_REFUSED;
		e->role = ZH_OBS_ROLE_CLIENT;
		obs_svc(e, sk, v6);
		obs_submit(e);
		return 1;
	}
	e->type = ZH_OBS_EV_CLOSE;
	e->flags |= ZH_OBS_F_RAW;
	if (v6)
		obs_svc(e, sk, 1);	/* invariant 4 */
	e->srtt_us = srtt >> 3;
	/* acked, plus what is written and not yet acked (it leaves after
	 * close), without our FIN: payload plus the active opener's SYN,
	 * which the agent takes off by role (invariant 9) */
	e->bytes_sent = r.acked + (__u32)(r.wseq - r.una) - obs_fin_out(r.st, r.err);
	e->bytes_recv = r.rcvd - (r.rcvd ? r.fin_in : 0);
	obs_submit(e);
	return 1;
}

SEC("sockops")
int zh_obs_sockops(struct bpf_sock_ops *skops)
{
	__u32 old, new;

	/* The op first (invariant 8): of the ~17 callbacks of a connection
	 * (9 without the state ones, docs/observability.md "Cost"), 7 are
	 * nothing to us; they return before any other context read. */
	switch (skops->op) {
	case BPF_SOCK_OPS_ACTIVE_ESTABLISHED_CB:
		obs_open(skops, ZH_OBS_ROLE_CLIENT);
		break;
	case BPF_SOCK_OPS_PASSIVE_ESTABLISHED_CB:
		obs_open(skops, ZH_OBS_ROLE_SERVER);
		break;
	case BPF_SOCK_OPS_STATE_CB:
		/* only sockets another program asked the callbacks for (the
		 * short-circuit, on its sockets) come here; they are closed
		 * here, every other one at release (invariant 10) */
		old = skops->args[0];
		new = skops->args[1];
		if (old == BPF_TCP_ESTABLISHED && new != BPF_TCP_ESTABLISHED)
			obs_publish_sc(skops);
		if (new == BPF_TCP_CLOSE)
			obs_close(skops, old);
		break;
	}
	return 1;
}
