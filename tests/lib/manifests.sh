# manifests.sh — YAML generators for the lab tests (source it; lab_test.sh
# does). Each prints one object in flow style followed by a `---` line, so
# calls can be concatenated into one file:
#	{ m_deploy ...; m_svc ...; } > "$TMP/app.yaml"
#
#	m_ctr NAME PORTS CMD...
#		one container (a YAML flow mapping, for m_pod/m_deploy): NAME runs
#		CMD; PORTS is "" or a space-separated list of PORT, PNAME:PORT or
#		PNAME:PORT/UDP (named container ports)
#	m_img NAME IMAGE PORTS
#		one container running IMAGE (the lab maps well-known images to
#		its own programs: docs/lab.md), PORTS as m_ctr
#	m_pod NAME NODE LABELS CTR...
#		a Pod; NODE "" leaves the choice to the lab; LABELS "" or
#		"k: v, k2: v2"; CTR... are m_ctr outputs; M_SPEC="k: v, ..." adds
#		spec fields (serviceAccountName, ...); M_NS its namespace
#	m_deploy NAME NODE LABELS CTR...
#		a Deployment of $REPLICAS (default 1) pods selected by name=NAME,
#		labelled name: NAME plus LABELS; NODE, CTR as m_pod
#	m_svc NAME SELECTOR PORTS [CLUSTERIP [ANNOTATIONS]]
#		a Service selecting SELECTOR ("k: v, ..."); PORTS a space-separated
#		list of PORT:TARGET or PORT:TARGET/UDP (TARGET a number or a port
#		name), each named p<PORT> unless given as PNAME=PORT:TARGET;
#		CLUSTERIP "" lets the lab allocate; ANNOTATIONS "k: v, ..."
#		M_SPEC="k: v, ..." before the call adds spec fields (ipFamilies,
#		ipFamilyPolicy, type, ...)
#	m_cluster NAME NODES [DUAL]
#		the lab's Cluster object: NODES a space-separated list; DUAL
#		non-empty: dual-stack (IPv4 first) with the lab's default CIDRs
#		and fd00:10:244::/56, fd00:10:96::/112 (docs/ipv6.md)
#	m_egress_only NAME SELECTOR TO PORT
#		a NetworkPolicy: pods matching SELECTOR ("k: v") may open
#		only pods matching TO ("k: v") on PORT (egress isolated)
#	m_ingress_from NAME SELECTOR FROM [PORT]
#		a NetworkPolicy: pods matching SELECTOR ("k: v") admit only
#		pods matching FROM ("k: v"), on PORT when given
#	m_netpol_peer NAME SELECTOR ingress|egress PEER [PORT]
#		the two above: one direction isolated, one peer allowed
#	m_http_dir NAME
#		one container serving $TMP/NAME on [::]:8080 (both families;
#		python3 http.server), whose index.html says "srv-NAME" (made
#		here, readable by the pods)
#	m_idle NAME NODE
#		a Pod labelled app: NAME on NODE that only sleeps: the client or
#		intruder of most policy tests
#	m_who NAME NODE LABELS [PORT]
#		m_deploy of one lbprobe.py who-tcp server on PORT (default 8080),
#		port named http: the backend most lab tests use

m_ctr() {
	local name=$1 ports=$2 cmd="" a sep=""
	shift 2
	for a in "$@"; do cmd+="$sep\"$a\""; sep=", "; done
	printf '{name: %s, command: [%s]%s}' "$name" "$cmd" "$(m_ports "$ports")"
}

m_img() {
	printf '{name: %s, image: %s%s}' "$1" "$2" "$(m_ports "$3")"
}

# ", ports: [...]" of a PORTS list (m_ctr), nothing for "".
m_ports() {
	local p pn pp proto sep=""
	[ -n "$1" ] || return 0
	printf ', ports: ['
	for p in $1; do
		proto=
		case "$p" in */UDP) proto=", protocol: UDP"; p=${p%/UDP} ;; esac
		case "$p" in
		*:*) pn=${p%%:*}; pp=${p#*:}; printf '%s{name: %s, containerPort: %s%s}' "$sep" "$pn" "$pp" "$proto" ;;
		*) printf '%s{containerPort: %s%s}' "$sep" "$p" "$proto" ;;
		esac
		sep=", "
	done
	printf ']'
}

# The "containers: [...]" of CTR... (m_ctr outputs).
m_ctrs() {
	local c sep=""
	printf 'containers: ['
	for c in "$@"; do printf '%s%s' "$sep" "$c"; sep=", "; done
	printf ']'
}

