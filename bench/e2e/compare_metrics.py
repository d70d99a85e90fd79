#!/usr/bin/env python3
"""What the metrics endpoint costs (issue 24: < 2 % of produce throughput at full load, scraped every second vs
off). One Mala node, compare.py's single-node server.properties, started twice per round, in alternating order:

  off      no metrics.listeners (nothing is served and nothing counted)
  scraped  metrics.listeners set (the shards count), and GET /metrics every second from this harness while the
           load runs

Each session creates the measured topic (8 partitions) and, so that a scrape carries a realistic number of
per-partition series, --idle-partitions more in another topic; then Apache Kafka's ProducerPerformance produces
1 KiB records at full speed (acks=1), and the broker's CPU seconds per GB are taken from /proc/<pid>/stat. The table
holds medians and the scraped/off ratios; the raw numbers go to a JSON file. Nothing is asserted:
docs/performance.md reads the numbers.

  bench/e2e/compare_metrics.py                       # 3 rounds
  bench/e2e/compare_metrics.py --quick               # 1 round, small counts
  bench/e2e/compare_metrics.py --from-json run.json  # the table of an earlier run

Needs what compare.py needs for the Java tools (the Kafka jars, a JDK, confluent-kafka for topic creation).
"""

import argparse
import datetime
import json
import statistics
import sys
import tempfile
import threading
import time
import urllib.request
import uuid
from pathlib import Path

import compare

PROFILES = {
    "quick": {"rounds": 1, "records": 200_000, "idle_partitions": 200},
    "default": {"rounds": 3, "records": 2_000_000, "idle_partitions": 1000},
}


def with_metrics_listener(base):
    """A broker class of compare.py whose server.properties also sets metrics.listeners on a port of its own."""

    class Scraped(base):
        def __init__(self, env, tag):
            super().__init__(env, tag)
            self.metrics_port = compare.free_port({self.port, self.controller_port})
            with self.config_path.open("a") as f:
                f.write(f"\nmetrics.listeners=http://127.0.0.1:{self.metrics_port}\n")

    Scraped.name = "scraped"
    return Scraped


class Plain(compare.MalaBroker):
    name = "off"


class Scraper:
    """GET /metrics every `interval` seconds on a thread until stopped; counts scrapes and their sizes and times."""

    def __init__(self, port, interval=1.0):
        self.port, self.interval = port, interval
        self.count, self.bytes, self.seconds, self.errors = 0, 0, [], []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self):
        while not self._stop.is_set():
            t0 = time.monotonic()
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/metrics", timeout=10) as r:
                    body = r.read()
                self.count += 1
                self.bytes = len(body)
                self.seconds.append(time.monotonic() - t0)
            except OSError as e:
                self.errors.append(str(e))
            self._stop.wait(max(0.0, self.interval - (time.monotonic() - t0)))

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join(timeout=15)


def produce(env, broker, topic, records):
    args = ["--bootstrap-server", broker.bootstrap, "--topic", topic, "--num-records", str(records), "--record-size",
            "1024", "--throughput", "-1", "--command-property", "acks=1"]
    r = compare.run_checked(env.java_cmd(compare.PRODUCER_PERF, args), 900, "ProducerPerformance", broker)
    m = None
    for line in r.stdout.splitlines():
        m = compare.PRODUCER_PERF_RE.search(line) or m
    if r.returncode != 0 or m is None or int(m.group(1)) != records:
        raise RuntimeError(f"ProducerPerformance exit {r.returncode}: {compare.short(r.stdout + r.stderr)}")
    return {"records": records, "bytes": records * 1024, "mb_per_sec": float(m.group(3)),
            "p99_ms": float(m.group(8))}


