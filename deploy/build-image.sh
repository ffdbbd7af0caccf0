#!/usr/bin/env bash
# build-image.sh — the zerohop node image from local files only:
#	deploy/build-image.sh [ZEROHOP_BINARY] [TAG] [BUILDAH-GLOBAL-OPTS...]
# Stages a context with rootfs/ = the zerohop binary, every shared library
# `ldd` lists for it (and the loader), busybox-static (a shell for the
# scripts and probes) and install-cni.sh, then `buildah bud` with
# deploy/Containerfile. Extra arguments go to buildah before `bud` (the
# test passes --root/--runroot so nothing lands in the machine's storage).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
zh=$(realpath "${1:-$here/../build/zerohop}")
tag=${2:-zerohop:dev}
shift $(($# < 2 ? $# : 2))
ctx=$(mktemp -d /tmp/zerohop-image.XXXXXX)
trap 'rm -rf "$ctx"' EXIT
root=$ctx/rootfs
mkdir -p "$root"/{bin,usr/local/bin,etc,tmp,run,var/run}
cp "$zh" "$root/usr/local/bin/zerohop"
ln -s zerohop "$root/usr/local/bin/zerohop-cni"
for l in $(ldd "$zh" | grep -o '/[^ ]*'); do
	mkdir -p "$root$(dirname "$l")"
	cp -L "$l" "$root$l"
done
cp /usr/bin/busybox "$root/bin/busybox"
for a in sh cat cp mkdir ln grep sed test printf echo sleep rm mv chmod; do ln -s busybox "$root/bin/$a"; done
cp "$here/install-cni.sh" "$root/usr/local/bin/install-cni.sh"
chmod 755 "$root/usr/local/bin/install-cni.sh"
echo "root:x:0:0:root:/:/bin/sh" >"$root/etc/passwd"
cp "$here/Containerfile" "$ctx/Containerfile"
buildah "$@" bud --quiet -f "$ctx/Containerfile" -t "$tag" "$ctx"
