/* test_hbone_out.c — the HBONE client (include/zerohop/hbone_out.h) against
 * the real HBONE server (hbone.h) in ONE event loop, over loopback sockets,
 * with certificates from a real CA: node-a's SVIDs for the client, node-b's
 * for the server. An "application" socket plays the captured client pod;
 * the destination is an echo thread that says BYE after the client's EOF.
 * Checked: bytes both ways and half-close in both directions (O4); two
 * concurrent streams over one TLS connection; a server presenting another
 * identity refused (O1); a missing source SVID refused; a 403 closes the
 * client with a reset and the reason counted; a refused TCP connect; the
 * idle close (O6) and the tunnel cap; an SVID renewal makes a new context;
 * the server going away resets a relaying stream; 4 MiB echoed through a
 * slow reader with no stream buffer above HB_HIGH (O3). Everything runs
 * under ASan/LSan in `make unit`: every close path frees (O8). */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include "tap.h"
#include "id_fixture.h"
#include "zerohop/ev.h"
#include "zerohop/hbone.h"
#include "zerohop/hbone_out.h"
#include "zerohop/identity.h"
#include "zerohop/state.h"

static char root[] = "/tmp/zh-hbo.XXXXXX";
static char ca[ID_FIXTURE_PATH], rogue[ID_FIXTURE_PATH], dir_a[ID_FIXTURE_PATH],
	dir_b[ID_FIXTURE_PATH], sdir[ID_FIXTURE_PATH];
static int echo_port, echo_conns, app_lfd;
static long half_got = -1;	/* bytes the HALF destination read after its shutdown */
static struct ev_loop *loop;

static struct md_state *state(void)
{
	static const char yaml[] =
		"apiVersion: v1\nkind: Pod\nmetadata: {name: cli}\n"
		"spec: {nodeName: node-a, containers: [{name: c, command: [sleep]}]}\n"
		"---\napiVersion: v1\nkind: Pod\nmetadata: {name: evil}\n"
		"spec: {nodeName: node-a, serviceAccountName: evil, containers: [{name: c, command: [sleep]}]}\n"
		"---\napiVersion: v1\nkind: Pod\nmetadata: {name: srv}\n"
		"spec: {nodeName: node-b, serviceAccountName: web, containers: [{name: c, command: [sleep]}]}\n"
		"---\napiVersion: v1\nkind: Pod\nmetadata: {name: other}\n"
		"spec: {nodeName: node-b, serviceAccountName: other, containers: [{name: c, command: [sleep]}]}\n";

	return id_fixture_state(root, sdir, yaml);
}

/* ---- the destination: echo, BYE after EOF; "HALF": its side ends first ---- */

static void *conn_main(void *arg)
{
	int fd = (int)(long)arg;
	char b[65536];
	ssize_t n;
	bool first = true;

	while ((n = read(fd, b, sizeof(b))) > 0) {
		if (first && n >= 4 && !memcmp(b, "HALF", 4)) {
			long got = n - 4;

			if (write(fd, "HALF-OK", 7) != 7)
				break;
			shutdown(fd, SHUT_WR);	/* ends first; keeps reading */
			while ((n = read(fd, b, sizeof(b))) > 0)
				got += n;
			__atomic_store_n(&half_got, got, __ATOMIC_SEQ_CST);
			close(fd);
			return NULL;
		}
		first = false;
		if (write(fd, b, (size_t)n) != n)
			break;
	}
	if (n == 0 && write(fd, "BYE", 3) != 3)
		diag("echo: BYE not written");
	close(fd);
	return NULL;
}

static void *echo_main(void *arg)
{
	int lfd = (int)(long)arg;

	for (;;) {
		int fd = accept(lfd, NULL, NULL);
		pthread_t th;

		if (fd < 0)
			return NULL;
		__atomic_add_fetch(&echo_conns, 1, __ATOMIC_SEQ_CST);
		pthread_create(&th, NULL, conn_main, (void *)(long)fd);
		pthread_detach(th);
	}
}

static const char *deny_evil(void *arg, const char *peer, const char *sni, uint32_t ip,
			     uint16_t port, uint32_t src_ip)
{
	return strstr(peer, "/sa/evil") ? "denied by a DENY policy" : NULL;
}

static struct hb_server *server(const char *pod)
{
	struct hb_opts o = { .loop = loop, .listen = "127.0.0.1:0", .svid_dir = dir_b,
			     .ns = pod ? "default" : NULL, .pod = pod, .authorize = deny_evil };
	struct hb_server *s = NULL;
	char err[300];

