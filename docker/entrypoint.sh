#!/bin/sh
# Entrypoint of the Mala image (docker/Dockerfile) and of the network-namespace test that stands in for
# Docker: runs mala with the node's config file. Environment:
#   MALA_CONFIG   the config file (default /etc/mala/node.yaml, where compose.yaml mounts config/node-N.yaml)
#   MALA_BIN      the binary (default: mala on the PATH)
#   MALA_OVERRIDES  extra "key=value" settings, space-separated, passed as --override (e.g. a test's log.dirs)
# Arguments after the image name are passed to mala as they are.
set -eu
config=${MALA_CONFIG:-/etc/mala/node.yaml}
bin=${MALA_BIN:-mala}
set -- --config "$config" "$@"
for kv in ${MALA_OVERRIDES:-}; do
  set -- "$@" --override "$kv"
done
exec "$bin" "$@"
