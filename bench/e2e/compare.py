#!/usr/bin/env python3
"""End-to-end comparison of one Mala node with one Apache Kafka 4.x node .

Starts each broker in turn on this machine (fresh temp data dir, free ports, KRaft combined mode, the same
server.properties apart from the broker-specific lines), alternating the order over several rounds, and drives both
with the same clients:
  - Apache Kafka's ProducerPerformance / ConsumerPerformance (the classes kafka-producer-perf-test.sh and
    kafka-consumer-perf-test.sh run), plus AssignConsumerPerf.java (Kafka's Java consumer with assign(), because
    ConsumerPerformance needs consumer groups);
  - librdkafka through confluent-kafka (rdkafka_load.py, several processes);
  - franz-go (franzload/, a compiled Go client with 1 MB batches: the least client CPU per byte of the three);
  - franzload's raw modes: Produce requests carrying one prebuilt 1 MB batch per partition, and Fetch requests
    whose answers are walked batch header by batch header, on plain connections: no client library work per
    record, so on 2 shared cores these rows show what the broker itself can take.
Measures produce throughput (1 KiB and 100 B records, acks=1 and acks=all), produce latency at a fixed rate, consume
throughput, broker CPU seconds per GB (/proc/<pid>/stat), broker peak RSS (VmHWM) and the time from process start to
the first acknowledged produce. Prints a Markdown table of per-broker medians over the rounds with Mala/Kafka ratios,
then a second one that shows what limits each throughput row (CPU cores the broker and the clients kept busy, and
the kernel's share of each broker's CPU), and writes every raw number to a JSON file. Nothing is asserted:
docs/performance.md explains the numbers.

  bench/e2e/compare.py            # default: 3 rounds, roughly 10-15 minutes on an idle 2-core machine
  bench/e2e/compare.py --quick    # smoke run: small record counts, 1 round (about 2 minutes)
  bench/e2e/compare.py --only kafka|mala   # one broker only (no ratios)
  bench/e2e/compare.py --from-json results.json   # print an earlier run's table again, run nothing

Needs: build/src/app/mala (or --mala-bin), Apache Kafka's jars in tests/integration/.deps/kafka-libs (from
scripts/install-test-clients.sh, or --kafka-libs), a JDK (java and javac), confluent-kafka, and Go (franzload is
built from its pinned go.mod/go.sum at the start of a run).
"""

import argparse
import base64
import datetime
import glob
import json
import os
import platform
import re
import resource
import shutil
import signal
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
RDKAFKA_LOAD = HERE / "rdkafka_load.py"
ASSIGN_CONSUMER_SRC = HERE / "AssignConsumerPerf.java"
FRANZ_LOAD_SRC = HERE / "franzload"

# kafka-run-class.sh's KAFKA_JVM_PERFORMANCE_OPTS (MaxInlineLevel=15, which older scripts add, is JDK 17's default).
JVM_PERF_OPTS = ["-server", "-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20", "-XX:InitiatingHeapOccupancyPercent=35",
                 "-XX:+ExplicitGCInvokesConcurrent", "-Djava.awt.headless=true"]
KAFKA_SERVER_HEAP = ["-Xmx1G", "-Xms1G"]  # kafka-server-start.sh's default KAFKA_HEAP_OPTS
PERF_TOOL_HEAP = ["-Xmx512M"]  # kafka-producer-perf-test.sh / kafka-consumer-perf-test.sh
# The tools' progress goes to stdout; their INFO logging (slf4j-simple from the test jars) would bury it.
TOOL_LOG_OPTS = ["-Dorg.slf4j.simpleLogger.defaultLogLevel=warn"]

PRODUCER_PERF = "org.apache.kafka.tools.ProducerPerformance"  # kafka-producer-perf-test.sh
CONSUMER_PERF = "org.apache.kafka.tools.ConsumerPerformance"  # kafka-consumer-perf-test.sh
STORAGE_TOOL = "kafka.tools.StorageTool"  # kafka-storage.sh
KAFKA_MAIN = "kafka.Kafka"  # kafka-server-start.sh

# Consumer-group APIs ConsumerPerformance's classic consumer needs: OffsetFetch, FindCoordinator, JoinGroup,
# Heartbeat, SyncGroup.
GROUP_API_KEYS = {9: "OffsetFetch", 10: "FindCoordinator", 11: "JoinGroup", 12: "Heartbeat", 14: "SyncGroup"}

PROFILES = {
    # records of 1 KiB / of 100 B per produce run, fixed-rate latency run, rounds
    # raw_mb: MiB per raw produce run (franzload rawproduce; the raw 1 KiB acks=1 topic is what rawfetch reads)
    "quick": {"rounds": 1, "records_1k": 20_000, "records_100": 100_000, "latency_rate": 1000,
              "latency_seconds": 5, "raw_mb": 256},
    "default": {"rounds": 3, "records_1k": 250_000, "records_100": 1_000_000, "latency_rate": 2000,
                "latency_seconds": 15, "raw_mb": 512},
}
SIZES = (1024, 100)
ACKS = ("1", "all")
MIB = 2**20
GB = 1e9


def log(msg):
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def free_port(taken=()):
    while True:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        if port not in taken:
            return port


def parse_cpus(spec):
    """A CPU list as taskset takes it ("1", "0,2", "2-3"), as a set; None for no list."""
    if not spec:
        return None
    cpus = set()
    for part in spec.split(","):
        lo, _, hi = part.partition("-")
        cpus.update(range(int(lo), int(hi or lo) + 1))
    return cpus


def kafka_uuid():
    """A Kafka cluster id: 16 random bytes, URL-safe base64 without padding (what `kafka-storage random-uuid`
    prints). Never one that starts with "-", which Kafka's Uuid.randomUuid also avoids: the tools would take it
    for an option."""
    while True:
        text = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not text.startswith("-"):
            return text


def clk_tck():
    return os.sysconf("SC_CLK_TCK")


def proc_cpu_times(pid):
    """(utime, stime) in seconds of the whole process (all threads, live and exited) from /proc/<pid>/stat.
    stime holds the kernel's work for the process: its system calls (socket reads, page-cache writes, sendfile)
    and the loopback TCP processing they run."""
    with open(f"/proc/{pid}/stat") as f:
        stat = f.read()
    fields = stat[stat.rfind(")") + 2:].split()
    return int(fields[11]) / clk_tck(), int(fields[12]) / clk_tck()  # fields 14 and 15 of proc(5)


def proc_cpu_seconds(pid):
    return sum(proc_cpu_times(pid))