	if (hb_server_open(&o, &s, err, sizeof(err)))
		diag("server: %s", err);
	return s;
}

/* ---- the application: the captured client pod's socket ----------------------- */

struct app {
	int fd;			/* the application's end */
	char in[4096];
	size_t n_in;
	bool eof, reset;
};

/* A connected pair on loopback: *app the pod's end, returns the proxy's. */
static int app_open(struct app *a)
{
	struct sockaddr_in sa;
	socklen_t sl = sizeof(sa);
	int fd;

	memset(a, 0, sizeof(*a));
	getsockname(app_lfd, (struct sockaddr *)&sa, &sl);
	a->fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
	if (connect(a->fd, (struct sockaddr *)&sa, sizeof(sa)) && errno != EINPROGRESS)
		return -1;
	fd = accept(app_lfd, NULL, NULL);
	return fd;
}

static void app_read(struct app *a)
{
	for (;;) {
		ssize_t n = recv(a->fd, a->in + a->n_in, sizeof(a->in) - 1 - a->n_in, 0);

		if (n > 0) {
			a->n_in += (size_t)n;
			a->in[a->n_in] = 0;
			continue;
		}
		if (n == 0)
			a->eof = true;
		else if (errno == ECONNRESET)
			a->reset = true;
		return;
	}
}

static bool app_has(struct app *a, const char *s)
{
	app_read(a);
	return strstr(a->in, s) != NULL;
}

/* Run the loop until cond(a) or ms pass. */
static bool pump(int ms, bool (*cond)(struct app *), struct app *a)
{
	uint64_t end = ev_now_ns() + ms * 1000000ULL;

	while (ev_now_ns() < end) {
		if (cond && cond(a))
			return true;
		ev_run_once(loop, 5);
	}
	return cond ? cond(a) : true;
}

static bool app_done(struct app *a)
{
	app_read(a);
	return a->eof || a->reset;
}

static bool app_bye(struct app *a)
{
	return app_has(a, "BYE");
}

static bool app_ping(struct app *a)
{
	return app_has(a, "ping");
}

static bool app_half(struct app *a)
{
	return app_has(a, "HALF-OK") && app_done(a);
}

static bool half_done(struct app *a)
{
	return __atomic_load_n(&half_got, __ATOMIC_SEQ_CST) >= 0;
}

static struct hbo_target target(const char *src, const char *dst_pod, const char *dst_sa,
				int port)
{
	return (struct hbo_target){
		.src_ns = "default", .src_pod = src, .dst_ns = "default", .dst_pod = dst_pod,
		.dst_sa = dst_sa, .node_ip = htonl(INADDR_LOOPBACK), .node_port = (uint16_t)port,
		.dst_ip = htonl(INADDR_LOOPBACK), .dst_port = (uint16_t)echo_port,
		.client_ip = htonl(INADDR_LOOPBACK), .client_port = 1,
	};
}

/* A client connection from src to srv through the server on port. */
static int app_connect(struct hbo_client *cl, struct app *a, const char *src, int port)
{
	struct hbo_target t = target(src, "srv", "web", port);

	return hbo_connect(cl, app_open(a), &t);
}

static void app_close(struct app *a)
{
	close(a->fd);
	a->fd = -1;
}

/* ---- a large transfer through a slow reader (O3) ------------------------------ */

static uint8_t pat(size_t i)
{
	return (uint8_t)(i * 7 + i / 251);
}

