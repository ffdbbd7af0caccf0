#!/bin/sh
# install-cni.sh — the DaemonSet's init container: put zerohop-cni and its
# configuration on the host (docs/install.md).
#   /opt/cni/bin/zerohop.d/      the binary, its shared libraries and loader
#   /opt/cni/bin/zerohop-cni     a wrapper: the loader with --argv0
#                                zerohop-cni (so the binary acts as the
#                                plugin) and the shipped libraries, so the
#                                host needs none of libbpf, libyaml, libelf
#   /etc/cni/net.d/10-zerohop.conflist
# Needs NODE_NAME and POD_CIDR (the node's .spec.podCIDR) in the environment;
# STATE_DIR defaults to /var/run/zerohop/state (the agent's --state).
set -eu
: "${NODE_NAME:?NODE_NAME (downward API spec.nodeName) is required}"
: "${POD_CIDR:?POD_CIDR (the node spec.podCIDR) is required}"
STATE_DIR=${STATE_DIR:-/var/run/zerohop/state}
BIN=${CNI_BIN_DIR:-/host/opt/cni/bin}
NETD=${CNI_NET_DIR:-/host/etc/cni/net.d}
d=$BIN/zerohop.d
mkdir -p "$d.new" "$NETD"
cp /usr/local/bin/zerohop "$d.new/zerohop"
for l in /lib/x86_64-linux-gnu/*.so* /lib64/ld-linux-x86-64.so.2; do [ -e "$l" ] && cp "$l" "$d.new/"; done
rm -rf "$d" && mv "$d.new" "$d"
cat >"$BIN/zerohop-cni.tmp" <<WRAP
#!/bin/sh
d=\$(dirname "\$0")/zerohop.d
exec "\$d/ld-linux-x86-64.so.2" --library-path "\$d" --argv0 zerohop-cni "\$d/zerohop" "\$@"
WRAP
chmod 755 "$BIN/zerohop-cni.tmp"
mv "$BIN/zerohop-cni.tmp" "$BIN/zerohop-cni"
cat >"$NETD/10-zerohop.conflist.tmp" <<CONF
{
  "cniVersion": "1.0.0",
  "name": "zerohop",
  "plugins": [
    {"type": "zerohop-cni", "node": "$NODE_NAME", "podCIDR": "$POD_CIDR",
     "stateDir": "$STATE_DIR", "dataDir": "/var/run/zerohop/cni",
     "labelsDir": "/var/run/zerohop/labels"},
    {"type": "portmap", "capabilities": {"portMappings": true}}
  ]
}
CONF
mv "$NETD/10-zerohop.conflist.tmp" "$NETD/10-zerohop.conflist"
echo "install-cni: zerohop-cni and 10-zerohop.conflist installed for $NODE_NAME ($POD_CIDR)"
