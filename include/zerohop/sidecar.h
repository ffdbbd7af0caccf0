/* sidecar.h — the sidecar-mesh baseline (`zerohop lab up --mesh sidecar`,
 * prefix sc_): what an Istio sidecar pod looks like, with HAProxy (Debian's
 * 2.6; Envoy is not packaged) in Envoy's place. docs/sidecar-baseline.md.
 *
 * Per pod, as istio-init and the injector lay it out:
 *   - nftables rules in the pod's network namespace (sc_capture_rules(),
 *     istio-init's nat chains translated one to one): outbound TCP is
 *     REDIRECTed to SC_OUTBOUND_PORT, inbound TCP to SC_INBOUND_PORT,
 *     the proxy's own sockets (uid/gid SC_UID) and its inbound leg (source
 *     SC_INBOUND_SRC on lo) are exempt;
 *   - one HAProxy (master-worker, workers run as SC_UID) in the pod's
 *     network namespace and cgroup, so it counts in the pod's CPU and
 *     memory, configured by sc_render_cfg() from the model.
 *
 * sc_render_cfg() is a pure function of the state and the pod (unit tested
 * in tests/unit/lab/test_sidecar_cfg.c); the lab's supervisor re-renders on
 * every state change and reloads the HAProxy whose text changed
 * (src/lab/lab_sidecar.c).
 */
#ifndef ZH_SIDECAR_H
#define ZH_SIDECAR_H

#include <stdbool.h>
#include <stdint.h>

#include "zerohop/model.h"

#define SC_UID 1337			/* istio-proxy's uid and gid */
#define SC_OUTBOUND_PORT 15001		/* Envoy's virtualOutbound */
#define SC_INBOUND_PORT 15006		/* Envoy's virtualInbound */
#define SC_STATS_PORT 15090		/* HAProxy stats: /stats;csv, /stats/prometheus */
#define SC_INBOUND_SRC "127.0.0.6"	/* source of the inbound leg to the app (Istio's) */
#define SC_CONTAINER "istio-proxy"	/* the sidecar's container name */
#define SC_INJECT_ANNOTATION "sidecar.istio.io/inject"	/* "false": no sidecar */
#define SC_SNIFF_MS 100			/* protocol detection timeout (Istio's former default) */

struct sc_pod {
	const char *ns, *name;
	uint32_t ip;			/* network order */
	const uint16_t *tcp_ports;	/* declared TCP containerPorts (host order) */
	int n_tcp_ports;
	const char *stats_sock;		/* unix socket path for `show stat`, or NULL */
};

/* Does pod ns/annotations get a sidecar? Not in kube-system (Istio's
 * default injection skips it), not with SC_INJECT_ANNOTATION "false". */
bool sc_wanted(const char *ns, const struct md_labels *annotations);

/* The HAProxy configuration of pod p for state st (a finished md_state):
 *   outbound (SC_OUTBOUND_PORT): the original destination (SO_ORIGINAL_DST)
 *     chooses the Service ClusterIP:port; HTTP (port named http*, grpc*,
 *     or sniffed) is balanced per request (roundrobin over the Endpoints,
 *     keep-alive pools `http-reuse always`, retries 0), other TCP per
 *     connection; an SMI TrafficSplit without matches weights the servers
 *     of its root Service; anything else passes through to the original
 *     destination (Istio's PassthroughCluster);
 *   inbound (SC_INBOUND_PORT): to 127.0.0.1:ORIGINAL_PORT from
 *     SC_INBOUND_SRC, HTTP with a keep-alive pool per declared port;
 *   stats on SC_STATS_PORT.
 * *out is malloc'd, owned by the caller. 0 or -ENOMEM. */
int sc_render_cfg(const struct md_state *st, const struct sc_pod *p, char **out);

/* The nft script (`nft -f -`) that lays istio-init's capture in a pod's
 * network namespace: table ip SC_NFT_TABLE. Static text. */
#define SC_NFT_TABLE "zerohop_sidecar"
const char *sc_capture_rules(void);

#endif
