/* identity.h — workload identity: a cluster CA and X.509 SVIDs (prefix id_).
 *
 * Every pod has a SPIFFE ID, spiffe://TRUST_DOMAIN/ns/NAMESPACE/sa/SA,
 * from its ServiceAccount (md_pod_service_account: "default" when none).
 * A cluster CA, kept with the cluster's state, issues each node short-lived
 * X.509-SVIDs for the pods scheduled on that node, and only for those.
 * docs/identity.md is the user's page; the mTLS tunnel that will present
 * these certificates is not built yet (it needs HTTP/2 CONNECT).
 *
 * The CA directory (CA_DIR = STATE_DIR/ca, mode 0700, root only):
 *   trust-domain     the trust domain, one line ("cluster.local" by default)
 *   ca.key           the active CA's private key (EC P-256, mode 0600)
 *   ca.crt           the active CA's certificate (self-signed, mode 0644)
 *   previous.crt     after a rotation: the CA before it, trusted until
 *                    `ca rotate --finish` or its own expiry (mode 0644)
 *   bundle.pem       the trust bundle: ca.crt then previous.crt (mode 0644)
 * The previous CA's key is deleted at rotation: nothing is ever signed by
 * it again, its certificates stay valid only through the bundle.
 *
 * A node's SVID directory (OUT_DIR, mode 0700):
 *   NAMESPACE_POD.crt   the SVID (leaf only; mode 0644)
 *   NAMESPACE_POD.key   its private key (EC P-256, mode 0600)
 *   bundle.pem          a copy of the trust bundle
 *
 * Invariants:
 *  I1 A private key is only ever written to a file created with mode 0600
 *     in a directory of mode 0700, through a temporary name and rename():
 *     no reader sees a half key, and no key is ever world- or
 *     group-readable, whatever the umask. Keys are never logged or printed.
 *  I2 id_issue_node() issues for a pod only when spec.nodeName is the node
 *     asking: a node can get certificates only for its own pods (-EPERM
 *     with the pod named otherwise, through id_issue_pod()).
 *  I3 An SVID has exactly one URI SAN, the pod's SPIFFE ID, CA:FALSE, key
 *     usage digitalSignature + keyEncipherment, extended key usage server
 *     and client auth (the SPIFFE X.509-SVID profile), and a validity of
 *     the requested TTL (24 h by default) starting one minute in the past
 *     (clock skew between nodes).
 *  I4 An SVID is renewed once half of its lifetime has passed, or when it
 *     no longer verifies against the active CA, or names another identity
 *     (the pod's ServiceAccount changed): id_issue_node() is idempotent
 *     and cheap when nothing is due.
 *  I5 During a CA rotation the bundle holds both CAs, so that SVIDs of the
 *     old CA and of the new one verify everywhere until every node has
 *     renewed (I4 renews them at the next call, since they no longer
 *     verify against the active CA; the node agent waits ID_CA_SETTLE_S
 *     first, I11).
 *  I10 A renewed SVID's key and certificate are written as a pair: both
 *     temporaries first, then two renames back to back, key first. A
 *     reader that finds a key not matching its certificate reads both
 *     again (ID_SVID_READ_TRIES): it was between the two renames.
 *  I11 Trust before use. id_issue_node() copies the bundle into the node's
 *     directory before it issues anything, so a node trusts a new CA
 *     before any of its pods presents an SVID of it. The node agent
 *     (id_issue_node_settle) renews an SVID of the previous CA (still in
 *     the bundle) only once the active CA is ID_CA_SETTLE_S old: by then
 *     every agent has copied the new bundle (each looks once a second, I6)
 *     and every proxy has re-read it (hbone_out.h O10, once a second), so
 *     no peer meets an SVID of a CA it does not trust yet. `ca rotate
 *     --finish` is refused until every SVID it can see is of the active CA
 *     and at least ID_SVID_SETTLE_MS old (id_ca_finish_ready), unless
 *     forced.
 *
 * All calls return 0 or -errno; err (when not NULL) gets a one-line reason.
 */
#ifndef ZH_IDENTITY_H
#define ZH_IDENTITY_H

#include <stdbool.h>
#include <stddef.h>
#include <time.h>

#include "zerohop/model.h"

#define ID_DEFAULT_TRUST_DOMAIN "cluster.local"
#define ID_DEFAULT_SVID_TTL (24 * 3600)		/* seconds: 24 h, Istio's default */
#define ID_DEFAULT_CA_TTL (365 * 24 * 3600)	/* seconds: one year */

struct id_err {
	char msg[256];
};

/* spiffe://TD/ns/NS/sa/SA into buf; -ENAMETOOLONG when it does not fit,
 * -EINVAL when a part is empty or holds a '/'. */
