/* test_parse.c — every kind and field decodes into the typed model, from
 * YAML and from JSON; defaults; multi-document files; Lists; line numbers. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>

#include "tap.h"
#include "zerohop/model.h"

static const char all_kinds[] =
	"apiVersion: zerohop.io/v1alpha1\n"			/* 1 */
	"kind: Cluster\n"
	"metadata: {name: lab1}\n"
	"spec:\n"
	"  nodes: [n1, {name: n2}, n3]\n"			/* 5 */
	"  podCIDR: 10.200.0.0/16\n"
	"  serviceCIDR: 10.100.0.0/16\n"
	"---\n"
	"apiVersion: v1\n"					/* 9 */
	"kind: Namespace\n"
	"metadata:\n"
	"  name: shop\n"
	"  labels: {env: prod}\n"
	"---\n"
	"apiVersion: v1\n"					/* 15 */
	"kind: ConfigMap\n"
	"metadata: {name: nginx-conf, namespace: shop}\n"
	"data:\n"
	"  nginx.conf: |\n"
	"    events {}\n"
	"  empty:\n"
	"---\n"
	"apiVersion: v1\n"					/* 23 */
	"kind: Pod\n"
	"metadata:\n"
	"  name: web-0\n"
	"  namespace: shop\n"
	"  labels: {app: web, \"example.com/tier\": front}\n"
	"  annotations: {note: \"a b c\"}\n"
	"  ownerReferences: [{kind: Deployment, name: web}]\n"
	"spec:\n"
	"  nodeName: n2\n"
	"  containers:\n"
	"    - name: main\n"
	"      image: nginx\n"
	"      command: [\"/bin/sh\", \"-c\"]\n"
	"      args: [\"exec nginx\"]\n"
	"      ports:\n"
	"        - {name: http, containerPort: 80}\n"
	"        - {name: dns, containerPort: 53, protocol: UDP}\n"
	"      volumeMounts:\n"
	"        - {name: conf, mountPath: /etc/nginx, subPath: nginx.conf}\n"
	"  volumes:\n"
	"    - name: conf\n"
	"      configMap: {name: nginx-conf}\n"
	"    - name: scratch\n"
	"      emptyDir: {}\n"
	"status: {podIP: 10.200.1.5, phase: Running}\n"
	"---\n"
	"apiVersion: apps/v1\n"					/* 50 */
	"kind: Deployment\n"
	"metadata: {name: web, namespace: shop}\n"
	"spec:\n"
	"  replicas: 3\n"
	"  selector:\n"
	"    matchLabels: {app: web}\n"
	"    matchExpressions: [{key: track, operator: NotIn, values: [canary]}]\n"
	"  template:\n"
	"    metadata:\n"
	"      labels: {app: web, track: stable}\n"
	"      annotations: {a: b}\n"
	"    spec:\n"
	"      containers: [{name: c, image: nginx, ports: [{name: http, containerPort: 8080}]}]\n"
	"---\n"
	"apiVersion: v1\n"					/* 65 */
	"kind: Service\n"
	"metadata: {name: web, namespace: shop}\n"
	"spec:\n"
	"  clusterIP: 10.100.0.20\n"
	"  selector: {app: web}\n"
	"  ports:\n"
	"    - {name: http, port: 80, targetPort: http}\n"
	"    - {name: dns, port: 53, targetPort: 5353, protocol: UDP}\n"
	"---\n"
	"apiVersion: v1\n"					/* 75 */
	"kind: Service\n"
	"metadata: {name: headless, namespace: shop}\n"
	"spec: {clusterIP: None, selector: {app: web}}\n"
	"---\n"
	"apiVersion: split.smi-spec.io/v1alpha4\n"		/* 80 */
	"kind: TrafficSplit\n"
	"metadata: {name: web-split, namespace: shop}\n"
	"spec:\n"
	"  service: web\n"
	"  backends:\n"
	"    - {service: web, weight: 90}\n"
	"    - {service: headless, weight: 10}\n"
	"---\n"
	"apiVersion: gateway.networking.k8s.io/v1beta1\n"	/* 89 */
	"kind: HTTPRoute\n"
	"metadata: {name: r, namespace: shop}\n"
	"spec:\n"
	"  parentRefs: [{group: \"\", kind: Service, name: web, port: 80}]\n"
	"  hostnames: [web.shop]\n"
	"  rules:\n"
	"    - matches:\n"
	"        - path: {type: Exact, value: /login}\n"
	"          method: POST\n"
	"          headers: [{name: x-user, value: \"^a.*\", type: RegularExpression}]\n"
	"          queryParams: [{name: debug, value: \"1\"}]\n"
	"      filters:\n"
	"        - type: RequestRedirect\n"
	"          requestRedirect: {scheme: https, port: 8443, statusCode: 301,\n"
	"                            path: {type: ReplaceFullPath, replaceFullPath: /x}}\n"
	"        - type: ResponseHeaderModifier\n"
	"          responseHeaderModifier: {add: [{name: a, value: b}], remove: [server]}\n"
	"      backendRefs:\n"
	"        - name: web\n"
	"          port: 80\n"
	"          weight: 0\n"
	"          filters: [{type: RequestHeaderModifier, requestHeaderModifier: {set: [{name: x-v, value: \"2\"}]}}]\n"
	"        - {name: missing, port: 80, namespace: other}\n"
	"      timeouts: {request: 10s, backendRequest: 2s}\n"
	"---\n"
	"apiVersion: networking.k8s.io/v1\n"			/* 114 */
	"kind: NetworkPolicy\n"
	"metadata: {name: np, namespace: shop}\n"
	"spec:\n"
	"  podSelector: {matchLabels: {app: web}}\n"
	"  ingress:\n"
	"    - from:\n"
	"        - podSelector: {}\n"
	"          namespaceSelector: {matchLabels: {env: prod}}\n"
	"        - ipBlock: {cidr: 192.168.0.0/16, except: [192.168.1.0/24]}\n"
	"      ports:\n"
	"        - {port: http}\n"
	"        - {protocol: UDP, port: 1000, endPort: 2000}\n"
	"        - {protocol: SCTP}\n"
	"    - {}\n"
	"  egress:\n"
	"    - to: []\n";

