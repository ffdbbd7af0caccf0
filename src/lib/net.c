/* net.c — socket helpers (contract in net.h). */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "zerohop/net.h"

static int parse_port(const char *s, int *port)
{
	char *end;
	long v;

	if (!*s)
		return -EINVAL;
	errno = 0;
	v = strtol(s, &end, 10);
	if (errno || *end || v < 0 || v > 65535 || *s == '-' || *s == '+' || *s == ' ')
		return -EINVAL;
	*port = (int)v;
	return 0;
}

static int fill(const char *host, int port, struct net_addr *out)
{
	struct sockaddr_in *in4 = (struct sockaddr_in *)&out->ss;
	struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)&out->ss;

	memset(out, 0, sizeof(*out));
	if (inet_pton(AF_INET, host, &in4->sin_addr) == 1) {
		in4->sin_family = AF_INET;
		in4->sin_port = htons((uint16_t)port);
		out->len = sizeof(*in4);
		return 0;
	}
	if (inet_pton(AF_INET6, host, &in6->sin6_addr) == 1) {
		in6->sin6_family = AF_INET6;
		in6->sin6_port = htons((uint16_t)port);
		out->len = sizeof(*in6);
		return 0;
	}
	return -EINVAL;
}

int net_parse_addr(const char *s, const char *default_host, int default_port,
		   struct net_addr *out)
{
	char host[INET6_ADDRSTRLEN + 1];
	const char *colon, *port_s = NULL;
	size_t hlen;
	int port = default_port;

	if (!s || !*s)
		return -EINVAL;
	if (!default_host)
		default_host = "0.0.0.0";
	if (s[0] == '[') {
		const char *rb = strchr(s, ']');

		if (!rb || (rb[1] && rb[1] != ':'))
			return -EINVAL;
		hlen = (size_t)(rb - s - 1);
		if (hlen >= sizeof(host))
			return -EINVAL;
		memcpy(host, s + 1, hlen);
		host[hlen] = 0;
		if (rb[1] == ':')
			port_s = rb + 2;
	} else if ((colon = strrchr(s, ':')) && strchr(s, ':') == colon) {
		hlen = (size_t)(colon - s);
		if (!hlen || hlen >= sizeof(host))
			return -EINVAL;
		memcpy(host, s, hlen);
		host[hlen] = 0;
		port_s = colon + 1;
	} else if (!strchr(s, '.') && !strchr(s, ':')) {
		snprintf(host, sizeof(host), "%s", default_host);	/* just a port */
		port_s = s;
	} else {
		if (strlen(s) >= sizeof(host))
			return -EINVAL;
		snprintf(host, sizeof(host), "%s", s);	/* bare address */
	}
	if (port_s && parse_port(port_s, &port))
		return -EINVAL;
	if (port < 0)
		return -EINVAL;
	return fill(host, port, out);
}

const char *net_addr_str(const struct net_addr *a, char *buf, size_t n)
{
	char h[INET6_ADDRSTRLEN];

	if (a->ss.ss_family == AF_INET6) {
		const struct sockaddr_in6 *in6 = (const void *)&a->ss;

		inet_ntop(AF_INET6, &in6->sin6_addr, h, sizeof(h));
		snprintf(buf, n, "[%s]:%u", h, ntohs(in6->sin6_port));
	} else if (a->ss.ss_family == AF_INET) {
		const struct sockaddr_in *in4 = (const void *)&a->ss;

		inet_ntop(AF_INET, &in4->sin_addr, h, sizeof(h));
		snprintf(buf, n, "%s:%u", h, ntohs(in4->sin_port));
	} else {
		snprintf(buf, n, "(family %d)", a->ss.ss_family);
	}
	return buf;
}

int net_addr_port(const struct net_addr *a)
{
	if (a->ss.ss_family == AF_INET6)
		return ntohs(((const struct sockaddr_in6 *)&a->ss)->sin6_port);
	if (a->ss.ss_family == AF_INET)
		return ntohs(((const struct sockaddr_in *)&a->ss)->sin_port);
	return -1;
}

int net_listen(const struct net_addr *a, int type, int flags, int backlog)
{
	int fd, one = 1, err;

	fd = socket(a->ss.ss_family, type | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0)
		goto err_close;
	if ((flags & NET_REUSEPORT) &&
	    setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof(one)) < 0)
		goto err_close;
	if (bind(fd, (const struct sockaddr *)&a->ss, a->len) < 0)
		goto err_close;
	if (type == SOCK_STREAM && listen(fd, backlog) < 0)
		goto err_close;
	return fd;

err_close:
	err = -errno;
	close(fd);
	return err;
}

int net_accept(int lfd, struct net_addr *peer)
{
	struct net_addr tmp;
	int fd;

	if (!peer)
		peer = &tmp;
	peer->len = sizeof(peer->ss);
	fd = accept4(lfd, (struct sockaddr *)&peer->ss, &peer->len, SOCK_NONBLOCK | SOCK_CLOEXEC);
	return fd < 0 ? -errno : fd;
}

int net_connect(const struct net_addr *a)
{
	int fd, err;

	fd = socket(a->ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	if (connect(fd, (const struct sockaddr *)&a->ss, a->len) < 0 && errno != EINPROGRESS) {
		err = -errno;
		close(fd);
		return err;
	}
	return fd;
}

int net_connect_result(int fd)
{
	int err = 0;
	socklen_t len = sizeof(err);

	if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) < 0)
		return -errno;
	return -err;
}

int net_set_nodelay(int fd)
{
	int one = 1;

	return setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)) < 0 ? -errno : 0;
}

int net_local_addr(int fd, struct net_addr *out)
{
	out->len = sizeof(out->ss);
	if (getsockname(fd, (struct sockaddr *)&out->ss, &out->len) < 0)
		return -errno;
	return 0;
}
