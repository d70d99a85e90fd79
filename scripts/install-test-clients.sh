#!/usr/bin/env bash
# Installs the real Kafka clients the integration tests drive against a running Mala node:
#   - kcat (librdkafka's command-line client, Debian package), Prometheus (Debian package: it scrapes the metrics
#     endpoint in test_metrics.py),
#   - Java 17 + Maven, then Apache Kafka's own jars (kafka-clients, kafka-tools, ...) from Maven Central into
#     tests/integration/.deps/kafka-libs and the small Java programs of tests/integration/java compiled against them,
#   - Kafka Connect's worker (tests/integration/apps/connect-pom.xml) into tests/integration/.deps/connect-libs,
#   - Kafka Streams + rocksdbjni (tests/integration/apps/streams-pom.xml) into tests/integration/.deps/streams-libs and
#     the Streams apps of tests/integration/apps/streams compiled against them into .deps/streams-classes,
#   - Apicurio Registry 3.0.9 (a schema registry; its runnable Quarkus bundle from Maven Central) extracted into
#     tests/integration/.deps/apicurio-registry,
#   - Python packages pinned in tests/integration/requirements.txt (pytest, confluent-kafka, kafka-python),
#   - tests/integration/go: mala-go-client (franz-go and sarama, versions pinned in go.mod/go.sum, from the Go module
#     proxy) built into tests/integration/.deps/bin,
#   - tests/integration/node: KafkaJS from npm (pinned in package-lock.json) into tests/integration/node/node_modules.
# Idempotent and quick on re-run: each step is skipped when its result is already present and up to date.
set -euo pipefail

repo_root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
it_dir=$repo_root/tests/integration
deps_dir=$it_dir/.deps
java_dir=$it_dir/java

# --- Debian packages -------------------------------------------------------------------------------------------
packages=(kcat openjdk-17-jdk-headless maven prometheus)
missing=()
for p in "${packages[@]}"; do
  if ! dpkg -s "$p" 2>/dev/null | grep -q '^Status: install ok installed'; then
    # An already working JDK/Maven (another packaging) is fine too.
    case $p in
      openjdk-17-jdk-headless) command -v javac >/dev/null && javac -version 2>&1 | grep -qE ' (1[7-9]|2[0-9])' && continue ;;
      maven) command -v mvn >/dev/null && continue ;;
      kcat) command -v kcat >/dev/null && continue ;;
      prometheus) command -v prometheus >/dev/null && continue ;;
    esac
    missing+=("$p")
  fi
