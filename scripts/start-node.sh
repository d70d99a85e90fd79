#!/usr/bin/env bash
# Builds Mala (if needed) and starts a single node on localhost:9092 with the embedded default config
# (broker + controller in one process). Extra arguments go to mala, e.g. `--config node.yaml`. Stop with Ctrl-C.
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
exec build/src/app/mala "$@"
