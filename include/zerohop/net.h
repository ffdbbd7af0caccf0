/* net.h — socket helpers (prefix net_): address parsing, listening sockets
 * with SO_REUSEPORT, nonblocking connect. Every fd returned is nonblocking
 * and close-on-exec; the caller owns and closes it. Results: fd or 0 on
 * success, -errno on failure (-EINVAL for an address that does not parse).
 */
#ifndef ZH_NET_H
#define ZH_NET_H

#include <stddef.h>
#include <sys/socket.h>

struct net_addr {
	struct sockaddr_storage ss;
	socklen_t len;
};

/* Numeric only, no DNS: "PORT" (on default_host), "HOST:PORT",
 * "[V6]:PORT", "V4". default_host may be NULL for 0.0.0.0; default_port
 * applies when s has no port (-1: a port is required). */
int net_parse_addr(const char *s, const char *default_host, int default_port,
		   struct net_addr *out);
/* "1.2.3.4:80" or "[::1]:80" into buf; returns buf. */
const char *net_addr_str(const struct net_addr *a, char *buf, size_t n);
int net_addr_port(const struct net_addr *a);

#define NET_REUSEPORT 0x1	/* SO_REUSEPORT: one socket per thread on one port */

/* type SOCK_STREAM (listen(backlog)) or SOCK_DGRAM (bound only). */
int net_listen(const struct net_addr *a, int type, int flags, int backlog);
/* accept4 nonblocking; peer may be NULL. */
int net_accept(int lfd, struct net_addr *peer);
/* Nonblocking TCP connect: returns the fd with the connect in progress;
 * wait for EV_WRITE and check net_connect_result(). */
int net_connect(const struct net_addr *a);
int net_connect_result(int fd);	/* 0 or -errno (SO_ERROR) */
int net_set_nodelay(int fd);
/* Local address of a bound socket (e.g. to learn an ephemeral port). */
int net_local_addr(int fd, struct net_addr *out);

#endif
