#!/usr/bin/env bash
# Install what zerohop needs, from Debian packages only. Quiet and idempotent:
# does nothing when every package is already installed.
set -euo pipefail
pkgs=(
	build-essential clang llvm libbpf-dev bpftool libelf-dev zlib1g-dev libyaml-dev
	iproute2 nftables pkg-config util-linux procps psmisc
	perl curl jq python3 python3-yaml
	wrk nginx-light haproxy iperf3
	libclang-rt-14-dev libssl-dev openssl
	wget python3-grpcio golang-go openjdk-17-jdk-headless nodejs
	libnghttp2-dev nghttp2-client python3-h2
	podman runc containernetworking-plugins busybox-static buildah
	etcd-server etcd-client time bc
	prometheus tmux chromium
	tcpdump tshark
)
missing=()
for p in "${pkgs[@]}"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0
echo "deps: installing ${missing[*]}"
if [ "$(id -u)" -ne 0 ]; then
	echo "deps: need root to install packages (run as root, or install: ${missing[*]})" >&2
	exit 1
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq >/dev/null
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
exit 0
