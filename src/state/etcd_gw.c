/* etcd_gw.c — etcd v3 JSON gateway client pieces (etcd.h): JSON, base64,
 * chunked de-framing, endpoint lists and a bounded HTTP/1.1 POST. */
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

/* ---- JSON --------------------------------------------------------------- */

struct jp {
	const char *p, *end;
	int depth;
};

static void skip_ws(struct jp *j)
{
	while (j->p < j->end && (*j->p == ' ' || *j->p == '\t' || *j->p == '\n' || *j->p == '\r'))
		j->p++;
}

static void put_utf8(struct buf *b, unsigned cp)
{
	char u[4];
	size_t n;

	if (cp < 0x80) {
		u[0] = (char)cp;
		n = 1;
	} else if (cp < 0x800) {
		u[0] = (char)(0xc0 | cp >> 6);
		u[1] = (char)(0x80 | (cp & 0x3f));
		n = 2;
	} else if (cp < 0x10000) {
		u[0] = (char)(0xe0 | cp >> 12);
		u[1] = (char)(0x80 | ((cp >> 6) & 0x3f));
		u[2] = (char)(0x80 | (cp & 0x3f));
		n = 3;
	} else {
		u[0] = (char)(0xf0 | cp >> 18);
		u[1] = (char)(0x80 | ((cp >> 12) & 0x3f));
		u[2] = (char)(0x80 | ((cp >> 6) & 0x3f));
		u[3] = (char)(0x80 | (cp & 0x3f));
		n = 4;
	}
	buf_append(b, u, n);
}

static int hex4(const char *p, const char *end, unsigned *out)
{
	unsigned v = 0;

	if (end - p < 4)
		return -EINVAL;
	for (int i = 0; i < 4; i++) {
		char c = p[i];

		v <<= 4;
		if (c >= '0' && c <= '9')
			v |= (unsigned)(c - '0');
		else if (c >= 'a' && c <= 'f')
			v |= (unsigned)(c - 'a' + 10);
		else if (c >= 'A' && c <= 'F')
			v |= (unsigned)(c - 'A' + 10);
		else
			return -EINVAL;
	}
	*out = v;
	return 0;
}

/* A string at j->p (the opening quote) into a malloc'd NUL-terminated copy. */
static int parse_str(struct jp *j, char **out, size_t *out_len)
{
	struct buf b;

	buf_init(&b, 0);
	j->p++;
	for (;;) {
		unsigned char c;

		if (j->p >= j->end)
			goto bad;
		{
			/* a run of plain characters at once (base64 is all plain) */
			const char *q = j->p;

			while (q < j->end && *q != '"' && *q != '\\' && (unsigned char)*q >= 0x20)
				q++;
			if (q > j->p) {
				buf_append(&b, j->p, (size_t)(q - j->p));
				j->p = q;
				continue;
			}
		}
		c = (unsigned char)*j->p++;
		if (c == '"')
			break;
		if (c < 0x20)
			goto bad;
		if (j->p >= j->end)
			goto bad;
		c = (unsigned char)*j->p++;
		switch (c) {
		case '"': case '\\': case '/': buf_append(&b, &c, 1); break;
		case 'b': buf_append(&b, "\b", 1); break;
		case 'f': buf_append(&b, "\f", 1); break;
		case 'n': buf_append(&b, "\n", 1); break;
		case 'r': buf_append(&b, "\r", 1); break;
		case 't': buf_append(&b, "\t", 1); break;
		case 'u': {
			unsigned cp, lo;

			if (hex4(j->p, j->end, &cp))
				goto bad;
			j->p += 4;
			if (cp >= 0xd800 && cp < 0xdc00) {	/* a surrogate pair */
				if (j->end - j->p < 6 || j->p[0] != '\\' || j->p[1] != 'u' ||
				    hex4(j->p + 2, j->end, &lo) || lo < 0xdc00 || lo > 0xdfff)
					goto bad;
				j->p += 6;
				cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
			} else if (cp >= 0xdc00 && cp < 0xe000) {
				goto bad;
			}
			put_utf8(&b, cp);
			break;
		}
		default:
			goto bad;
		}
	}
	buf_append(&b, "", 1);
	*out_len = b.data - 1;
	*out = zh_malloc(b.data);
	memcpy(*out, buf_head(&b), b.data);
	buf_free(&b);
	return 0;
bad:
	buf_free(&b);
	return -EINVAL;
}