def proc_status_kb(pid, key):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1])
    return None


def api_versions(port, timeout=5.0):
    """ApiVersions v0 over a raw socket: {api_key: (min, max)}. Used only to see whether the broker serves
    consumer groups (ConsumerPerformance needs them)."""
    client_id = b"mala-bench"
    body = struct.pack(">hhih", 18, 0, 1, len(client_id)) + client_id
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        s.sendall(struct.pack(">i", len(body)) + body)

        def read(n):
            buf = b""
            while len(buf) < n:
                chunk = s.recv(n - len(buf))
                if not chunk:
                    raise ConnectionError("connection closed")
                buf += chunk
            return buf

        size = struct.unpack(">i", read(4))[0]
        data = read(size)
    _corr, err, count = struct.unpack(">ihi", data[:10])
    if err != 0:
        raise RuntimeError(f"ApiVersions error {err}")
    apis = {}
    for i in range(count):
        key, lo, hi = struct.unpack(">hhh", data[10 + 6 * i:16 + 6 * i])
        apis[key] = (lo, hi)
    return apis


def server_properties(port, controller_port, data_dir):
    """The single-node KRaft combined-mode settings of Kafka 4.x's config/server.properties, with static voters,
    loopback listeners and this run's ports and data dir. Mala reads the same file (it takes .properties files
    with Kafka's key names)."""
    return "\n".join([
        "# Written by bench/e2e/compare.py: Kafka 4.x config/server.properties (KRaft combined mode) with this run's",
        "# ports and data dir. Every other setting is the broker default.",
        "process.roles=broker,controller",
        "node.id=1",
        f"controller.quorum.voters=1@127.0.0.1:{controller_port}",
        f"listeners=PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{controller_port}",
        f"advertised.listeners=PLAINTEXT://127.0.0.1:{port}",
        "controller.listener.names=CONTROLLER",
        "inter.broker.listener.name=PLAINTEXT",
        "listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
        "num.network.threads=3",
        "num.io.threads=8",
        "socket.send.buffer.bytes=102400",
        "socket.receive.buffer.bytes=102400",
        "socket.request.max.bytes=104857600",
        f"log.dirs={data_dir}",
        "num.partitions=1",
        "num.recovery.threads.per.data.dir=1",
        "offsets.topic.replication.factor=1",
        "share.coordinator.state.topic.replication.factor=1",
        "share.coordinator.state.topic.min.isr=1",
        "transaction.state.log.replication.factor=1",
        "transaction.state.log.min.isr=1",
        "log.retention.hours=168",
        "log.retention.check.interval.ms=300000",
        "",
    ])


class Env:
    """Paths and programs shared by every run."""

    def __init__(self, args, work):
        self.work = work
        self.mala_bin = Path(args.mala_bin)
        self.kafka_libs = Path(args.kafka_libs)
        self.java = shutil.which("java")
        self.javac = shutil.which("javac")
        jars = sorted(glob.glob(str(self.kafka_libs / "*.jar")))
        self.classpath = ":".join(jars)
        self.python = sys.executable
        self.assign_classes = work / "classes"
        self.go = shutil.which("go") or ("/usr/local/go/bin/go" if os.access("/usr/local/go/bin/go", os.X_OK) else None)
        self.franz_load = work / "franzload"
        # Scripts without --broker-cpus/--client-cpus (compare_groups.py) leave both unset.
        self.broker_cpus = parse_cpus(getattr(args, "broker_cpus", None))
        self.client_cpus = parse_cpus(getattr(args, "client_cpus", None))

    def check(self, brokers):
        problems = []
        if "mala" in brokers and not os.access(self.mala_bin, os.X_OK):
            problems.append(f"mala binary not found at {self.mala_bin} (ninja -C build mala, or --mala-bin)")
        if not self.classpath or not list(self.kafka_libs.glob("kafka_2.13-*.jar")):
            problems.append(f"Apache Kafka jars not found in {self.kafka_libs} (scripts/install-test-clients.sh)")
        if not self.java or not self.javac:
            problems.append("java/javac not on PATH (a JDK 17+)")
        if self.broker_cpus and not shutil.which("taskset"):
            problems.append("--broker-cpus needs taskset (util-linux)")
        try:
            import confluent_kafka  # noqa: F401
        except ImportError:
            problems.append("python package confluent-kafka missing (scripts/install-test-clients.sh)")
        if not self.go:
            problems.append("go not on PATH (scripts/install-test-clients.sh installs it)")
        return problems

    def kafka_version(self):
        jar = next(iter(self.kafka_libs.glob("kafka_2.13-*.jar")), None)
        return jar.stem.split("-", 1)[1] if jar else "?"

    def compile_java_tool(self, src):
        """Compiles one of bench/e2e's Java tools against the Kafka jars into self.assign_classes (java_cmd's
        extra_cp)."""
        self.assign_classes.mkdir(parents=True, exist_ok=True)
        subprocess.run([self.javac, "-nowarn", "-d", str(self.assign_classes), "-cp", self.classpath, str(src)],
                       check=True, capture_output=True, text=True, timeout=300)

    def compile_assign_consumer(self):
        self.compile_java_tool(ASSIGN_CONSUMER_SRC)

    def build_franz_load(self):
        # -mod=readonly: the versions are the ones go.mod and go.sum pin, from the Go module proxy.
        subprocess.run([self.go, "build", "-trimpath", "-o", str(self.franz_load), "."], cwd=FRANZ_LOAD_SRC,
                       env={**os.environ, "GOFLAGS": "-mod=readonly -buildvcs=false"}, check=True,
                       capture_output=True, text=True, timeout=600)

    def java_cmd(self, main_class, args, heap=PERF_TOOL_HEAP, extra_cp=None):
        cp = self.classpath + (":" + str(extra_cp) if extra_cp else "")
        return [self.java, *heap, *JVM_PERF_OPTS, *TOOL_LOG_OPTS, "-cp", cp, main_class, *args]


