#!/usr/bin/env bash
# What an operator installs (deploy/, docs/install.md): the node image
# builds with Debian's buildah from local files only (private storage under
# the test's temp dir, nothing in the machine's), its init script installs
# zerohop-cni and a conflist into a fake host root, the installed wrapper
# answers as a CNI plugin on this host, and the Kubernetes manifests hold
# what docs/install.md promises (RBAC verbs read-only, privileged host-network
# DaemonSet, the mounts, the init container, probes).
source "$(dirname "$0")/../lib/tap.sh"
source "$(dirname "$0")/../lib/harness.sh"
test_setup t82 buildah jq /usr/bin/python3
/usr/bin/python3 -c 'import yaml' 2>/dev/null || skip_all "no python3-yaml"
B=(buildah --root "$TMP/storage" --runroot "$TMP/run" --storage-driver vfs)
test_cleanup() {
	"${B[@]}" rm --all >/dev/null 2>&1
	"${B[@]}" rmi --all --force >/dev/null 2>&1
}
TAG=localhost/zerohop:t82${ZH_TEST_LAB_SUFFIX:-}

t0=$(date +%s)
"$ROOT/deploy/build-image.sh" "$ZH" "$TAG" --root "$TMP/storage" --runroot "$TMP/run" --storage-driver vfs >"$TMP/build.log" 2>&1
ok $? "deploy/build-image.sh builds the image from local files in $(($(date +%s) - t0)) s" || sed 's/^/#   /' "$TMP/build.log"
is "$("${B[@]}" inspect --type image "$TAG" 2>/dev/null | jq -c .OCIv1.config.Entrypoint)" '["/usr/local/bin/zerohop"]' "entrypoint is zerohop"
grep -q "pull\|Trying to" "$TMP/build.log"
ok $([ $? -ne 0 ]; echo $?) "nothing was pulled"

# the init container's job, into a fake host root
mkdir -p "$TMP/host"
c=$("${B[@]}" from "$TAG" 2>/dev/null)
"${B[@]}" run --isolation chroot -v "$TMP/host:/host" --env NODE_NAME=node-x --env POD_CIDR=10.244.7.0/24 \
	"$c" -- /usr/local/bin/install-cni.sh >"$TMP/install.log" 2>&1
ok $? "install-cni.sh ran in the image ($(tail -1 "$TMP/install.log"))"
conf="$TMP/host/etc/cni/net.d/10-zerohop.conflist"
is "$(jq -c '[.plugins[0].type, .plugins[0].node, .plugins[0].podCIDR]' "$conf" 2>/dev/null)" '["zerohop-cni","node-x","10.244.7.0/24"]' "the conflist names the plugin, the node and its pod CIDR"
out=$(echo '{"cniVersion":"1.0.0"}' | CNI_COMMAND=VERSION "$TMP/host/opt/cni/bin/zerohop-cni")
is "$?:$(echo "$out" | jq -r .cniVersion)" "0:1.0.0" "the installed wrapper runs the shipped binary with its own libraries as zerohop-cni"
out=$(jq '.plugins[0] + {cniVersion: .cniVersion, name: .name}' "$conf" | CNI_COMMAND=ADD "$TMP/host/opt/cni/bin/zerohop-cni" 2>/dev/null)
is "$(echo "$out" | jq -r .code)" 4 "and answers ADD without the spec's variables with error code 4"

# the manifests
/usr/bin/python3 - "$ROOT/deploy/kubernetes/zerohop.yaml" >"$TMP/m.out" 2>&1 <<'PY'
import sys, yaml
docs = [d for d in yaml.safe_load_all(open(sys.argv[1])) if d]
kinds = sorted(d["kind"] for d in docs)
print("kinds", " ".join(kinds))
role = next(d for d in docs if d["kind"] == "ClusterRole")
print("verbs", " ".join(sorted({v for r in role["rules"] for v in r["verbs"]})))
ds = next(d for d in docs if d["kind"] == "DaemonSet")["spec"]["template"]["spec"]
print("hostNetwork", ds["hostNetwork"])
cs = {c["name"]: c for c in ds["containers"]}
print("privileged", all(c["securityContext"]["privileged"] for c in cs.values()))
print("probes", all("readinessProbe" in c and "livenessProbe" in c for c in cs.values()))
print("init", " ".join(c["name"] for c in ds["initContainers"]))
print("hostPaths", " ".join(sorted(v["hostPath"]["path"] for v in ds["volumes"])))
PY
m=$(cat "$TMP/m.out")
is "$(echo "$m" | sed -n 's/^kinds //p')" "ClusterRole ClusterRoleBinding DaemonSet Namespace ServiceAccount" "manifests: Namespace, ServiceAccount, ClusterRole/Binding, DaemonSet"
is "$(echo "$m" | sed -n 's/^verbs //p')" "get list watch" "ClusterRole: read-only verbs"
is "$(echo "$m" | sed -n 's/^hostNetwork //p'):$(echo "$m" | sed -n 's/^privileged //p'):$(echo "$m" | sed -n 's/^probes //p')" "True:True:True" "DaemonSet: host network, privileged, readiness and liveness probes"
is "$(echo "$m" | sed -n 's/^init //p')" "install-cni" "an init container installs the plugin"
is "$(echo "$m" | sed -n 's/^hostPaths //p')" "/etc/cni/net.d /opt/cni/bin /sys/fs/bpf /sys/fs/cgroup /var/run/zerohop" "mounts: bpffs, cgroup2 root, CNI bin and conf dirs, the node state"
done_testing