int id_spiffe(char *buf, size_t len, const char *td, const char *ns, const char *sa);

/* The SPIFFE ID of pod p in st under trust domain td. */
int id_pod_spiffe(char *buf, size_t len, const char *td, const struct md_state *st,
		  const struct md_pod *p);

/* ---- the CA -------------------------------------------------------------- */

/* Create CA_DIR with a new CA; -EEXIST when one is there (rotate instead). */
int id_ca_init(const char *ca_dir, const char *trust_domain, long ttl_s, struct id_err *err);

/* A new active CA; the old certificate becomes previous.crt (I5); -EBUSY
 * while a previous rotation is not finished (two CAs at most). With finish,
 * only drop previous.crt from the bundle (the end of a rotation). */
int id_ca_rotate(const char *ca_dir, long ttl_s, bool finish, struct id_err *err);

/* I11: may the rotation of CA_DIR end now? 0 when it may (or when no
 * rotation is in progress); -EBUSY with the reason in err while the active
 * CA is younger than ID_CA_SETTLE_S + ID_SVID_SETTLE_MS, or while an SVID
 * in one of the N_DIRS node SVID directories is of the previous CA or was
 * written less than ID_SVID_SETTLE_MS ago (proxies have not re-read it). */
int id_ca_finish_ready(const char *ca_dir, const char *const *svid_dirs, int n_dirs,
		       struct id_err *err);

/* The trust domain of CA_DIR into buf (-ENOENT: no CA). */
int id_ca_trust_domain(const char *ca_dir, char *buf, size_t len, struct id_err *err);

/* ---- SVIDs --------------------------------------------------------------- */

struct id_issue_report {
	int issued;		/* new or renewed SVIDs */
	int kept;		/* valid, not due yet (I4) */
	int removed;		/* files of pods no longer on the node */
	time_t next_due;	/* when the first SVID kept or issued falls due
				 * (I4), 0 when the node has no pod */
};

/* Bring OUT_DIR up to date for node: the bundle copied (I11), an SVID for
 * every pod of st scheduled on node (I2, I4), files of other pods removed.
 * SVIDs of the previous CA are renewed at once (`ca issue`). */
int id_issue_node(const char *ca_dir, const struct md_state *st, const char *node,
		  const char *out_dir, long ttl_s, struct id_issue_report *r, struct id_err *err);
/* The same for the node agent (I11): an SVID of the previous CA, still
 * trusted, is renewed only once the active CA is settle_s old (r->next_due
 * says when). */
int id_issue_node_settle(const char *ca_dir, const struct md_state *st, const char *node,
			 const char *out_dir, long ttl_s, int settle_s,
			 struct id_issue_report *r, struct id_err *err);

/* A new SVID for one pod, due or not, into OUT_DIR (-EPERM when the pod is not
 * scheduled on node, I2; -ENOENT when there is no such pod). */
int id_issue_pod(const char *ca_dir, const struct md_state *st, const char *node,
		 const char *ns, const char *name, const char *out_dir, long ttl_s,
		 struct id_err *err);

/* ---- the node agent renews its node's SVIDs (renew.c) -------------------
 *
 *  I6 The agent of node N keeps N's SVID directory up to date by itself:
 *     id_renew_sync() after every state load it applies (pods scheduled,
 *     removed, ServiceAccounts changed), and id_renew_tick() from its loop,
 *     which calls id_issue_node() again when the first SVID falls due
 *     (half-life, I4) or the CA changed (ca.crt or bundle.pem replaced:
 *     `ca init`, `ca rotate`, `ca rotate --finish`), looked at every
 *     ID_RENEW_POLL_MS. No CA directory: nothing to do, no error (the mesh
 *     runs in plain text until `ca init`). A failure is logged and retried
 *     at the next tick; SVIDs already on disk stay (they are valid until
 *     their expiry).
 *  I7 One writer at a time per SVID directory (flock on OUT_DIR/.lock in
 *     id_issue_node and id_issue_pod): the agent and `ca issue` may run at
 *     once, and a key and its certificate always come from the same one. */
#define ID_RENEW_POLL_MS 1000
#define ID_CA_SETTLE_S 4	/* I11: > two looks of one second (agent, then
				 * proxy), with room for a loaded node */
#define ID_SVID_SETTLE_MS 2500	/* I11: a proxy re-reads an SVID within
				 * a second of its renewal (O10), twice over */
#define ID_SVID_READ_TRIES 8	/* I10 */
#define ID_MIN_AGENT_TTL 90	/* seconds: an SVID is valid from 60 s before its
				 * issue, so a shorter TTL would be due at once */