m_pod() {
	local name=$1 node=$2 labels=$3
	shift 3
	cat <<YAML
apiVersion: v1
kind: Pod
metadata: {name: $name${M_NS:+, namespace: $M_NS}${labels:+, labels: {$labels\}}}
spec: {${node:+nodeName: $node, }${M_SPEC:+$M_SPEC, }$(m_ctrs "$@")}
---
YAML
}

m_deploy() {
	local name=$1 node=$2 labels=$3
	shift 3
	cat <<YAML
apiVersion: apps/v1
kind: Deployment
metadata: {name: $name${M_NS:+, namespace: $M_NS}}
spec:
  replicas: ${REPLICAS:-1}
  selector: {matchLabels: {name: $name}}
  template:
    metadata: {labels: {name: $name${labels:+, $labels}}}
    spec: {${node:+nodeName: $node, }$(m_ctrs "$@")}
---
YAML
}

m_svc() {
	local name=$1 sel=$2 ports=$3 cip=$4 ann=$5 p pn t proto sep="" list=""
	for p in $ports; do
		proto=
		case "$p" in */UDP) proto=", protocol: UDP"; p=${p%/UDP} ;; esac
		case "$p" in *=*) pn=${p%%=*}; p=${p#*=} ;; *) pn=p${p%%:*} ;; esac
		t=${p#*:}
		list+="$sep{name: $pn, port: ${p%%:*}, targetPort: $t$proto}"
		sep=", "
	done
	cat <<YAML
apiVersion: v1
kind: Service
metadata: {name: $name${M_NS:+, namespace: $M_NS}${ann:+, annotations: {$ann\}}}
spec: {${M_SPEC:+$M_SPEC, }${cip:+clusterIP: $cip, }selector: {$sel}, ports: [$list]}
---
YAML
}

m_cluster() {
	local n sep="" nodes=""
	for n in $2; do nodes+="$sep$n"; sep=", "; done
	cat <<YAML
apiVersion: zerohop.io/v1alpha1
kind: Cluster
metadata: {name: $1}
spec:
  nodes: [$nodes]
YAML
	[ -z "$3" ] || cat <<'YAML'
  podCIDRs: [10.244.0.0/16, "fd00:10:244::/56"]
  serviceCIDRs: [10.96.0.0/12, "fd00:10:96::/112"]
YAML
	echo ---
}

m_who() {
	local port=${4:-8080}
	m_deploy "$1" "$2" "$3" "$(m_ctr who "http:$port" python3 "$PROBE" who-tcp "$port")"
}

m_netpol_peer() {	# NAME SELECTOR ingress|egress PEER [PORT]
	local k=to types=Egress

	[ "$3" = ingress ] && { k=from; types=Ingress; }
	cat <<YAML
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: $1${M_NS:+, namespace: $M_NS}}
spec:
  podSelector: {matchLabels: {$2}}
  policyTypes: [$types]
  $3: [{$k: [{podSelector: {matchLabels: {$4}}}]${5:+, ports: [{port: $5\}]}}]
---
YAML
}

m_egress_only() { m_netpol_peer "$1" "$2" egress "$3" "$4"; }

m_ingress_from() { m_netpol_peer "$1" "$2" ingress "$3" "$4"; }

m_http_dir() {
	mkdir -p "$TMP/$1"
	echo "srv-$1" >"$TMP/$1/index.html"
	chmod -R a+rX "$TMP"
	m_ctr web "8080" "$PY" -m http.server --bind :: 8080 --directory "$TMP/$1"
}

m_idle() {
	m_pod "$1" "$2" "app: $1" "$(m_ctr c "" sleep 100000)"
}

# m_route NAME PARENT [ANNOTATIONS [PORT]] <<RULES
#	a Gateway API HTTPRoute attached to Service PARENT port PORT (default
#	80); its rules are read from stdin as YAML list items ("  - matches:
#	...", indented under `rules:`); ANNOTATIONS "k: v, ...". Printed
#	between two `---` lines, so it also follows loopback.sh's lb_*
#	objects, which put theirs first (an empty document is allowed).
m_route() {
	local name=$1 parent=$2 ann=$3 port=${4:-80}
	cat <<YAML
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: $name${ann:+, annotations: {$ann\}}}
spec:
  parentRefs: [{group: "", kind: Service, name: $parent, port: $port}]
  rules:
YAML
	cat
	echo ---
}