class Broker:
    """One broker process with its own ports, config and data dir under the run's work dir."""

    name = "?"

    def __init__(self, env, tag):
        self.env = env
        self.dir = env.work / tag
        self.dir.mkdir(parents=True)
        self.data_dir = self.dir / "data"
        self.port = free_port()
        self.controller_port = free_port({self.port})
        self.config_path = self.dir / "server.properties"
        self.config_path.write_text(server_properties(self.port, self.controller_port, self.data_dir))
        self.log_path = self.dir / "broker.log"
        self.proc = None
        self._log = None

    @property
    def bootstrap(self):
        return f"127.0.0.1:{self.port}"

    def prepare(self):
        """Work done before the clock starts (Kafka: formatting the storage)."""

    def command(self):
        raise NotImplementedError

    def spawn(self):
        self._log = open(self.log_path, "ab")
        # --broker-cpus: the broker runs on those CPUs only. taskset sets the affinity and execs the broker (same
        # pid), so the JVM's availableProcessors and Mala's default shard count see the narrowed set. (Not a
        # preexec_fn: the start-up probe's librdkafka threads are alive while the broker is spawned.)
        cpus = self.env.broker_cpus
        pin = ["taskset", "-c", ",".join(map(str, sorted(cpus)))] if cpus else []
        self.proc = subprocess.Popen([*pin, *self.command()], stdin=subprocess.DEVNULL, stdout=self._log,
                                     stderr=subprocess.STDOUT, cwd=self.dir, start_new_session=True)

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def cpu_seconds(self):
        return proc_cpu_seconds(self.proc.pid)

    def cpu_times(self):
        return proc_cpu_times(self.proc.pid)

    def peak_rss_kb(self):
        return proc_status_kb(self.proc.pid, "VmHWM")

    def stop(self, timeout=60):
        """SIGTERM and wait (a broker's clean shutdown); SIGKILL after `timeout`. Returns the exit code."""
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=30)
        if self._log:
            self._log.close()
        return self.proc.returncode

    def log_tail(self, lines=25, pattern=None):
        try:
            text = self.log_path.read_text(errors="replace").splitlines()
        except FileNotFoundError:
            return ""
        if pattern:
            text = [ln for ln in text if re.search(pattern, ln)]
        return "\n".join(text[-lines:])

    def cleanup(self):
        shutil.rmtree(self.data_dir, ignore_errors=True)


class MalaBroker(Broker):
    name = "mala"

    def command(self):
        return [str(self.env.mala_bin), "--config", str(self.config_path)]


class KafkaBroker(Broker):
    name = "kafka"
    format_args = ()  # more arguments of kafka-storage format, e.g. ("--feature", "transaction.version=1")

    def prepare(self):
        # kafka-storage.sh format -t <id> -c server.properties (static voters, so no --standalone).
        cmd = self.env.java_cmd(STORAGE_TOOL, ["format", "-t", kafka_uuid(), "-c", str(self.config_path),
                                               *self.format_args], heap=["-Xmx512M"])
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
        if r.returncode != 0:
            raise RuntimeError(f"kafka-storage format failed ({r.returncode}): {r.stdout[-2000:]}{r.stderr[-2000:]}")

    def command(self):
        # kafka-server-start.sh: -Xmx1G -Xms1G, kafka-run-class.sh's JVM options and its GC log (-loggc).
        gc_log = f"-Xlog:gc*:file={self.dir / 'kafkaServer-gc.log'}:time,tags:filecount=10,filesize=100M"
        return [self.env.java, *KAFKA_SERVER_HEAP, *JVM_PERF_OPTS, gc_log, "-cp", self.env.classpath, KAFKA_MAIN,
                str(self.config_path)]


def time_to_first_produce(broker, timeout=120.0):
    """Spawns the broker and returns the seconds from just before spawn to the delivery report of the first
    acknowledged record (acks=all, topic auto-created, as a client finds a fresh broker). The librdkafka producer
    is created before the spawn, with reconnect/metadata backoffs of a few ms, so client set-up is not counted and
    the polling adds at most a few ms."""
    from confluent_kafka import Producer
    import logging
    quiet = logging.getLogger("bench-startup")
    quiet.addHandler(logging.NullHandler())
    quiet.propagate = False
    p = Producer({"bootstrap.servers": broker.bootstrap, "acks": "all", "linger.ms": 0,
                  "reconnect.backoff.ms": 1, "reconnect.backoff.max.ms": 5,
                  "topic.metadata.refresh.fast.interval.ms": 5, "retry.backoff.ms": 1, "retry.backoff.max.ms": 5,
                  "message.timeout.ms": int(timeout * 1000), "logger": quiet})
    done = []
    t0 = time.perf_counter()
    broker.spawn()
    p.produce("bench-startup", b"first", on_delivery=lambda err, msg: done.append((err, time.perf_counter())))
    while not done:
        p.poll(0.001)
        if not broker.alive():
            raise RuntimeError(f"broker exited with code {broker.proc.returncode} during start-up")
        if time.perf_counter() - t0 > timeout + 5:
            raise RuntimeError(f"no acknowledged produce within {timeout} s")
    err, t1 = done[0]
    p.flush(5)
    if err is not None:
        raise RuntimeError(f"first produce failed: {err}")
    return t1 - t0


def create_topics(broker, names, partitions, timeout=60.0):
    from confluent_kafka.admin import AdminClient, NewTopic
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    futures = admin.create_topics([NewTopic(n, partitions, 1) for n in names], operation_timeout=30)
    for name, fut in futures.items():
        fut.result(timeout=timeout)
    deadline = time.monotonic() + timeout
    while True:  # every partition has a leader in the metadata
        md = admin.list_topics(timeout=10)
        ready = all(n in md.topics and md.topics[n].error is None and len(md.topics[n].partitions) == partitions
                    and all(pm.leader >= 0 for pm in md.topics[n].partitions.values()) for n in names)
        if ready:
            return
        if time.monotonic() > deadline:
            raise RuntimeError(f"topics {names} have no leaders after {timeout} s")
        time.sleep(0.05)


