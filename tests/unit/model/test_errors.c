/* test_errors.c — every validation error names the file, the line and the
 * field (table-driven), and a failing add leaves the state untouched. */
#include <errno.h>
#include <string.h>

#include "tap.h"
#include "zerohop/model.h"

#define SVC "apiVersion: v1\nkind: Service\n"
#define NP "apiVersion: networking.k8s.io/v1\nkind: NetworkPolicy\nmetadata: {name: p}\n"
#define TS1 "apiVersion: split.smi-spec.io/v1alpha1\nkind: TrafficSplit\nmetadata: {name: s}\n"
#define TS2 "apiVersion: split.smi-spec.io/v1alpha2\nkind: TrafficSplit\nmetadata: {name: s}\n"
#define RT "apiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\nmetadata: {name: r}\n"
#define GR "apiVersion: gateway.networking.k8s.io/v1\nkind: GRPCRoute\nmetadata: {name: g}\n"
/* one rule with one match (the match at line 7 after GR) */
#define GRULE(m) "spec:\n  rules:\n  - matches:\n    - " m "\n"
#define DEP "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: d}\n"
#define POD "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\n"
#define SVC_A "apiVersion: v1\nkind: Service\nmetadata: {name: a}\nspec: {ports: [{port: 80}]}\n---\n"
#define NPPORT(x) NP "spec:\n  podSelector: {}\n  ingress:\n    - ports:\n        - " x "\n"
#define NPBLOCK(x) NP "spec:\n  podSelector: {}\n  egress:\n    - to:\n        - ipBlock: " x "\n"

struct ecase {
	const char *name;
	const char *yaml;
	int at_finish;		/* 0: md_state_add_buf fails; 1: md_state_finish fails */
	int line;
	const char *field;
	const char *msg;	/* substring of the message */
};

