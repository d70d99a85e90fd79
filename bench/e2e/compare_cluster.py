#!/usr/bin/env python3
"""Three-node comparison of Mala with Apache Kafka 4.x on this machine.

Runs one cluster at a time: three Kafka nodes, then three Mala nodes (or the other order on alternate rounds), each
node in KRaft combined mode with the same server.properties apart from node id and ports (static voters, default
replication settings, RF 3, min.insync.replicas 2), and measures with Apache Kafka's ProducerPerformance (the class
kafka-producer-perf-test.sh runs):
  - RF-3 acks=all produce throughput at full speed (1 KiB records), and the CPU seconds all three nodes used;
  - RF-3 acks=all latency (p50 / p99 / p99.9) at a fixed rate;
  - time to recover leadership after SIGKILL of a partition leader: from the kill until an acks=all produce to
    that partition is acknowledged again (the controller must notice the dead broker: broker.session.timeout.ms,
    9 s by default, the same for both).
Prints a Markdown table of medians with Mala/Kafka ratios and writes the raw numbers to JSON. Nothing is asserted.

  bench/e2e/compare_cluster.py --quick     # about 5 minutes
  bench/e2e/compare_cluster.py             # 2 rounds, about 15 minutes

Needs what compare.py needs (build/src/app/mala, Kafka's jars from scripts/install-test-clients.sh, a JDK,
confluent-kafka).
"""

import argparse
import datetime
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import compare  # noqa: E402  (the single-node comparison: Env, ports, ProducerPerformance parsing)

PROFILES = {
    "quick": {"rounds": 1, "records": 60_000, "latency_rate": 1000, "latency_seconds": 10, "failovers": 1},
    "default": {"rounds": 2, "records": 300_000, "latency_rate": 2000, "latency_seconds": 20, "failovers": 2},
}
TOPIC = "bench-rf3"
PARTITIONS = 6


def cluster_properties(node_id, ports, data_dir):
    """compare.py's server.properties (Kafka 4.x's KRaft combined-mode file) for one node of the three: its node
    id, all three voters, replication factor 3 and min.insync.replicas 2."""
    port, controller_port = ports[node_id]
    overrides = {
        "node.id": str(node_id),
        "controller.quorum.voters": ",".join(f"{n}@127.0.0.1:{ports[n][1]}" for n in sorted(ports)),
        "default.replication.factor": "3",
        "min.insync.replicas": "2",
        "offsets.topic.replication.factor": "3",
        "share.coordinator.state.topic.replication.factor": "3",
        "share.coordinator.state.topic.min.isr": "2",
        "transaction.state.log.replication.factor": "3",
        "transaction.state.log.min.isr": "2",
        "group.initial.rebalance.delay.ms": "0",
    }
    lines = []
    for line in compare.server_properties(port, controller_port, data_dir).splitlines():
        key = line.split("=", 1)[0]
        lines.append(f"{key}={overrides.pop(key)}" if key in overrides else line)
    lines += [f"{k}={v}" for k, v in overrides.items()]
    return "\n".join(lines).replace("compare.py", "compare_cluster.py", 1) + "\n"


class Node(compare.Broker):
    """One node of a cluster; `kind` is mala or kafka."""

    def __init__(self, env, tag, kind, node_id, ports, cluster_id):
        self.env = env
        self.kind = kind
        self.name = kind
        self.node_id = node_id
        self.cluster_id = cluster_id
        self.dir = env.work / tag
        self.dir.mkdir(parents=True)
        self.data_dir = self.dir / "data"
        self.port, self.controller_port = ports[node_id]
        self.config_path = self.dir / "server.properties"
        text = cluster_properties(node_id, ports, self.data_dir)
        if kind == "mala":
            text += f"cluster.id={cluster_id}\n"
        self.config_path.write_text(text)
        self.log_path = self.dir / "broker.log"
        self.proc = None
        self._log = None

    def prepare(self):
        if self.kind == "kafka":
            cmd = self.env.java_cmd(compare.STORAGE_TOOL, ["format", "-t", self.cluster_id, "-c",
                                                           str(self.config_path)], heap=["-Xmx512M"])
            r = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
            if r.returncode != 0:
                raise RuntimeError(f"kafka-storage format failed: {r.stdout[-2000:]}{r.stderr[-2000:]}")

    def command(self):
        if self.kind == "mala":
            return [str(self.env.mala_bin), "--config", str(self.config_path)]
        return [self.env.java, *compare.KAFKA_SERVER_HEAP, *compare.JVM_PERF_OPTS, "-cp", self.env.classpath,
                compare.KAFKA_MAIN, str(self.config_path)]

    def kill(self):
        if self.alive():
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(30)


