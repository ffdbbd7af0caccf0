#!/usr/bin/env bash
# Assemble docs/BENCHMARKS.md from the summary (docs/benchmarks/README.md)
# and each component's section (docs/benchmarks/*.md), headings shifted one
# level down so the whole file has one title.
set -euo pipefail
cd "$(dirname "$0")/.."
out=docs/BENCHMARKS.md
{
	cat docs/benchmarks/README.md
	for f in echo lab model agent bench accel policy proxy cap; do
		[ -f "docs/benchmarks/$f.md" ] || continue
		printf '\n'
		awk '/^```/ { fence = !fence } !fence && /^#/ { $0 = "#" $0 } { print }' "docs/benchmarks/$f.md"
	done
} >"$out.tmp"
mv "$out.tmp" "$out"
echo "wrote $out"
