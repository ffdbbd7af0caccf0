/* etcd_gw.c — etcd v3 JSON gateway client pieces (etcd.h): base64,
 * chunked de-framing, endpoint lists and a bounded HTTP/1.1 POST over an
 * eg_conn (etcd_conn.c: plain or TLS). */
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <sys/un.h>

#include "zerohop/etcd.h"
#include "zerohop/log.h"

/* ---- base64 ------------------------------------------------------------- */

static const char b64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

char *eg_b64_encode(const void *data, size_t len)
{
	const unsigned char *p = data;
	char *out = zh_malloc(4 * ((len + 2) / 3) + 1), *o = out;

	for (size_t i = 0; i < len; i += 3) {
		unsigned v = (unsigned)p[i] << 16;

		if (i + 1 < len)
			v |= (unsigned)p[i + 1] << 8;
		if (i + 2 < len)
			v |= p[i + 2];
		*o++ = b64[v >> 18];
		*o++ = b64[(v >> 12) & 63];
		*o++ = i + 1 < len ? b64[(v >> 6) & 63] : '=';
		*o++ = i + 2 < len ? b64[v & 63] : '=';
	}
	*o = 0;
	return out;
}

static int b64_val(char c)
{
	const char *p = c ? strchr(b64, c) : NULL;

	return p ? (int)(p - b64) : -1;
}

int eg_b64_decode(const char *s, size_t len, char **out, size_t *out_len)
{
	char *o;
	size_t n = 0;

	if (len % 4)
		return -EINVAL;
	o = zh_malloc(len / 4 * 3 + 1);
	for (size_t i = 0; i < len; i += 4) {
		int a = b64_val(s[i]), b = b64_val(s[i + 1]), c, d;
		bool last = i + 4 == len;

		c = s[i + 2] == '=' && last ? -2 : b64_val(s[i + 2]);
		d = s[i + 3] == '=' && last ? -2 : b64_val(s[i + 3]);
		if (a < 0 || b < 0 || c == -1 || d == -1 || (c == -2 && d != -2))
			goto bad;
		o[n++] = (char)(a << 2 | b >> 4);
		if (c >= 0)
			o[n++] = (char)((b & 15) << 4 | c >> 2);
		if (d >= 0)
			o[n++] = (char)((c & 3) << 6 | d);
	}
	o[n] = 0;
	*out = o;
	*out_len = n;
	return 0;
bad:
	free(o);
	return -EINVAL;
}

/* ---- chunked transfer coding -------------------------------------------- */

enum { DC_SIZE, DC_EXT, DC_SIZE_LF, DC_DATA, DC_DATA_CR, DC_DATA_LF, DC_TRAILER, DC_DONE };

int eg_dechunk(struct eg_dechunk *d, const char *in, size_t n, struct buf *out)
{
	size_t i = 0;

	while (i < n) {
		char c = in[i];

		switch (d->st) {
		case DC_SIZE: {
			int h = c >= '0' && c <= '9' ? c - '0' :
				c >= 'a' && c <= 'f' ? c - 'a' + 10 :
				c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;

			if (h >= 0) {
				if (d->left >> 56)
					return -EINVAL;
				d->left = d->left << 4 | (unsigned)h;
			} else if (c == ';') {
				d->st = DC_EXT;
			} else if (c == '\r') {
				d->st = DC_SIZE_LF;
			} else {
				return -EINVAL;
			}
			i++;
			break;
		}
		case DC_EXT:
			if (c == '\r')
				d->st = DC_SIZE_LF;
			i++;
			break;
		case DC_SIZE_LF:
			if (c != '\n')
				return -EINVAL;
			i++;
			d->st = d->left ? DC_DATA : DC_TRAILER;
			break;
		case DC_DATA: {
			size_t k = n - i < d->left ? n - i : (size_t)d->left;

			buf_append(out, in + i, k);
			i += k;
			d->left -= k;
			if (!d->left)
				d->st = DC_DATA_CR;
			break;
		}
		case DC_DATA_CR:
			if (c != '\r')
				return -EINVAL;
			i++;
			d->st = DC_DATA_LF;
			break;
		case DC_DATA_LF:
			if (c != '\n')
				return -EINVAL;
			i++;
			d->st = DC_SIZE;
			break;
		case DC_TRAILER:	/* trailers are not used by the gateway: "\r\n" ends */
			i++;
			if (c == '\n') {
				d->st = DC_DONE;
				d->done = true;
			}
			break;
		default:
			return 0;	/* bytes after the end are ignored */
		}
	}
	return 0;
}

/* ---- endpoints and HTTP ------------------------------------------------- */