static void test_all_kinds(void)
{
	struct md_state *st = md_state_new();
	struct md_err err = { 0 };
	char ebuf[512];
	int r = md_state_add_buf(st, "all.yaml", all_kinds, strlen(all_kinds), &err);
	uint32_t ip;

	is_int(r, 0, "all kinds parse");
	if (r)
		diag("%s", md_err_str(&err, ebuf, sizeof(ebuf)));
	r = md_state_finish(st, &err);
	is_int(r, 0, "all kinds finish");
	if (r) {
		diag("%s", md_err_str(&err, ebuf, sizeof(ebuf)));
		md_state_free(st);
		return;
	}
	is_int(md_state_n_objects(st), 10, "10 objects");

	/* Cluster */
	ok(st->cluster.present, "cluster present");
	is_str(st->cluster.name, "lab1", "cluster name");
	is_int(st->cluster.n_nodes, 3, "three nodes, strings and {name}");
	is_str(st->cluster.nodes[1].name, "n2", "node 2 from {name: n2}");
	inet_pton(AF_INET, "10.200.0.0", &ip);
	ok(st->cluster.pod_cidr == ip && st->cluster.pod_cidr_len == 16, "podCIDR");
	inet_pton(AF_INET, "10.100.0.0", &ip);
	ok(st->cluster.svc_cidr == ip && st->cluster.svc_cidr_len == 16, "serviceCIDR");

	/* Namespace: explicit keeps labels and gains metadata.name; none implied
	 * beyond shop (everything is in shop) */
	is_int(st->n_namespaces, 1, "one namespace");
	is_str(md_labels_get(md_namespace_labels(st, "shop"), "env"), "prod", "namespace label");
	is_str(md_labels_get(md_namespace_labels(st, "shop"), "kubernetes.io/metadata.name"),
	       "shop", "implied metadata.name label");
	is_int(md_namespace_labels(st, "nowhere")->n, 0, "labels of unknown namespace: empty");

	/* ConfigMap */
	{
		const struct md_configmap *cm = md_find_configmap(st, "shop", "nginx-conf");

		ok(cm != NULL, "configmap found");
		is_str(md_labels_get(&cm->data, "nginx.conf"), "events {}\n", "configmap data");
		is_str(md_labels_get(&cm->data, "empty"), "", "null data value is empty");
	}

	/* Pod */
	{
		const struct md_pod *p = md_find_pod(st, "shop", "web-0");
		const struct md_container *c;

		ok(p != NULL, "pod found");
		is_str(p->meta.ns, "shop", "pod namespace");
		is_int(p->meta.line, 23, "pod line");
		is_str(p->meta.file, "all.yaml", "pod file");
		is_str(md_labels_get(&p->meta.labels, "example.com/tier"), "front", "prefixed label");
		is_str(md_labels_get(&p->meta.annotations, "note"), "a b c", "annotation");
		is_str(p->owner, "web", "ownerReferences[0].name");
		is_str(p->spec.node_name, "n2", "nodeName");
		ok(p->has_status, "has status");
		is_int(p->phase, MD_PHASE_RUNNING, "phase Running");
		inet_pton(AF_INET, "10.200.1.5", &ip);
		ok(p->ip == ip, "podIP");
		is_int(p->spec.n_containers, 1, "one container");
		c = &p->spec.containers[0];
		is_str(c->name, "main", "container name");
		is_str(c->image, "nginx", "image");
		ok(c->n_command == 2 && !strcmp(c->command[1], "-c"), "command");
		ok(c->n_args == 1 && !strcmp(c->args[0], "exec nginx"), "args");
		is_int(c->n_ports, 2, "two ports");
		is_int(c->ports[1].port, 53, "containerPort");
		is_int(c->ports[1].proto, MD_PROTO_UDP, "protocol UDP");
		is_int(c->ports[0].proto, MD_PROTO_TCP, "protocol defaults to TCP");
		ok(c->n_mounts == 1 && !strcmp(c->mounts[0].mount_path, "/etc/nginx") &&
		   !strcmp(c->mounts[0].sub_path, "nginx.conf"), "volumeMounts");
		is_int(p->spec.n_volumes, 2, "two volumes");
		is_str(p->spec.volumes[0].configmap, "nginx-conf", "configMap volume");
		ok(p->spec.volumes[1].configmap == NULL, "other volume kinds: no configmap");
	}

	/* Deployment */
	{
		const struct md_deployment *d = md_find_deployment(st, "shop", "web");

		ok(d != NULL, "deployment found");
		is_int(d->replicas, 3, "replicas");
		is_int(d->selector.n_exprs, 1, "selector expressions");
		is_int(d->selector.exprs[0].op, MD_SEL_NOT_IN, "NotIn");
		is_str(md_labels_get(&d->template_labels, "track"), "stable", "template labels");
		is_str(md_labels_get(&d->template_annotations, "a"), "b", "template annotations");
		is_int(d->template.containers[0].ports[0].port, 8080, "template container port");
	}

	/* Services and endpoints (the runtime pod is Running with an IP) */
	{
		const struct md_service *s = md_find_service(st, "shop", "web");
		const struct md_service *h = md_find_service(st, "shop", "headless");

		ok(s != NULL, "service found");
		inet_pton(AF_INET, "10.100.0.20", &ip);
		ok(s->ip_given && s->cluster_ip == ip, "given clusterIP kept");
		is_int(s->n_ports, 2, "two ports");
		ok(s->ports[0].target.name && !strcmp(s->ports[0].target.name, "http"),
		   "named targetPort");
		is_int(s->ports[1].target.num, 5353, "numeric targetPort");
		is_int(s->ports[1].proto, MD_PROTO_UDP, "UDP service port");
		is_int(s->endpoints[0].n, 1, "endpoint for the named port");
		is_int(s->endpoints[0].v[0].port, 80, "named port resolved on the pod");
		is_int(s->endpoints[1].n, 1, "endpoint for the numeric port");
		is_int(s->endpoints[1].v[0].port, 5353, "numeric targetPort used as is");
		ok(h->headless && h->cluster_ip == 0, "headless service: no ClusterIP");
	}

	/* TrafficSplit v1alpha4: integer weights */
	{
		const struct md_trafficsplit *t = &st->splits[0];

		is_str(t->api_version, "split.smi-spec.io/v1alpha4", "split apiVersion");
		is_str(t->root, "web", "split root");
		ok(t->root_svc == md_find_service(st, "shop", "web"), "root resolved");
		is_int(t->backends[0].weight_milli, 90000, "integer weight 90 -> 90000 milli");
		ok(t->backends[1].svc == md_find_service(st, "shop", "headless"), "backend resolved");
		is_int(t->root_line, 84, "root line");
	}

	/* HTTPRoute */
	{
		const struct md_httproute *rt = &st->routes[0];
		const struct md_route_rule *ru = &rt->rules[0];
		const struct md_route_match *m = &ru->matches[0];

		is_int(rt->n_parents, 1, "one parent");
		is_str(rt->parents[0].kind, "Service", "parent kind");
		is_str(rt->parents[0].group, "", "core group");
		is_str(rt->parents[0].ns, "shop", "parent namespace defaults to the route's");
		ok(rt->parents[0].svc == md_find_service(st, "shop", "web"), "parent Service resolved");
		ok(rt->n_hostnames == 1 && !strcmp(rt->hostnames[0], "web.shop"), "hostnames");
		is_int(m->path_type, MD_PATH_EXACT, "Exact path");
		is_str(m->path, "/login", "path value");
		is_str(m->method, "POST", "method");
		ok(m->n_headers == 1 && m->headers[0].type == MD_MATCH_REGEX, "regex header match");
		ok(m->n_query == 1 && m->query[0].type == MD_MATCH_EXACT &&
		   !strcmp(m->query[0].value, "1"), "query param match");
		is_int(ru->n_filters, 2, "two filters");
		is_int(ru->filters[0].type, MD_FILTER_REQUEST_REDIRECT, "redirect");
		is_int(ru->filters[0].status_code, 301, "statusCode");
		is_int(ru->filters[0].port, 8443, "redirect port");
		is_str(ru->filters[0].scheme, "https", "redirect scheme");
		is_int(ru->filters[0].path_type, MD_PATHMOD_FULL, "ReplaceFullPath");
		is_str(ru->filters[0].path, "/x", "replaceFullPath");
		ok(ru->filters[1].headers.add.n == 1 && ru->filters[1].headers.n_remove == 1,
		   "response header modifier");
		is_int(ru->n_backends, 2, "two backendRefs");
		is_int(ru->backends[0].weight, 0, "weight 0 kept");
		is_int(ru->backends[1].weight, 1, "weight defaults to 1");
		ok(ru->backends[0].svc == md_find_service(st, "shop", "web"), "backendRef resolved");
		ok(ru->backends[1].svc == NULL, "missing backendRef resolves to NULL, not an error");
		is_str(ru->backends[1].ns, "other", "backendRef namespace");
		is_int(ru->backends[0].filters[0].type, MD_FILTER_REQUEST_HEADER_MODIFIER,
		       "backend filter");
		is_int(ru->backends[0].filters[0].headers.set.n, 1, "backend header set");
		is_int(ru->timeout_request_ms, 10000, "timeouts.request");
		is_int(ru->timeout_backend_ms, 2000, "timeouts.backendRequest");
		ok(md_route_needs_l7(rt), "route with matches needs L7");
	}

	/* NetworkPolicy */
	{
		const struct md_netpol *np = &st->netpols[0];
		const struct md_np_rule *in = &np->ingress[0];
		uint32_t ex;

		ok(np->type_ingress && np->type_egress, "types default: Ingress, and Egress as it has egress rules");
		ok(!np->types_given, "policyTypes not given");
		is_int(np->n_ingress, 2, "two ingress rules");
		ok(in->peers_present && in->n_peers == 2, "two peers");
		ok(in->peers[0].pod_sel.present && in->peers[0].ns_sel.present, "pod AND ns selector");
		is_int(in->peers[0].pod_sel.match_labels.n, 0, "empty podSelector");
		ok(in->peers[1].has_ipblock && in->peers[1].ipblock.len == 16, "ipBlock");
		inet_pton(AF_INET, "192.168.1.0", &ex);
		ok(in->peers[1].ipblock.n_except == 1 && in->peers[1].ipblock.except[0] == ex &&
		   in->peers[1].ipblock.except_len[0] == 24, "except");
		is_int(in->n_ports, 3, "three ports");
		ok(in->ports[0].port.name && !in->ports[0].has_proto &&
		   in->ports[0].proto == MD_PROTO_TCP, "named port, protocol defaults to TCP");
		ok(in->ports[1].port.num == 1000 && in->ports[1].end_port == 2000, "port range");
		ok(in->ports[2].proto == MD_PROTO_SCTP && !in->ports[2].port.present, "SCTP all ports");
		ok(!np->ingress[1].peers_present && !np->ingress[1].n_ports, "{} rule: all");
		ok(np->egress[0].peers_present && np->egress[0].n_peers == 0, "to: [] present and empty");
	}
	md_state_free(st);
}