def create_topics_once_serving(broker, names, partitions, timeout=120.0):
    """create_topics once the broker just spawned serves (its listeners open, its controller elected)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            create_topics(broker, names, partitions, timeout=10)
            return
        except Exception as e:  # noqa: BLE001 (not up yet)
            if time.monotonic() > deadline or not broker.alive():
                raise RuntimeError(f"{broker.name} did not start ({e}): {broker.log_tail()}") from e
            time.sleep(0.5)


def session_median(sessions, broker, row, field):
    """A single-node comparison's median of `field` in `row` over the sessions of `broker` ("mala" or "kafka");
    None when no session has it (compare_tls.py, compare_sasl.py)."""
    vals = [s["rows"][row][field] for s in sessions if s["broker"] == broker and row in s["rows"]
            and s["rows"][row].get(field) is not None]
    return statistics.median(vals) if vals else None


class RatioTable:
    """A Markdown table of Mala against Kafka: one row per figure, fn(broker) giving each side, and their ratio."""

    def __init__(self, default_fmt="{:.2f}"):
        self.lines = ["| Row | Mala | Kafka | Mala/Kafka |", "| --- | ---: | ---: | ---: |"]
        self.default_fmt = default_fmt

    def row(self, label, fn, fmt=None):
        fmt = fmt or self.default_fmt
        m, k = fn("mala"), fn("kafka")
        ratio = f"{m / k:.2f}x" if m is not None and k else ""
        show = (lambda v: fmt.format(v) if v is not None else "")
        self.lines.append(f"| {label} | {show(m)} | {show(k)} | {ratio} |")

    def text(self):
        return "\n".join(self.lines)


def add_listener(broker, protocol, settings=()):
    """Adds a listener named after its security protocol (SSL, SASL_PLAINTEXT) on a port of its own to `broker`'s
    server.properties, listed and advertised after PLAINTEXT, with `settings` (property lines) appended; returns
    the port (compare_tls.py, compare_sasl.py)."""
    port = free_port({broker.port, broker.controller_port})
    text = broker.config_path.read_text()
    text = text.replace(f"listeners=PLAINTEXT://127.0.0.1:{broker.port},",
                        f"listeners=PLAINTEXT://127.0.0.1:{broker.port},{protocol}://127.0.0.1:{port},")
    text = text.replace(f"advertised.listeners=PLAINTEXT://127.0.0.1:{broker.port}",
                        f"advertised.listeners=PLAINTEXT://127.0.0.1:{broker.port},{protocol}://127.0.0.1:{port}")
    text = text.replace("listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
                        f"listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,{protocol}:{protocol}")
    text += "\n".join([*settings, ""])
    broker.config_path.write_text(text)
    return port


def alternating_sessions(classes, rounds, run_session):
    """run_session(cls, round) for every broker class each round, their order reversed every other round (so that
    neither always runs first on a machine that warms up or slows down); the sessions in run order."""
    sessions = []
    for r in range(rounds):
        for cls in (classes if r % 2 == 0 else list(reversed(classes))):
            sessions.append(run_session(cls, r))
    return sessions


def save_and_print(results, args, work, render):
    """Writes a single-node comparison's raw results (--json, else the run's work dir) and prints its table."""
    out = Path(args.json) if args.json else work / "results.json"
    out.write_text(json.dumps(results, indent=1))
    print(render(results))
    print(f"\nraw results: {out}")


def add_single_node_args(ap):
    """The options of the single-node comparisons (compare_tls.py, compare_metrics.py) besides their counts."""
    ap.add_argument("--quick", action="store_true", help="1 round, small counts")
    ap.add_argument("--rounds", type=int)
    ap.add_argument("--mala-bin", default=str(REPO / "build" / "src" / "app" / "mala"))
    ap.add_argument("--kafka-libs", default=str(REPO / "tests" / "integration" / ".deps" / "kafka-libs"))
    ap.add_argument("--json", help="write all raw results here")
    ap.add_argument("--from-json", help="run nothing: print the table of an earlier run")


PRODUCER_PERF_RE = re.compile(
    r"(\d+) records sent, ([\d.]+) records/sec \(([\d.]+) MB/sec\), ([\d.]+) ms avg latency, ([\d.]+) ms max "
    r"latency, (\d+) ms 50th, (\d+) ms 95th, (\d+) ms 99th, (\d+) ms 99\.9th")


def children_cpu_seconds():
    """User + system CPU seconds of every child process this harness has waited for (and of theirs)."""
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def run_checked(cmd, timeout, what, broker):
    """Runs a client program to completion. Stops it (its whole process group) when it overruns `timeout` or when
    the broker dies under it, so a crashed broker costs seconds, not the clients' own long retry timeouts."""
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=out, stderr=err, text=True,
                                start_new_session=True)
        deadline = time.monotonic() + timeout
        problem = None
        while True:
            try:
                proc.wait(timeout=0.2)
                break
            except subprocess.TimeoutExpired:
                pass
            if not broker.alive():
                problem = f"{what}: stopped, the broker exited with code {broker.proc.returncode}"
            elif time.monotonic() > deadline:
                problem = f"{what}: no result within {timeout} s"
            if problem:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
                break
        out.seek(0)
        err.seek(0)
        r = subprocess.CompletedProcess(cmd, proc.returncode, out.read(), err.read())
    if problem:
        raise RuntimeError(f"{problem}; output: {short(r.stdout + r.stderr, 400)}")
    return r


def short(text, n=600):
    text = text.strip()
    return text if len(text) <= n else "..." + text[-n:]


def producer_perf(env, broker, topic, records, size, throughput, props, timeout):
    args = ["--bootstrap-server", broker.bootstrap, "--topic", topic, "--num-records", str(records),
            "--record-size", str(size), "--throughput", str(throughput), "--command-property", *props]
    r = run_checked(env.java_cmd(PRODUCER_PERF, args), timeout, "ProducerPerformance", broker)
    m = None
    for line in r.stdout.splitlines():
        mm = PRODUCER_PERF_RE.search(line)
        if mm:
            m = mm  # the last summary line (warm-up runs print more than one)
    if r.returncode != 0 or m is None or int(m.group(1)) != records:
        raise RuntimeError(f"ProducerPerformance exit {r.returncode}: {short(r.stdout + r.stderr)}")
    return {"records": int(m.group(1)), "records_per_sec": float(m.group(2)), "mb_per_sec": float(m.group(3)),
            "p50_ms": float(m.group(6)), "p99_ms": float(m.group(8)), "p999_ms": float(m.group(9)),
            "bytes": records * size}


def consumer_perf(env, broker, topic, records, timeout):
    args = ["--bootstrap-server", broker.bootstrap, "--topic", topic, "--num-records", str(records),
            "--group", f"bench-perf-{uuid.uuid4().hex[:8]}", "--timeout", "15000"]
    r = run_checked(env.java_cmd(CONSUMER_PERF, args), timeout, "ConsumerPerformance", broker)
    rows = [ln.split(",") for ln in r.stdout.splitlines() if ln.count(",") == 9 and not ln.startswith("start.time")]
    if r.returncode != 0 or not rows:
        raise RuntimeError(f"ConsumerPerformance exit {r.returncode}: {short(r.stdout + r.stderr)}")
    f = [x.strip() for x in rows[-1]]
    # start.time, end.time, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, nMsg.sec, rebalance.time.ms,
    # fetch.time.ms, fetch.MB.sec, fetch.nMsg.sec
    consumed = int(f[4])
    if consumed < records:
        raise RuntimeError(f"ConsumerPerformance read {consumed} of {records} records: {short(r.stdout + r.stderr)}")
    return {"records": consumed, "bytes": int(float(f[2]) * MIB), "mb_per_sec": float(f[8]),
            "records_per_sec": float(f[9]), "mb_per_sec_with_rebalance": float(f[3]),
            "rebalance_ms": float(f[6])}