def run_session(env, broker_cls, round_no, prof):
    broker = broker_cls(env, f"round{round_no}-{broker_cls.name}")
    try:
        broker.prepare()
        broker.spawn()
        topic = f"metrics-load-{uuid.uuid4().hex[:6]}"
        idle = f"metrics-idle-{uuid.uuid4().hex[:6]}"
        compare.create_topics_once_serving(broker, [topic], 8)
        compare.create_topics(broker, [idle], prof["idle_partitions"], timeout=120)
        compare.log(f"{broker.name} round {round_no}: produce")
        scraper = Scraper(broker.metrics_port) if hasattr(broker, "metrics_port") else None
        cpu0, t0 = broker.cpu_seconds(), time.monotonic()
        if scraper:
            with scraper:
                row = produce(env, broker, topic, prof["records"])
        else:
            row = produce(env, broker, topic, prof["records"])
        row["seconds"] = time.monotonic() - t0
        row["broker_cpu_s"] = broker.cpu_seconds() - cpu0
        row["broker_cpu_s_per_gb"] = row["broker_cpu_s"] / (row["bytes"] / compare.GB)
        if scraper:
            row["scrapes"] = scraper.count
            row["scrape_bytes"] = scraper.bytes
            row["scrape_ms_median"] = 1000 * statistics.median(scraper.seconds) if scraper.seconds else None
            row["scrape_errors"] = scraper.errors[:5]
    finally:
        broker.stop()
        broker.cleanup()
    return {"variant": broker_cls.name, "round": round_no, "row": row}


def render(results):
    sessions = results["sessions"]

    def med(variant, field):
        vals = [s["row"][field] for s in sessions if s["variant"] == variant and s["row"].get(field) is not None]
        return statistics.median(vals) if vals else None

    lines = ["| | off | scraped every 1 s | scraped / off |", "|---|---:|---:|---:|"]
    for label, field, fmt in (("produce MB/s (1 KiB, acks=1)", "mb_per_sec", "{:.1f}"),
                              ("broker CPU s per GB", "broker_cpu_s_per_gb", "{:.2f}"),
                              ("produce p99 ms", "p99_ms", "{:.0f}")):
        off, on = med("off", field), med("scraped", field)
        ratio = f"{on / off:.3f}" if off and on else "-"
        lines.append(f"| {label} | {fmt.format(off) if off is not None else '-'} | "
                     f"{fmt.format(on) if on is not None else '-'} | {ratio} |")
    scrapes = [s["row"] for s in sessions if s["variant"] == "scraped"]
    if scrapes:
        lines.append("")
        lines.append(f"scrapes per run: {[r['scrapes'] for r in scrapes]}, body {scrapes[-1]['scrape_bytes']} bytes, "
                     f"median scrape {statistics.median(r['scrape_ms_median'] for r in scrapes):.1f} ms; "
                     f"{results['profile']['idle_partitions'] + 8 + 50} partitions hosted")
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--records", type=int, help="1 KiB records per produce run")
    ap.add_argument("--idle-partitions", type=int)
    compare.add_single_node_args(ap)
    args = ap.parse_args()
    if args.from_json:
        print(render(json.loads(Path(args.from_json).read_text())))
        return 0
    prof = dict(PROFILES["quick" if args.quick else "default"])
    for key in ("rounds", "records", "idle_partitions"):
        if getattr(args, key):
            prof[key] = getattr(args, key)
    work = Path(tempfile.mkdtemp(prefix="mala-metrics-bench-"))
    env = compare.Env(args, work)
    problems = [p for p in env.check({"mala"}) if not p.startswith("go ")]
    if problems:
        print("\n".join(problems), file=sys.stderr)
        return 2
    classes = [Plain, with_metrics_listener(compare.MalaBroker)]
    sessions = []
    for r in range(prof["rounds"]):
        for cls in classes if r % 2 == 0 else list(reversed(classes)):
            sessions.append(run_session(env, cls, r, prof))
    results = {"date": datetime.datetime.now(datetime.timezone.utc).isoformat(), "profile": prof,
               "sessions": sessions}
    compare.save_and_print(results, args, work, render)
    return 0


if __name__ == "__main__":
    sys.exit(main())