static int parse_val(struct jp *j, struct eg_json *v);

static int parse_members(struct jp *j, struct eg_json *v, bool obj)
{
	int cap = 0;

	j->p++;
	if (++j->depth > 64)
		return -EINVAL;
	skip_ws(j);
	if (j->p < j->end && *j->p == (obj ? '}' : ']')) {
		j->p++;
		j->depth--;
		return 0;
	}
	for (;;) {
		char *key = NULL;
		size_t kl;

		skip_ws(j);
		if (obj) {
			if (j->p >= j->end || *j->p != '"' || parse_str(j, &key, &kl))
				return -EINVAL;
			skip_ws(j);
			if (j->p >= j->end || *j->p != ':') {
				free(key);
				return -EINVAL;
			}
			j->p++;
		}
		if (v->n == cap) {
			cap = cap ? 2 * cap : 4;
			v->v = zh_realloc(v->v, (size_t)cap * sizeof(*v->v));
			if (obj)
				v->k = zh_realloc(v->k, (size_t)cap * sizeof(*v->k));
		}
		memset(&v->v[v->n], 0, sizeof(v->v[v->n]));
		if (obj)
			v->k[v->n] = key;
		v->n++;
		if (parse_val(j, &v->v[v->n - 1]))
			return -EINVAL;
		skip_ws(j);
		if (j->p < j->end && *j->p == ',') {
			j->p++;
			continue;
		}
		if (j->p < j->end && *j->p == (obj ? '}' : ']')) {
			j->p++;
			j->depth--;
			return 0;
		}
		return -EINVAL;
	}
}

static int parse_val(struct jp *j, struct eg_json *v)
{
	skip_ws(j);
	if (j->p >= j->end)
		return -EINVAL;
	switch (*j->p) {
	case '{':
		v->t = EG_OBJ;
		return parse_members(j, v, true);
	case '[':
		v->t = EG_ARR;
		return parse_members(j, v, false);
	case '"':
		v->t = EG_STR;
		return parse_str(j, &v->s, &v->len);
	case 't':
		if (j->end - j->p < 4 || memcmp(j->p, "true", 4))
			return -EINVAL;
		v->t = EG_BOOL;
		v->b = true;
		j->p += 4;
		return 0;
	case 'f':
		if (j->end - j->p < 5 || memcmp(j->p, "false", 5))
			return -EINVAL;
		v->t = EG_BOOL;
		j->p += 5;
		return 0;
	case 'n':
		if (j->end - j->p < 4 || memcmp(j->p, "null", 4))
			return -EINVAL;
		v->t = EG_NULL;
		j->p += 4;
		return 0;
	default: {
		/* RFC 8259 number: -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)? */
		const char *s = j->p, *p = j->p;

		if (p < j->end && *p == '-')
			p++;
		if (p < j->end && *p == '0')
			p++;
		else if (p < j->end && *p >= '1' && *p <= '9')
			while (p < j->end && *p >= '0' && *p <= '9')
				p++;
		else
			return -EINVAL;
		if (p < j->end && *p == '.') {
			if (++p >= j->end || *p < '0' || *p > '9')
				return -EINVAL;
			while (p < j->end && *p >= '0' && *p <= '9')
				p++;
		}
		if (p < j->end && (*p == 'e' || *p == 'E')) {
			p++;
			if (p < j->end && (*p == '+' || *p == '-'))
				p++;
			if (p >= j->end || *p < '0' || *p > '9')
				return -EINVAL;
			while (p < j->end && *p >= '0' && *p <= '9')
				p++;
		}
		v->t = EG_NUM;
		v->len = (size_t)(p - s);
		v->s = zh_malloc(v->len + 1);
		memcpy(v->s, s, v->len);
		v->s[v->len] = 0;
		j->p = p;
		return 0;
	}
	}
}

static void json_clear(struct eg_json *j)
{
	for (int i = 0; i < j->n; i++) {
		json_clear(&j->v[i]);
		if (j->k)
			free(j->k[i]);
	}
	free(j->v);
	free(j->k);
	free(j->s);
}

