#!/usr/bin/env bash
# The nginx image in the lab: Debian's nginx runs each pod's own config from
# a ConfigMap volume — mounted as a directory at /etc/nginx/conf.d, as a
# single file with subPath, or as all of /etc/nginx — with private /run,
# /var/log/nginx and /var/lib/nginx, so two nginx pods never share a pid
# file or a log, and the host's nginx files are untouched.
source "$(dirname "$0")/../lib/tap.sh"
source "$(dirname "$0")/../lib/lab_test.sh"
[ -x /usr/sbin/nginx ] || skip_all "nginx not installed (scripts/deps.sh installs it)"
lab_test_setup t15 curl

cat >"$TMP/lab.yaml" <<'EOF'
apiVersion: v1
kind: ConfigMap
metadata:
  name: dir-conf
data:
  default.conf: |
    server {
      listen 80;
      location / { return 200 "dir $hostname\n"; }
    }
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: file-conf
data:
  site.conf: |
    server { listen 8081; location / { return 200 "file $hostname\n"; } }
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: whole-conf
data:
  nginx.conf: |
    worker_processes 1;
    error_log /var/log/nginx/error.log;
    events { worker_connections 64; }
    http {
      access_log /var/log/nginx/access.log;
      server { listen 8082; location / { return 200 "whole $hostname\n"; } }
    }
---
apiVersion: v1
kind: Pod
metadata:
  name: ng-dir
spec:
  nodeName: node-a
  containers:
  - name: nginx
    image: nginx:1.25
    ports:
    - containerPort: 80
    volumeMounts:
    - name: conf
      mountPath: /etc/nginx/conf.d
  volumes:
  - name: conf
    configMap:
      name: dir-conf
---
apiVersion: v1
kind: Pod
metadata:
  name: ng-file
spec:
  nodeName: node-a
  containers:
  - name: nginx
    image: nginx
    ports:
    - containerPort: 8081
    volumeMounts:
    - name: conf
      mountPath: /etc/nginx/conf.d/default.conf
      subPath: site.conf
  volumes:
  - name: conf
    configMap:
      name: file-conf
---
apiVersion: v1
kind: Pod
metadata:
  name: ng-whole
spec:
  nodeName: node-b
  containers:
  - name: nginx
    image: docker.io/library/nginx:stable
    ports:
    - containerPort: 8082
    volumeMounts:
    - name: conf
      mountPath: /etc/nginx
  volumes:
  - name: conf
    configMap:
      name: whole-conf
---
apiVersion: v1
kind: Pod
metadata:
  name: client
spec:
  nodeName: node-b
  containers:
  - name: sleep
    image: busybox
    command: ["sleep", "100000"]
EOF
HOSTLOG=$(ls -l /var/log/nginx 2>/dev/null | md5sum)
HOSTPID=$([ -e /run/nginx.pid ] && echo yes || echo no)

"$ZH" lab up --lab $LAB --no-mesh -f "$TMP/lab.yaml" >"$TMP/up.out" 2>&1
ok $? "lab up with three nginx pods: $(head -1 "$TMP/up.out")"
grep -q "up:" "$TMP/up.out" || diag "$(cat "$TMP/up.out")"
"$ZH" lab status --lab $LAB -o json >"$TMP/st.json"
ip_of() { jq -r ".pods[] | select(.name==\"$1\") | .ip" "$TMP/st.json"; }
X() { "$ZH" lab exec --lab $LAB "$@"; }
is "$(X client -- curl -s -m 5 "http://$(ip_of ng-dir)/")" "dir ng-dir" \
	"ConfigMap as /etc/nginx/conf.d: the pod's own server answers"
is "$(X client -- curl -s -m 5 "http://$(ip_of ng-file):8081/")" "file ng-file" \
	"ConfigMap key as one file (subPath)"
is "$(X client -- curl -s -m 5 "http://$(ip_of ng-whole):8082/")" "whole ng-whole" \
	"ConfigMap as all of /etc/nginx"
X client -- curl -s -m 5 -o /dev/null "http://$(ip_of ng-dir)/nothing-else-here"
A=$(X ng-dir -- cat /run/nginx.pid)
B=$(X ng-file -- cat /run/nginx.pid)
ok $([ -n "$A" ] && [ -n "$B" ] && [ "$A" != "$B" ]; echo $?) "each nginx pod has its own /run/nginx.pid ($A, $B)"
X ng-dir -- grep -q "nothing-else-here" /var/log/nginx/access.log
ok $? "ng-dir logs into its own /var/log/nginx"
X ng-file -- grep -q "nothing-else-here" /var/log/nginx/access.log
ok $((! $?)) "... which ng-file does not see"
X ng-file -- test -e /etc/nginx/sites-enabled/default
ok $((! $?)) "a pod with its own conf.d does not serve Debian's default site"
is "$(ls -l /var/log/nginx 2>/dev/null | md5sum)" "$HOSTLOG" "the host's /var/log/nginx is untouched"
is "$([ -e /run/nginx.pid ] && echo yes || echo no)" "$HOSTPID" "no nginx pid file on the host"
"$ZH" lab down --lab $LAB >/dev/null
ok $? "lab down"
done_testing
