/* bpfmap.h — reading a whole BPF map from user space (prefix zh_map_).
 *
 * The agent adopts what a previous agent left pinned (docs/agent.md,
 * docs/policy.md): it reads every entry back before it changes anything.
 * One reader serves every map type: BPF_MAP_LOOKUP_BATCH where the kernel
 * has it for the map (a few syscalls for 100,000 entries instead of two per
 * entry), the get_next_key walk where it does not (LPM tries on older
 * kernels, and any map type without batch ops).
 *
 * Contract: the map is not written while it is read (every caller holds
 * the only writer). Keys and values come back in two malloc'd arrays of
 * *n entries of ksz and vsz bytes, in the kernel's order; the caller frees
 * both (NULL when the map is empty is allowed: free(NULL) is fine).
 */
#ifndef ZH_BPFMAP_H
#define ZH_BPFMAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Every entry of map fd. 0 / -errno (nothing allocated on error). */
int zh_map_dump(int fd, size_t ksz, size_t vsz, char **keys, char **vals, size_t *n);

/* The same by the get_next_key walk only: the fallback of zh_map_dump,
 * callable on its own so that tests exercise both paths. */
int zh_map_dump_walk(int fd, size_t ksz, size_t vsz, char **keys, char **vals, size_t *n);

/* Counters sized by an enum (one entry per reason or stat): an upgrade that
 * adds one leaves a pin of another max_entries, which libbpf cannot reuse
 * and which would fail the whole load. Counters are the one kind of map
 * whose content may be dropped: when the map pinned at path has another
 * size than max_entries, the pin is removed (logged with what), so the
 * next load creates a fresh one; running programs keep the old map until
 * their links switch. True when it was removed. */
bool zh_map_pin_drop_resized(const char *path, uint32_t max_entries, const char *what);

#endif
