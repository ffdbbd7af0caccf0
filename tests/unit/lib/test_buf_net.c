/* test_buf_net.c — byte buffer and socket helpers on real sockets. */
#include <errno.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "tap.h"
#include "zerohop/buf.h"
#include "zerohop/net.h"

static void test_buf(void)
{
	struct buf b;
	char big[10000];
	int sv[2];
	ssize_t n;

	buf_init(&b, 16);
	buf_append(&b, "hello world", 11);
	is_int(b.data, 11, "append");
	buf_consume(&b, 6);
	ok(b.head == 6 && !memcmp(buf_head(&b), "world", 5), "consume moves the head");
	buf_reserve(&b, 10);
	ok(b.head == 0 && b.size == 16 && !memcmp(buf_head(&b), "world", 5),
	   "reserve compacts before growing");
	buf_reserve(&b, 100);
	ok(b.size >= 105 && !memcmp(buf_head(&b), "world", 5), "reserve grows keeping data");
	buf_consume(&b, 5);
	is_int(b.head, 0, "emptied buffer rewinds");
	is_int(buf_printf(&b, "%s-%d", "x", 42), 4, "printf returns bytes added");
	memset(big, 'q', sizeof(big));
	buf_printf(&b, "%.*s", (int)sizeof(big), big);
	is_int(b.data, 4 + sizeof(big), "printf grows for long output");
	buf_free(&b);

	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sv) < 0)
		return;
	buf_init(&b, 0);
	is_int(buf_read_fd(&b, sv[0], 0), -EAGAIN, "read_fd on an empty socket: -EAGAIN");
	buf_append(&b, "ping", 4);
	is_int(buf_write_fd(&b, sv[1]), 4, "write_fd sends all");
	is_int(b.data, 0, "and consumes it");
	n = buf_read_fd(&b, sv[0], 0);
	ok(n == 4 && !memcmp(buf_head(&b), "ping", 4), "read_fd reads it back");
	close(sv[1]);
	buf_consume(&b, 4);
	is_int(buf_read_fd(&b, sv[0], 0), 0, "read_fd at EOF: 0");
	close(sv[0]);
	buf_free(&b);
}

static void test_net(void)
{
	struct net_addr a, l;
	char s[64];
	int lfd, cfd, afd, ufd;

	is_int(net_parse_addr("8080", "127.0.0.1", -1, &a), 0, "parse bare port");
	is_str(net_addr_str(&a, s, sizeof(s)), "127.0.0.1:8080", "on the default host");
	is_int(net_parse_addr("10.1.2.3:80", NULL, -1, &a), 0, "parse v4:port");
	is_str(net_addr_str(&a, s, sizeof(s)), "10.1.2.3:80", "v4 round trip");
	is_int(net_parse_addr("[::1]:443", NULL, -1, &a), 0, "parse [v6]:port");
	is_str(net_addr_str(&a, s, sizeof(s)), "[::1]:443", "v6 round trip");
	is_int(net_parse_addr("10.0.0.1", NULL, 99, &a), 0, "bare address takes default port");
	is_int(net_addr_port(&a), 99, "default port");
	is_int(net_parse_addr("10.0.0.1", NULL, -1, &a), -EINVAL, "port required");
	is_int(net_parse_addr("1.2.3.4:99999", NULL, -1, &a), -EINVAL, "port out of range");
	is_int(net_parse_addr("1.2.3.4:8x", NULL, -1, &a), -EINVAL, "junk port");
	is_int(net_parse_addr("example.com:80", NULL, -1, &a), -EINVAL, "no DNS names");
	is_int(net_parse_addr("", NULL, 80, &a), -EINVAL, "empty");

	net_parse_addr("127.0.0.1:0", NULL, -1, &a);
	lfd = net_listen(&a, SOCK_STREAM, NET_REUSEPORT, 16);
	ok(lfd >= 0, "listen on an ephemeral loopback port");
	net_local_addr(lfd, &l);
	ok(net_addr_port(&l) > 0, "learn the port");
	cfd = net_connect(&l);
	ok(cfd >= 0, "nonblocking connect started");
	usleep(20000);
	afd = net_accept(lfd, NULL);
	ok(afd >= 0, "accepted");
	is_int(net_connect_result(cfd), 0, "connect succeeded");
	is_int(net_set_nodelay(cfd), 0, "nodelay");
	ufd = net_listen(&l, SOCK_DGRAM, NET_REUSEPORT, 0);
	ok(ufd >= 0, "UDP bound on the same port number");
	close(ufd); close(afd); close(cfd); close(lfd);
}

int main(void)
{
	test_buf();
	test_net();
	return done_testing();
}
