#!/usr/bin/env bash
# The image's cold start and RSS: from `podman run` (scripts/test-image's own flags, a
# fresh volume each round) to the first 200 on /v1/health, and the server's VmRSS then.
# As root, after `scripts/test-image` has built the image:
#   bash benchmarks/image_cold_start.sh [ROUNDS] [TAG]   (defaults: 3, test-image)
set -euo pipefail
rounds=${1:-3}
image=localhost/memory-plugin-vector:${2:-test-image}
flags=(--network none --user 10001:10001 --group-add 10001 --read-only
  --tmpfs /tmp:rw,size=256m,mode=1777 --cap-drop ALL --security-opt no-new-privileges
  -e MEMORY_PLUGIN_BACKEND=embedded --ulimit nofile=1024:1024 --ulimit nproc=1024:1024
  --runtime runc --read-only-tmpfs=false)
for round in $(seq "$rounds"); do
  podman volume create "v$round" >/dev/null
  t0=$(date +%s.%N)
  podman run -d --name "c$round" "${flags[@]}" -v "v$round:/data" "$image" >/dev/null
  pid=$(podman inspect --format '{{.State.Pid}}' "c$round")
  until nsenter -t "$pid" --net curl -sf http://127.0.0.1:9100/v1/health >/dev/null; do
    sleep 0.05
  done
  echo "round $round: $(echo "$(date +%s.%N) - $t0" | bc) s, $(grep VmRSS "/proc/$pid/status")"
  podman rm -f "c$round" >/dev/null
  podman volume rm "v$round" >/dev/null
done
