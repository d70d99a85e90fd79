#!/usr/bin/env python3
"""Partition scale: one Mala node against one Apache Kafka 4.x node with thousands of partitions (issue 20).

For each partition count (default 1,000 / 10,000 / 20,000), each broker in turn, on this machine, with the same
server.properties as bench/e2e/compare.py (Kafka 4.x's single-node KRaft file, fresh data dir, free ports):
  1. start (fresh) and wait until it answers Metadata;
  2. CreateTopics: topics of --topic-partitions partitions each (the last one smaller), in CreateTopics requests of
     at most 5,000 partitions (Kafka refuses more than 10,000 per request) sent one after the other through
     confluent-kafka's AdminClient; timed from the first request until Metadata shows a leader for every
     partition (what kafka-topics.sh --create followed by a describe would wait for);
  3. one record produced to every partition (librdkafka, acks=all), so the logs are not empty at restart;
  4. idle: after --settle seconds, RSS (VmRSS), open file descriptors, memory maps and threads of the broker
     process, and its CPU use over --idle-seconds with nothing to do;
  5. Metadata for all topics (librdkafka list_topics, median of 3);
  6. clean restart (SIGTERM, then start): seconds from spawn until a record produced to the last partition of
     the last topic is acknowledged (the first produce waits for the broker to load every log and serve), and RSS
     then;
  7. crash restart (SIGKILL, then start): the same after a kill -9 (Kafka and Mala both run log recovery).
Then, separately (fresh brokers): produce latency at a fixed rate (--latency-rate records/s for
--latency-seconds, acks=all, 100 B, keyless so librdkafka spreads the records over every partition) into one
topic of --latency-partitions partitions (default 10,000), p50/p99/p99.9 from bench/e2e/rdkafka_load.py.

Prints a Markdown table with Mala/Kafka ratios and writes the raw numbers to <work dir>/results.json. Nothing is
asserted. Both brokers get the soft open-files limit raised to --nofile (Kafka's docs ask for a high nofile; a
broker keeps a descriptor per segment), capped by what the process may set.

  bench/e2e/compare_partition_scale.py                       # 1k/10k/20k, both brokers (about 25 minutes)
  bench/e2e/compare_partition_scale.py --sizes 1000,10000 --only mala
  bench/e2e/compare_partition_scale.py --from-json results.json
  bench/e2e/compare_partition_scale.py --from-json mala.json kafka.json   # two one-broker runs, one table

Needs: build/src/app/mala (or --mala-bin), Kafka's jars in tests/integration/.deps/kafka-libs, java, confluent-kafka.
"""

import argparse
import datetime
import json
import os
import resource
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import compare  # noqa: E402  (the brokers, their configs and process helpers are compare.py's)

log = compare.log


def quiet_logger():
    import logging
    q = logging.getLogger("bench-partition-scale")
    q.addHandler(logging.NullHandler())
    q.propagate = False
    return q


def raise_nofile(target):
    """preexec_fn for the brokers: the soft limit of open files up to `target` (the hard limit too when this
    process may raise it, as root may)."""
    def apply():
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, target), max(hard, target)))
        except (ValueError, OSError):
            resource.setrlimit(resource.RLIMIT_NOFILE, (min(max(soft, target), hard), hard))
    return apply


class ScaleBrokerMixin:
    """compare.py's brokers, spawned with a raised nofile limit and restartable on the same data dir."""

    nofile = 200_000

    def spawn(self):
        self._log = open(self.log_path, "ab")
        self.proc = subprocess.Popen(self.command(), stdin=subprocess.DEVNULL, stdout=self._log,
                                     stderr=subprocess.STDOUT, cwd=self.dir, start_new_session=True,
                                     preexec_fn=raise_nofile(self.nofile))

    def kill9(self):
        self.proc.kill()
        self.proc.wait(timeout=60)
        if self._log:
            self._log.close()


class MalaScale(ScaleBrokerMixin, compare.MalaBroker):
    pass


class KafkaScale(ScaleBrokerMixin, compare.KafkaBroker):
    pass