done
if ((${#missing[@]} > 0)); then
  echo "install-test-clients: installing ${missing[*]}"
  sudo_cmd=()
  [[ $(id -u) -ne 0 ]] && sudo_cmd=(sudo)
  export DEBIAN_FRONTEND=noninteractive
  "${sudo_cmd[@]}" apt-get update -qq
  "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

# --- Python packages -------------------------------------------------------------------------------------------
python=${PYTHON:-python3}
if ! "$python" - "$it_dir/requirements.txt" <<'PY'
import sys
from importlib import metadata
ok = True
for line in open(sys.argv[1]):
    line = line.split('#', 1)[0].strip()
    if not line:
        continue
    name, _, want = line.partition('==')
    try:
        have = metadata.version(name)
    except metadata.PackageNotFoundError:
        have = None
    if have != want:
        ok = False
sys.exit(0 if ok else 1)
PY
then
  echo "install-test-clients: pip install -r tests/integration/requirements.txt"
  pip_args=(-m pip install -q --disable-pip-version-check --root-user-action=ignore -r "$it_dir/requirements.txt")
  if ! "$python" -m pip --version >/dev/null 2>&1; then
    apt-get install -y -qq --no-install-recommends python3-pip >/dev/null
  fi
  # Debian's own python3 refuses pip installs outside a venv (PEP 668); these are test-only packages.
  "$python" "${pip_args[@]}" 2>/dev/null || "$python" "${pip_args[@]}" --break-system-packages
fi

# --- Apache Kafka jars from Maven Central ------------------------------------------------------------------------
libs_dir=$deps_dir/kafka-libs
pom_hash=$(sha256sum "$java_dir/pom.xml" | cut -d' ' -f1)
if [[ ! -f $libs_dir/.pom-sha256 || $(cat "$libs_dir/.pom-sha256") != "$pom_hash" ]]; then
  echo "install-test-clients: resolving Apache Kafka jars with Maven"
  rm -rf "$libs_dir"
  mkdir -p "$libs_dir"
  (cd "$java_dir" && mvn -q -B -Dstyle.color=never dependency:copy-dependencies -DincludeScope=runtime -DoutputDirectory="$libs_dir")
  echo "$pom_hash" >"$libs_dir/.pom-sha256"
fi

# --- Applications that live on compacted topics (issue 21), each on a class path of its own -------------------------
resolve_app() {  # resolve_app POM DIR: the runtime jars of the POM's dependencies into DIR, when the POM changed
  local pom=$1 dir=$2 hash
  hash=$(sha256sum "$pom" | cut -d' ' -f1)
  if [[ ! -f $dir/.pom-sha256 || $(cat "$dir/.pom-sha256") != "$hash" ]]; then
    echo "install-test-clients: resolving $(basename "$pom") with Maven"
    rm -rf "$dir"
    mkdir -p "$dir"
    mvn -q -B -Dstyle.color=never -f "$pom" dependency:copy-dependencies -DincludeScope=runtime -DoutputDirectory="$dir"
    echo "$hash" >"$dir/.pom-sha256"
  fi
}
resolve_app "$it_dir/apps/connect-pom.xml" "$deps_dir/connect-libs"
resolve_app "$it_dir/apps/streams-pom.xml" "$deps_dir/streams-libs"

# Apicurio Registry with KafkaSQL storage (test_schema_registry.py): the whole runnable bundle, one tar.gz artifact.
# 3.0.9 is the newest release that takes its journal topic's configs (cleanup.policy=compact) as they are: later ones
# refuse a compacted journal. Its parent POM is not on Maven Central, which the 3.x dependency plugin needs to read the
# artifact's descriptor; the 2.10 plugin copies the artifact alone.
apicurio_version=3.0.9
apicurio_dir=$deps_dir/apicurio-registry
if [[ ! -f $apicurio_dir/.version || $(cat "$apicurio_dir/.version") != "$apicurio_version" ]]; then
  echo "install-test-clients: fetching Apicurio Registry $apicurio_version with Maven"
  rm -rf "$apicurio_dir"
  mkdir -p "$apicurio_dir"
  apicurio_tmp=$(mktemp -d)
  (cd "$apicurio_tmp" && mvn -q -B -Dstyle.color=never org.apache.maven.plugins:maven-dependency-plugin:2.10:copy \
    -Dartifact="io.apicurio:apicurio-registry-app:$apicurio_version:tar.gz:all" -DoutputDirectory="$apicurio_tmp")
  tar -xzf "$apicurio_tmp/apicurio-registry-app-$apicurio_version-all.tar.gz" -C "$apicurio_dir"
  rm -rf "$apicurio_tmp"
  echo "$apicurio_version" >"$apicurio_dir/.version"
fi

# --- Kafka Streams applications (issue 22), compiled against .deps/streams-libs -----------------------------------------
streams_classes=$deps_dir/streams-classes
mapfile -t streams_sources < <(find "$it_dir/apps/streams" -name '*.java' | sort)
streams_hash=$(cat "${streams_sources[@]}" "$deps_dir/streams-libs/.pom-sha256" | sha256sum | cut -d' ' -f1)
if [[ ! -f $streams_classes/.src-sha256 || $(cat "$streams_classes/.src-sha256") != "$streams_hash" ]]; then
  echo "install-test-clients: compiling ${#streams_sources[@]} Kafka Streams app(s)"
  rm -rf "$streams_classes"
  mkdir -p "$streams_classes"
  javac -encoding UTF-8 --release 17 -cp "$deps_dir/streams-libs/*" -d "$streams_classes" "${streams_sources[@]}"
  echo "$streams_hash" >"$streams_classes/.src-sha256"
fi

# --- Small Java programs -----------------------------------------------------------------------------------------
classes_dir=$deps_dir/classes
mapfile -t java_sources < <(find "$java_dir/src" -name '*.java' | sort)
src_hash=$(cat "${java_sources[@]}" "$libs_dir/.pom-sha256" | sha256sum | cut -d' ' -f1)
if [[ ! -f $classes_dir/.src-sha256 || $(cat "$classes_dir/.src-sha256") != "$src_hash" ]]; then
  echo "install-test-clients: compiling ${#java_sources[@]} Java test program(s)"
  rm -rf "$classes_dir"
  mkdir -p "$classes_dir"
  javac -encoding UTF-8 --release 17 -cp "$libs_dir/*" -d "$classes_dir" "${java_sources[@]}"
  echo "$src_hash" >"$classes_dir/.src-sha256"
fi

# --- Go clients (franz-go, sarama) ------------------------------------------------------------------------------
go_dir=$it_dir/go
bin_dir=$deps_dir/bin
if ! command -v go >/dev/null && [[ -x /usr/local/go/bin/go ]]; then
  export PATH=$PATH:/usr/local/go/bin
fi
if ! command -v go >/dev/null; then
  echo "install-test-clients: installing golang-go"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq && apt-get install -y -qq --no-install-recommends golang-go
fi
go_hash=$(cat "$go_dir"/go.mod "$go_dir"/go.sum "$go_dir"/*.go | sha256sum | cut -d' ' -f1)
if [[ ! -x $bin_dir/mala-go-client || ! -f $bin_dir/.go-sha256 || $(cat "$bin_dir/.go-sha256") != "$go_hash" ]]; then
  echo "install-test-clients: building mala-go-client (franz-go, sarama)"
  mkdir -p "$bin_dir"
  # -mod=readonly: the versions are the ones go.mod and go.sum pin, never upgraded on the fly.
  (cd "$go_dir" && GOFLAGS="-mod=readonly -buildvcs=false" go build -trimpath -o "$bin_dir/mala-go-client" .)
  echo "$go_hash" >"$bin_dir/.go-sha256"
fi

# --- KafkaJS -----------------------------------------------------------------------------------------------------
node_dir=$it_dir/node
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
  echo "install-test-clients: installing nodejs and npm"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq && apt-get install -y -qq --no-install-recommends nodejs npm
fi
lock_hash=$(sha256sum "$node_dir/package-lock.json" | cut -d' ' -f1)
if [[ ! -f $node_dir/node_modules/.lock-sha256 || $(cat "$node_dir/node_modules/.lock-sha256") != "$lock_hash" ]]; then
  echo "install-test-clients: npm ci (kafkajs)"
  (cd "$node_dir" && npm ci --no-audit --no-fund --loglevel=error >/dev/null)
  echo "$lock_hash" >"$node_dir/node_modules/.lock-sha256"
fi

echo "install-test-clients: kcat, Java tools (Kafka $(ls "$libs_dir" | sed -n 's/^kafka-clients-\(.*\)\.jar$/\1/p')), Kafka Streams, Apicurio Registry, Python clients, mala-go-client, KafkaJS ready"
