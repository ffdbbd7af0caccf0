/* test_sidecar_cfg.c — the sidecar baseline's HAProxy configuration
 * (src/lab/sidecar_cfg.c, include/zerohop/sidecar.h) from a parsed state:
 * Services by ClusterIP:port, protocol by port name (Istio's rule) or
 * sniffed, Endpoints as servers, a TrafficSplit's weights, the inbound
 * pools per declared port, the loop guards, byte-identical re-renders
 * (SC1), and who gets a sidecar. */
#include <arpa/inet.h>
#include <stdlib.h>
#include <string.h>

#include "tap.h"
#include "zerohop/model.h"
#include "zerohop/sidecar.h"

static const char *yaml =
	"apiVersion: v1\nkind: Pod\nmetadata: {name: a1, labels: {app: a, v: one}}\n"
	"spec: {containers: [{name: c, command: [x], ports: [{containerPort: 8080}]}]}\n"
	"status: {phase: Running, podIP: 10.244.0.5}\n"
	"---\napiVersion: v1\nkind: Pod\nmetadata: {name: a2, labels: {app: a, v: two}}\n"
	"spec: {containers: [{name: c, command: [x], ports: [{containerPort: 8080}]}]}\n"
	"status: {phase: Running, podIP: 10.244.1.7}\n"
	"---\napiVersion: v1\nkind: Service\nmetadata: {name: web}\n"
	"spec: {clusterIP: 10.96.0.80, selector: {app: a}, ports: [{name: http, port: 80, targetPort: 8080},"
	" {name: tcp-echo, port: 8078, targetPort: 8078}, {name: web, port: 9000, targetPort: 8080},"
	" {name: dns, port: 53, protocol: UDP}]}\n"
	"---\napiVersion: v1\nkind: Service\nmetadata: {name: one}\n"
	"spec: {clusterIP: 10.96.0.81, selector: {v: one}, ports: [{name: http, port: 80, targetPort: 8080}]}\n"
	"---\napiVersion: v1\nkind: Service\nmetadata: {name: two}\n"
	"spec: {clusterIP: 10.96.0.82, selector: {v: two}, ports: [{name: http, port: 80, targetPort: 8080}]}\n"
	"---\napiVersion: v1\nkind: Service\nmetadata: {name: root}\n"
	"spec: {clusterIP: 10.96.0.83, selector: {app: a}, ports: [{name: http, port: 80, targetPort: 8080}]}\n"
	"---\napiVersion: v1\nkind: Service\nmetadata: {name: headless}\n"
	"spec: {clusterIP: None, selector: {app: a}, ports: [{port: 80}]}\n"
	"---\napiVersion: split.smi-spec.io/v1alpha1\nkind: TrafficSplit\nmetadata: {name: s}\n"
	"spec: {service: root, backends: [{service: one, weight: 1}, {service: two, weight: 500m}]}\n";

static int count(const char *hay, const char *needle)
{
	int n = 0;

	for (const char *p = hay; (p = strstr(p, needle)); p++)
		n++;
	return n;
}

int main(void)
{
	struct md_state *st = md_state_new();
	struct md_err err = { 0 };
	char buf[512], *cfg = NULL, *again = NULL;
	uint16_t ports[] = { 8080, 9090 };
	struct sc_pod pod = { .ns = "default", .name = "a1", .tcp_ports = ports, .n_tcp_ports = 2 };

	inet_pton(AF_INET, "10.244.0.5", &pod.ip);
	if (md_state_add_buf(st, "t.yaml", yaml, strlen(yaml), &err) || md_state_finish(st, &err)) {
		diag("parse: %s", md_err_str(&err, buf, sizeof(buf)));
		md_state_free(st);
		return 1;
	}
	is_int(sc_render_cfg(st, &pod, &cfg), 0, "renders");
	ok(strstr(cfg, "bind 0.0.0.0:15001") && strstr(cfg, "bind 0.0.0.0:15006"),
	   "outbound 15001 and inbound 15006 listeners");
	ok(strstr(cfg, "uid 1337\n") && strstr(cfg, "gid 1337\n"), "workers run as 1337");
	ok(strstr(cfg, "use_backend o0_0_h if { dst 10.96.0.80 } { dst_port 80 }\n") &&
	   !strstr(cfg, "o0_0_t"), "port named http: HTTP only, no sniffing");
	ok(strstr(cfg, "use_backend o0_1_t if { dst 10.96.0.80 } { dst_port 8078 }\n") &&
	   !strstr(cfg, "o0_1_h"), "port named tcp-echo: TCP only");
	ok(strstr(cfg, "use_backend o0_2_h if HTTP { dst 10.96.0.80 } { dst_port 9000 }\n") &&
	   strstr(cfg, "use_backend o0_2_t if { dst 10.96.0.80 } { dst_port 9000 }\n"),
	   "port named neither way (web): sniffed, HTTP first then TCP");
	ok(!strstr(cfg, "dst_port 53 "), "UDP ports are not captured");
	ok(!strstr(cfg, "Service default/headless"), "headless Service: no backend");
	is_int(count(cfg, "server e0 10.244.0.5:8080\n"), 4, "web's endpoints in its backends (80 h, 9000 h+t, one)");
	ok(strstr(cfg, "server e1 10.244.1.7:8080\n"), "second endpoint");
	ok(strstr(cfg, "mode http\n    balance roundrobin\n    http-reuse always\n"),
	   "HTTP: per request round robin, keep-alive pool");
	ok(strstr(cfg, "retries 0\n"), "retries off");
	ok(strstr(cfg, "server e0 10.244.0.5:8080 weight 256  # one\n") &&
	   strstr(cfg, "server e1 10.244.1.7:8080 weight 128  # two\n"), "split 1 : 500m as weights 256 : 128");
	ok(strstr(cfg, "backend passthrough\n    mode tcp\n    server orig 0.0.0.0\n"),
	   "unknown destinations pass through to the original destination");
	ok(strstr(cfg, "tcp-request connection reject if { dst_port 15001 }") &&
	   strstr(cfg, "tcp-request connection reject if { dst_port 15006 }"),
	   "direct connections to the listeners are refused (no loop)");
	ok(strstr(cfg, "use_backend in_8080 if HTTP { dst_port 8080 }") &&
	   strstr(cfg, "server app 127.0.0.1:9090 source 127.0.0.6\n") &&
	   strstr(cfg, "server app 127.0.0.1 source 127.0.0.6\n"),
	   "inbound: a pool per declared port from 127.0.0.6, TCP to the original port");
	is_int(sc_render_cfg(st, &pod, &again), 0, "renders again");
	is_str(again, cfg, "SC1: the same state renders byte-identical text");

	ok(strstr(sc_capture_rules(), "redirect to :15001") &&
	   strstr(sc_capture_rules(), "ip saddr 127.0.0.6 return") &&
	   strstr(sc_capture_rules(), "meta skuid 1337 return"), "capture rules as istio-init");
	ok(sc_wanted("default", NULL), "default namespace: sidecar");
	ok(!sc_wanted("kube-system", NULL), "kube-system: none");
	{
		struct md_kv kv = { "sidecar.istio.io/inject", "false" };
		struct md_labels ann = { &kv, 1 };

		ok(!sc_wanted("default", &ann), "inject: false: none");
	}
	free(cfg);
	free(again);
	md_state_free(st);
	return done_testing();
}