def admin(broker):
    from confluent_kafka.admin import AdminClient
    return AdminClient({"bootstrap.servers": broker.bootstrap, "logger": quiet_logger()})


def wait_metadata(broker, timeout):
    deadline = time.monotonic() + timeout
    while True:
        if not broker.alive():
            raise RuntimeError(f"{broker.name} exited with {broker.proc.returncode}:\n{broker.log_tail()}")
        try:
            admin(broker).list_topics(timeout=2)
            return
        except Exception:
            if time.monotonic() > deadline:
                raise RuntimeError(f"{broker.name} not answering after {timeout} s:\n{broker.log_tail()}")
            time.sleep(0.05)


def topic_layout(total, per_topic):
    """[(name, partitions)] totalling `total` partitions, at most `per_topic` each."""
    out, i = [], 0
    while total > 0:
        n = min(per_topic, total)
        out.append((f"scale-{i}", n))
        total -= n
        i += 1
    return out


def leaders_ready(broker, layout):
    md = admin(broker).list_topics(timeout=30)
    for name, n in layout:
        t = md.topics.get(name)
        if t is None or t.error is not None or len(t.partitions) != n:
            return False
        if any(p.leader < 0 for p in t.partitions.values()):
            return False
    return True


# Partitions per CreateTopics request: Kafka's controller refuses a request of more than 10,000 partitions
# (and a batch of more than 10,000 records, a topic record included), so larger layouts go in several requests.
PARTITIONS_PER_REQUEST = 5000


def create_topics_timed(broker, layout, timeout):
    """CreateTopics of at most PARTITIONS_PER_REQUEST partitions each; a topic larger than that is created with
    that many and grown by CreatePartitions requests of as many more."""
    from confluent_kafka.admin import NewPartitions, NewTopic
    a = admin(broker)  # referenced until the answer: destroying the client fails the futures
    requests, current, size = [], [], 0
    growth = []  # (topic, total after the request)
    for name, n in layout:
        first = min(n, PARTITIONS_PER_REQUEST)
        if current and size + first > PARTITIONS_PER_REQUEST:
            requests.append(current)
            current, size = [], 0
        current.append((name, first))
        size += first
        growth += [(name, min(n, total)) for total in range(2 * first, n + first, first)]
    if current:
        requests.append(current)
    t0 = time.perf_counter()
    for request in requests:
        futures = a.create_topics([NewTopic(n, p, 1) for n, p in request], operation_timeout=timeout,
                                  request_timeout=timeout)
        for _, fut in futures.items():
            fut.result(timeout=timeout)
    for name, total in growth:
        for _, fut in a.create_partitions([NewPartitions(name, total)], operation_timeout=timeout,
                                          request_timeout=timeout).items():
            fut.result(timeout=timeout)
    del a
    deadline = time.monotonic() + timeout
    while not leaders_ready(broker, layout):
        if time.monotonic() > deadline:
            raise RuntimeError(f"partitions without a leader after {timeout} s")
        time.sleep(0.1)
    return time.perf_counter() - t0


def produce_everywhere(broker, layout, timeout):
    """One record to every partition, acks=all; returns seconds."""
    from confluent_kafka import Producer
    p = Producer({"bootstrap.servers": broker.bootstrap, "acks": "all", "linger.ms": 20,
                  "queue.buffering.max.messages": 1_000_000, "message.timeout.ms": int(timeout * 1000),
                  "logger": quiet_logger()})
    errors = []
    t0 = time.perf_counter()
    for name, n in layout:
        for part in range(n):
            p.produce(name, b"v", key=b"k", partition=part,
                      on_delivery=lambda err, msg: err is not None and errors.append(err))
        p.poll(0)
    left = p.flush(timeout)
    if left or errors:
        raise RuntimeError(f"produce to every partition: {left} not delivered, errors {errors[:3]}")
    return time.perf_counter() - t0


def proc_count(pid, what):
    try:
        return len(os.listdir(f"/proc/{pid}/{what}"))
    except OSError:
        return None


def map_count(pid):
    with open(f"/proc/{pid}/maps") as f:
        return sum(1 for _ in f)