/* The scheme at p: its length, and whether it is TLS; 0 when none. */
static size_t scheme(const char *p, bool *tls)
{
	static const struct {
		const char *s;
		bool tls;
	} sc[] = { { "etcd://", false }, { "https://", true }, { "etcds://", true } };

	for (size_t i = 0; i < sizeof(sc) / sizeof(sc[0]); i++)
		if (!strncmp(p, sc[i].s, strlen(sc[i].s))) {
			*tls = sc[i].tls;
			return strlen(sc[i].s);
		}
	return 0;
}

int eg_parse_endpoints(const char *spec, struct eg_ep *eps, int max)
{
	const char *p = spec;
	bool tls = false;
	int n = 0;

	p += scheme(p, &tls);
	while (*p) {
		const char *e, *colon;
		size_t l, whole;
		char tmp[128], *end;
		long port;
		bool t = tls;

		/* an endpoint may repeat the scheme, never change TLS */
		p += scheme(p, &t);
		if (t != tls)
			return -EINVAL;
		e = strchr(p, ',');
		l = e ? (size_t)(e - p) : strlen(p);
		whole = l;
		if (!l || l >= sizeof(tmp) || n == max)
			return -EINVAL;
		memcpy(tmp, p, l);
		tmp[l] = 0;
		eps[n].tls = tls;
		eps[n].tlsc = NULL;
		if (!strncmp(tmp, "unix:", 5)) {
			if (tls || !tmp[5] || l - 5 >= sizeof(eps[n].host))
				return -EINVAL;
			memcpy(eps[n].host, tmp + 5, l - 4);
			eps[n].port = 0;
			eps[n].unix_sock = true;
			n++;
			p += whole + (e ? 1 : 0);
			if (e && !*p)
				return -EINVAL;
			continue;
		}
		if (tmp[l - 1] == '/')
			tmp[--l] = 0;	/* etcd://h:p/ */
		colon = strrchr(tmp, ':');
		if (!colon || colon == tmp || (size_t)(colon - tmp) >= sizeof(eps[n].host))
			return -EINVAL;
		port = strtol(colon + 1, &end, 10);
		if (*end || port < 1 || port > 65535)
			return -EINVAL;
		if (tmp[0] == '[' && colon[-1] == ']' && colon - tmp > 2) {	/* [v6]:port */
			memcpy(eps[n].host, tmp + 1, (size_t)(colon - tmp - 2));
			eps[n].host[colon - tmp - 2] = 0;
		} else {
			memcpy(eps[n].host, tmp, (size_t)(colon - tmp));
			eps[n].host[colon - tmp] = 0;
		}
		eps[n].port = (int)port;
		eps[n].unix_sock = false;
		n++;
		p += whole + (e ? 1 : 0);
		if (e && !*p)
			return -EINVAL;
	}
	return n ? n : -EINVAL;
}

const char *eg_ep_str(const struct eg_ep *ep, char *buf, size_t len)
{
	if (ep->unix_sock)
		snprintf(buf, len, "%s", ep->host);
	else
		snprintf(buf, len, "%s%s:%d", ep->tls ? "https://" : "", ep->host, ep->port);
	return buf;
}

static int send_req(struct eg_conn *c, const struct eg_ep *ep, const char *path, const char *body,
		    int timeout_ms, bool keep)
{
	long long deadline = eg_now_ms() + timeout_ms;
	struct buf b;
	int ret = 0;

	buf_init(&b, 0);
	buf_printf(&b,
		   "POST %s HTTP/1.1\r\nHost: %s:%d\r\nContent-Type: application/json\r\n"
		   "Content-Length: %zu\r\nConnection: %s\r\n\r\n",
		   path, ep->unix_sock ? "localhost" : ep->host, ep->port, strlen(body),
		   keep ? "keep-alive" : "close");
	buf_append(&b, body, strlen(body));
	while (b.data) {
		ssize_t w = eg_write(c, buf_head(&b), b.data);

		if (w > 0)
			buf_consume(&b, (size_t)w);
		else if (w == -EAGAIN)
			ret = eg_wait(c, deadline);
		else
			ret = w ? (int)w : -EPIPE;
		if (ret)
			break;
	}
	buf_free(&b);
	return ret;
}

int eg_send(struct eg_conn *c, const struct eg_ep *ep, const char *path, const char *body,
	    int timeout_ms)
{
	return send_req(c, ep, path, body, timeout_ms, false);
}

/* Read more from c into b before deadline: bytes read, 0 at EOF, -errno. */
static ssize_t read_more(struct eg_conn *c, struct buf *b, long long deadline)
{
	for (;;) {
		ssize_t r = eg_read(c, b);
		int ret;

		if (r != -EAGAIN)
			return r;
		ret = eg_wait(c, deadline);
		if (ret)
			return ret;
	}
}

static bool hdr_is(const char *line, size_t len, const char *name, const char **val)
{
	size_t nl = strlen(name);

	if (len <= nl || strncasecmp(line, name, nl) || line[nl] != ':')
		return false;
	*val = line + nl + 1;
	while (**val == ' ' || **val == '\t')
		(*val)++;
	return true;
}

