/* dash_cli.c — `zerohop dashboard`: a web page of the lab's mesh, served by
 * the binary itself on loopback (docs/observability.md "Dashboard").
 *
 * Every --interval the server samples the lab as `zerohop top` does
 * (obs_view.h), per edge (source workload -> destination workload or
 * Service) and per Service, and reads the agents' recent drops (/flows);
 * GET /api/snapshot returns the last snapshot as JSON, GET / the page. The
 * page (below, inline: no CDN, no external file) draws the service graph
 * (workloads as nodes, edges labelled with RPS, success rate and p99 or
 * connections/s, edges with drops in red), each Service's request and
 * connection rate over time, the p50/p95/p99 of each L7 Service, and the
 * recent drops with their reasons. It polls the snapshot every 2 s.
 *
 * Loopback by default (127.0.0.1, an ephemeral port unless --addr says
 * otherwise): the dashboard shows the lab to whoever runs it, no one else.
 */
#include <errno.h>
#include <getopt.h>
#include <glob.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include "zerohop/log.h"
#include "zerohop/obs.h"
#include "zerohop/paths.h"
#include "obs_view.h"

static const char dash_page[] =
"<!doctype html><html><head><meta charset=utf-8><title>zerohop dashboard</title>\n"
"<style>body{font:13px sans-serif;margin:12px;background:#fafafa;color:#222}"
"h1{font-size:18px;margin:0 0 8px}h2{font-size:14px;margin:14px 0 6px}"
"#graph{background:#fff;border:1px solid #ccc}table{border-collapse:collapse;background:#fff}"
"td,th{border:1px solid #ddd;padding:3px 6px;text-align:right}td:first-child,th:first-child{text-align:left}"
".drop{color:#c00}.wrap{display:flex;gap:16px;flex-wrap:wrap}canvas{background:#fff;border:1px solid #ccc}"
"</style></head><body><h1>zerohop — lab <span id=lab></span> <small id=upd></small></h1>\n"
"<div class=wrap><div><h2>Service graph</h2><svg id=graph width=720 height=460></svg></div>\n"
"<div><h2>Requests/s and connections/s</h2><canvas id=ts width=520 height=220></canvas>\n"
"<h2>Latency (L7, ms)</h2><canvas id=lat width=520 height=180></canvas></div></div>\n"
"<h2>Services</h2><table id=svcs><thead><tr><th>service</th><th>RPS</th><th>success</th>"
"<th>p50</th><th>p95</th><th>p99</th><th>conn/s</th><th>active</th><th>bytes/s</th><th>drops</th></tr></thead><tbody></tbody></table>\n"
"<h2>Recent drops</h2><table id=drops><thead><tr><th>time</th><th>node</th><th>source</th>"
"<th>destination</th><th>reason</th></tr></thead><tbody></tbody></table>\n"
"<script>\n"
"'use strict';\n"
"const hist = {}; const HN = 60;\n"
"function f(v, d) { return v === null || v === undefined ? '-' : Number(v).toFixed(d); }\n"
"function el(tag, attrs, text) { const e = document.createElementNS('http://www.w3.org/2000/svg', tag);"
" for (const k in attrs) e.setAttribute(k, attrs[k]); if (text !== undefined) e.textContent = text; return e; }\n"
"function short(n) { return n.replace('.svc.cluster.local', ''); }\n"
"function graph(edges) {\n"
" const svg = document.getElementById('graph'); while (svg.firstChild) svg.removeChild(svg.firstChild);\n"
" const names = []; for (const e of edges) for (const n of [e.source, e.destination]) if (!names.includes(n)) names.push(n);\n"
" const W = 720, H = 460, R = Math.min(W, H) / 2 - 70, pos = {};\n"
" names.forEach((n, i) => { const a = 2 * Math.PI * i / Math.max(names.length, 1);"
" pos[n] = [W / 2 + R * Math.cos(a), H / 2 + R * Math.sin(a)]; });\n"
" svg.appendChild(el('defs', {})).appendChild(el('marker', {id: 'arr', viewBox: '0 0 10 10', refX: 10, refY: 5,"
" markerWidth: 6, markerHeight: 6, orient: 'auto'})).appendChild(el('path', {d: 'M0,0L10,5L0,10z', fill: '#666'}));\n"
" for (const e of edges) {\n"
"  const [x1, y1] = pos[e.source], [x2, y2] = pos[e.destination], bad = e.drops_total > 0;\n"
"  const dx = x2 - x1, dy = y2 - y1, l = Math.hypot(dx, dy) || 1;\n"
"  svg.appendChild(el('line', {x1: x1 + dx / l * 28, y1: y1 + dy / l * 28, x2: x2 - dx / l * 28, y2: y2 - dy / l * 28,"
" stroke: bad ? '#c00' : '#666', 'stroke-width': bad ? 2.5 : 1.5, 'stroke-dasharray': bad ? '6 3' : '',"
" 'marker-end': 'url(#arr)', class: 'edge' + (bad ? ' drop' : '')}));\n"
"  const label = e.l7 ? f(e.rps, 1) + ' rps ' + f(e.success_rate * 100, 1) + '% p99 ' + f(e.p99_ms, 1) + 'ms'"
" : f(e.tcp_conns_per_second, 1) + ' conn/s' + (bad ? ' drops ' + e.drops_total : '');\n"
"  svg.appendChild(el('text', {x: (x1 + x2) / 2, y: (y1 + y2) / 2 - 4, 'text-anchor': 'middle', 'font-size': 11,"
" fill: bad ? '#c00' : '#333', class: 'edge-label'}, label));\n"
" }\n"
" for (const n of names) { const [x, y] = pos[n];\n"
"  svg.appendChild(el('circle', {cx: x, cy: y, r: 26, fill: n.includes('.svc.') ? '#fde' : '#def', stroke: '#357'}));\n"
"  svg.appendChild(el('text', {x: x, y: y + 40, 'text-anchor': 'middle', 'font-size': 12, class: 'node'}, short(n))); }\n"
"}\n"
"function plot(id, series, keyf, label) {\n"
" const c = document.getElementById(id), g = c.getContext('2d'); g.clearRect(0, 0, c.width, c.height);\n"
" let max = 1; for (const s of series) for (const v of s.v) max = Math.max(max, v);\n"
" const cols = ['#1f77b4', '#d62728', '#2ca02c', '#9467bd', '#ff7f0e', '#8c564b'];\n"
" series.forEach((s, i) => { g.strokeStyle = cols[i % cols.length]; g.beginPath();\n"
"  s.v.forEach((v, j) => { const x = 40 + j * (c.width - 50) / (HN - 1), y = c.height - 20 - v / max * (c.height - 40);"
" j ? g.lineTo(x, y) : g.moveTo(x, y); }); g.stroke(); g.fillStyle = cols[i % cols.length];"
" g.fillText(s.name, 45, 12 + 12 * i); });\n"
" g.fillStyle = '#333'; g.fillText(f(max, 1) + ' ' + label, 2, 30);\n"
"}\n"
"function latency(svcs) {\n"
" const c = document.getElementById('lat'), g = c.getContext('2d'); g.clearRect(0, 0, c.width, c.height);\n"
" const l7 = svcs.filter(s => s.l7); let max = 1; for (const s of l7) max = Math.max(max, s.p99_ms || 0);\n"
" l7.forEach((s, i) => { const y = 10 + i * 34; g.fillStyle = '#333'; g.fillText(short(s.service), 2, y + 10);\n"
"  [['p50', s.p50_ms, '#2ca02c'], ['p95', s.p95_ms, '#ff7f0e'], ['p99', s.p99_ms, '#d62728']].forEach((q, k) => {\n"
"   g.fillStyle = q[2]; const w = (q[1] || 0) / max * (c.width - 220); g.fillRect(160, y + k * 9, w, 8);"
" g.fillText(q[0] + ' ' + f(q[1], 2), 165 + w, y + k * 9 + 8); }); });\n"
"}\n"
"async function tick() {\n"
" const r = await fetch('/api/snapshot'); const s = await r.json();\n"
" document.getElementById('lab').textContent = s.lab;\n"
" document.getElementById('upd').textContent = new Date(s.time * 1000).toLocaleTimeString();\n"
" graph(s.edges.rows);\n"
" const tb = document.querySelector('#svcs tbody'); tb.innerHTML = '';\n"
" for (const v of s.services.rows) { const tr = tb.insertRow();"
" tr.className = 'svc' + (v.drops_total > 0 ? ' drop' : '');\n"
"  for (const x of [short(v.service), v.l7 ? f(v.rps, 1) : '-', v.success_rate === null ? '-' : f(v.success_rate * 100, 2) + '%',"
" f(v.p50_ms, 1), f(v.p95_ms, 1), f(v.p99_ms, 1), f(v.tcp_conns_per_second, 1), f(v.tcp_active, 0),"
" f(v.tcp_bytes_per_second, 0), f(v.drops_total, 0)]) tr.insertCell().textContent = x;\n"
"  const h = hist[v.service] = hist[v.service] || {r: [], c: []};\n"
"  h.r.push(v.rps); h.c.push(v.tcp_conns_per_second); if (h.r.length > HN) { h.r.shift(); h.c.shift(); } }\n"
" const ser = []; for (const k in hist) { ser.push({name: short(k) + ' rps', v: hist[k].r});"
" ser.push({name: short(k) + ' conn/s', v: hist[k].c}); }\n"
" plot('ts', ser.filter(x => x.v.some(v => v > 0)), null, '/s'); latency(s.services.rows);\n"
" const db = document.querySelector('#drops tbody'); db.innerHTML = '';\n"
" for (const d of s.drops.slice(-20).reverse()) { const tr = db.insertRow(); tr.className = 'drop';\n"
"  for (const x of [new Date(d.time * 1000).toLocaleTimeString(), d.node,"
" (d.source.namespace || '') + '/' + (d.source.pod || d.source.ip),"
" d.destination.service || d.destination.ip + ':' + d.destination.port, d.reason]) tr.insertCell().textContent = x; }\n"
"}\n"
"function loop() { tick().catch(e => { document.getElementById('upd').textContent = 'no data: ' + e; })"
".finally(() => setTimeout(loop, 2000)); }\n"
"loop();\n"
"</script></body></html>\n";

