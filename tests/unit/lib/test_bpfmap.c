/* test_bpfmap.c — whole-map reads (bpfmap.h) on real kernel maps: a hash
 * map large enough to need several batches and a growing buffer, an array,
 * and an LPM trie (the policy's CIDR map, where the kernel may have no
 * batch ops and zh_map_dump must fall back to the walk). Both paths must
 * return exactly the entries written. Needs root (map creation). */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <bpf/bpf.h>

#include "tap.h"
#include "zerohop/bpfmap.h"

struct lpm_key {
	uint32_t prefixlen;
	uint32_t ip;
};

/* Every key i in [0, n) present once with value i * 7 (keys and values
 * are uint32_t, or struct lpm_key with ip = i for the trie). */
static int check(const char *what, const char *k, const char *v, size_t n, size_t want,
		 size_t ksz)
{
	char *seen = calloc(want ? want : 1, 1);
	int bad = 0;

	for (size_t i = 0; i < n; i++) {
		uint32_t key, val;

		if (ksz == sizeof(struct lpm_key))
			key = ((const struct lpm_key *)(const void *)(k + i * ksz))->ip;
		else
			memcpy(&key, k + i * ksz, sizeof(key));
		memcpy(&val, v + i * sizeof(val), sizeof(val));
		if (key >= want || seen[key]++ || val != key * 7)
			bad++;
	}
	free(seen);
	is_int(n, want, "%s: %zu entries", what, want);
	is_int(bad, 0, "%s: each key once, with its value", what);
	return bad;
}

static void both(const char *what, int fd, size_t ksz, size_t want)
{
	char *k = NULL, *v = NULL, name[96];
	size_t n = 0;

	snprintf(name, sizeof(name), "%s, zh_map_dump", what);
	is_int(zh_map_dump(fd, ksz, sizeof(uint32_t), &k, &v, &n), 0, "%s: 0", name);
	check(name, k, v, n, want, ksz);
	free(k);
	free(v);
	k = v = NULL;
	snprintf(name, sizeof(name), "%s, zh_map_dump_walk", what);
	is_int(zh_map_dump_walk(fd, ksz, sizeof(uint32_t), &k, &v, &n), 0, "%s: 0", name);
	check(name, k, v, n, want, ksz);
	free(k);
	free(v);
}

int main(void)
{
	LIBBPF_OPTS(bpf_map_create_opts, lpm_opts, .map_flags = BPF_F_NO_PREALLOC);
	int fd;

	if (geteuid()) {
		printf("1..0 # SKIP needs root (BPF maps)\n");
		return 0;
	}

	fd = bpf_map_create(BPF_MAP_TYPE_HASH, "zh_t_hash", 4, 4, 20000, NULL);
	ok(fd >= 0, "hash map created");
	both("empty hash", fd, 4, 0);
	for (uint32_t i = 0; i < 12345; i++) {
		uint32_t val = i * 7;

		bpf_map_update_elem(fd, &i, &val, BPF_ANY);
	}
	both("hash, 12345 entries", fd, 4, 12345);
	close(fd);

	fd = bpf_map_create(BPF_MAP_TYPE_ARRAY, "zh_t_array", 4, 4, 300, NULL);
	ok(fd >= 0, "array map created");
	for (uint32_t i = 0; i < 300; i++) {
		uint32_t val = i * 7;

		bpf_map_update_elem(fd, &i, &val, BPF_ANY);
	}
	both("array, 300 entries", fd, 4, 300);
	close(fd);

	fd = bpf_map_create(BPF_MAP_TYPE_LPM_TRIE, "zh_t_lpm", sizeof(struct lpm_key), 4, 1000,
			    &lpm_opts);
	ok(fd >= 0, "LPM trie created");
	for (uint32_t i = 0; i < 500; i++) {
		struct lpm_key key = { .prefixlen = 32, .ip = i };
		uint32_t val = i * 7;

		bpf_map_update_elem(fd, &key, &val, BPF_ANY);
	}
	both("LPM trie, 500 entries", fd, sizeof(struct lpm_key), 500);
	close(fd);

	is_int(zh_map_dump(-1, 4, 4, &(char *){ NULL }, &(char *){ NULL }, &(size_t){ 0 }), -EBADF,
	       "a bad fd: -EBADF, nothing allocated");
	return done_testing();
}
