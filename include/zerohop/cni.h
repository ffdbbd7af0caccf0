/* cni.h — zerohop as a CNI plugin (prefix cni_): a container runtime
 * (podman, containerd, a kubelet's runtime) gives a pod its network through
 * `zerohop-cni`, and the pod is published to the node's state source so the
 * agent serves it exactly like a lab pod (docs/cni.md).
 *
 * Protocol: CNI specification 1.0.0 (also answers 0.3.0, 0.3.1, 0.4.0 and
 * 1.1.0 configurations). The runtime sets CNI_COMMAND (ADD, DEL, CHECK,
 * VERSION, and GC, STATUS of 1.1), CNI_CONTAINERID, CNI_NETNS, CNI_IFNAME,
 * CNI_ARGS, CNI_PATH, and writes the network configuration on stdin. On
 * success the plugin prints the result JSON (ADD), the version JSON
 * (VERSION) or nothing, and exits 0; on failure it prints the error JSON
 * {"cniVersion", "code", "msg", "details"} on stdout and exits 1. Logs go
 * to stderr only.
 *
 * Network configuration (JSON on stdin; unknown keys are ignored, as the
 * spec asks):
 *   cniVersion, name, type      as the spec says (type: "zerohop-cni")
 *   node       string, required the node name published as spec.nodeName
 *   podCIDR    string, required the node's pod range, e.g. "10.244.0.0/24"
 *   stateDir   string, required the node's state source (state.h), e.g.
 *                               /run/zerohop/LAB/state
 *   dataDir    string           IPAM and attachment records; default
 *                               CNI_DATA_ROOT/NAME
 *   labelsDir  string           labels of pod NS/NAME from DIR/NS_NAME
 *                               (key=value lines), when the file exists
 *   rangeStart, rangeEnd        the part of podCIDR to hand out (default:
 *                               all but its first two and last address)
 *   mtu        number           of both veth ends (default: the kernel's)
 *   args.cni.labels             [{"key","value"}] (CNI conventions), merged
 *                               over the labels file
 *   publish    bool             write the pod to stateDir (default true);
 *                               false when the runtime publishes it (the
 *                               lab's kubelet under --runtime podman)
 *   runtimeConfig.ips           the "ips" capability (or CNI_ARGS IP=, what
 *                               podman --ip sends): the address to give
 *                               (must be a pod address of podCIDR, free)
 *   prevResult                  CHECK: what ADD returned; ADD: chained after
 *                               an interface plugin (publish its address,
 *                               pass the result on; docs/cni.md "Chaining")
 *
 * What ADD makes (the lab's pod plumbing, lab.h "Addresses"): a veth pair
 * whose host end (CNI_HOST_VETH_PREFIX + hash of container id and ifname,
 * MAC LAB_GW_MAC) stays in the plugin's own network namespace — the node's —
 * and whose other end is CNI_IFNAME in CNI_NETNS with one /32 from podCIDR,
 * a permanent neighbour for LAB_GW and a default route via it; the host
 * gets a /32 route and a permanent neighbour for the pod.
 *
 * Results are 0/-errno inside; the exit status is the protocol's.
 */
#ifndef ZH_CNI_H
#define ZH_CNI_H

#define CNI_SPEC_VERSION "1.0.0"	/* what VERSION calls current */
#define CNI_DATA_ROOT "/run/zerohop/cni"	/* default dataDir parent */
#define CNI_HOST_VETH_PREFIX "zh"
#define CNI_PLUGIN_NAME "zerohop-cni"	/* argv[0] that makes `zerohop` a plugin */

/* Annotations on a published pod: which attachment owns it (DEL removes a
 * pod only when it still names the deleting container). */
#define CNI_ANN_CONTAINER "zerohop.io/cni-container-id"
#define CNI_ANN_NETNS "zerohop.io/cni-netns"

/* Error codes: 1-11 are the spec's; 50/51 are 1.1's STATUS codes; 100 and
 * up are this plugin's own (the spec reserves them for plugins). */
enum cni_code {
	CNI_ERR_VERSION = 1,		/* incompatible CNI version */
	CNI_ERR_FIELD = 2,		/* unsupported field in the network config */
	CNI_ERR_CONTAINER = 3,		/* container unknown or does not exist */
	CNI_ERR_ENV = 4,		/* invalid necessary environment variables */
	CNI_ERR_IO = 5,			/* I/O failure */
	CNI_ERR_DECODE = 6,		/* failed to decode content */
	CNI_ERR_CONFIG = 7,		/* invalid network config */
	CNI_ERR_AGAIN = 11,		/* try again later */
	CNI_ERR_UNAVAILABLE = 50,	/* STATUS: plugin not available */
	CNI_ERR_NO_ADDRESS = 100,	/* podCIDR has no free address */
	CNI_ERR_DRIFT = 101,		/* CHECK: the attachment is not what ADD made */
	CNI_ERR_NETWORK = 102,		/* the interface could not be set up */
};

/* `zerohop cni` and `zerohop-cni`: the plugin; the protocol lives in the
 * environment and stdin, so argv only carries --help. */
int cli_cni(int argc, char **argv);

#endif