void eg_json_free(struct eg_json *j)
{
	if (!j)
		return;
	json_clear(j);
	free(j);
}

int eg_json_parse(const char *text, size_t len, struct eg_json **out)
{
	struct jp j = { .p = text, .end = text + len };
	struct eg_json *v = zh_calloc(1, sizeof(*v));

	if (parse_val(&j, v))
		goto bad;
	skip_ws(&j);
	if (j.p != j.end)
		goto bad;
	*out = v;
	return 0;
bad:
	eg_json_free(v);
	return -EINVAL;
}

const struct eg_json *eg_json_get(const struct eg_json *o, const char *key)
{
	if (!o || o->t != EG_OBJ)
		return NULL;
	for (int i = 0; i < o->n; i++)
		if (!strcmp(o->k[i], key))
			return &o->v[i];
	return NULL;
}

uint64_t eg_json_u64(const struct eg_json *v, uint64_t def)
{
	char *end;
	unsigned long long x;

	if (!v || (v->t != EG_STR && v->t != EG_NUM) || !v->len || v->s[0] == '-')
		return def;
	errno = 0;
	x = strtoull(v->s, &end, 10);
	if (errno || *end)
		return def;
	return x;
}

bool eg_json_bool(const struct eg_json *v)
{
	return v && v->t == EG_BOOL && v->b;
}

long eg_json_next(const char *buf, size_t len)
{
	size_t i = 0;
	int depth = 0;
	bool in_str = false, esc = false;

	while (i < len && (buf[i] == ' ' || buf[i] == '\n' || buf[i] == '\r' || buf[i] == '\t'))
		i++;
	if (i == len)
		return 0;
	if (buf[i] != '{' && buf[i] != '[')
		return -EINVAL;	/* the gateway streams objects only */
	for (; i < len; i++) {
		char c = buf[i];

		if (in_str) {
			if (esc)
				esc = false;
			else if (c == '\\')
				esc = true;
			else if (c == '"')
				in_str = false;
			continue;
		}
		if (c == '"')
			in_str = true;
		else if (c == '{' || c == '[')
			depth++;
		else if (c == '}' || c == ']') {
			if (--depth == 0)
				return (long)(i + 1);
		}
	}
	return 0;
}

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