struct id_renew {
	char ca_dir[256];
	char out_dir[256];
	char node[128];
	long ttl_s;
	struct timespec ca_mtime, bundle_mtime;	/* of the CA seen at the last issue */
	time_t next_due;	/* 0: nothing due (no pod or no CA) */
	long long next_look_ms;	/* CLOCK_MONOTONIC ms of the next CA look */
	bool dirty;		/* last issue failed: retry at the next tick */
};

void id_renew_init(struct id_renew *r, const char *ca_dir, const char *out_dir, const char *node,
		   long ttl_s);
/* Bring the node's SVIDs up to date for st now. 0 (also: no CA) or -errno
 * (logged with the reason). */
int id_renew_sync(struct id_renew *r, const struct md_state *st);
/* Called from the agent's loop: renews when due or when the CA changed;
 * cheap otherwise (a clock read, two stat() a second). st may be NULL (no
 * good state yet: nothing is done). */
int id_renew_tick(struct id_renew *r, const struct md_state *st);
/* Milliseconds until id_renew_tick has something to look at (the poll
 * timeout the agent uses), at most ID_RENEW_POLL_MS. */
int id_renew_timeout_ms(const struct id_renew *r);

/* ---- TLS with SVIDs, for the HBONE tunnel (tls.c) -----------------------
 *
 *  I8 Both ends of a tunnel: TLS 1.3 only, ALPN "h2" (HTTP/2 CONNECT), a
 *     peer certificate required and verified against the node's bundle.pem
 *     (read when the context is made: a context is made per SVID renewal),
 *     the peer's identity is its URI SAN (I3). A client that names the
 *     identity it expects (the destination workload's) refuses any other
 *     during the handshake, before a byte of the connection is sent.
 *  I9 Every refusal has a one-line reason for the log and the denial
 *     counters ("certificate has expired", "unable to get local issuer
 *     certificate", "peer did not return a certificate", "peer is X, not
 *     the expected Y"); never key material. */
#define ID_TLS_ALPN "h2"

struct ssl_ctx_st;
struct ssl_st;

/* A TLS context presenting the SVID of pod NS/NAME from svid_dir (its .crt
 * and .key, bundle.pem as the trust store). NULL with the reason in err. The
 * caller frees it with SSL_CTX_free(). */
struct ssl_ctx_st *id_tls_ctx(const char *svid_dir, const char *ns, const char *name,
			      bool server, struct id_err *err);

/* A server context that presents the SVID of the pod the client names in
 * SNI as "POD.NS" (the destination workload's identity, as ztunnel
 * presents the destination's), loaded from svid_dir at each handshake so
 * renewed SVIDs are used at once; no SNI, or no SVID for that pod on this
 * node: the handshake is refused. NULL with the reason in err. */
struct ssl_ctx_st *id_tls_ctx_sni(const char *svid_dir, struct id_err *err);

/* Client side, before the handshake: refuse a server whose identity is not
 * spiffe (copied). 0 or -ENOMEM. */
int id_tls_expect(struct ssl_st *ssl, const char *spiffe);

/* The SPIFFE ID of the SVID a context presents (its own certificate's URI
 * SAN) into buf: the HBONE client takes the trust domain from it. 0, or
 * -ENOKEY when it has none. */
int id_tls_ctx_spiffe(struct ssl_ctx_st *ctx, char *buf, size_t len);

/* After the handshake: the peer's SPIFFE ID into buf; -ENOKEY when it has
 * none (never after a handshake that succeeded). */
int id_tls_peer(struct ssl_st *ssl, char *buf, size_t len);

/* Why the handshake failed (I9), into buf; returns buf. */
const char *id_tls_reason(struct ssl_st *ssl, char *buf, size_t len);

/* What a certificate file says, for `get certs` and `get identities`. */
struct id_cert_info {
	char uri[256];		/* the URI SAN ("" for a CA) */
	char subject[256];	/* one-line subject */
	char serial[48];	/* hex */
	time_t not_before, not_after;
	bool is_ca;
	bool verified;		/* verifies against CA_DIR's bundle now */
};

int id_cert_info(const char *ca_dir, const char *crt_path, struct id_cert_info *ci,
		 struct id_err *err);

/* ---- where a lab keeps them, and `zerohop get` ----------------------------- */

void id_ca_dir(char *buf, size_t len, const char *lab);		/* RUN/ca */
void id_svid_dir(char *buf, size_t len, const char *lab, const char *node); /* RUN/nodes/NODE/svid */

/* `zerohop get identities` (every pod's SPIFFE ID and SVID) or `get certs`
 * (the CAs of the trust bundle) of lab to stdout; ns filters pods. */
int id_get(const char *kind, const struct md_state *st, const char *lab, const char *ns,
	   bool json);

#endif