static char *snapshot;	/* the last /api/snapshot body (malloc'd) */

/* The agents' recent DROPPED events, as JSON array elements into f. */
static void drops_json(const char *lab, FILE *f)
{
	char pattern[300];
	glob_t g = {};
	int first = 1;

	ag_obs_sock_path(pattern, sizeof(pattern), lab, "*");
	if (glob(pattern, 0, NULL, &g))
		return;
	for (size_t i = 0; i < g.gl_pathc; i++) {
		int fd = ag_obs_sock_get(g.gl_pathv[i], "/flows");
		char buf[4096], line[2048];
		size_t ll = 0;
		ssize_t r;

		if (fd < 0)
			continue;
		while ((r = read(fd, buf, sizeof(buf))) > 0)
			for (ssize_t k = 0; k < r; k++) {
				if (buf[k] != '\n') {
					if (ll < sizeof(line) - 1)
						line[ll++] = buf[k];
					continue;
				}
				line[ll] = '\0';
				if (strstr(line, "\"verdict\":\"DROPPED\"")) {
					fprintf(f, "%s%s", first ? "" : ",", line);
					first = 0;
				}
				ll = 0;
			}
		close(fd);
	}
	globfree(&g);
}

static void take_snapshot(const char *lab, struct obs_view *edges, struct obs_view *svcs)
{
	char *body = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&body, &len);

	obs_view_sample(edges);
	obs_view_sample(svcs);
	fprintf(f, "{\"lab\":\"%s\",\"time\":%lld,\"edges\":", lab, (long long)time(NULL));
	obs_view_json(edges, f);
	fprintf(f, ",\"services\":");
	obs_view_json(svcs, f);
	fprintf(f, ",\"drops\":[");
	drops_json(lab, f);
	fprintf(f, "]}\n");
	fclose(f);
	free(snapshot);
	snapshot = body;
}