def idle_stats(broker, settle, seconds):
    time.sleep(settle)
    pid = broker.proc.pid
    c0, t0 = broker.cpu_seconds(), time.monotonic()
    time.sleep(seconds)
    cpu = (broker.cpu_seconds() - c0) / (time.monotonic() - t0)
    return {"rss_mb": compare.proc_status_kb(pid, "VmRSS") / 1024, "fds": proc_count(pid, "fd"),
            "maps": map_count(pid), "threads": proc_count(pid, "task"), "idle_cpu_pct": 100 * cpu}


def metadata_seconds(broker, rounds=3):
    a = admin(broker)
    times = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        md = a.list_topics(timeout=60)
        times.append(time.perf_counter() - t0)
    return statistics.median(times), sum(len(t.partitions) for t in md.topics.values())


def restart_to_ready(broker, layout, timeout):
    """Spawns the broker (data dir kept) and returns seconds from spawn to the acknowledgement of a record
    produced to the last partition of the last topic."""
    from confluent_kafka import Producer
    name, n = layout[-1]
    p = Producer({"bootstrap.servers": broker.bootstrap, "acks": "all", "linger.ms": 0,
                  "reconnect.backoff.ms": 5, "reconnect.backoff.max.ms": 20,
                  "topic.metadata.refresh.fast.interval.ms": 20, "retry.backoff.ms": 5, "retry.backoff.max.ms": 20,
                  "message.timeout.ms": int(timeout * 1000), "logger": quiet_logger()})
    done = []
    t0 = time.perf_counter()
    broker.spawn()
    p.produce(name, b"after-restart", partition=n - 1,
              on_delivery=lambda err, msg: done.append((err, time.perf_counter())))
    while not done:
        p.poll(0.005)
        if not broker.alive():
            raise RuntimeError(f"{broker.name} exited with {broker.proc.returncode} during start-up:\n"
                               f"{broker.log_tail()}")
        if time.perf_counter() - t0 > timeout + 5:
            raise RuntimeError(f"no acknowledged produce within {timeout} s")
    err, t1 = done[0]
    if err is not None:
        raise RuntimeError(f"first produce after restart failed: {err}")
    return t1 - t0


def run_size(env, cls, size, args):
    broker = cls(env, f"{cls.name}-{size}")
    layout = topic_layout(size, args.topic_partitions)
    res = {}
    try:
        broker.prepare()
        t0 = time.perf_counter()
        broker.spawn()
        wait_metadata(broker, args.timeout)
        res["fresh_start_s"] = time.perf_counter() - t0
        log(f"{broker.name} {size}: creating {len(layout)} topics")
        res["create_topics_s"] = create_topics_timed(broker, layout, args.timeout)
        res["produce_all_s"] = produce_everywhere(broker, layout, args.timeout)
        res.update(idle_stats(broker, args.settle, args.idle_seconds))
        res["metadata_s"], res["metadata_partitions"] = metadata_seconds(broker)
        log(f"{broker.name} {size}: {res}")
        stop_t0 = time.perf_counter()
        res["stop_exit"] = broker.stop(timeout=args.timeout)
        res["stop_s"] = time.perf_counter() - stop_t0
        res["clean_restart_s"] = restart_to_ready(broker, layout, args.timeout)
        time.sleep(args.settle)
        res["rss_after_restart_mb"] = compare.proc_status_kb(broker.proc.pid, "VmRSS") / 1024
        broker.kill9()
        res["crash_restart_s"] = restart_to_ready(broker, layout, args.timeout)
        log(f"{broker.name} {size}: restarts clean {res['clean_restart_s']:.2f} s, "
            f"kill -9 {res['crash_restart_s']:.2f} s")
    except Exception as e:  # noqa: BLE001  (a failed size is reported, the run goes on)
        res["error"] = str(e)[-2000:]
        log(f"{broker.name} {size}: FAILED {res['error'][-600:]}")
    finally:
        broker.stop(timeout=args.timeout)
        if not args.keep:
            broker.cleanup()
    return res


