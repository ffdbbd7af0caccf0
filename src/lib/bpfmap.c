/* bpfmap.c — whole-map reads (see bpfmap.h). */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <bpf/bpf.h>

#include "zerohop/bpfmap.h"
#include "zerohop/log.h"

/* The kernel's own "operation not supported" (ENOTSUPP in the kernel's errno.h), what
 * BPF_MAP_LOOKUP_BATCH answers for a map type without batch ops; it is not
 * the libc ENOTSUP. */
#define KERNEL_ENOTSUPP 524

/* Room for cap entries in both arrays. */
static void dump_room(char **k, char **v, size_t cap, size_t ksz, size_t vsz)
{
	*k = zh_realloc(*k, cap * ksz);
	*v = zh_realloc(*v, cap * vsz);
}

static int dump_fail(char *k, char *v, int ret)
{
	free(k);
	free(v);
	return ret;
}

int zh_map_dump_walk(int fd, size_t ksz, size_t vsz, char **keys, char **vals, size_t *n)
{
	char *k = NULL, *v = NULL, *prev = zh_malloc(ksz);
	size_t cnt = 0, cap = 0;
	bool first = true;
	int ret = 0;

	for (;;) {
		if (cnt == cap) {
			cap = cap ? cap * 2 : 256;
			dump_room(&k, &v, cap, ksz, vsz);
		}
		if (bpf_map_get_next_key(fd, first ? NULL : prev, k + cnt * ksz)) {
			ret = errno == ENOENT ? 0 : -errno;	/* ENOENT: past the last key */
			break;
		}
		if (bpf_map_lookup_elem(fd, k + cnt * ksz, v + cnt * vsz)) {
			ret = -errno;
			break;
		}
		memcpy(prev, k + cnt * ksz, ksz);
		first = false;
		cnt++;
	}
	free(prev);
	if (ret)
		return dump_fail(k, v, ret);
	*keys = k;
	*vals = v;
	*n = cnt;
	return 0;
}

int zh_map_dump(int fd, size_t ksz, size_t vsz, char **keys, char **vals, size_t *n)
{
	LIBBPF_OPTS(bpf_map_batch_opts, opts);
	size_t cap = 4096, got = 0;
	char *k = NULL, *v = NULL;
	/* The batch token: a bucket index for hash maps, a key for the maps
	 * the kernel batches generically (arrays): room for either. */
	size_t tsz = ksz > 8 ? ksz : 8;
	char *tok_in = zh_calloc(1, tsz), *tok_out = zh_calloc(1, tsz);
	bool first = true;
	int ret;

	dump_room(&k, &v, cap, ksz, vsz);
	for (;;) {
		uint32_t cnt;

		if (cap - got < 1024) {
			cap *= 2;
			dump_room(&k, &v, cap, ksz, vsz);
		}
		cnt = (uint32_t)(cap - got);
		ret = bpf_map_lookup_batch(fd, first ? NULL : tok_in, tok_out, k + got * ksz,
					   v + got * vsz, &cnt, &opts);
		if (ret && ret != -ENOENT && ret != -ENOSPC)
			break;
		if (ret == -ENOSPC && !cnt) {	/* a bucket larger than the room left */
			cap *= 2;
			dump_room(&k, &v, cap, ksz, vsz);
			continue;
		}
		got += cnt;
		if (ret == -ENOENT) {	/* the end: cnt holds the last entries */
			ret = 0;
			break;
		}
		memcpy(tok_in, tok_out, tsz);
		first = false;
	}
	free(tok_in);
	free(tok_out);
	if (ret && first && (ret == -EINVAL || ret == -KERNEL_ENOTSUPP || ret == -EOPNOTSUPP)) {
		/* no batch ops for this map type: walk it */
		free(k);
		free(v);
		return zh_map_dump_walk(fd, ksz, vsz, keys, vals, n);
	}
	if (ret)
		return dump_fail(k, v, ret);
	*keys = k;
	*vals = v;
	*n = got;
	return 0;
}

bool zh_map_pin_drop_resized(const char *path, uint32_t max_entries, const char *what)
{
	struct bpf_map_info info = {};
	uint32_t len = sizeof(info);
	bool drop;
	int fd = bpf_obj_get(path);

	if (fd < 0)
		return false;
	drop = !bpf_obj_get_info_by_fd(fd, &info, &len) && info.max_entries != max_entries;
	close(fd);
	if (drop) {
		zh_info("%s: pinned counters of another version (%u, now %u): replaced, counters restart at 0",
			what, info.max_entries, max_entries);
		unlink(path);
	}
	return drop;
}