def assign_consumer(env, broker, topic, records, timeout):
    r = run_checked(env.java_cmd("AssignConsumerPerf", [broker.bootstrap, topic, str(records), "15000"],
                                 extra_cp=env.assign_classes), timeout, "AssignConsumerPerf", broker)
    m = re.search(r"records=(\d+) bytes=(\d+) seconds=([\d.]+)", r.stdout)
    if r.returncode != 0 or m is None:
        raise RuntimeError(f"AssignConsumerPerf exit {r.returncode}: {short(r.stdout + r.stderr)}")
    n, b, s = int(m.group(1)), int(m.group(2)), float(m.group(3))
    return {"records": n, "bytes": b, "seconds": s, "mb_per_sec": b / s / MIB, "records_per_sec": n / s}


def json_tool(cmd, timeout, what, broker):
    """Runs a load tool that prints one JSON object last on stdout (rdkafka_load.py, franzload)."""
    r = run_checked(cmd, timeout, what, broker)
    try:
        res = json.loads(r.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        raise RuntimeError(f"{what} exit {r.returncode}: {short(r.stdout + r.stderr)}")
    if r.returncode != 0 or res.get("error"):
        raise RuntimeError(f"{what}: {res.get('error')} {short(r.stderr, 300)}")
    return res


def tool_args(kw):
    return [a for k, v in kw.items() for a in (f"--{k}", str(v))]


def rdkafka(env, mode, broker, topic, timeout, **kw):
    cmd = [env.python, str(RDKAFKA_LOAD), mode, "--bootstrap", broker.bootstrap, "--topic", topic, *tool_args(kw)]
    return json_tool(cmd, timeout, f"rdkafka_load {mode}", broker)


def franz(env, mode, broker, topic, timeout, **kw):
    cmd = [str(env.franz_load), mode, "--bootstrap", broker.bootstrap, "--topic", topic,
           "--timeout", f"{int(timeout)}s", *tool_args(kw)]
    return json_tool(cmd, timeout, f"franzload {mode}", broker)


def run_session(env, broker_cls, round_no, prof, args):
    """One broker start: every workload once. Returns (metrics, errors, info)."""
    broker = broker_cls(env, f"round{round_no}-{broker_cls.name}")
    metrics, errors, info = {}, [], {"bootstrap": broker.bootstrap, "loadavg_start": os.getloadavg()}
    produce_cpu = [0.0, 0]  # broker CPU seconds, bytes, over the max-throughput produce runs
    consume_cpu = [0.0, 0]
    timeout = args.step_timeout

    def step(key, fn, cpu_acc=None):
        if not broker.alive():
            errors.append(f"{key}: not run, broker exited with code {broker.proc.returncode}")
            return
        log(f"  {broker.name} round {round_no}: {key}")
        user0, sys0 = broker.cpu_times()
        wall0, children0 = time.monotonic(), children_cpu_seconds()
        try:
            res = fn()
        except Exception as e:  # one failed workload must not hide the others
            msg = str(e)
            if not broker.alive():
                msg += f" (broker exited with code {broker.proc.returncode})"
            errors.append(f"{key}: {msg}")
            log(f"    FAILED: {short(msg, 300)}")
            return
        if res is None:
            return
        user1, sys1 = broker.cpu_times()
        cpu = (user1 - user0) + (sys1 - sys0)
        res["broker_cpu_s"] = cpu
        res["broker_sys_s"] = sys1 - sys0
        # The clients are this harness's children, each waited for: their CPU (threads and their own children
        # included) is the growth of RUSAGE_CHILDREN over the step, start-up included.
        res["step_wall_s"] = time.monotonic() - wall0
        res["client_cpu_s"] = children_cpu_seconds() - children0
        metrics[key] = res
        if cpu_acc is not None and res.get("bytes"):
            cpu_acc[0] += cpu
            cpu_acc[1] += res["bytes"]
        log("    " + ", ".join(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}" for k, v in res.items()
                               if k in ("mb_per_sec", "records_per_sec", "p50_ms", "p99_ms", "p999_ms",
                                        "broker_cpu_s")))

    try:
        broker.prepare()
        try:
            secs = time_to_first_produce(broker)
            metrics["startup"] = {"seconds": secs}
            log(f"  {broker.name} round {round_no}: first produce acknowledged {secs * 1000:.0f} ms after spawn")
        except Exception as e:
            errors.append(f"startup: {e}")
            log(f"    FAILED start-up: {e}")
            if not broker.alive():
                return metrics, errors, info_with_log(info, broker)

        topics = {}
        for size in SIZES:
            for acks in ACKS:
                topics[("java", size, acks)] = f"java-{size}b-acks{acks}"
                topics[("rd", size, acks)] = f"rd-{size}b-acks{acks}"
                topics[("franz", size, acks)] = f"franz-{size}b-acks{acks}"
                topics[("raw", size, acks)] = f"raw-{size}b-acks{acks}"
        topics["java-latency"] = "java-latency"
        topics["rd-latency"] = "rd-latency"
        try:
            create_topics(broker, sorted(topics.values()), args.partitions)
        except Exception as e:
            errors.append(f"create topics: {e}")

        n_for = {1024: prof["records_1k"], 100: prof["records_100"]}
        for size in SIZES:
            for acks in ACKS:
                step(f"java_produce_{size}b_acks{acks}",
                     lambda size=size, acks=acks: producer_perf(env, broker, topics[("java", size, acks)],
                                                                n_for[size], size, -1, [f"acks={acks}"], timeout),
                     produce_cpu)
        for size in SIZES:
            for acks in ACKS:
                step(f"rd_produce_{size}b_acks{acks}",
                     lambda size=size, acks=acks: rdkafka(env, "produce", broker, topics[("rd", size, acks)], timeout,
                                                          records=n_for[size], size=size, acks=acks,
                                                          procs=args.rd_procs),
                     produce_cpu)
        for size in SIZES:
            for acks in ACKS:
                step(f"franz_produce_{size}b_acks{acks}",
                     lambda size=size, acks=acks: franz(env, "produce", broker, topics[("franz", size, acks)],
                                                        timeout, records=n_for[size], size=size, acks=acks),
                     produce_cpu)

        rate, secs = prof["latency_rate"], prof["latency_seconds"]
        step("java_latency",
             lambda: producer_perf(env, broker, topics["java-latency"], int(rate * secs), 1024, rate,
                                   ["acks=all", "linger.ms=0"], timeout))
        step("rd_latency",
             lambda: rdkafka(env, "latency", broker, topics["rd-latency"], timeout, rate=rate, seconds=secs,
                             size=1024, acks="all"))

        consume_topic = topics[("java", 1024, "1")]
        n = prof["records_1k"]

        def group_consume():
            try:
                apis = api_versions(broker.port)
            except Exception as e:
                raise RuntimeError(f"ApiVersions probe failed: {e}")
            missing = [name for key, name in GROUP_API_KEYS.items() if key not in apis]
            if missing:
                info.setdefault("skipped", []).append(
                    f"java_consume_group: ConsumerPerformance subscribe()s, and the broker does not advertise "
                    f"{'/'.join(missing)} (consumer groups)")
                log(f"    skipped: broker has no consumer-group APIs ({', '.join(missing)})")
                return None
            return consumer_perf(env, broker, consume_topic, n, timeout)

        step("java_consume_group", group_consume, consume_cpu)
        step("java_consume_assign", lambda: assign_consumer(env, broker, consume_topic, n, timeout), consume_cpu)
        step("rd_consume", lambda: rdkafka(env, "consume", broker, consume_topic, timeout, procs=args.rd_procs),
             consume_cpu)
        step("franz_consume", lambda: franz(env, "consume", broker, consume_topic, timeout), consume_cpu)
        # The raw runs come last. They are not in the CPU-per-GB sums: they move several times the bytes of the
        # client runs and would swamp them (each row still records its own broker CPU seconds). Each produce run
        # starts, outside the measured time, with sync(2) and, when this process may (root), with the clean page
        # cache dropped: on this VM, writing into memory the guest has not touched for a while costs several
        # times more than writing into recycled page cache (the host backs guest memory lazily), and gigabytes
        # written back to back reach the kernel's dirty-page limits; without this the rows measured the VM's
        # memory rather than the broker. The raw fetch reads the first raw topic right after it was written.
        def raw_produce(size, acks):
            os.sync()
            try:
                Path("/proc/sys/vm/drop_caches").write_text("1\n")
                info["raw_page_cache_dropped"] = True
            except OSError:
                info["raw_page_cache_dropped"] = False
            return franz(env, "rawproduce", broker, topics[("raw", size, acks)], timeout,
                         records=prof["raw_mb"] * MIB // size, size=size, acks=acks)

        for size in SIZES:
            for acks in ACKS:
                step(f"raw_produce_{size}b_acks{acks}", lambda size=size, acks=acks: raw_produce(size, acks))
                if (size, acks) == (1024, "1"):
                    step("raw_fetch",
                         lambda: franz(env, "rawfetch", broker, topics[("raw", 1024, "1")], timeout))

        if produce_cpu[1]:
            metrics["cpu_produce"] = {"s_per_gb": produce_cpu[0] / (produce_cpu[1] / GB), "bytes": produce_cpu[1]}
        if consume_cpu[1]:
            metrics["cpu_consume"] = {"s_per_gb": consume_cpu[0] / (consume_cpu[1] / GB), "bytes": consume_cpu[1]}
        if broker.alive():
            metrics["rss"] = {"peak_mb": broker.peak_rss_kb() / 1024.0}
        return metrics, errors, info_with_log(info, broker)
    finally:
        alive = broker.alive()
        code = broker.stop()
        info["exit_code"] = code
        info["loadavg_end"] = os.getloadavg()
        if not alive:
            errors.append(f"broker was not running at the end (exit code {code}); log tail:\n"
                          f"{broker.log_tail(30)}")
        if not args.keep:
            broker.cleanup()


def load_range(sessions):
    """1-minute load averages seen at session starts and ends: other work on the machine shows up here."""
    loads = [s["info"][k][0] for s in sessions for k in ("loadavg_start", "loadavg_end") if k in s["info"]]
    return f"{min(loads):.1f}-{max(loads):.1f}" if loads else "?"


def info_with_log(info, broker):
    info["log"] = str(broker.log_path)
    return info


# --- report -------------------------------------------------------------------------------------------------------

def median(vals):
    vals = [v for v in vals if v is not None]
    return statistics.median(vals) if vals else None


def collect(sessions, broker, key, field):
    return median([s["metrics"].get(key, {}).get(field) for s in sessions if s["broker"] == broker])


def fmt_num(v, unit=""):
    if v is None:
        return "—"
    if abs(v) >= 100:
        s = f"{v:,.0f}"
    elif abs(v) >= 10:
        s = f"{v:.1f}"
    else:
        s = f"{v:.2f}"
    return s + unit


def report_rows(prof, args):
    rows = []  # (label, metric key, field, unit, better, target, secondary field); unit "ms-int": whole ms
    for client, cname in (("java", "ProducerPerformance"), ("rd", "librdkafka"), ("franz", "franz-go"),
                          ("raw", "raw Produce requests")):
        for size in SIZES:
            for acks in ACKS:
                sz = "1 KiB" if size == 1024 else "100 B"
                rows.append((f"Produce {sz}, acks={acks}, MB/s (records/s) — {cname}",
                             f"{client}_produce_{size}b_acks{acks}", "mb_per_sec", "", "higher", "≥ 2",
                             "records_per_sec"))
    rate = prof["latency_rate"]
    for client, cname in (("java", "ProducerPerformance"), ("rd", "librdkafka")):
        for field, q in (("p50_ms", "p50"), ("p99_ms", "p99"), ("p999_ms", "p99.9")):
            rows.append((f"Produce latency {q} ms @ {rate:,} rec/s, 1 KiB, acks=all — {cname}",
                         f"{client}_latency", field, "ms-int" if client == "java" else "", "lower",
                         "≤ 0.5" if q == "p99" else "", None))
    # librdkafka's own split of that latency (statistics, medians of 1 s windows): the broker round trip of its
    # requests, and the records' wait in the producer's queue before they were sent.
    for field, what in (("rtt_p50_ms", "broker round trip p50 (median of 1 s windows)"),
                        ("rtt_p99_ms", "broker round trip p99 (median of 1 s windows)"),
                        ("rtt_p99_max_ms", "broker round trip p99 (largest 1 s window)"),
                        ("queue_p99_ms", "wait in the producer's queue p99 (median of 1 s windows)")):
        rows.append((f"  of which {what}, ms — librdkafka statistics", "rd_latency", field, "", "lower", "", None))
    rows.append(("Consume MB/s — ConsumerPerformance (group, fetch.MB.sec)", "java_consume_group", "mb_per_sec", "",
                 "higher", "≥ 2", None))
    rows.append(("Consume MB/s — Java consumer, assign()", "java_consume_assign", "mb_per_sec", "", "higher", "≥ 2",
                 None))
    rows.append(("Consume MB/s — librdkafka, assign()", "rd_consume", "mb_per_sec", "", "higher", "≥ 2", None))
    rows.append(("Consume MB/s — franz-go, assign()", "franz_consume", "mb_per_sec", "", "higher", "≥ 2", None))
    rows.append(("Consume MB/s — raw Fetch requests (record batch bytes)", "raw_fetch", "mb_per_sec", "", "higher",
                 "≥ 2", None))
    rows.append(("Broker CPU s per GB produced", "cpu_produce", "s_per_gb", "", "lower", "", None))
    rows.append(("Broker CPU s per GB consumed", "cpu_consume", "s_per_gb", "", "lower", "", None))
    rows.append(("Broker peak RSS MiB (VmHWM)", "rss", "peak_mb", "", "lower", "≤ 0.1", None))
    rows.append(("Start to first acknowledged produce, ms", "startup", "seconds", "", "lower", "< 100 ms", None))
    return rows


def render_table(sessions, prof, args, brokers):
    lines = ["| Metric (median of rounds) | Mala | Kafka | Mala/Kafka | Better | Issue 4 target |",
             "| --- | ---: | ---: | ---: | --- | --- |"]
    skipped = {}
    for s in sessions:
        for msg in s["info"].get("skipped", []):
            skipped.setdefault((s["broker"], msg.split(":", 1)[0]), msg)
    for label, key, field, unit, better, target, second in report_rows(prof, args):
        cells = []
        vals = {}
        for b in ("mala", "kafka"):
            if b not in brokers:
                cells.append("not run")
                vals[b] = None
                continue
            v = collect(sessions, b, key, field)
            if key == "startup" and v is not None:
                v *= 1000.0
            vals[b] = v
            if v is None:
                if (b, key) in skipped:
                    cells.append("n/a (no consumer groups)")
                else:
                    cells.append("FAILED" if any(e.startswith(key) for s in sessions if s["broker"] == b
                                                 for e in s["errors"]) else "—")
                continue
            # ProducerPerformance prints whole milliseconds: 0 means "under 1 ms".
            txt = "< 1" if unit == "ms-int" and v < 0.5 else fmt_num(v)
            if second:
                txt += f" ({fmt_num(collect(sessions, b, key, second))})"
            cells.append(txt)
        if vals["mala"] is None or not vals["kafka"]:
            ratio = "—"
        elif unit == "ms-int" and vals["mala"] < 0.5:
            ratio = f"< {1.0 / vals['kafka']:.2f}"
        else:
            ratio = f"{vals['mala'] / vals['kafka']:.2f}"
        lines.append(f"| {label} | {cells[0]} | {cells[1]} | {ratio} | {better} | {target} |")
    return "\n".join(lines)


def measured_seconds(res):
    """How long the client's measured phase took: its own figure, or bytes over the rate it printed."""
    if res.get("seconds"):
        return res["seconds"]
    if res.get("bytes") and res.get("mb_per_sec"):
        return res["bytes"] / (res["mb_per_sec"] * MIB)
    return None


def busy_cores(sessions, broker, key):
    """Medians over the rounds of (broker CPU / measured phase, client CPU / whole step, the kernel's share of
    the broker's CPU) for one workload."""
    broker_cores, client_cores, kernel_share = [], [], []
    for s in sessions:
        res = s["metrics"].get(key) if s["broker"] == broker else None
        if not res:
            continue
        secs = measured_seconds(res)
        if secs and "broker_cpu_s" in res:
            broker_cores.append(res["broker_cpu_s"] / secs)
        if res.get("step_wall_s") and "client_cpu_s" in res:
            client_cores.append(res["client_cpu_s"] / res["step_wall_s"])
        if res.get("broker_cpu_s") and "broker_sys_s" in res:
            kernel_share.append(res["broker_sys_s"] / res["broker_cpu_s"])
    return median(broker_cores), median(client_cores), median(kernel_share)


def render_bound_table(sessions, prof, args, brokers):
    """Which side limits each throughput row: CPU cores the broker kept busy during the measured phase, the
    clients' CPU cores over the whole step (their start-up, e.g. the JVM's, included), and how much of each
    broker's CPU was the kernel's (system time: socket and page-cache copies, loopback TCP)."""
    lines = ["| Workload (median of rounds) | Mala broker cores | Kafka broker cores | clients' cores with Mala | "
             "clients' cores with Kafka | kernel share of Mala's CPU | kernel share of Kafka's CPU |",
             "| --- | ---: | ---: | ---: | ---: | ---: | ---: |"]
    any_value = False
    for label, key, field, unit, better, target, second in report_rows(prof, args):
        if field != "mb_per_sec":
            continue
        cells = {}
        for b in ("mala", "kafka"):
            cells[b] = busy_cores(sessions, b, key) if b in brokers else (None, None, None)
        values = [cells["mala"][0], cells["kafka"][0], cells["mala"][1], cells["kafka"][1], cells["mala"][2],
                  cells["kafka"][2]]
        any_value = any_value or any(v is not None for v in values)
        name = label.replace(", MB/s (records/s)", "").replace(" MB/s", "")
        lines.append(f"| {name} | " + " | ".join(fmt_num(v) for v in values[:4]) + " | " +
                     " | ".join("—" if v is None else f"{v:.0%}" for v in values[4:]) + " |")
    return "\n".join(lines) if any_value else ""


def machine_info(env):
    cpu = "?"
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    jv = subprocess.run([env.java, "-version"], capture_output=True, text=True).stderr.splitlines()
    import confluent_kafka
    return {"cpus": os.cpu_count(), "cpu_model": cpu, "kernel": platform.release(),
            "mem_gb": round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30, 1),
            "java": jv[0] if jv else "?", "kafka": env.kafka_version(),
            "confluent_kafka": confluent_kafka.version()[0], "librdkafka": confluent_kafka.libversion()[0],
            "broker_cpus": sorted(env.broker_cpus) if env.broker_cpus else None,
            "client_cpus": sorted(env.client_cpus) if env.client_cpus else None,
            "mala_bin_mtime": datetime.datetime.fromtimestamp(env.mala_bin.stat().st_mtime).isoformat(
                timespec="seconds") if env.mala_bin.exists() else None}