static void reply(int fd, const char *status, const char *ctype, const char *body, size_t len)
{
	dprintf(fd, "HTTP/1.1 %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\n"
		    "Cache-Control: no-store\r\nConnection: close\r\n\r\n", status, ctype, len);
	while (len) {
		ssize_t w = write(fd, body, len);

		if (w <= 0)
			return;
		body += w;
		len -= (size_t)w;
	}
}

static void serve(int lfd)
{
	struct timeval tv = { .tv_sec = 1 };
	char req[2048], path[256] = "";
	ssize_t n;
	int fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);

	if (fd < 0)
		return;
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	n = read(fd, req, sizeof(req) - 1);
	if (n > 0) {
		req[n] = '\0';
		if (sscanf(req, "GET %255s", path) != 1)
			reply(fd, "405 Method Not Allowed", "text/plain", "GET only\n", 9);
		else if (!strcmp(path, "/") || !strcmp(path, "/index.html"))
			reply(fd, "200 OK", "text/html; charset=utf-8", dash_page, sizeof(dash_page) - 1);
		else if (!strcmp(path, "/api/snapshot"))
			reply(fd, "200 OK", "application/json", snapshot ? snapshot : "{}",
			      snapshot ? strlen(snapshot) : 2);
		else if (!strcmp(path, "/favicon.ico"))
			reply(fd, "204 No Content", "image/x-icon", "", 0);
		else
			reply(fd, "404 Not Found", "text/plain", "not found\n", 10);
	}
	close(fd);
}

