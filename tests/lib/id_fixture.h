/* id_fixture.h — for unit tests of identity and the tunnel: a state built
 * the way the agent gets it (manifests applied to a real directory state
 * source, then loaded). Header-only, after tap.h. */
#ifndef ZH_ID_FIXTURE_H
#define ZH_ID_FIXTURE_H

#include <stdio.h>
#include <stdlib.h>

#include "zerohop/state.h"

/* Write yaml to ROOT/app.yaml, apply it to the state source SDIR, load it.
 * NULL when the source cannot be opened; a load error is diagnosed. */
static inline struct md_state *id_fixture_state(const char *root, const char *sdir,
						const char *yaml)
{
	char path[400], *paths[1] = { path };
	struct md_state *st = NULL;
	struct md_err err = {};
	struct ss *s;
	FILE *f;

	snprintf(path, sizeof(path), "%s/app.yaml", root);
	f = fopen(path, "w");
	if (!f)
		return NULL;
	fputs(yaml, f);
	fclose(f);
	if (ss_open(sdir, &s))
		return NULL;
	if (ss_apply(s, paths, 1, &err) || ss_load(s, &st, &err))
		diag("state: %s", err.msg);
	ss_close(s);
	return st;
}

/* The directories under a fresh ROOT (a mkdtemp template): ca (the
 * cluster's CA), rogue (a CA nobody trusts), out and bad (a node's SVIDs
 * from each), sdir (the state source). Each buffer ID_FIXTURE_PATH bytes.
 * 0, or -1 when ROOT cannot be made. */
#define ID_FIXTURE_PATH 300
static inline int id_fixture_dirs(char *root, char *ca, char *rogue, char *out, char *bad,
				  char *sdir)
{
	if (!mkdtemp(root))
		return -1;
	snprintf(ca, ID_FIXTURE_PATH, "%s/ca", root);
	snprintf(rogue, ID_FIXTURE_PATH, "%s/rogue", root);
	snprintf(out, ID_FIXTURE_PATH, "%s/svid", root);
	snprintf(bad, ID_FIXTURE_PATH, "%s/bad", root);
	snprintf(sdir, ID_FIXTURE_PATH, "%s/state", root);
	return 0;
}

/* Remove ROOT and everything under it (the end of a test). */
static inline void id_fixture_rm(const char *root)
{
	char cmd[400];

	snprintf(cmd, sizeof(cmd), "rm -rf %s", root);
	if (system(cmd))
		diag("cannot remove %s", root);
}

#endif