def profile_from_args(args, profiles, keys):
    """The --quick or the default profile, with the `keys` given on the command line in place of its values."""
    prof = dict(profiles["quick" if args.quick else "default"])
    for k in keys:
        if getattr(args, k) is not None:
            prof[k] = getattr(args, k)
    return prof


def run_setup(args, prefix):
    """(brokers, work dir, Env) of a run from --only, --work-dir (default: a new temp dir named `prefix`...) and
    --client-cpus, which this process takes on so that every client it starts inherits it."""
    brokers = [args.only] if args.only else ["mala", "kafka"]
    work = Path(args.work_dir) if args.work_dir else Path(tempfile.mkdtemp(prefix=prefix))
    work.mkdir(parents=True, exist_ok=True)
    env = Env(args, work)
    if env.client_cpus:
        os.sched_setaffinity(0, env.client_cpus)  # inherited by every client process (and go build, javac)
    return brokers, work, env


def exit_on_problems(env, brokers, script, needs_go=True):
    """Exits with status 2, saying why, when something a run needs is missing (Env.check)."""
    problems = [p for p in env.check(brokers) if needs_go or not p.startswith("go ")]
    for p in problems:
        print(f"{script}: {p}", file=sys.stderr)
    if problems:
        sys.exit(2)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="smoke run: small record counts, 1 round")
    ap.add_argument("--rounds", type=int, help="rounds (each starts both brokers once, order alternating)")
    ap.add_argument("--records-1k", type=int, help="records per 1 KiB produce run")
    ap.add_argument("--records-100", type=int, help="records per 100 B produce run")
    ap.add_argument("--raw-mb", type=int, help="MiB per raw produce run")
    ap.add_argument("--latency-rate", type=int, help="records/s of the fixed-rate latency runs")
    ap.add_argument("--latency-seconds", type=float, help="duration of the fixed-rate latency runs")
    ap.add_argument("--partitions", type=int, default=2, help="partitions per benchmark topic (default 2)")
    ap.add_argument("--rd-procs", type=int, default=2, help="librdkafka producer/consumer processes (default 2)")
    ap.add_argument("--only", choices=["mala", "kafka"], help="run one broker only")
    ap.add_argument("--broker-cpus", help="run the broker on these CPUs only (taskset syntax, e.g. 1)")
    ap.add_argument("--client-cpus", help="run this harness and every client on these CPUs only (e.g. 0)")
    ap.add_argument("--mala-bin", default=str(REPO / "build" / "src" / "app" / "mala"))
    ap.add_argument("--kafka-libs", default=str(REPO / "tests" / "integration" / ".deps" / "kafka-libs"))
    ap.add_argument("--work-dir", help="where configs, logs and data go (default: a new temp dir)")
    ap.add_argument("--json", help="write all raw results here (default: <work dir>/results.json)")
    ap.add_argument("--markdown", help="also write the table here")
    ap.add_argument("--keep", action="store_true", help="keep the brokers' data dirs")
    ap.add_argument("--step-timeout", type=float, default=600, help="seconds any one workload may take")
    ap.add_argument("--from-json", help="run nothing: print the table of an earlier run's results.json")
    args = ap.parse_args()
    if args.from_json:
        return print_report(json.loads(Path(args.from_json).read_text()), args.from_json, args)

    prof = profile_from_args(args, PROFILES, ("rounds", "records_1k", "records_100", "latency_rate",
                                              "latency_seconds", "raw_mb"))
    brokers, work, env = run_setup(args, "mala-bench-e2e-")
    exit_on_problems(env, brokers, "compare.py")
    env.compile_assign_consumer()
    env.build_franz_load()
    machine = machine_info(env)
    log(f"work dir {work}; profile {prof}; partitions {args.partitions}; brokers {brokers}")

    sessions = []
    started = time.time()
    classes = {"mala": MalaBroker, "kafka": KafkaBroker}
    for rnd in range(1, prof["rounds"] + 1):
        order = brokers if rnd % 2 == 1 else list(reversed(brokers))
        for b in order:
            log(f"round {rnd}/{prof['rounds']}: {b}")
            t = time.time()
            metrics, errors, info = run_session(env, classes[b], rnd, prof, args)
            info["seconds"] = time.time() - t
            sessions.append({"broker": b, "round": rnd, "metrics": metrics, "errors": errors, "info": info})

    out = {"machine": machine, "profile": prof, "partitions": args.partitions, "rd_procs": args.rd_procs,
           "brokers": brokers, "started": datetime.datetime.fromtimestamp(started).isoformat(timespec="seconds"),
           "elapsed_s": time.time() - started, "sessions": sessions}
    json_path = Path(args.json) if args.json else work / "results.json"
    json_path.write_text(json.dumps(out, indent=1, default=str))
    return print_report(out, json_path, args)