static const struct ecase cases[] = {
	/* syntax and structure */
	{ "yaml syntax", "a: [1, 2\nb: c\n", 0, 2, "", "YAML syntax error" },
	{ "duplicate yaml key", SVC "metadata: {name: a}\nspec: {ports: [{port: 1}], ports: []}\n",
	  0, 4, "", "duplicate mapping key" },
	{ "not a mapping", "- a\n- b\n", 0, 1, "", "must be a mapping" },
	{ "NUL in a string", "apiVersion: v1\nkind: \"Serv\\0ice\"\n", 0, 2, "",
	  "NUL characters in strings are not supported" },
	{ "unknown alias", "apiVersion: v1\nkind: *k\n", 0, 2, "", "unknown alias *k" },
	{ "missing kind", "apiVersion: v1\nmetadata: {name: a}\n", 0, 1, "kind", "is required" },
	{ "unknown kind", "apiVersion: v1\nkind: Gizmo\n", 0, 2, "kind", "unknown kind \"Gizmo\"" },
	{ "unknown apiVersion", "apiVersion: apps/v1beta1\nkind: Deployment\n", 0, 1, "apiVersion",
	  "unsupported apiVersion" },
	{ "unknown split version", "apiVersion: split.smi-spec.io/v1\nkind: TrafficSplit\n", 0, 1,
	  "apiVersion", "unsupported apiVersion" },
	{ "missing metadata", SVC "spec: {}\n", 0, 1, "metadata.name", "is required" },
	{ "missing name", SVC "metadata:\n  labels: {a: b}\n", 0, 4, "metadata.name", "is required" },
	{ "bad name", SVC "metadata: {name: Web_1}\n", 0, 3, "metadata.name", "invalid name" },
	{ "bad namespace", SVC "metadata: {name: a, namespace: \"x.y\"}\n", 0, 3,
	  "metadata.namespace", "invalid namespace" },
	{ "bad label value", SVC "metadata:\n  name: a\n  labels: {app: \"-x\"}\n", 0, 5,
	  "metadata.labels.app", "invalid label value" },
	{ "bad label key", SVC "metadata:\n  name: a\n  labels: {\"a/b/c\": x}\n", 0, 5,
	  "metadata.labels.a/b/c", "invalid label key" },
	{ "labels not a map", SVC "metadata:\n  name: a\n  labels: [a]\n", 0, 5, "metadata.labels",
	  "must be a mapping" },

	/* services */
	{ "port out of range", SVC "metadata: {name: a}\nspec:\n  ports:\n    - {name: a, port: 80}\n"
	  "    - {name: b, port: 70000}\n", 0, 7, "spec.ports[1].port", "between 1 and 65535" },
	/* address families on the default IPv4-only cluster (issue 14): the
	 * errors kube-apiserver gives on a single-stack cluster, never a
	 * silent IPv4-only Service (dual-stack clusters: test_families.c) */
	{ "RequireDualStack", SVC "metadata: {name: a}\nspec:\n  ipFamilyPolicy: RequireDualStack\n"
	  "  ports: [{port: 80}]\n", 1, 1, "spec.ipFamilyPolicy",
	  "this cluster is not configured for dual-stack services" },
	{ "bad ipFamilyPolicy", SVC "metadata: {name: a}\nspec:\n  ipFamilyPolicy: Dual\n"
	  "  ports: [{port: 80}]\n", 0, 5, "spec.ipFamilyPolicy", "Unsupported value: \"Dual\"" },
	{ "ipFamilies IPv6", SVC "metadata: {name: a}\nspec:\n  ipFamilyPolicy: PreferDualStack\n"
	  "  ipFamilies: [IPv4, IPv6]\n  ports: [{port: 80}]\n", 1, 1, "spec.ipFamilies[1]",
	  "\"IPv6\": not configured on this cluster" },
	{ "ipFamilies bad", SVC "metadata: {name: a}\nspec:\n  ipFamilies: [ipv4]\n"
	  "  ports: [{port: 80}]\n", 0, 5, "spec.ipFamilies[0]", "Unsupported value: \"ipv4\"" },
	{ "ipFamilies dup", SVC "metadata: {name: a}\nspec:\n  ipFamilies: [IPv4, IPv4]\n"
	  "  ports: [{port: 80}]\n", 0, 5, "spec.ipFamilies[1]", "Duplicate value: \"IPv4\"" },
	{ "clusterIPs IPv6", SVC "metadata: {name: a}\nspec:\n  clusterIPs: [\"fd00::1\"]\n"
	  "  ports: [{port: 80}]\n", 1, 1, "spec.clusterIPs[0]", "IPv6 is not configured on this cluster" },
	{ "clusterIPs two v4", SVC "metadata: {name: a}\nspec:\n  ipFamilyPolicy: PreferDualStack\n"
	  "  clusterIPs: [10.96.0.9, 10.96.0.8]\n  ports: [{port: 80}]\n", 0, 6, "spec.clusterIPs",
	  "no more than one IP for each IP family" },
	{ "clusterIPs two single", SVC "metadata: {name: a}\nspec:\n  clusterIPs: [10.96.0.9, \"fd00::9\"]\n"
	  "  ports: [{port: 80}]\n", 1, 1, "spec.ipFamilyPolicy",
	  "must be 'RequireDualStack' or 'PreferDualStack' when multiple cluster IPs" },
	{ "clusterIPs three", SVC "metadata: {name: a}\nspec:\n  clusterIPs: [10.96.0.9, \"fd00::9\", 10.96.0.8]\n"
	  "  ports: [{port: 80}]\n", 0, 5, "spec.clusterIPs", "may only hold up to 2 values" },
	{ "clusterIPs None second", SVC "metadata: {name: a}\nspec:\n  clusterIPs: [10.96.0.9, None]\n"
	  "  ports: [{port: 80}]\n", 0, 5, "spec.clusterIPs", "'None' must be the first and only value" },
	{ "clusterIPs bad", SVC "metadata: {name: a}\nspec:\n  clusterIPs: [10.96.0.300]\n"
	  "  ports: [{port: 80}]\n", 0, 5, "spec.clusterIPs[0]", "must be a valid IP address" },
	{ "clusterIPs v4-mapped", SVC "metadata: {name: a}\nspec:\n  clusterIPs: [\"::ffff:10.96.0.9\"]\n"
	  "  ports: [{port: 80}]\n", 0, 5, "spec.clusterIPs[0]", "must be a valid IP address" },
	{ "clusterIP family", SVC "metadata: {name: a}\nspec:\n  clusterIP: 10.96.0.9\n"
	  "  ipFamilies: [IPv6]\n  ports: [{port: 80}]\n", 0, 5, "spec.clusterIP",
	  "expected an IPv6 value as indicated by `ipFamilies[0]`" },
	{ "clusterIPs differ", SVC "metadata: {name: a}\nspec:\n  clusterIP: 10.96.0.9\n"
	  "  clusterIPs: [10.96.0.8]\n  ports: [{port: 80}]\n", 0, 6, "spec.clusterIPs",
	  "first value must match `clusterIP`" },
	{ "port zero", SVC "metadata: {name: a}\nspec:\n  ports: [{port: 0}]\n", 0, 5,
	  "spec.ports[0].port", "between 1 and 65535" },
	{ "port quoted", SVC "metadata: {name: a}\nspec:\n  ports: [{port: \"80\"}]\n", 0, 5,
	  "spec.ports[0].port", "must be an integer" },
	{ "port missing", SVC "metadata: {name: a}\nspec:\n  ports: [{name: x}]\n", 0, 5,
	  "spec.ports[0].port", "is required" },
	{ "ports missing", SVC "metadata: {name: a}\nspec: {selector: {a: b}}\n", 0, 4, "spec.ports",
	  "is required" },
	{ "port name required", SVC "metadata: {name: a}\nspec:\n  ports:\n    - {port: 80}\n"
	  "    - {port: 81, name: b}\n", 0, 6, "spec.ports[0].name", "more than one port" },
	{ "port name duplicate", SVC "metadata: {name: a}\nspec:\n  ports:\n    - {port: 80, name: b}\n"
	  "    - {port: 81, name: b}\n", 0, 7, "spec.ports[1].name", "duplicate port name" },
	{ "port duplicate", SVC "metadata: {name: a}\nspec:\n  ports:\n    - {port: 80, name: a}\n"
	  "    - {port: 80, name: b}\n", 0, 7, "spec.ports[1].port", "duplicate port 80/TCP" },
	{ "target port 0", SVC "metadata: {name: a}\nspec:\n  ports: [{port: 1, targetPort: 0}]\n", 0,
	  5, "spec.ports[0].targetPort", "between 1 and 65535" },
	{ "target port name", SVC "metadata: {name: a}\nspec:\n  ports: [{port: 1, targetPort: \"8080\"}]\n",
	  0, 5, "spec.ports[0].targetPort", "at least one letter" },
	{ "target port name chars", SVC "metadata: {name: a}\nspec:\n  ports: [{port: 1, targetPort: Http}]\n",
	  0, 5, "spec.ports[0].targetPort", "invalid port name" },
	{ "service protocol", SVC "metadata: {name: a}\nspec:\n  ports: [{port: 1, protocol: ICMP}]\n",
	  0, 5, "spec.ports[0].protocol", "unknown protocol \"ICMP\"" },
	{ "service sctp", SVC "metadata: {name: a}\nspec:\n  ports: [{port: 1, protocol: SCTP}]\n",
	  0, 5, "spec.ports[0].protocol", "SCTP is not supported" },
	{ "bad clusterIP", SVC "metadata: {name: a}\nspec:\n  clusterIP: 10.96.0.300\n  ports: [{port: 1}]\n",
	  0, 5, "spec.clusterIP", "must be a valid IP address" },
	{ "clusterIP outside CIDR", SVC "metadata: {name: a}\nspec:\n  clusterIP: 10.200.0.1\n"
	  "  ports: [{port: 1}]\n", 1, 1, "spec.clusterIP", "outside the service CIDR" },
	{ "clusterIP network address", SVC "metadata: {name: a}\nspec:\n  clusterIP: 10.96.0.0\n"
	  "  ports: [{port: 1}]\n", 1, 1, "spec.clusterIP", "network address" },
	{ "clusterIP duplicate", SVC "metadata: {name: a}\nspec: {clusterIP: 10.96.0.10, ports: [{port: 1}]}\n"
	  "---\n" SVC "metadata: {name: b}\nspec: {clusterIP: 10.96.0.10, ports: [{port: 1}]}\n", 1, 6,
	  "spec.clusterIP", "already used by Service default/a" },
	{ "service type", SVC "metadata: {name: a}\nspec: {type: ExternalName, ports: [{port: 1}]}\n", 0,
	  4, "spec.type", "unsupported type" },
	{ "duplicate service", SVC "metadata: {name: a}\nspec: {ports: [{port: 1}]}\n---\n"
	  SVC "metadata: {name: a}\nspec: {ports: [{port: 2}]}\n", 1, 6, "metadata.name",
	  "duplicate Service default/a (also defined at t.yaml:1)" },

	/* pods, deployments */
	{ "pod no containers", POD "spec: {containers: []}\n", 0, 4, "spec.containers",
	  "at least one container" },
	{ "pod container port", POD "spec:\n  containers:\n    - name: c\n      ports: [{containerPort: 99999}]\n",
	  0, 7, "spec.containers[0].ports[0].containerPort", "between 1 and 65535" },
	{ "pod port name dup", POD "spec:\n  containers:\n    - name: c\n"
	  "      ports: [{name: h, containerPort: 1}, {name: h, containerPort: 2, protocol: UDP}]\n",
	  0, 7, "spec.containers[0].ports[1].name", "duplicate port name" },
	{ "pod bad phase", POD "spec: {containers: [{name: c}]}\nstatus: {phase: Exploded}\n", 0, 5,
	  "status.phase", "unknown phase" },
	{ "pod bad ip", POD "spec: {containers: [{name: c}]}\nstatus: {podIP: 1.2.3}\n", 0, 5,
	  "status.podIP", "invalid IP address \"1.2.3\"" },
	{ "pod podIPs first", POD "spec: {containers: [{name: c}]}\nstatus:\n  podIP: 10.0.0.1\n"
	  "  podIPs: [{ip: 10.0.0.2}]\n", 0, 7, "status.podIPs", "first value must match `podIP`" },
	{ "pod podIPs family", POD "spec: {containers: [{name: c}]}\nstatus:\n"
	  "  podIPs: [{ip: 10.0.0.2}, {ip: 10.0.0.3}]\n", 0, 6, "status.podIPs",
	  "no more than one IP for each IP family" },
	{ "pod podIPs bad", POD "spec: {containers: [{name: c}]}\nstatus:\n"
	  "  podIPs: [{ip: 10.0.0.2}, {ip: \"fd00::zz\"}]\n", 0, 6, "status.podIPs[1].ip",
	  "invalid IP address" },
	{ "pod podIPs no ip", POD "spec: {containers: [{name: c}]}\nstatus:\n"
	  "  podIPs: [{addr: 10.0.0.2}]\n", 0, 6, "status.podIPs[0].ip", "is required" },
	{ "pod unknown node", POD "spec: {nodeName: node-z, containers: [{name: c}]}\n", 1, 1,
	  "spec.nodeName", "unknown node" },
	{ "duplicate pod", POD "spec: {containers: [{name: c}]}\n---\n" POD
	  "spec: {containers: [{name: c}]}\n", 1, 6, "metadata.name", "duplicate Pod default/p" },
	{ "deployment selector mismatch", DEP "spec:\n  selector: {matchLabels: {app: x}}\n"
	  "  template:\n    metadata: {labels: {app: y}}\n    spec: {containers: [{name: c}]}\n", 0, 5,
	  "spec.selector", "does not match template labels" },
	{ "deployment no selector", DEP "spec:\n  template:\n    spec: {containers: [{name: c}]}\n", 0,
	  5, "spec.selector", "is required" },
	{ "deployment empty selector", DEP "spec:\n  selector: {}\n  template:\n"
	  "    spec: {containers: [{name: c}]}\n", 0, 5, "spec.selector", "empty selector" },
	{ "deployment replicas", DEP "spec:\n  replicas: -1\n", 0, 5, "spec.replicas",
	  "between 0 and" },
	{ "deployment container name", DEP "spec:\n  selector: {matchLabels: {a: b}}\n  template:\n"
	  "    metadata: {labels: {a: b}}\n    spec: {containers: [{name: C}]}\n", 0, 8,
	  "spec.template.spec.containers[0].name", "invalid container name" },

	/* selectors */
	{ "In without values", NP "spec:\n  podSelector:\n    matchExpressions:\n      - {key: a, operator: In}\n",
	  0, 7, "spec.podSelector.matchExpressions[0].values", "must be non-empty" },
	{ "Exists with values", NP "spec:\n  podSelector:\n    matchExpressions:\n"
	  "      - key: a\n        operator: Exists\n        values: [x]\n", 0, 9,
	  "spec.podSelector.matchExpressions[0].values", "must be empty" },
	{ "bad operator", NP "spec:\n  podSelector:\n    matchExpressions:\n"
	  "      - {key: a, operator: Like, values: [x]}\n", 0, 7,
	  "spec.podSelector.matchExpressions[0].operator", "unknown operator" },
	{ "expression key missing", NP "spec:\n  podSelector:\n    matchExpressions:\n"
	  "      - {operator: Exists}\n", 0, 7, "spec.podSelector.matchExpressions[0].key",
	  "is required" },

	/* TrafficSplit */
	{ "weight negative", SVC_A TS1 "spec:\n  service: a\n  backends: [{service: a, weight: -1}]\n", 0,
	  11, "spec.backends[0].weight", "invalid weight \"-1\"" },
	{ "weight garbage", SVC_A TS1 "spec:\n  service: a\n  backends:\n    - service: a\n"
	  "      weight: 1x\n", 0, 13, "spec.backends[0].weight", "invalid weight" },
	{ "weight missing", SVC_A TS1 "spec:\n  service: a\n  backends: [{service: a}]\n", 0, 11,
	  "spec.backends[0].weight", "is required" },
	{ "weight v1alpha2 quantity", SVC_A TS2 "spec:\n  service: a\n  backends: [{service: a, weight: 500m}]\n",
	  0, 11, "spec.backends[0].weight", "must be an integer" },
	{ "weights zero", SVC_A TS2 "spec:\n  service: a\n  backends: [{service: a, weight: 0}]\n", 0,
	  11, "spec.backends", "add up to 0" },
	{ "backend duplicate", SVC_A TS2 "spec:\n  service: a\n  backends:\n"
	  "    - {service: a, weight: 1}\n    - {service: a, weight: 2}\n", 0, 13,
	  "spec.backends[1].service", "duplicate backend" },
	{ "split matches v1alpha2", SVC_A TS2 "spec:\n  service: a\n  backends: [{service: a, weight: 1}]\n"
	  "  matches: [{kind: HTTPRouteGroup, name: g}]\n", 0, 12, "spec.matches",
	  "matches need v1alpha3 or v1alpha4" },
	{ "split matches kind", SVC_A "apiVersion: split.smi-spec.io/v1alpha4\nkind: TrafficSplit\n"
	  "metadata: {name: s}\nspec:\n  service: a\n  backends: [{service: a, weight: 1}]\n"
	  "  matches: [{kind: TCPRoute, name: g}]\n", 0, 12, "spec.matches[0].kind",
	  "matches of kind \"TCPRoute\" are not supported" },
	{ "route group regex", "apiVersion: specs.smi-spec.io/v1alpha4\nkind: HTTPRouteGroup\n"
	  "metadata: {name: g}\nspec:\n  matches:\n    - name: m\n      pathRegex: \"/a(\"\n", 0, 7,
	  "spec.matches[0].pathRegex", "invalid regular expression" },
	{ "route group empty", "apiVersion: specs.smi-spec.io/v1alpha4\nkind: HTTPRouteGroup\n"
	  "metadata: {name: g}\nspec: {matches: []}\n", 0, 4, "spec.matches",
	  "at least one match" },
	/* GRPCRoute (src/model/decode_grpc.c) */
	{ "grpcroute old version", "apiVersion: gateway.networking.k8s.io/v1alpha1\nkind: GRPCRoute\n"
	  "metadata: {name: g}\n", 0, 1, "apiVersion", "unsupported apiVersion" },
	{ "grpcroute no spec", GR, 0, 1, "spec", "is required" },
	{ "grpcroute method type", GR GRULE("{method: {type: Prefix, service: a.B}}"), 0, 7,
	  "spec.rules[0].matches[0].method.type", "unknown method match type \"Prefix\"" },
	{ "grpcroute method empty", GR GRULE("{method: {type: Exact}}"), 0, 7,
	  "spec.rules[0].matches[0].method.service", "one or both of service and method" },
	{ "grpcroute bad service", GR GRULE("{method: {service: \"a..B\"}}"), 0, 7,
	  "spec.rules[0].matches[0].method.service", "invalid gRPC service name \"a..B\"" },
	{ "grpcroute service digit", GR GRULE("{method: {service: \"pkg.9S\"}}"), 0, 7,
	  "spec.rules[0].matches[0].method.service", "invalid gRPC service name" },
	{ "grpcroute bad method", GR GRULE("{method: {service: a.B, method: \"Say.*\"}}"), 0, 7,
	  "spec.rules[0].matches[0].method.method", "use type RegularExpression" },
	{ "grpcroute bad regex", GR GRULE("{method: {type: RegularExpression, service: \"a(\"}}"),
	  0, 7, "spec.rules[0].matches[0].method.service", "invalid regular expression \"a(\"" },
	{ "grpcroute path field", GR GRULE("{path: {value: /a}}"), 0, 7,
	  "spec.rules[0].matches[0].path", "unknown field" },
	{ "grpcroute header type", GR GRULE("{headers: [{type: Prefix, name: a, value: b}]}"), 0, 7,
	  "spec.rules[0].matches[0].headers[0].type", "unknown match type" },
	{ "grpcroute timeouts", GR "spec:\n  rules:\n  - timeouts: {request: 1s}\n", 0, 6,
	  "spec.rules[0].timeouts", "unknown field" },
	{ "grpcroute mirror port", GR "spec:\n  rules:\n  - filters:\n    - type: RequestMirror\n"
	  "      requestMirror: {backendRef: {name: a}}\n", 0, 8,
	  "spec.rules[0].filters[0].requestMirror.backendRef.port", "is required" },
	{ "grpcroute five mirrors", GR "spec:\n  rules:\n  - filters:\n"
	  "    - {type: RequestMirror, requestMirror: {backendRef: {name: m, port: 1}}}\n"
	  "    - {type: RequestMirror, requestMirror: {backendRef: {name: m, port: 2}}}\n"
	  "    - {type: RequestMirror, requestMirror: {backendRef: {name: m, port: 3}}}\n"
	  "    - {type: RequestMirror, requestMirror: {backendRef: {name: m, port: 4}}}\n"
	  "    - {type: RequestMirror, requestMirror: {backendRef: {name: m, port: 5}}}\n", 0, 11,
	  "spec.rules[0].filters[4]", "at most 4 RequestMirror" },
	{ "grpcroute extensionref", GR "spec:\n  rules:\n  - filters: [{type: ExtensionRef}]\n",
	  0, 6, "spec.rules[0].filters[0].type", "ExtensionRef filters are not supported" },
	{ "grpcroute redirect", GR "spec:\n  rules:\n  - filters: [{type: RequestRedirect}]\n",
	  0, 6, "spec.rules[0].filters[0].type", "unknown GRPCRoute filter type \"RequestRedirect\"" },
	{ "grpcroute two header filters", GR "spec:\n  rules:\n  - filters:\n"
	  "    - {type: RequestHeaderModifier, requestHeaderModifier: {remove: [a]}}\n"
	  "    - {type: RequestHeaderModifier, requestHeaderModifier: {remove: [b]}}\n", 0, 8,
	  "spec.rules[0].filters[1]", "at most one per rule" },
	{ "grpcroute modifier missing", GR "spec:\n  rules:\n  - filters: [{type: ResponseHeaderModifier}]\n",
	  0, 6, "spec.rules[0].filters[0].responseHeaderModifier", "is required" },
	{ "grpcroute backend mirror", GR "spec:\n  rules:\n  - backendRefs:\n"
	  "    - {name: a, port: 80, filters: [{type: RequestMirror}]}\n", 0, 7,
	  "spec.rules[0].backendRefs[0].filters[0].type", "RequestMirror is not supported" },
	{ "grpcroute backend port", GR "spec:\n  rules:\n  - backendRefs: [{name: a}]\n", 0, 6,
	  "spec.rules[0].backendRefs[0].port", "is required when referring to a Service" },
	{ "grpcroute backend weight", GR "spec:\n  rules:\n  - backendRefs: [{name: a, port: 80, weight: -1}]\n",
	  0, 6, "spec.rules[0].backendRefs[0].weight", "between 0 and 1000000" },
	{ "grpcroute session", GR "spec:\n  rules:\n  - sessionPersistence: {sessionName: s}\n", 0,
	  6, "spec.rules[0].sessionPersistence", "not supported" },
	{ "grpcroute duplicate", GR "spec: {rules: [{}]}\n---\n" GR "spec: {rules: [{}]}\n", 1, 6,
	  "metadata.name", "duplicate GRPCRoute default/g (also defined at t.yaml:1)" },
	{ "ignored kind needs a name", "apiVersion: v1\nkind: Secret\nmetadata: {}\n", 0, 3,
	  "metadata.name", "is required" },
	{ "split backends missing", SVC_A TS1 "spec:\n  service: a\n", 0, 10, "spec.backends",
	  "is required" },

	/* HTTPRoute */
	{ "route section name", RT "spec:\n  parentRefs: [{kind: Service, group: \"\", name: a, sectionName: http}]\n",
	  0, 5, "spec.parentRefs[0].sectionName", "use port" },
	{ "route extension ref", RT "spec:\n  rules:\n    - filters: [{type: ExtensionRef, extensionRef: {name: x}}]\n",
	  0, 6, "spec.rules[0].filters[0].type", "ExtensionRef filters are not supported" },
	{ "route backend rewrite", RT "spec:\n  rules:\n    - backendRefs:\n        - name: a\n"
	  "          port: 80\n          filters: [{type: URLRewrite, urlRewrite: {hostname: h}}]\n",
	  0, 9, "spec.rules[0].backendRefs[0].filters[0]", "only RequestHeaderModifier" },
	{ "route retry code", RT "spec:\n  rules:\n    - retry: {codes: [503, 404]}\n", 0, 6,
	  "spec.rules[0].retry.codes[1]", "5xx statuses only" },
	{ "route retry attempts", RT "spec:\n  rules:\n    - retry: {attempts: 11}\n", 0, 6,
	  "spec.rules[0].retry.attempts", "between 0 and 10" },
	{ "route retry backoff", RT "spec:\n  rules:\n    - retry: {backoff: fast}\n", 0, 6,
	  "spec.rules[0].retry.backoff", "invalid duration" },
	{ "route unknown field", RT "spec:\n  rules:\n    - backendRef: [{name: a, port: 80}]\n", 0, 6,
	  "spec.rules[0].backendRef", "unknown field" },
	{ "route unknown match field", RT "spec:\n  rules:\n    - matches: [{paths: {value: /x}}]\n", 0, 6,
	  "spec.rules[0].matches[0].paths", "unknown field" },
	{ "split unknown field", SVC_A TS2 "spec:\n  service: a\n  backend: [{service: a, weight: 1}]\n",
	  0, 11, "spec.backend", "unknown field" },
	{ "np unknown field", NP "spec:\n  podSelector: {}\n  ingres: []\n", 0, 6, "spec.ingres",
	  "unknown field" },
	{ "route session persistence", RT "spec:\n  rules:\n    - sessionPersistence: {sessionName: s}\n",
	  0, 6, "spec.rules[0].sessionPersistence", "not supported" },
	{ "route two redirects", RT "spec:\n  rules:\n    - filters:\n"
	  "        - {type: RequestRedirect, requestRedirect: {statusCode: 301}}\n"
	  "        - {type: RequestRedirect, requestRedirect: {statusCode: 302}}\n", 0, 8,
	  "spec.rules[0].filters[1]", "already given" },
	{ "route redirect and rewrite", RT "spec:\n  rules:\n    - filters:\n"
	  "        - {type: RequestRedirect, requestRedirect: {statusCode: 301}}\n"
	  "        - {type: URLRewrite, urlRewrite: {hostname: h}}\n", 0, 7,
	  "spec.rules[0].filters", "cannot be used together" },
	{ "route five mirrors", RT "spec:\n  rules:\n    - filters:\n"
	  "        - {type: RequestMirror, requestMirror: {backendRef: {name: m, port: 1}}}\n"
	  "        - {type: RequestMirror, requestMirror: {backendRef: {name: m, port: 2}}}\n"
	  "        - {type: RequestMirror, requestMirror: {backendRef: {name: m, port: 3}}}\n"
	  "        - {type: RequestMirror, requestMirror: {backendRef: {name: m, port: 4}}}\n"
	  "        - {type: RequestMirror, requestMirror: {backendRef: {name: m, port: 5}}}\n", 0, 11,
	  "spec.rules[0].filters[4]", "at most 4 RequestMirror" },
	{ "route mirror port", RT "spec:\n  rules:\n    - filters:\n        - type: RequestMirror\n"
	  "          requestMirror: {backendRef: {name: m}}\n", 0, 8,
	  "spec.rules[0].filters[0].requestMirror.backendRef.port", "is required" },
	{ "route mirror percent", RT "spec:\n  rules:\n    - filters:\n        - type: RequestMirror\n"
	  "          requestMirror: {backendRef: {name: m, port: 80}, percent: 101}\n", 0, 8,
	  "spec.rules[0].filters[0].requestMirror.percent", "between 0 and 100" },
	{ "route path type", RT "spec:\n  rules:\n    - matches:\n        - path: {type: Glob, value: /x}\n",
	  0, 7, "spec.rules[0].matches[0].path.type", "unknown path match type" },
	{ "route path slash", RT "spec:\n  rules:\n    - matches:\n        - path: {value: x}\n", 0, 7,
	  "spec.rules[0].matches[0].path.value", "must start with '/'" },
	{ "route method", RT "spec:\n  rules:\n    - matches: [{method: FETCH}]\n", 0, 6,
	  "spec.rules[0].matches[0].method", "unknown method" },
	{ "route duration", RT "spec:\n  rules:\n    - timeouts: {request: 10}\n", 0, 6,
	  "spec.rules[0].timeouts.request", "invalid duration" },
	{ "route backend timeout", RT "spec:\n  rules:\n    - timeouts: {request: 1s, backendRequest: 2s}\n",
	  0, 6, "spec.rules[0].timeouts.backendRequest", "must not be longer" },
	{ "route backend port", RT "spec:\n  rules:\n    - backendRefs: [{name: a}]\n", 0, 6,
	  "spec.rules[0].backendRefs[0].port", "is required when referring to a Service" },
	{ "route weight", RT "spec:\n  rules:\n    - backendRefs: [{name: a, port: 1, weight: -2}]\n", 0,
	  6, "spec.rules[0].backendRefs[0].weight", "between 0 and 1000000" },
	{ "route filter", RT "spec:\n  rules:\n    - filters: [{type: Teleport}]\n", 0, 6,
	  "spec.rules[0].filters[0].type", "unknown filter type" },
	{ "route filter body", RT "spec:\n  rules:\n    - filters: [{type: RequestHeaderModifier}]\n", 0,
	  6, "spec.rules[0].filters[0].requestHeaderModifier", "is required" },
	{ "route redirect code", RT "spec:\n  rules:\n    - filters:\n        - type: RequestRedirect\n"
	  "          requestRedirect: {statusCode: 304}\n", 0, 8,
	  "spec.rules[0].filters[0].requestRedirect.statusCode", "must be 301, 302, 303, 307 or 308" },

	/* NetworkPolicy (Kubernetes' ValidateNetworkPolicy) */
	{ "np invalid cidr", NPBLOCK("{cidr: 10.0.0.0/40}"), 0, 8, "spec.egress[0].to[0].ipBlock.cidr",
	  "invalid CIDR \"10.0.0.0/40\"" },
	{ "np cidr host bits", NPBLOCK("{cidr: 10.0.0.1/8}"), 0, 8, "spec.egress[0].to[0].ipBlock.cidr",
	  "did you mean 10.0.0.0/8" },
	{ "np except outside", NPBLOCK("{cidr: 10.0.0.0/16, except: [10.1.0.0/24]}"), 0, 8,
	  "spec.egress[0].to[0].ipBlock.except[0]", "not strictly within cidr" },
	{ "np except equal", NPBLOCK("{cidr: 10.0.0.0/16, except: [10.0.0.0/16]}"), 0, 8,
	  "spec.egress[0].to[0].ipBlock.except[0]", "not strictly within cidr" },
	{ "np except invalid", NPBLOCK("{cidr: 10.0.0.0/16, except: [10.0.0.5/24]}"), 0, 8,
	  "spec.egress[0].to[0].ipBlock.except[0]", "host bits set" },
	/* IPv6 ipBlocks (docs/ipv6.md "NetworkPolicy") */
	{ "np v6 cidr host bits", NPBLOCK("{cidr: \"fd00::1/64\"}"), 0, 8,
	  "spec.egress[0].to[0].ipBlock.cidr", "IPv6: no host bits may be set" },
	{ "np v6 except outside", NPBLOCK("{cidr: \"fd00::/64\", except: [\"fd01::/72\"]}"), 0, 8,
	  "spec.egress[0].to[0].ipBlock.except[0]", "not strictly within cidr" },
	{ "np v6 except of IPv4", NPBLOCK("{cidr: \"fd00::/64\", except: [10.0.0.0/8]}"), 0, 8,
	  "spec.egress[0].to[0].ipBlock.except[0]", "an IPv6 cidr takes IPv6 excepts" },
	{ "np ipBlock with selector", NP "spec:\n  podSelector: {}\n  ingress:\n    - from:\n"
	  "        - ipBlock: {cidr: 10.0.0.0/8}\n          podSelector: {}\n", 0, 8,
	  "spec.ingress[0].from[0].ipBlock", "may not be combined" },
	{ "np empty peer", NP "spec:\n  podSelector: {}\n  ingress:\n    - from:\n        - {}\n", 0, 8,
	  "spec.ingress[0].from[0]", "must specify podSelector, namespaceSelector or ipBlock" },
	{ "np endPort without port", NPPORT("{endPort: 90}"), 0, 8, "spec.ingress[0].ports[0].endPort",
	  "may not be specified when port is not specified" },
	{ "np endPort below port", NPPORT("{port: 100, endPort: 90}"), 0, 8,
	  "spec.ingress[0].ports[0].endPort", "greater than or equal to port" },
	{ "np endPort named", NPPORT("{port: http, endPort: 90}"), 0, 8,
	  "spec.ingress[0].ports[0].endPort", "named port" },
	{ "np protocol", NPPORT("{protocol: ICMP}"), 0, 8, "spec.ingress[0].ports[0].protocol",
	  "unknown protocol \"ICMP\"" },
	{ "np port range", NPPORT("{port: 65536}"), 0, 8, "spec.ingress[0].ports[0].port",
	  "between 1 and 65535" },
	{ "np policy type", NP "spec:\n  podSelector: {}\n  policyTypes: [Ingress, Sideways]\n", 0, 6,
	  "spec.policyTypes[1]", "unknown policy type" },
	{ "np policy type dup", NP "spec:\n  podSelector: {}\n  policyTypes: [Egress, Egress]\n", 0, 6,
	  "spec.policyTypes[1]", "duplicate policy type" },

	/* Cluster */
	{ "two clusters", "apiVersion: zerohop.io/v1alpha1\nkind: Cluster\n---\n"
	  "apiVersion: zerohop.io/v1alpha1\nkind: Cluster\n", 0, 4, "kind", "a second Cluster" },
	{ "cluster bad cidr", "apiVersion: zerohop.io/v1alpha1\nkind: Cluster\nspec: {podCIDR: 10.0.0.1/16}\n",
	  0, 3, "spec.podCIDR", "host bits set" },
	{ "cluster overlap", "apiVersion: zerohop.io/v1alpha1\nkind: Cluster\n"
	  "spec: {podCIDR: 10.0.0.0/16, serviceCIDR: 10.0.0.0/24}\n", 0, 3, "spec.serviceCIDR", "overlaps" },
	{ "cluster IPv6 host bits", "apiVersion: zerohop.io/v1alpha1\nkind: Cluster\n"
	  "spec: {podCIDRs: [10.0.0.0/16, \"fd00:10::1/56\"]}\n", 0, 3, "spec.podCIDRs[1]",
	  "host bits set" },
	{ "cluster dup node", "apiVersion: zerohop.io/v1alpha1\nkind: Cluster\nspec:\n  nodes: [a, b, a]\n",
	  0, 4, "spec.nodes[2]", "duplicate node name" },
	{ "cluster bad node", "apiVersion: zerohop.io/v1alpha1\nkind: Cluster\nspec:\n  nodes: [{name: A}]\n",
	  0, 4, "spec.nodes[0]", "invalid node name" },
};

