/* abi/obs.h — types shared by the connection-signal BPF program
 * (bpf/obs.bpf.c) and the agent (src/agent/obs.c). Types only: fixed-width
 * fields, explicit padding, sizes asserted; compiled by clang -target bpf
 * and gcc.
 *
 * One event per connection event, never per packet (docs/observability.md):
 *   OPEN   a TCP connection of a local pod became ESTABLISHED (either end)
 *   CLOSE  it reached TCP_CLOSE: the kernel's byte counts and srtt, plus the
 *          bytes the same-node short-circuit (accel sk_msg) moved for it
 *   FAIL   an active open died in SYN_SENT (RST: refused, or timed out)
 *   DROP   connect() was refused by a hook before any packet: no backend
 *          (ZH_OBS_R_NO_BACKEND, bpf/lb.bpf.c invariant 3) or policy
 *          (ZH_OBS_R_POLICY, bpf/policy.bpf.c pol_connect)
 *
 * Map overview (details and limits in docs/maps.md):
 *   obs_events  ringbuf                 struct zh_obs_event records, or
 *                                       struct zh_obs_event6 (ZH_OBS_F_V6)
 *   obs_stats   percpu array u32 (ZH_OBS_ST_*) -> u64 counters
 */
#ifndef ZH_ABI_OBS_H
#define ZH_ABI_OBS_H

#include <linux/types.h>

#define ZH_OBS_RINGBUF_BYTES	(1 << 20)	/* 1 MiB: ~11,900 IPv4 events of backlog */
#define ZH_OBS_DRAIN_MS		100	/* the agent drains open/close events this often */

enum zh_obs_ev_type {
	ZH_OBS_EV_OPEN = 1,
	ZH_OBS_EV_CLOSE = 2,
	ZH_OBS_EV_FAIL = 3,
	ZH_OBS_EV_DROP = 4,
};

/* Why a connection was dropped or failed; also the `reason` metric label
 * (src/agent/obs.c zh_obs_reason_name). */
enum zh_obs_reason {
	ZH_OBS_R_NONE = 0,
	ZH_OBS_R_POLICY = 1,		/* connect() denied by NetworkPolicy (EPERM) */
	ZH_OBS_R_NO_BACKEND = 2,	/* Service without ready endpoints (ECONNREFUSED) */
	ZH_OBS_R_REFUSED = 3,		/* SYN_SENT -> CLOSE: reset by the peer or timed out */
	ZH_OBS_R_OTHER = 4,		/* connect() failed with another error */
	ZH_OBS_R_MAX,
};

enum zh_obs_role {
	ZH_OBS_ROLE_CLIENT = 1,		/* active open: this socket connected */
	ZH_OBS_ROLE_SERVER = 2,		/* passive open: accepted */
};

enum zh_obs_flags {
	ZH_OBS_F_SVC = 1 << 0,		/* vip/vport hold the Service the client asked for */
	ZH_OBS_F_L7 = 1 << 1,		/* the connection went to the node proxy (L7 Service) */
	ZH_OBS_F_SC = 1 << 2,		/* the socket was in the short-circuit (accel) */
	/* CLOSE as the kernel writes it (bpf/obs.bpf.c invariant 9): no role,
	 * dur_ms or Service (the agent takes them from the OPEN with the same
	 * cookie); bytes_sent still holds the active opener's SYN and not
	 * sc_sent. The agent finishes the event and clears the flag. */
	ZH_OBS_F_RAW = 1 << 3,
	/* a native IPv6 connection: the record is a struct zh_obs_event6,
	 * the addresses are its saddr6/daddr6 (and vip6 with F_SVC);
	 * saddr/daddr/vip are 0 (bpf/obs.bpf.c invariant 4) */
	ZH_OBS_F_V6 = 1 << 4,
};

struct zh_obs_event {
	__u64 ts_ns;		/* bpf_ktime_get_ns() at the event */
	__u64 cookie;		/* socket cookie */
	__u64 cgid;		/* cgroup id of the current task (DROP, OPEN client), else 0 */
	__u64 bytes_sent;	/* CLOSE: TCP bytes acked + short-circuit bytes sent */
	__u64 bytes_recv;	/* CLOSE: TCP bytes received (short-circuit ones: the agent pairs) */
	__u64 sc_sent;		/* CLOSE: of bytes_sent, moved by the short-circuit */
	__u32 saddr;		/* this socket's local address, network order (DROP: 0 or bound) */
	__u32 daddr;		/* its remote address (DROP: the destination asked for) */
	__u16 sport;		/* host order */
	__u16 dport;		/* host order */
	__u32 vip;		/* F_SVC: the Service VIP, network order */
	__u16 vport;		/* F_SVC: its port, host order */
	__u8 type;		/* enum zh_obs_ev_type */
	__u8 reason;		/* enum zh_obs_reason */
	__u8 role;		/* enum zh_obs_role */
	__u8 flags;		/* enum zh_obs_flags */
	__u16 pad;
	__u32 srtt_us;		/* CLOSE/OPEN: the kernel's smoothed RTT (tp->srtt_us >> 3) */
	__u32 dur_ms;		/* CLOSE: ms since OPEN (0 when OPEN was not seen) */
};
_Static_assert(sizeof(struct zh_obs_event) == 80, "zh_obs_event size");

/* The record of a native IPv6 connection (ZH_OBS_F_V6): the IPv4 record
 * and the three IPv6 addresses. A separate, longer record so that IPv4
 * events keep their size (a 128-byte record for every event cost ~20 ns
 * more per sock_ops run: docs/observability.md "IPv6"). */
struct zh_obs_event6 {
	struct zh_obs_event e;
	__u8 saddr6[16];	/* as saddr */
	__u8 daddr6[16];	/* as daddr */
	__u8 vip6[16];		/* with F_SVC: as vip (a CLOSE carries it too) */
};
_Static_assert(sizeof(struct zh_obs_event6) == 128, "zh_obs_event6 size");

/* obs_stats indices; also metric names (docs/maps.md). */
enum zh_obs_stat {
	ZH_OBS_ST_EVENTS = 0,		/* events written to obs_events */
	ZH_OBS_ST_LOST,			/* events lost: ring buffer full (metrics undercount) */
	ZH_OBS_ST_REREAD,		/* a release read overlapped a segment: read again */
	ZH_OBS_ST_TORN,			/* ... and again: its bytes may be off (obs.bpf.c inv. 11) */
	ZH_OBS_ST_MAX,
};

#endif