class Cluster:
    """Three nodes; `bootstrap` names them all. Quacks like compare.Broker for run_checked (alive, proc)."""

    def __init__(self, env, kind, round_no):
        taken = set()
        ports = {}
        for n in (1, 2, 3):
            p = compare.free_port(taken)
            taken.add(p)
            c = compare.free_port(taken)
            taken.add(c)
            ports[n] = (p, c)
        cluster_id = compare.kafka_uuid()
        self.kind = kind
        self.name = kind
        self.nodes = {n: Node(env, f"{kind}-r{round_no}-node{n}", kind, n, ports, cluster_id) for n in (1, 2, 3)}
        self.proc = None

    @property
    def bootstrap(self):
        return ",".join(n.bootstrap for n in self.nodes.values())

    def alive(self):
        return sum(n.alive() for n in self.nodes.values()) >= 2

    def log_tail(self, lines=25, pattern=None):
        return "\n".join(f"--- node {i} ---\n{n.log_tail(lines, pattern)}" for i, n in self.nodes.items())

    def start(self):
        for n in self.nodes.values():
            n.prepare()
        for n in self.nodes.values():
            n.spawn()
        self.proc = self.nodes[1].proc

    def cpu_seconds(self):
        return sum(n.cpu_seconds() for n in self.nodes.values() if n.alive())

    def peak_rss_kb(self):
        return sum(n.peak_rss_kb() or 0 for n in self.nodes.values() if n.alive())

    def stop(self):
        for n in self.nodes.values():
            n.stop(timeout=60)

    def cleanup(self):
        for n in self.nodes.values():
            n.cleanup()


def admin(bootstrap):
    from confluent_kafka.admin import AdminClient
    return AdminClient({"bootstrap.servers": bootstrap, "socket.timeout.ms": 5000, "log_level": 2})


def create_rf3_topic(cluster, timeout=120):
    """Waits for all three brokers, then CreateTopics (never a Metadata naming the topic first: that would
    auto-create it with num.partitions)."""
    from confluent_kafka.admin import NewTopic
    deadline = time.monotonic() + timeout
    while True:
        try:
            if len(admin(cluster.bootstrap).list_topics(timeout=10).brokers) == 3:
                break
        except Exception:  # noqa: BLE001 - still starting
            pass
        if time.monotonic() > deadline:
            raise RuntimeError(f"three brokers not registered after {timeout} s:\n{cluster.log_tail(10)}")
        time.sleep(0.5)
    while True:
        try:
            a = admin(cluster.bootstrap)
            f = a.create_topics([NewTopic(TOPIC, num_partitions=PARTITIONS, replication_factor=3,
                                          config={"min.insync.replicas": "2"})], request_timeout=10)
            f[TOPIC].result(timeout=15)
        except Exception as e:  # noqa: BLE001 - the cluster may still be electing / registering
            if "already exists" not in str(e) and time.monotonic() > deadline:
                raise
        try:
            md = admin(cluster.bootstrap).list_topics(timeout=10)
            t = md.topics[TOPIC]
            if t.error is None and len(t.partitions) == PARTITIONS and \
                    all(len(p.isrs) == 3 and p.leader >= 0 for p in t.partitions.values()):
                return
        except Exception:  # noqa: BLE001
            pass
        if time.monotonic() > deadline:
            raise RuntimeError(f"{TOPIC} not fully replicated after {timeout} s:\n{cluster.log_tail(10)}")
        time.sleep(0.5)


def leader_of(bootstrap, partition):
    md = admin(bootstrap).list_topics(timeout=10)
    return md.topics[TOPIC].partitions[partition].leader


def failover_seconds(cluster, partition=0, timeout=90):
    """SIGKILL of the partition's leader; seconds until an acks=all produce to the partition is acknowledged."""
    from confluent_kafka import Producer
    victim = leader_of(cluster.bootstrap, partition)
    survivors = ",".join(n.bootstrap for i, n in cluster.nodes.items() if i != victim)
    producer = Producer({"bootstrap.servers": survivors, "acks": "all", "linger.ms": 0,
                         "message.timeout.ms": 5000, "socket.timeout.ms": 3000, "log_level": 2,
                         "enable.idempotence": False, "retries": 0})
    cluster.nodes[victim].kill()
    killed = time.monotonic()
    while time.monotonic() - killed < timeout:
        outcome = {}
        producer.produce(TOPIC, value=b"failover-probe", partition=partition,
                         on_delivery=lambda err, msg: outcome.setdefault("err", err))
        producer.flush(6)
        if outcome.get("err", "none") is None:
            elapsed = time.monotonic() - killed
            break
        time.sleep(0.05)
    else:
        raise RuntimeError(f"no acks=all produce to {TOPIC}-{partition} within {timeout} s of the kill")
    # Back to three nodes for the next measurement.
    cluster.nodes[victim].spawn()
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        try:
            md = admin(cluster.bootstrap).list_topics(timeout=10)
            if all(len(p.isrs) == 3 for p in md.topics[TOPIC].partitions.values()):
                break
        except Exception:  # noqa: BLE001
            pass
        time.sleep(0.5)
    return elapsed