static bool big_transfer(struct hbo_client *cl, int port, size_t total, bool *bounded_wait)
{
	struct app a;
	size_t sent = 0, got = 0;
	uint64_t end = ev_now_ns() + 60000000000ULL, stall_end = 0;
	bool bad = false, blocked = false, shut = false;
	int it = 0;

	if (app_connect(cl, &a, "cli", port))
		return false;
	while (ev_now_ns() < end && !bad) {
		uint8_t b[8192];
		ssize_t n;

		while (sent < total) {	/* write while the tunnel takes it */
			size_t k = total - sent < sizeof(b) ? total - sent : sizeof(b);

			for (size_t i = 0; i < k; i++)
				b[i] = pat(sent + i);
			n = send(a.fd, b, k, MSG_NOSIGNAL);
			if (n <= 0) {
				blocked = blocked || (n < 0 && errno == EAGAIN);
				break;
			}
			sent += (size_t)n;
		}
		if (sent == total && !shut) {
			shutdown(a.fd, SHUT_WR);
			shut = true;
		}
		ev_run_once(loop, 1);
		/* slow: nothing read for the first 300 ms, then 8 KiB a turn */
		if (!stall_end)
			stall_end = ev_now_ns() + 300000000ULL;
		if (ev_now_ns() < stall_end || (++it & 1))
			continue;
		n = recv(a.fd, b, sizeof(b), MSG_DONTWAIT);
		if (n == 0)
			break;
		for (ssize_t i = 0; i < n && got + (size_t)i < total; i++)
			if (b[i] != pat(got + (size_t)i)) {
				diag("byte %zu differs", got + (size_t)i);
				bad = true;
				break;
			}
		if (n > 0)
			got += (size_t)n;
	}
	*bounded_wait = blocked;
	app_close(&a);
	pump(100, NULL, NULL);
	if (got != total + 3)	/* + BYE */
		diag("sent %zu, got %zu of %zu (+3)", sent, got, total);
	return !bad && got == total + 3;
}