static void test_defaults_and_json(void)
{
	const char *json =
		"{\"apiVersion\": \"v1\", \"kind\": \"Service\",\n"
		" \"metadata\": {\"name\": \"j\"},\n"
		" \"spec\": {\"selector\": {\"app\": \"j\"}, \"ports\": [{\"port\": 8080}]}}\n";
	const char *split1 =
		"apiVersion: split.smi-spec.io/v1alpha1\nkind: TrafficSplit\n"
		"metadata: {name: s}\nspec:\n  service: j\n"
		"  backends: [{service: j, weight: 1}, {service: k, weight: 500m}]\n"
		"---\napiVersion: v1\nkind: Service\nmetadata: {name: k}\n"
		"spec: {ports: [{port: 1}]}\n---\n";
	const char *np =
		"apiVersion: networking.k8s.io/v1\nkind: NetworkPolicy\n"
		"metadata: {name: deny}\nspec:\n  podSelector:\n  ingress:\n"
		"    - from:\n        - podSelector: {matchLabels: {a: b}}\n"
		"          namespaceSelector:\n";
	const char *route =
		"apiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\nmetadata: {name: r}\n"
		"spec:\n  parentRefs: [{kind: Service, group: core, name: j}]\n"
		"  rules: [{backendRefs: [{name: j, port: 8080, weight: 3}, {name: k, port: 1}]}]\n";
	struct md_state *st = md_state_new();
	struct md_err err = { 0 };
	char ebuf[512];
	const struct md_service *s;
	uint32_t lo, hi;
	int r;

	r = md_state_add_buf(st, "j.json", json, strlen(json), &err);
	is_int(r, 0, "JSON input parses");
	r = md_state_add_buf(st, "s.yaml", split1, strlen(split1), &err);
	is_int(r, 0, "v1alpha1 split with quantities parses (trailing --- ok)");
	r = md_state_add_buf(st, "np.yaml", np, strlen(np), &err);
	is_int(r, 0, "policy with null selectors parses");
	r = md_state_add_buf(st, "r.yaml", route, strlen(route), &err);
	is_int(r, 0, "route parses");
	r = md_state_finish(st, &err);
	is_int(r, 0, "finish");
	if (r)
		diag("%s", md_err_str(&err, ebuf, sizeof(ebuf)));
	ok(!st->cluster.present, "no Cluster object");
	is_int(st->cluster.n_nodes, 2, "default two nodes");
	is_str(st->cluster.nodes[0].name, "node-a", "node-a");
	is_str(st->cluster.nodes[1].name, "node-b", "node-b");
	is_int(st->cluster.svc_cidr_len, 12, "default service CIDR /12");
	is_int(st->cluster.pod_cidr_len, 16, "default pod CIDR /16");
	s = md_find_service(st, NULL, "j");
	ok(s != NULL, "lookup with NULL namespace means default");
	is_str(s->meta.ns, "default", "default namespace");
	is_int(s->ports[0].target.num, 8080, "targetPort defaults to port");
	is_int(s->ports[0].proto, MD_PROTO_TCP, "protocol defaults to TCP");
	inet_pton(AF_INET, "10.96.0.16", &lo);
	inet_pton(AF_INET, "10.111.255.254", &hi);
	ok(!s->ip_given && ntohl(s->cluster_ip) >= ntohl(lo) && ntohl(s->cluster_ip) <= ntohl(hi),
	   "allocated clusterIP inside 10.96.0.0/12 past the reserved 16");
	is_int(s->endpoints[0].n, 0, "no pods: no endpoints");
	is_int(st->splits[0].backends[0].weight_milli, 1000, "weight 1 -> 1000");
	is_int(st->splits[0].backends[1].weight_milli, 500, "weight 500m -> 500");
	ok(st->netpols[0].type_ingress && !st->netpols[0].type_egress, "default: Ingress only");
	ok(st->netpols[0].ingress[0].peers[0].pod_sel.present &&
	   !st->netpols[0].ingress[0].peers[0].ns_sel.present,
	   "a null namespaceSelector is absent (nil), not {}");
	ok(st->netpols[0].pod_sel.present && st->netpols[0].pod_sel.match_labels.n == 0,
	   "null spec.podSelector selects all");
	is_int(st->n_namespaces, 1, "implied namespace default");
	is_str(st->namespaces[0].meta.name, "default", "namespace default implied");
	is_str(md_labels_get(&st->namespaces[0].meta.labels, "kubernetes.io/metadata.name"),
	       "default", "implied namespace label");
	ok(!md_route_needs_l7(&st->routes[0]), "weights-only route is L4");
	is_str(st->routes[0].parents[0].group, "", "group core normalized to \"\"");
	is_int(st->routes[0].rules[0].n_matches, 0, "no matches given");
	md_state_free(st);
}

static void test_list_and_anchors(void)
{
	const char *list =
		"apiVersion: v1\nkind: List\nitems:\n"
		"  - apiVersion: v1\n    kind: Service\n    metadata: &m {name: a}\n"
		"    spec: {ports: [{port: 80}]}\n"
		"  - apiVersion: v1\n    kind: Namespace\n    metadata: {name: b}\n";
	struct md_state *st = md_state_new();
	struct md_err err = { 0 };

	is_int(md_state_add_buf(st, "l.yaml", list, strlen(list), &err), 0, "v1 List parses");
	is_int(st->n_services, 1, "List item Service");
	is_int(st->services[0].meta.line, 4, "List item line");
	is_int(md_state_n_objects(st), 2, "two objects from a List");
	md_state_free(st);
}

int main(void)
{
	test_all_kinds();
	test_defaults_and_json();
	test_list_and_anchors();
	return done_testing();
}
