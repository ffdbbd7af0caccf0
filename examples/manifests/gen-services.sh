#!/usr/bin/env bash
# gen-services.sh N [PODS] — print N Services (namespace bench), each selecting
# its own app label, and PODS Running runtime pods per Service (default 0), as
# one multi-document YAML stream. Used for the model's scale figures
# (docs/benchmarks/log/model.md).
set -euo pipefail
n=${1:?usage: gen-services.sh N [PODS_PER_SERVICE]}
pods=${2:-0}
awk -v n="$n" -v pods="$pods" 'BEGIN {
	for (i = 0; i < n; i++) {
		printf "---\napiVersion: v1\nkind: Service\nmetadata:\n  name: svc-%d\n  namespace: bench\n", i
		printf "spec:\n  selector:\n    app: app-%d\n  ports:\n    - name: http\n      port: 80\n      targetPort: http\n", i
		for (j = 0; j < pods; j++) {
			k = i * pods + j
			printf "---\napiVersion: v1\nkind: Pod\nmetadata:\n  name: pod-%d-%d\n  namespace: bench\n", i, j
			printf "  labels:\n    app: app-%d\nspec:\n  nodeName: node-a\n  containers:\n    - name: c\n", i
			printf "      ports:\n        - name: http\n          containerPort: 8080\n"
			printf "status:\n  podIP: 10.%d.%d.%d\n  phase: Running\n", 244 + int(k / 65536), int(k / 256) % 256, k % 256
		}
	}
}'