static volatile sig_atomic_t dash_stop;

static void on_sig(int sig)
{
	(void)sig;
	dash_stop = 1;
}

int cli_dashboard(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "lab", required_argument, NULL, 'l' },
		{ "addr", required_argument, NULL, 'a' },
		{ "interval", required_argument, NULL, 'i' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	const char *lab_opt = NULL, *addr = "127.0.0.1:0", *lab, *colon;
	struct sockaddr_in sa = { .sin_family = AF_INET };
	socklen_t sl = sizeof(sa);
	struct obs_view *edges = NULL, *svcs = NULL;
	double interval = 2;
	char host[64], shown[64];
	int c, lfd = -1, ret = 1, one = 1;

	optind = 1;
	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (c) {
		case 'l': lab_opt = optarg; break;
		case 'a': addr = optarg; break;
		case 'i':
			interval = atof(optarg);
			if (interval < 0.5 || interval > 60) {
				fprintf(stderr, "zerohop dashboard: --interval: 0.5..60 seconds, got '%s'\n", optarg);
				return 2;
			}
			break;
		default:
			fprintf(stderr, "usage: zerohop dashboard [--lab LAB] [--addr IP:PORT (127.0.0.1:0)] [--interval SECONDS]\n");
			return c == 'h' ? 0 : 2;
		}
	}
	colon = strrchr(addr, ':');
	if (!colon || colon - addr >= (long)sizeof(host)) {
		fprintf(stderr, "zerohop dashboard: --addr: IP:PORT, got '%s'\n", addr);
		return 2;
	}
	memcpy(host, addr, (size_t)(colon - addr));
	host[colon - addr] = '\0';
	if (inet_pton(AF_INET, host, &sa.sin_addr) != 1 || atoi(colon + 1) < 0 || atoi(colon + 1) > 65535) {
		fprintf(stderr, "zerohop dashboard: --addr: IP:PORT, got '%s'\n", addr);
		return 2;
	}
	sa.sin_port = htons((uint16_t)atoi(colon + 1));
	lab = zh_lab_name(lab_opt);
	if (obs_view_open(lab, OBS_BY_EDGE, &edges) || obs_view_open(lab, OBS_BY_SERVICE, &svcs)) {
		fprintf(stderr, "zerohop dashboard: lab %s is not up\n", lab);
		goto out;
	}
	lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (lfd < 0 || bind(lfd, (struct sockaddr *)&sa, sizeof(sa)) || listen(lfd, 16) ||
	    getsockname(lfd, (struct sockaddr *)&sa, &sl)) {
		fprintf(stderr, "zerohop dashboard: listen on %s: %s\n", addr, strerror(errno));
		goto out;
	}
	inet_ntop(AF_INET, &sa.sin_addr, shown, sizeof(shown));
	take_snapshot(lab, edges, svcs);
	printf("dashboard: http://%s:%u/ (lab %s; Ctrl-C stops)\n", shown, ntohs(sa.sin_port), lab);
	fflush(stdout);
	signal(SIGINT, on_sig);
	signal(SIGTERM, on_sig);
	signal(SIGPIPE, SIG_IGN);
	{
		struct timespec t0, t1;

		clock_gettime(CLOCK_MONOTONIC, &t0);
		while (!dash_stop) {
			struct pollfd p = { .fd = lfd, .events = POLLIN };
			double el;

			if (poll(&p, 1, 200) > 0)
				serve(lfd);
			clock_gettime(CLOCK_MONOTONIC, &t1);
			el = (double)(t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) / 1e9;
			if (el >= interval) {
				take_snapshot(lab, edges, svcs);
				t0 = t1;
			}
		}
	}
	ret = 0;
out:
	if (lfd >= 0)
		close(lfd);
	obs_view_close(edges);
	obs_view_close(svcs);
	free(snapshot);
	snapshot = NULL;
	return ret;
}