def run_latency(env, cls, args):
    broker = cls(env, f"{cls.name}-latency")
    layout = [("latency", args.latency_partitions)]
    res = {}
    try:
        broker.prepare()
        broker.spawn()
        wait_metadata(broker, args.timeout)
        res["create_topics_s"] = create_topics_timed(broker, layout, args.timeout)
        cmd = [sys.executable, str(compare.RDKAFKA_LOAD), "latency", "--bootstrap", broker.bootstrap,
               "--topic", "latency", "--rate", str(args.latency_rate), "--seconds", str(args.latency_seconds),
               "--size", "100", "--acks", "all"]
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=args.latency_seconds + args.timeout)
        out = json.loads(r.stdout.strip().splitlines()[-1])
        res.update(out)
        log(f"{broker.name} latency: {out}")
    except Exception as e:  # noqa: BLE001
        res["error"] = str(e)[-2000:]
        log(f"{broker.name} latency: FAILED {res['error'][-600:]}")
    finally:
        broker.stop(timeout=args.timeout)
        if not args.keep:
            broker.cleanup()
    return res


ROWS = [
    ("create_topics_s", "CreateTopics until every partition has a leader (s)", "{:.2f}"),
    ("fresh_start_s", "fresh start until Metadata answers (s)", "{:.2f}"),
    ("rss_mb", "RSS idle, one record per partition (MiB)", "{:.0f}"),
    ("fds", "open file descriptors", "{:.0f}"),
    ("maps", "memory maps", "{:.0f}"),
    ("threads", "threads", "{:.0f}"),
    ("idle_cpu_pct", "CPU while idle (% of one core)", "{:.1f}"),
    ("metadata_s", "Metadata of all topics, librdkafka (s)", "{:.3f}"),
    ("stop_s", "SIGTERM until exit (s)", "{:.2f}"),
    ("clean_restart_s", "clean restart until a produce is acknowledged (s)", "{:.2f}"),
    ("rss_after_restart_mb", "RSS after the clean restart (MiB)", "{:.0f}"),
    ("crash_restart_s", "kill -9 restart until a produce is acknowledged (s)", "{:.2f}"),
]
LATENCY_ROWS = [("p50_ms", "p50 (ms)"), ("p99_ms", "p99 (ms)"), ("p999_ms", "p99.9 (ms)")]


def cell(v, fmt):
    return "-" if v is None else fmt.format(v)


def ratio(m, k):
    if m is None or k is None or k == 0:
        return "-"
    return f"{m / k:.3g}x"


def render(out):
    brokers, sizes = out["brokers"], out["sizes"]
    both = len(brokers) == 2
    lines = []
    head = ["partitions", "measure"] + brokers + (["Mala/Kafka"] if both else [])
    lines.append("| " + " | ".join(head) + " |")
    lines.append("|" + "---|" * len(head))
    for size in sizes:
        for key, label, fmt in ROWS:
            vals = [out["results"].get(b, {}).get(str(size), {}).get(key) for b in brokers]
            row = [f"{size:,}", label] + [cell(v, fmt) for v in vals]
            if both:
                row.append(ratio(vals[0], vals[1]))
            lines.append("| " + " | ".join(row) + " |")
    lat = out.get("latency") or {}
    if lat:
        for key, label in LATENCY_ROWS:
            vals = [lat.get(b, {}).get(key) for b in brokers]
            row = [f"{out['latency_partitions']:,}",
                   f"produce {label}, {out['latency_rate']} rec/s acks=all for {out['latency_seconds']} s"]
            row += [cell(v, "{:.1f}") for v in vals]
            if both:
                row.append(ratio(vals[0], vals[1]))
            lines.append("| " + " | ".join(row) + " |")
    errors = [(b, s, r["error"]) for b in brokers for s, r in out["results"].get(b, {}).items() if "error" in r]
    errors += [(b, "latency", r["error"]) for b, r in lat.items() if "error" in r]
    table = "\n".join(lines)
    if errors:
        table += "\n\nFailures:\n" + "\n".join(f"- {b} {s}: {e[-400:]}" for b, s, e in errors)
    return table


