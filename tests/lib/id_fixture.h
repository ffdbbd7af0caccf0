/* id_fixture.h — for unit tests of identity and the tunnel: a state built
 * the way the agent gets it (manifests applied to a real directory state
 * source, then loaded). Header-only, after tap.h. */
#ifndef ZH_ID_FIXTURE_H
#define ZH_ID_FIXTURE_H

#include <stdio.h>

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

#endif
