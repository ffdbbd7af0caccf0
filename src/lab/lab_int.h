/* lab_int.h — internals shared by the lab's source files (not a public
 * contract: other components use include/zerohop/lab.h). */
#ifndef ZH_LAB_INT_H
#define ZH_LAB_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "zerohop/lab.h"
#include "zerohop/model.h"

#define LAB_PATH 512

/* A node's /24: .0 the VTEP in overlay mode, .1 the gateway, .255
 * broadcast; the CNI plugin's own IPAM (containers made by hand with `lab
 * podman`) owns .200-.250, and the lab's pods (processes, or containers
 * with the address given) take theirs from the rest (lab_sup.c alloc_ip). */
#define LAB_CNI_RANGE_LO 200
#define LAB_CNI_RANGE_HI 250

/* Run argv (argv[0] looked up in PATH), stdin /dev/null, output captured.
 * 0 when it exits 0; otherwise -EIO with the command line and its output
 * printed with lab_err(). quiet=true suppresses the message. */
int lab_run(char *const argv[], bool quiet);
/* The same with input (NULL: /dev/null) on the command's stdin. */
int lab_run_input(char *const argv[], const char *input, bool quiet);
/* lab_run() of `ip` with a printf-built command line split on spaces. */
int lab_ip(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
int lab_ip_quiet(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* snprintf without gcc's truncation warnings: names are length-checked
 * where they enter the lab (name_ok in lab_cli.c), paths fit LAB_PATH. */
int lab_fmt(char *buf, size_t len, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* Errors go to stderr, prefixed "zerohop lab: " (the daemon's stderr is
 * its log). */
void lab_err(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Small file helpers: write atomically (tmp + rename) / read whole file. */
int lab_write_file(const char *path, const char *data, size_t len);
int lab_write_str(const char *path, const char *s);
/* The process exists and is not a zombie (init reaps orphans lazily). */
bool lab_pid_alive(int pid);
/* Write in place (cgroupfs, procfs): open, write, close. */
int lab_write_sys(const char *path, const char *s);
int lab_read_file(const char *path, char *buf, size_t len);	/* NUL-terminated */
int lab_mkdirs(const char *path, int mode);
/* Remove a tree without crossing into other mounts; 0 when gone. */
int lab_rm_tree(const char *path);

char *lab_ip4_str(uint32_t ip, char *buf);	/* network order -> dotted, buf >= 16 */

/* Network set-up (lab_net.c). */
int lab_net_up(const struct lab_topo *t);
/* lab_etcd.c: lab up --state etcd (3 members on the fabric), the spec the
 * agents use (-ENOENT without etcd), and lab status' etcd lines. */
int lab_etcd_up(const struct lab_topo *t, bool tls);
/* --state etcd-tls: the lab's PKI directory into dir, true when it has one;
 * lab_etcd_agent_args appends an agent's --etcd-cacert/--etcd-cert/
 * --etcd-key (6 strings, malloc'd) to v[n..] then: the new n. */
bool lab_etcd_tls(const char *lab, char *dir, size_t len);
int lab_etcd_agent_args(const char *lab, char **v, int n);
int lab_etcd_node_spec(const char *lab, char *buf, size_t len);
void lab_etcd_status(const char *lab, bool json);
int lab_net_pod_add(const struct lab_topo *t, const char *node, const char *ns,
		    const char *pod, uint32_t ip);
void lab_net_pod_del(const struct lab_topo *t, const char *node, const char *ns,
		     const char *pod);
/* Record a netns name the lab created (RUNDIR/netns.list) for lab down. */
int lab_netns_record(const char *lab, const char *name);

/* Pod namespaces (lab_net.c): create net+uts+mnt namespaces, kept alive by
 * bind mounts; extra mounts are done inside the new mount namespace. */
struct lab_mount {
	char src[LAB_PATH];	/* file or dir in the root mount namespace, or "tmpfs" */
	char dst[LAB_PATH];	/* path inside the pod */
	bool tmpfs;
};
int lab_pod_ns_create(const char *lab, const char *ns, const char *pod,
		      const struct lab_mount *mounts, int n_mounts);
void lab_pod_ns_destroy(const char *lab, const char *ns, const char *pod);

/* uts / mnt ns bind-mount files. */
char *lab_pod_nsfile(char *buf, size_t len, const char *lab, const char *ns,
		     const char *pod, const char *kind);

/* --mesh sidecar needs haproxy and nft on PATH (lab_sidecar.c): 0, or
 * -ENOENT with the missing one named on stderr (before anything is built). */
int lab_sc_check(void);

/* The supervisor daemon (lab_sup.c). Runs in the calling (forked) process;
 * writes one line to ready_fd ("ok" or "error: ...") once every initial pod
 * runs, then keeps going until SIGTERM. Never returns. */
void lab_supervisor(const struct lab_topo *t, int ready_fd) __attribute__((noreturn));

/* Real containers (lab_podman.c): podman for one node of a running lab
 * (args: podman's subcommand and arguments; the exit status), and the
 * removal of every container and cgroup it made (called by lab down). */
int lab_podman(const char *lab, const char *node, char **args, int n);
void lab_podman_down(const char *lab);
/* libcni cache entries (and the netns files they name) of this lab's
 * networks, whatever their state: once no process of the lab is left, to
 * catch a container a dying `podman run` set up after lab_podman_down(). */
void lab_podman_sweep(const char *lab);
/* lab up --runtime podman: build the pod image, set up and import it on
 * every node. The argv (NULL-terminated, malloc'd strings) that runs one
 * pod's container in the foreground (podman run --rm) with the lab's
 * address (ip: the CNI index, --ip; addr: POD_IP, sup_pod.addr), under the pod's cgroup, with the plan's mounts and command; the
 * pid of that container's first process (0: none yet); removing it. */
int lab_podman_up(const struct lab_topo *t);
char **lab_podman_pod_argv(const struct lab_topo *t, const char *node, const char *ns,
			   const char *name, uint32_t ip, const char *addr, const char *pod_cg,
			   const struct lab_mount *mounts, int n_mounts, char **cmd);
int lab_podman_pod_pid(const char *pod_cg);
void lab_podman_pod_rm(const char *lab, const char *node, const char *ns, const char *name);
/* lab_prom.c: start Debian's Prometheus in the first node's netns scraping
 * every agent (and proxy); its "IP:PORT" into addr. 0/-errno (printed). */
struct lab_topo;
int lab_prom_start(const struct lab_topo *t, bool proxies, char *addr, size_t addrlen);
/* `lab exec` of a pod that is a podman container: true when it is one (no
 * lab netns of its own, a podman node dir); lab_podman_exec() then runs
 * cmd in it through `podman exec -i` (returns only on failure). */
bool lab_podman_has_pod(const char *lab, const struct lab_pod_info *pod);
int lab_podman_exec(const char *lab, const struct lab_pod_info *pod, char **cmd);

#endif