def run_cluster(env, kind, round_no, prof, step_timeout):
    cluster = Cluster(env, kind, round_no)
    compare.log(f"round {round_no}: starting a 3-node {kind} cluster")
    cluster.start()
    result = {"kind": kind, "round": round_no}
    try:
        create_rf3_topic(cluster)
        props = ["acks=all", "linger.ms=5", "batch.size=65536"]
        compare.producer_perf(env, cluster, TOPIC, max(prof["records"] // 10, 5000), 1024, -1, props, step_timeout)
        cpu0 = cluster.cpu_seconds()
        tp = compare.producer_perf(env, cluster, TOPIC, prof["records"], 1024, -1, props, step_timeout)
        tp["cpu_seconds"] = cluster.cpu_seconds() - cpu0
        tp["cpu_s_per_gb"] = tp["cpu_seconds"] / (tp["bytes"] / 1e9)
        result["throughput"] = tp
        compare.log(f"  {kind}: {tp['records_per_sec']:.0f} rec/s, {tp['mb_per_sec']:.1f} MB/s acks=all RF 3")
        rate = prof["latency_rate"]
        lat = compare.producer_perf(env, cluster, TOPIC, int(rate * prof["latency_seconds"]), 1024, rate,
                                    ["acks=all", "linger.ms=0"], step_timeout)
        result["latency"] = lat
        compare.log(f"  {kind}: at {rate}/s p50 {lat['p50_ms']} ms, p99 {lat['p99_ms']} ms, p99.9 {lat['p999_ms']} ms")
        result["rss_kb"] = cluster.peak_rss_kb()
        result["failover_s"] = []
        for _ in range(prof["failovers"]):
            s = failover_seconds(cluster)
            result["failover_s"].append(s)
            compare.log(f"  {kind}: leadership recovered {s:.2f} s after SIGKILL of the leader")
    finally:
        cluster.stop()
        cluster.cleanup()
    return result


def median(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def table(results):
    def pick(kind, f):
        return median([f(r) for r in results if r["kind"] == kind and "throughput" in r])
    rows = [
        ("acks=all RF 3 throughput (records/s, 1 KiB)", lambda r: r["throughput"]["records_per_sec"], "higher"),
        ("acks=all RF 3 throughput (MB/s)", lambda r: r["throughput"]["mb_per_sec"], "higher"),
        ("CPU seconds per GB produced (3 nodes)", lambda r: r["throughput"]["cpu_s_per_gb"], "lower"),
        ("p50 latency at fixed rate (ms)", lambda r: r["latency"]["p50_ms"], "lower"),
        ("p99 latency at fixed rate (ms)", lambda r: r["latency"]["p99_ms"], "lower"),
        ("p99.9 latency at fixed rate (ms)", lambda r: r["latency"]["p999_ms"], "lower"),
        ("peak RSS, 3 nodes (MiB)", lambda r: r["rss_kb"] / 1024, "lower"),
        ("leadership recovery after SIGKILL (s)", lambda r: median(r["failover_s"]), "lower"),
    ]
    out = ["| metric | Kafka | Mala | Mala/Kafka |", "|---|---|---|---|"]
    for name, f, _ in rows:
        k, m = pick("kafka", f), pick("mala", f)
        ratio = f"{m / k:.2f}" if k and m is not None else "-"
        out.append(f"| {name} | {k if k is None else round(k, 2)} | {m if m is None else round(m, 2)} | {ratio} |")
    return "\n".join(out)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--rounds", type=int)
    ap.add_argument("--only", choices=["mala", "kafka"])
    ap.add_argument("--mala-bin", default=str(compare.REPO / "build" / "src" / "app" / "mala"))
    ap.add_argument("--kafka-libs", default=str(compare.REPO / "tests" / "integration" / ".deps" / "kafka-libs"))
    ap.add_argument("--json", help="write the raw results here")
    ap.add_argument("--step-timeout", type=float, default=600)
    args = ap.parse_args()
    prof = dict(PROFILES["quick" if args.quick else "default"])
    if args.rounds:
        prof["rounds"] = args.rounds
    work = Path(tempfile.mkdtemp(prefix="mala-cluster-bench-"))
    env = compare.Env(args, work)
    kinds = [args.only] if args.only else ["kafka", "mala"]
    problems = env.check(kinds)
    if problems:
        sys.exit("\n".join(problems))
    results = []
    for r in range(prof["rounds"]):
        for kind in (kinds if r % 2 == 0 else list(reversed(kinds))):
            try:
                results.append(run_cluster(env, kind, r, prof, args.step_timeout))
            except Exception as e:  # noqa: BLE001 - report and go on with the other cluster
                compare.log(f"round {r} {kind} failed: {e}")
                results.append({"kind": kind, "round": r, "error": str(e)})
    out = {"date": datetime.datetime.now().isoformat(timespec="seconds"), "profile": prof,
           "kafka_version": env.kafka_version(), "machine": compare.machine_info(env), "results": results}
    path = Path(args.json) if args.json else work / "results.json"
    path.write_text(json.dumps(out, indent=2))
    print(table(results))
    print(f"\nraw results: {path}")


if __name__ == "__main__":
    main()