int eg_parse_endpoints(const char *spec, struct eg_ep *eps, int max)
{
	const char *p = spec;
	int n = 0;

	if (!strncmp(p, "etcd://", 7))
		p += 7;
	while (*p) {
		const char *e = strchr(p, ','), *colon;
		size_t l = e ? (size_t)(e - p) : strlen(p), whole = l;
		char tmp[128], *end;
		long port;

		if (!l || l >= sizeof(tmp) || n == max)
			return -EINVAL;
		memcpy(tmp, p, l);
		tmp[l] = 0;
		if (!strncmp(tmp, "unix:", 5)) {
			if (!tmp[5] || l - 5 >= sizeof(eps[n].host))
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
		memcpy(eps[n].host, tmp, (size_t)(colon - tmp));
		eps[n].host[colon - tmp] = 0;
		eps[n].port = (int)port;
		eps[n].unix_sock = false;
		n++;
		p += whole + (e ? 1 : 0);
		if (e && !*p)
			return -EINVAL;
	}
	return n ? n : -EINVAL;
}

static long long now_ms(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (long long)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

static int wait_fd(int fd, short ev, long long deadline)
{
	for (;;) {
		struct pollfd p = { .fd = fd, .events = ev };
		long long left = deadline - now_ms();
		int r;

		if (left <= 0)
			return -ETIMEDOUT;
		r = poll(&p, 1, (int)left);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return -errno;
		if (r == 0)
			return -ETIMEDOUT;
		return 0;
	}
}

int eg_connect(const struct eg_ep *ep, int timeout_ms)
{
	struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM }, *ai;
	long long deadline = now_ms() + timeout_ms;
	char port[8];
	int fd, ret, one = 1;
	socklen_t sl = sizeof(ret);

	if (ep->unix_sock) {
		struct sockaddr_un su = { .sun_family = AF_UNIX };

		if (strlen(ep->host) >= sizeof(su.sun_path))
			return -ENAMETOOLONG;
		memcpy(su.sun_path, ep->host, strlen(ep->host));
		fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
		if (fd < 0)
			return -errno;
		if (connect(fd, (struct sockaddr *)&su, sizeof(su))) {
			ret = -errno;
			close(fd);
			return ret;
		}
		fcntl(fd, F_SETFL, O_NONBLOCK);
		return fd;
	}
	snprintf(port, sizeof(port), "%d", ep->port);
	if (getaddrinfo(ep->host, port, &hints, &ai))
		return -EHOSTUNREACH;
	fd = socket(ai->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		ret = -errno;
		freeaddrinfo(ai);
		return ret;
	}
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	ret = connect(fd, ai->ai_addr, ai->ai_addrlen) ? -errno : 0;
	freeaddrinfo(ai);
	if (ret == -EINPROGRESS) {
		ret = wait_fd(fd, POLLOUT, deadline);
		if (!ret && getsockopt(fd, SOL_SOCKET, SO_ERROR, &ret, &sl) == 0)
			ret = -ret;
	}
	if (ret) {
		close(fd);
		return ret;
	}
	return fd;
}

int eg_send(int fd, const struct eg_ep *ep, const char *path, const char *body, int timeout_ms)
{
	long long deadline = now_ms() + timeout_ms;
	struct buf b;
	int ret = 0;

	buf_init(&b, 0);
	buf_printf(&b,
		   "POST %s HTTP/1.1\r\nHost: %s:%d\r\nContent-Type: application/json\r\n"
		   "Content-Length: %zu\r\nConnection: close\r\n\r\n",
		   path, ep->unix_sock ? "localhost" : ep->host, ep->port, strlen(body));
	buf_append(&b, body, strlen(body));
	while (b.data) {
		ssize_t w = buf_write_fd(&b, fd);

		if (w == -EAGAIN)
			ret = wait_fd(fd, POLLOUT, deadline);
		else if (w < 0)
			ret = (int)w;
		if (ret)
			break;
	}
	buf_free(&b);
	return ret;
}

/* Read more from fd into b before deadline: bytes read, 0 at EOF, -errno. */
static ssize_t read_more(int fd, struct buf *b, long long deadline)
{
	for (;;) {
		ssize_t r = buf_read_fd(b, fd, 0);
		int ret;

		if (r != -EAGAIN)
			return r;
		ret = wait_fd(fd, POLLIN, deadline);
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

int eg_read_head(int fd, struct buf *b, int timeout_ms, int *status, bool *chunked,
		 long long *clen)
{
	long long deadline = now_ms() + timeout_ms;
	char *end = NULL;

	for (;;) {
		ssize_t r;

		if (b->data >= 4)
			end = memmem(buf_head(b), b->data, "\r\n\r\n", 4);
		if (end)
			break;
		if (b->data > 64 * 1024)
			return -EPROTO;
		r = read_more(fd, b, deadline);
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

int eg_call_send(const struct eg_ep *ep, const char *path, const char *body, int timeout_ms)
{
	int fd = eg_connect(ep, timeout_ms), ret;

	if (fd < 0)
		return fd;
	ret = eg_send(fd, ep, path, body, timeout_ms);
	if (ret) {
		close(fd);
		return ret;
	}
	return fd;
}

int eg_call_recv(int fd, int timeout_ms, int *status, struct buf *resp)
{
	long long deadline = now_ms() + timeout_ms, clen;
	struct eg_dechunk dc = {};
	struct buf in;
	bool chunked;
	int ret;

	buf_init(&in, 0);
	ret = eg_read_head(fd, &in, timeout_ms, status, &chunked, &clen);
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
		ssize_t r = read_more(fd, &in, deadline);

		if (r == 0) {
			if (chunked || clen >= 0)
				ret = -EPROTO;	/* cut short */
			break;
		}
		if (r < 0)
			ret = (int)r;
	}
	buf_free(&in);
	close(fd);
	return ret;
}

int eg_call(const struct eg_ep *ep, const char *path, const char *body, int timeout_ms,
	    int *status, struct buf *resp)
{
	long long deadline = now_ms() + timeout_ms;
	int fd = eg_call_send(ep, path, body, timeout_ms);

	if (fd < 0)
		return fd;
	return eg_call_recv(fd, (int)(deadline - now_ms()), status, resp);
}
