# podman.sh — real containers in a lab (source after lab_test.sh; docs/cni.md):
#	pm_skip_unless_ready		skip unless podman, runc and busybox are here
#	pm_image_tar TAR		a rootfs tarball built from local files only:
#					busybox-static (the shell and its applets), the
#					zerohop binary and the shared libraries it needs
#	pm NODE PODMAN-ARGS...		podman for NODE of $LAB (zerohop lab podman)
#	pm_import TAR			import TAR as $PM_IMAGE on every node
#	pm_run NODE NAME LABELS CMD...	a detached container NAME on NODE with
#					LABELS (k=v[,k=v...]) and the lab's cluster DNS
#					($PM_DNS)
#	pm_http NODE CTR HOST PORT	GET / from container CTR: the echo body's "name"
#	pm_ip NAME			the pod IP the CNI plugin published for NAME
PM_IMAGE=localhost/zerohop-pod:test
pm_skip_unless_ready() {
	local c
	for c in podman runc busybox; do command -v $c >/dev/null || skip_all "no $c"; done
	awk '$9 == "cgroup2" {f=1} END {exit !f}' /proc/self/mountinfo || skip_all "no cgroup2 mount for runc"
}
pm_image_tar() {
	local root l
	root=$(mktemp -d "$TMP/rootfs.XXXXXX")
	mkdir -p "$root"/{bin,usr/local/bin,etc,tmp,proc,sys,dev}
	cp /usr/bin/busybox "$root/bin/busybox"
	for l in sh ls cat echo sleep wget nc ip ping hostname true nslookup; do ln -s busybox "$root/bin/$l"; done
	cp "$ZH" "$root/usr/local/bin/zerohop"
	for l in $(ldd "$ZH" | grep -o '/[^ ]*'); do mkdir -p "$root$(dirname "$l")"; cp -L "$l" "$root$l"; done
	echo "root:x:0:0:root:/:/bin/sh" >"$root/etc/passwd"
	tar -C "$root" -cf "$1" . && rm -rf "$root"
}
pm() { local n=$1; shift; "$ZH" lab podman --lab "$LAB" --node "$n" -- "$@"; }
pm_import() {
	local n
	for n in $("$ZH" lab status --lab "$LAB" -o json | jq -r '.nodes[].name'); do
		pm "$n" import -q "$1" $PM_IMAGE >/dev/null || return 1
	done
}
pm_run() {
	local node=$1 name=$2 l ls=()
	for l in ${3//,/ }; do ls+=(-l "$l"); done
	shift 3
	pm "$node" run -d -q --name "$name" "${ls[@]}" --dns "$PM_DNS" \
		--dns-search default.svc.cluster.local --dns-search svc.cluster.local \
		--dns-option ndots:5 $PM_IMAGE "$@" >/dev/null
}
pm_ip() { "$ZH" get pods --lab "$LAB" -o json | jq -r --arg n "$1" '.[] | select(.name == $n) | .ip'; }
# busybox nc, not wget: Debian's static busybox wget crashes with -q/-T
pm_http() {
	pm "$1" exec "$2" sh -c 'printf "GET / HTTP/1.0\r\nHost: $0\r\n\r\n" | nc -w 3 "$0" "$1"' "$3" "$4" 2>/dev/null |
		sed -n '$p' | jq -r .name 2>/dev/null
}