def print_report(out, json_path, args):
    """The table (and failures) from a results dict: used at the end of a run and by --from-json."""
    machine, prof, sessions = out["machine"], out["profile"], out["sessions"]
    table = render_table(sessions, prof, args, out["brokers"])
    print()
    print(f"Mala vs Apache Kafka {machine['kafka']}, single node, {prof['rounds']} round(s), "
          f"{out['partitions']} partitions per topic; {machine['cpus']} CPUs ({machine['cpu_model']}); "
          f"elapsed {out['elapsed_s'] / 60:.1f} min; load average {load_range(sessions)}")
    if machine.get("broker_cpus") or machine.get("client_cpus"):
        print(f"CPUs: broker on {machine.get('broker_cpus') or 'any'}, clients on {machine.get('client_cpus') or 'any'}")
    print()
    print(table)
    bound = render_bound_table(sessions, prof, args, out["brokers"])
    if bound:
        print("\nWhat limits each throughput row (broker cores: during the client's measured phase; clients' "
              "cores: over the whole step, start-up included; kernel share: system time of the broker's CPU):\n")
        print(bound)
    all_errors = [(s["broker"], s["round"], e) for s in sessions for e in s["errors"]]
    if all_errors:
        print("\nFailures:")
        for b, r, e in all_errors:
            print(f"- {b} round {r}: {e}")
    print(f"\nRaw results: {json_path}")
    if args.markdown:
        Path(args.markdown).write_text(table + "\n" + (f"\n{bound}\n" if bound else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
