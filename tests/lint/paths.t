#!/usr/bin/env bash
# paths.t — every repository path named in a doc or a source file exists.
#
# What counts as a path: a token that starts with one of the top folders
# src/ include/ bpf/ tests/ docs/ scripts/ examples/ at a word boundary (not
# after a letter, digit, '_', '$', '.', '/', '~', '-' or '<', so build/src/x.c,
# $B/tests/x, /run/zerohop/docs/ and <bpf/libbpf.h> are not), made of
# letters, digits and _ . - * /, and ending either in a file extension
# (.c, .md, .bpf.c, ...) or in '/'; a final '.' that ends a sentence is not
# part of it. A token followed by '{' (a brace list, a/{b,c}) is not one. '*' and '**' are globs: at least one file must match.
# Anything else (tests/e2e/32, src/lab as a folder name in prose) is prose.
#
# Where: README.md and docs/**/*.md whole; *.c *.h *.sh *.t *.py under src,
# include, bpf, tests, scripts, examples whole (comments, usage texts and the
# code's own relative paths alike); the Makefile's comment lines only (its
# wildcards may match nothing). Nothing under build/.
#
# Usage: tests/lint/paths.t [ROOT]   (ROOT: the tree to check, default this one)
source "$(dirname "$0")/../lib/tap.sh"
ROOT=${1:-$(cd "$(dirname "$0")/../.." && pwd)}
cd "$ROOT" || exit 1
shopt -s globstar nullglob

TOP='(src|include|bpf|tests|docs|scripts|examples)'
PATH_RE="(?<![A-Za-z0-9_\$./~<-])$TOP/[A-Za-z0-9_.*/-]*(\.[A-Za-z0-9]+|/)(?![A-Za-z0-9_*/{-]|\.[A-Za-z0-9_*/-])"

# FILE:LINE:TOKEN for every path token.
scan() {
	local files
	mapfile -t files < <(find README.md docs src include bpf tests scripts examples \
		-type f \( -name '*.md' -o -name '*.c' -o -name '*.h' -o -name '*.sh' \
		-o -name '*.t' -o -name '*.py' \) 2>/dev/null | sort)
	grep -HnoP "$PATH_RE" "${files[@]}"
	[ -f Makefile ] && grep -nP '^\s*#' Makefile | while IFS=: read -r ln text; do
		grep -oP "$PATH_RE" <<<"$text" | sed "s/^/Makefile:$ln:/"
	done
}

exists() {
	local p=$1 m
	case "$p" in
	*'*'*) m=($p); [ ${#m[@]} -gt 0 ] ;;
	*) [ -e "$p" ] ;;
	esac
}

n=0
bad=0
while IFS=: read -r file line tok; do
	n=$((n + 1))
	exists "$tok" && continue
	diag "$file:$line: $tok does not exist"
	bad=$((bad + 1))
done < <(scan)

if [ -z "$ZH_PATHS_SELFTEST" ]; then
	ok $([ "$n" -gt 100 ]; echo $?) "found $n path references (the scan works)"
	# The check itself: a tree with one good and one wrong reference fails,
	# naming the wrong one only. (The names are built from $S and $D so
	# that this file does not name them itself.)
	S=src D=docs
	t=$(mktemp -d /tmp/zh-paths.XXXXXX)
	mkdir -p "$t/$D" "$t/$S/lib"
	printf 'See %s and %s, not %s.\n' "$S/lib/here.c" "$D/" "$S/lib/gone.c" >"$t/$D/a.md"
	printf '/* %s */\n' "$S/lib/*.c" >"$t/$S/lib/here.c"
	out=$(ZH_PATHS_SELFTEST=1 bash "$0" "$t" 2>&1)
	rc=$?
	rm -rf "$t"
	ok $([ $rc -ne 0 ] && echo "$out" | grep -qF "$D/a.md:1: $S/lib/gone.c does not exist" &&
		[ "$(echo "$out" | grep -c 'does not exist')" = 1 ]; echo $?) \
		"a wrong reference fails the check, and only it is named"
fi
is "$bad" 0 "every path named in docs and sources exists"
done_testing
