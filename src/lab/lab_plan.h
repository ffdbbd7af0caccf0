/* lab_plan.h — from a pod spec to what the supervisor runs (prefix lab_plan_):
 * each container's argv (well-known images mapped to built-in commands),
 * the pod's mounts (resolv.conf, hosts, ConfigMap volumes, nginx's private
 * dirs) and its declared ports; plus the runtime Pod object's YAML pieces and
 * the pod-template hash. Pure except for the files it writes into pod_dir. */
#ifndef ZH_LAB_PLAN_H
#define ZH_LAB_PLAN_H

#include <stddef.h>
#include <stdint.h>

#include "zerohop/lab.h"
#include "zerohop/model.h"
#include "lab_int.h"

struct lab_cmd {
	char name[64];		/* container name */
	char **argv;		/* owned, NULL-terminated */
};

struct lab_port {
	uint16_t port;
	enum md_proto proto;
};

struct lab_plan {
	struct lab_cmd *cmds;
	int n_cmds;
	struct lab_mount *mounts;	/* applied in order inside the pod */
	int n_mounts;
	struct lab_port *ports;
	int n_ports;
};

/* Plan pod NS/NAME. With pod_dir non-NULL also creates pod_dir and writes
 * resolv.conf, hosts, ConfigMap files and nginx's config copy into it; with
 * pod_dir NULL only validates (lab up checks every workload before it builds
 * anything). 0, or -EINVAL with "FILE:LINE: ..." in err. */
int lab_plan_pod(const struct lab_topo *t, const struct md_state *st, const char *ns,
		 const char *name, uint32_t ip, const struct md_pod_spec *spec,
		 const char *file, int line, const char *pod_dir, struct lab_plan *out,
		 char *err, size_t errlen);
void lab_plan_free(struct lab_plan *p);

/* "  labels:\n    k: \"v\"\n  ownerReferences: ..." (malloc'd). */
char *lab_plan_yaml_meta(const struct md_labels *labels, const char *owner, const char *hash);
/* "  serviceAccountName: ...\n  containers:\n  - name: ...\n    ports: ..." (malloc'd). */
char *lab_plan_yaml_spec(const struct md_pod_spec *spec);
/* 10 hex digits of a hash over the template (spec + labels). */
void lab_plan_hash(const struct md_pod_spec *spec, const struct md_labels *labels, char out[16]);

/* Built-in command for a container without `command` (argv malloc'd), or
 * -EINVAL with the reason in err. nginx set when it is Debian's nginx. */
int lab_plan_image(const char *zerohop, const struct md_container *c, char ***argv,
		   int *nginx, char *err, size_t errlen);

#endif