int main(void)
{
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t sl = sizeof(sa);
	const struct hbo_stats *st;
	struct hb_server *srv, *other, *third;
	struct hbo_client *cl, *cl1;
	struct hbo_opts co;
	struct id_issue_report r;
	struct id_err err = {};
	struct md_state *ms;
	struct app a, b;
	pthread_t th;
	char log[400], cmd[3000];
	int lfd, p, p_other, p_third, before;
	uint64_t n;

	signal(SIGPIPE, SIG_IGN);
	if (id_fixture_dirs(root, ca, rogue, dir_a, dir_b, sdir))
		return 1;
	ms = state();
	if (!ms || id_ca_init(ca, NULL, ID_DEFAULT_CA_TTL, &err) ||
	    id_issue_node(ca, ms, "node-a", dir_a, ID_DEFAULT_SVID_TTL, &r, &err) ||
	    id_issue_node(ca, ms, "node-b", dir_b, ID_DEFAULT_SVID_TTL, &r, &err)) {
		diag("set-up: %s", err.msg);
		return 1;
	}
	snprintf(log, sizeof(log), "%s/log", root);
	if (!freopen(log, "w", stderr))
		return 1;
	setvbuf(stderr, NULL, _IOLBF, 0);
	lfd = socket(AF_INET, SOCK_STREAM, 0);
	app_lfd = socket(AF_INET, SOCK_STREAM, 0);
	if (bind(lfd, (struct sockaddr *)&sa, sizeof(sa)) || listen(lfd, 64) ||
	    getsockname(lfd, (struct sockaddr *)&sa, &sl) ||
	    bind(app_lfd, (struct sockaddr *)&(struct sockaddr_in){ .sin_family = AF_INET,
			    .sin_addr.s_addr = htonl(INADDR_LOOPBACK) }, sizeof(sa)) ||
	    listen(app_lfd, 64))
		return 1;
	echo_port = ntohs(sa.sin_port);
	pthread_create(&th, NULL, echo_main, (void *)(long)lfd);
	loop = ev_loop_new(64);
	srv = server(NULL);		/* by SNI, as the node proxy */
	other = server("other");	/* presents default/other whatever the SNI */
	third = server(NULL);
	co = (struct hbo_opts){ .loop = loop, .svid_dir = dir_a, .idle_ms = 400 };
	hbo_client_new(&co, &cl);
	co.max_tunnels = 1;
	hbo_client_new(&co, &cl1);
	st = hbo_client_stats(cl);
	if (!ok(srv && other && third, "three HBONE servers on loopback"))
		return done_testing();
	p = hb_server_port(srv);
	p_other = hb_server_port(other);
	p_third = hb_server_port(third);

	/* ---- bytes both ways, then the client's half-close (O4) ---- */
	ok(app_connect(cl, &a, "cli", p) == 0, "cli -> srv: handed to the client");
	if (send(a.fd, "ping", 4, 0) != 4)
		diag("send");
	ok(pump(5000, app_ping, &a), "ping echoed through the tunnel (%s)", a.in);
	ok(!a.eof && !a.reset, "... the connection still open both ways");
	shutdown(a.fd, SHUT_WR);
	ok(pump(5000, app_bye, &a) && pump(2000, app_done, &a) && a.eof && !a.reset,
	   "client's SHUT_WR reached the destination (it said BYE after its EOF), then the "
	   "destination's FIN came back as EOF (%s)", a.in);
	app_close(&a);
	ok(st->tunnels == 1 && st->established == 1 && st->bytes_out == 4 && st->bytes_in == 7,
	   "one tunnel, one stream established, 4 bytes out, 7 in (%llu, %llu, %llu, %llu)",
	   (unsigned long long)st->tunnels, (unsigned long long)st->established,
	   (unsigned long long)st->bytes_out, (unsigned long long)st->bytes_in);

	/* ---- the destination half-closes first; the client still sends ---- */
	app_connect(cl, &a, "cli", p);
	if (send(a.fd, "HALF", 4, 0) != 4)
		diag("send");
	ok(pump(5000, app_half, &a) && a.eof && !a.reset,
	   "destination's SHUT_WR arrives as EOF while the client's side is open (%s)", a.in);
	if (send(a.fd, "0123456789", 10, MSG_NOSIGNAL) != 10)
		diag("send after EOF");
	shutdown(a.fd, SHUT_WR);
	pump(5000, half_done, &a);
	ok(half_got == 10, "... and the client's 10 later bytes and FIN still reach it (%ld)",
	   half_got);
	app_close(&a);

	/* ---- two concurrent streams over ONE TLS connection ---- */
	n = hb_server_stats(srv)->conns;
	app_connect(cl, &a, "cli", p);
	app_connect(cl, &b, "cli", p);
	if (send(a.fd, "ping", 4, 0) != 4 || send(b.fd, "ping", 4, 0) != 4)
		diag("send");
	ok(pump(5000, app_ping, &a) && pump(5000, app_ping, &b), "two streams open, both echo");
	ok(hb_server_stats(srv)->open == 1 && hb_server_stats(srv)->conns - n <= 1 &&
	   st->tunnels_open == 1,
	   "... over one TLS connection (server: %llu open, %llu new; client: %llu open)",
	   (unsigned long long)hb_server_stats(srv)->open,
	   (unsigned long long)(hb_server_stats(srv)->conns - n),
	   (unsigned long long)st->tunnels_open);
	shutdown(a.fd, SHUT_WR);
	shutdown(b.fd, SHUT_WR);
	ok(pump(5000, app_bye, &a) && pump(5000, app_bye, &b) && pump(2000, app_done, &a) &&
	   pump(2000, app_done, &b) && !a.reset && !b.reset, "both end cleanly");
	app_close(&a);
	app_close(&b);

	/* ---- idle close (O6) ---- */
	pump(3000, NULL, NULL);
	ok(st->tunnels_open == 0 && st->idle_closed >= 1,
	   "the tunnel without a stream closed after ~400 ms idle (%llu)",
	   (unsigned long long)st->idle_closed);
	pump(200, NULL, NULL);
	is_int((int)hb_server_stats(srv)->open, 0, "... and the server saw it go");

	/* ---- refusals: each closes the client with an RST, counted ---- */
	before = __atomic_load_n(&echo_conns, __ATOMIC_SEQ_CST);
	app_connect(cl, &a, "evil", p);
	ok(pump(5000, app_done, &a) && a.reset && st->failed[HBO_F_DENIED] == 1,
	   "evil (sa/evil): the server's 403 resets the client, counted as denied");
	is_int(__atomic_load_n(&echo_conns, __ATOMIC_SEQ_CST), before,
	   "... and no connection reached the destination");
	app_close(&a);

	{
		struct hbo_target t = target("cli", "srv", "web", p_other);

		hbo_connect(cl, app_open(&a), &t);
	}
	ok(pump(5000, app_done, &a) && a.reset && st->failed[HBO_F_TLS_REFUSED] == 1,
	   "a server presenting default/other for srv: refused in the handshake, reset (O1)");
	app_close(&a);

	ok(app_connect(cl, &a, "ghost", p) < 0 && pump(1000, app_done, &a) && a.reset &&
	   st->failed[HBO_F_NO_SOURCE_SVID] == 1, "a source pod without an SVID: reset at once");
	app_close(&a);

	{
		int s0 = socket(AF_INET, SOCK_STREAM, 0);
		struct sockaddr_in z = { .sin_family = AF_INET,
					 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
		socklen_t zl = sizeof(z);

		bind(s0, (struct sockaddr *)&z, sizeof(z));	/* a port nobody listens on */
		getsockname(s0, (struct sockaddr *)&z, &zl);
		app_connect(cl, &a, "cli", ntohs(z.sin_port));
		close(s0);
	}
	ok(pump(5000, app_done, &a) && a.reset && st->failed[HBO_F_CONNECT_REFUSED] == 1,
	   "no HBONE server at the node's address: connect refused, reset");
	app_close(&a);

	/* ---- SVID renewal: a new tunnel gets a new context; the old one lives ---- */
	app_connect(cl, &a, "cli", p);
	if (send(a.fd, "ping", 4, 0) != 4)
		diag("send");
	ok(pump(5000, app_ping, &a), "a stream on a tunnel to srv");
	n = st->ctx_loads;
	sleep(1);	/* (a new mtime, whatever the file system's resolution) */
	if (id_issue_pod(ca, ms, "node-a", "default", "cli", dir_a, ID_DEFAULT_SVID_TTL, &err))
		diag("renew: %s", err.msg);
	app_connect(cl, &b, "cli", p_third);
	if (send(b.fd, "ping", 4, 0) != 4)
		diag("send");
	ok(pump(5000, app_ping, &b) && st->ctx_loads == n + 1,
	   "cli's SVID renewed: the next tunnel loads it (contexts made %llu -> %llu)",
	   (unsigned long long)n, (unsigned long long)st->ctx_loads);
	shutdown(a.fd, SHUT_WR);
	ok(pump(5000, app_bye, &a) && pump(2000, app_done, &a) && !a.reset,
	   "... and the tunnel made before the renewal still carries its stream");
	app_close(&a);

	/* ---- the server goes: a relaying stream is reset ---- */
	hb_server_close(third);
	ok(pump(5000, app_done, &b) && b.reset && st->failed[HBO_F_RESET] == 1,
	   "the tunnel lost after the 200: the client is reset, counted");
	app_close(&b);

	/* ---- the tunnel cap (O6): max_tunnels 1 ---- */
	app_connect(cl1, &a, "cli", p);
	if (send(a.fd, "ping", 4, 0) != 4)
		diag("send");
	pump(5000, app_ping, &a);
	{
		struct hbo_target t = target("cli", "other", "other", p);

		ok(hbo_connect(cl1, app_open(&b), &t) < 0 && pump(1000, app_done, &b) && b.reset &&
		   hbo_client_stats(cl1)->failed[HBO_F_TUNNEL_CAP] == 1,
		   "max_tunnels 1, the one busy: a connection for another key is refused");
		app_close(&b);
		shutdown(a.fd, SHUT_WR);
		pump(5000, app_done, &a);
		app_close(&a);
		pump(50, NULL, NULL);
		if (!hbo_connect(cl1, app_open(&b), &t) && send(b.fd, "ping", 4, 0) != 4)
			diag("send");
		ok(pump(5000, app_ping, &b) && hbo_client_stats(cl1)->tunnels == 2,
		   "with it idle, the next one closes it and opens its own");
		app_close(&b);
	}

	/* ---- 4 MiB through a slow reader: bounded buffers (O3) ---- */
	{
		bool blocked = false;

		ok(big_transfer(cl, p, 4 << 20, &blocked), "4 MiB echoed intact through a slow reader");
		ok(st->buf_peak <= HB_HIGH && st->buf_peak > 0,
		   "no stream buffer above HB_HIGH (peak %llu)", (unsigned long long)st->buf_peak);
		ok(blocked, "the application's sends blocked: backpressure reached it");
	}

	hbo_client_close(cl1);
	hbo_client_close(cl);
	hb_server_close(srv);
	hb_server_close(other);
	ev_loop_free(loop);
	fflush(stderr);
	snprintf(cmd, sizeof(cmd),
		 "grep -q 'hbone-out: 127.0.0.1:1 (default/evil) -> 127.0.0.1:%d (srv.default): denied' %s && "
		 "grep -q 'tls_refused: peer is spiffe://cluster.local/ns/default/sa/other, not the expected spiffe://cluster.local/ns/default/sa/web' %s && "
		 "grep -q 'no_source_svid: no SVID for default/ghost' %s && "
		 "grep -q 'connect_refused' %s && ! grep -q 'PRIVATE KEY' %s",
		 echo_port, log, log, log, log, log);
	ok(system(cmd) == 0, "each refusal logged once with its reason, no key (O9)");
	if (tap_failed || getenv("HBO_TEST_LOG")) {	/* the client's log as diagnostics */
		snprintf(cmd, sizeof(cmd), "sed 's/^/# /' %s", log);
		if (system(cmd))
			diag("no log");
	}
	md_state_free(ms);
	close(app_lfd);
	id_fixture_rm(root);
	return done_testing();
}