def merge(runs):
    """One results dict from runs of one broker each (e.g. --only mala and --only kafka)."""
    out = dict(runs[0])
    out["results"], out["latency"] = {}, {}
    for run in runs:
        for b, r in run["results"].items():
            out["results"].setdefault(b, {}).update(r)
        out["latency"].update(run.get("latency") or {})
    order = ["mala", "kafka"]
    out["brokers"] = [b for b in order if b in out["results"]]
    out["sizes"] = sorted({s for run in runs for s in run["sizes"]})
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="1000,10000,20000", help="total partitions per run, comma-separated")
    ap.add_argument("--topic-partitions", type=int, default=1000, help="partitions per topic (default 1000)")
    ap.add_argument("--latency-partitions", type=int, default=10000, help="0 skips the latency run")
    ap.add_argument("--latency-rate", type=int, default=2000)
    ap.add_argument("--latency-seconds", type=float, default=20)
    ap.add_argument("--settle", type=float, default=5, help="seconds before the idle measurements")
    ap.add_argument("--idle-seconds", type=float, default=10, help="seconds of idle CPU measurement")
    ap.add_argument("--nofile", type=int, default=200_000, help="open-files limit for both brokers")
    ap.add_argument("--timeout", type=float, default=300, help="seconds any one step may take")
    ap.add_argument("--only", choices=["mala", "kafka"])
    ap.add_argument("--mala-bin", default=str(compare.REPO / "build" / "src" / "app" / "mala"))
    ap.add_argument("--kafka-libs", default=str(compare.REPO / "tests" / "integration" / ".deps" / "kafka-libs"))
    ap.add_argument("--work-dir")
    ap.add_argument("--json")
    ap.add_argument("--keep", action="store_true")
    ap.add_argument("--from-json", nargs="+", metavar="FILE",
                    help="run nothing: print the table of earlier runs (several files: one broker's each, merged)")
    args = ap.parse_args()
    if args.from_json:
        print(render(merge([json.loads(Path(f).read_text()) for f in args.from_json])))
        return 0
    args.broker_cpus = args.client_cpus = None
    ScaleBrokerMixin.nofile = args.nofile
    brokers = [args.only] if args.only else ["mala", "kafka"]
    sizes = [int(s) for s in args.sizes.split(",") if s]
    work = Path(args.work_dir) if args.work_dir else Path(tempfile.mkdtemp(prefix="mala-bench-scale-"))
    work.mkdir(parents=True, exist_ok=True)
    env = compare.Env(args, work)
    problems = [p for p in env.check(brokers) if not p.startswith("go ")]  # no Go load tool here
    if problems:
        print("\n".join(problems), file=sys.stderr)
        return 2
    classes = {"mala": MalaScale, "kafka": KafkaScale}
    started = time.time()
    out = {"machine": compare.machine_info(env), "brokers": brokers, "sizes": sizes,
           "latency_partitions": args.latency_partitions, "latency_rate": args.latency_rate,
           "latency_seconds": args.latency_seconds,
           "started": datetime.datetime.fromtimestamp(started).isoformat(timespec="seconds"),
           "results": {b: {} for b in brokers}, "latency": {}}
    json_path = Path(args.json) if args.json else work / "results.json"
    log(f"work dir {work}; sizes {sizes}; brokers {brokers}")
    for size in sizes:
        for b in brokers:
            out["results"][b][str(size)] = run_size(env, classes[b], size, args)
            json_path.write_text(json.dumps(out, indent=1, default=str))
    if args.latency_partitions > 0:
        for b in brokers:
            out["latency"][b] = run_latency(env, classes[b], args)
    out["elapsed_s"] = time.time() - started
    json_path.write_text(json.dumps(out, indent=1, default=str))
    m = out["machine"]
    print(f"\nMala vs Apache Kafka {m.get('kafka')}, single node, partition scale; {m.get('cpus')} CPUs; "
          f"elapsed {out['elapsed_s'] / 60:.1f} min\n")
    print(render(out))
    print(f"\nRaw results: {json_path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