static void check(const struct ecase *c)
{
	struct md_state *st = md_state_new();
	struct md_err err;
	int r;

	memset(&err, 0, sizeof(err));
	r = md_state_add_buf(st, "t.yaml", c->yaml, strlen(c->yaml), &err);
	if (c->at_finish) {
		if (!ok(r == 0, "%s: parses", c->name)) {
			char b[512];

			diag("%s", md_err_str(&err, b, sizeof(b)));
			goto out;
		}
		r = md_state_finish(st, &err);
	}
	is_int(r, -EINVAL, "%s: error", c->name);
	is_str(err.file, "t.yaml", "%s: file", c->name);
	is_int(err.line, c->line, "%s: line", c->name);
	is_str(err.field, c->field, "%s: field", c->name);
	if (!ok(strstr(err.msg, c->msg) != NULL, "%s: message", c->name))
		diag("got \"%s\", want \"%s\"", err.msg, c->msg);
out:
	md_state_free(st);
}

/* A failing add leaves the state exactly as it was. */
static void test_all_or_nothing(void)
{
	const char *good = SVC "metadata: {name: a}\nspec: {selector: {app: a}, ports: [{port: 80}]}\n";
	const char *bad = SVC "metadata: {name: b}\nspec: {ports: [{port: 80}]}\n---\n"
			  "apiVersion: v1\nkind: Namespace\nmetadata: {name: n}\n---\n"
			  SVC "metadata: {name: c}\nspec: {ports: [{port: 99999}]}\n";
	struct md_state *st = md_state_new();
	struct md_err err;

	is_int(md_state_add_buf(st, "good.yaml", good, strlen(good), &err), 0, "good file");
	is_int(md_state_add_buf(st, "bad.yaml", bad, strlen(bad), &err), -EINVAL,
	       "bad file with two valid objects before the bad one");
	is_int(st->n_services, 1, "still one service");
	is_int(st->n_namespaces, 0, "no namespace from the failed file");
	is_int(md_state_n_objects(st), 1, "one object");
	is_int(md_state_add_file(st, "/nonexistent/x.yaml", &err), -ENOENT, "missing file: -ENOENT");
	is_str(err.file, "/nonexistent/x.yaml", "missing file named");
	is_int(md_state_finish(st, &err), 0, "state still finishes");
	is_str(md_find_service(st, "default", "a")->meta.name, "a", "the good service is there");
	ok(md_find_service(st, "default", "b") == NULL, "nothing of the bad file");
	is_int(md_state_add_buf(st, "late.yaml", good, strlen(good), &err), -EINVAL,
	       "adding after finish is refused");
	md_state_free(st);
}

int main(void)
{
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		check(&cases[i]);
	test_all_or_nothing();
	return done_testing();
}
