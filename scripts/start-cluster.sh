#!/usr/bin/env bash
# Builds Mala (if needed) and starts a 3-node cluster on localhost with config/cluster/node-{1,2,3}.yaml: every node
# is broker + controller, one Raft metadata quorum (controller.quorum.voters 1@localhost:9093,2@...:9095,3@...:9097).
# Clients bootstrap from localhost:9092,localhost:9094,localhost:9096. Data in /tmp/mala-cluster/node-N, each node's
# output in /tmp/mala-cluster/node-N.log. Ctrl-C (or SIGTERM) stops all three; if one node exits on its own, the
# others are stopped too. Extra arguments go to every mala, e.g. `--override log.level=debug`.
set -euo pipefail

repo_root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$repo_root"
export CCACHE_BASEDIR=$repo_root
export CCACHE_NOHASHDIR=1

scripts/install-deps.sh
if [[ ! -f build/build.ninja ]]; then
  cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo
fi
ninja -C build -j"${MALA_JOBS:-2}" mala

mkdir -p /tmp/mala-cluster
pids=()
stop_all() {
  trap - INT TERM
  echo "start-cluster: stopping nodes (pids ${pids[*]})"
  for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
  echo "start-cluster: stopped"
}
trap 'stop_all; exit 130' INT
trap 'stop_all; exit 143' TERM

for i in 1 2 3; do
  build/src/app/mala --config "config/cluster/node-$i.yaml" "$@" >>"/tmp/mala-cluster/node-$i.log" 2>&1 &
  pids+=("$!")
  echo "start-cluster: node $i pid $! (log /tmp/mala-cluster/node-$i.log)"
done
echo "start-cluster: bootstrap servers localhost:9092,localhost:9094,localhost:9096 (Ctrl-C stops all three)"

set +e
wait -n "${pids[@]}"
code=$?
set -e
echo "start-cluster: a node exited with code $code; see /tmp/mala-cluster/node-*.log"
stop_all
exit "$code"