int eg_read_head(struct eg_conn *c, struct buf *b, int timeout_ms, int *status, bool *chunked,
		 long long *clen)
{
	long long deadline = eg_now_ms() + timeout_ms;
	char *end = NULL;

	for (;;) {
		ssize_t r;

		if (b->data >= 4)
			end = memmem(buf_head(b), b->data, "\r\n\r\n", 4);
		if (end)
			break;
		if (b->data > 64 * 1024)
			return -EPROTO;
		r = read_more(c, b, deadline);
		if (r == 0)
			return -ECONNRESET;
		if (r < 0)
			return (int)r;
	}
	{
		char *p = buf_head(b), *eol;
		size_t head_len = (size_t)(end - p) + 4;

		if (b->data < 12 || strncmp(p, "HTTP/1.", 7) || p[8] != ' ')
			return -EPROTO;
		*status = atoi(p + 9);
		*chunked = false;
		*clen = -1;
		for (p = strstr(p, "\r\n") + 2; p < end; p = eol + 2) {
			const char *v;

			eol = memmem(p, (size_t)(end + 2 - p), "\r\n", 2);
			if (!eol)
				break;
			if (hdr_is(p, (size_t)(eol - p), "Content-Length", &v))
				*clen = strtoll(v, NULL, 10);
			else if (hdr_is(p, (size_t)(eol - p), "Transfer-Encoding", &v))
				*chunked = !strncasecmp(v, "chunked", 7);
		}
		buf_consume(b, head_len);
	}
	return 0;
}

int eg_call_send(const struct eg_ep *ep, const char *path, const char *body, int timeout_ms,
		 struct eg_conn *c)
{
	int ret = eg_connect(ep, timeout_ms, c);

	if (ret)
		return ret;
	ret = eg_send(c, ep, path, body, timeout_ms);
	if (ret)
		eg_close(c);
	return ret;
}

/* One answer from c into resp; *framed: its end was known (a length or
 * chunks), so c can carry the next request. */
static int recv_answer(struct eg_conn *c, int timeout_ms, int *status, struct buf *resp,
		       bool *framed)
{
	long long deadline = eg_now_ms() + timeout_ms, clen;
	struct eg_dechunk dc = {};
	struct buf in;
	bool chunked;
	int ret;

	buf_init(&in, 0);
	ret = eg_read_head(c, &in, timeout_ms, status, &chunked, &clen);
	*framed = !ret && (chunked || clen >= 0);
	while (!ret) {
		if (chunked) {
			ret = eg_dechunk(&dc, buf_head(&in), in.data, resp);
			buf_consume(&in, in.data);
			if (ret || dc.done)
				break;
		} else {
			buf_append(resp, buf_head(&in), in.data);
			buf_consume(&in, in.data);
			if (clen >= 0 && (long long)resp->data >= clen)
				break;
		}
		ssize_t r = read_more(c, &in, deadline);

		if (r == 0) {
			if (chunked || clen >= 0)
				ret = -EPROTO;	/* cut short */
			break;
		}
		if (r < 0)
			ret = (int)r;
	}
	buf_free(&in);
	return ret;
}

int eg_call_recv(struct eg_conn *c, int timeout_ms, int *status, struct buf *resp)
{
	bool framed;
	int ret = recv_answer(c, timeout_ms, status, resp, &framed);

	eg_close(c);
	return ret;
}

int eg_call_keep(struct eg_conn *c, const struct eg_ep *ep, const char *path, const char *body,
		 int timeout_ms, int *status, struct buf *resp)
{
	long long deadline = eg_now_ms() + timeout_ms;

	for (;;) {
		bool reused = c->fd >= 0, framed = false;
		int ret = reused ? 0 : eg_connect(ep, timeout_ms, c);

		if (!ret)
			ret = send_req(c, ep, path, body, (int)(deadline - eg_now_ms()), true);
		if (!ret)
			ret = recv_answer(c, (int)(deadline - eg_now_ms()), status, resp, &framed);
		if (ret || !framed)
			eg_close(c);
		/* a kept connection the server closed meanwhile (an idle
		 * timeout, a restart) is no news: once more on a fresh one;
		 * no answer in time is */
		if (!ret || !reused || ret == -ETIMEDOUT || eg_now_ms() >= deadline)
			return ret;
		resp->head = resp->data = 0;
	}
}

int eg_call(const struct eg_ep *ep, const char *path, const char *body, int timeout_ms,
	    int *status, struct buf *resp)
{
	long long deadline = eg_now_ms() + timeout_ms;
	struct eg_conn c;
	int ret = eg_call_send(ep, path, body, timeout_ms, &c);

	if (ret)
		return ret;
	return eg_call_recv(&c, (int)(deadline - eg_now_ms()), status, resp);
}
