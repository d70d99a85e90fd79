#!/usr/bin/env python3
"""One Mala build with 1 shard against the same build with N shards on the raw Produce/Fetch load: does the data
path scale with shards, and does the CPU per GB stay flat?

Each configuration runs in turn (alternating the order over rounds) with the broker pinned by taskset to
--broker-cpus (default: the first two CPUs) and mala.shards set, fresh data dir and free ports (compare.py's
single-node config). franzload's raw modes drive it: Produce requests carrying one prebuilt 1 MB batch per partition
(acks=1 and acks=all), then raw Fetch of what was written, over --partitions partitions (spread over the shards by
replica_placement). Reported per configuration, medians over rounds: throughput, broker CPU seconds per GB, and the
load tool's CPU cores (client_cpu_s / wall: when it is near the cores the client may use, the row measured the
client). Nothing is asserted.

  bench/e2e/compare_shards.py [--mala-bin build/src/app/mala] [--shards 1,2] [--broker-cpus 0,1] [--rounds 3]

On a 2-core machine the load tool shares the cores with the broker, so the absolute figures are the client's as
much as the broker's; the CPU per GB column is the broker's own. On a larger machine, pin the broker to N cores
(--broker-cpus 0-15 --shards 1,16) and the clients elsewhere (--client-cpus).
"""

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import compare


def shards_class(shards, binary):
    class Configured(compare.MalaBroker):
        name = f"shards{shards}"

        def __init__(self, env, tag):
            super().__init__(env, tag)
            with open(self.config_path, "a") as f:
                f.write(f"mala.shards={shards}\n")

        def command(self):
            return [str(binary), "--config", str(self.config_path)]

    return Configured


def run_session(env, broker_cls, round_no, args):
    broker = broker_cls(env, f"round{round_no}-{broker_cls.name}")
    rows = {}
    try:
        broker.prepare()
        compare.time_to_first_produce(broker)
        topics = {acks: f"raw-1024b-acks{acks}" for acks in compare.ACKS}
        compare.create_topics(broker, sorted(topics.values()), args.partitions)

        def measure(key, fn):
            os.sync()
            user0, sys0 = broker.cpu_times()
            wall0, children0 = time.monotonic(), compare.children_cpu_seconds()
            res = fn()
            user1, sys1 = broker.cpu_times()
            wall = time.monotonic() - wall0
            cpu = (user1 - user0) + (sys1 - sys0)
            rows[key] = {"mb_per_sec": res.get("mb_per_sec"),
                         "cpu_s_per_gb": cpu / (res["bytes"] / compare.GB) if res.get("bytes") else None,
                         "client_cores": (compare.children_cpu_seconds() - children0) / wall if wall else None}
            compare.log(f"  {broker.name} round {round_no}: {key} {rows[key]}")

        for acks, topic in topics.items():
            measure(f"raw_produce_1024b_acks{acks}",
                    lambda t=topic, a=acks: compare.franz(env, "rawproduce", broker, t, args.step_timeout,
                                                          records=args.raw_mb * compare.MIB // 1024, size=1024,
                                                          acks=a))
        measure("raw_fetch", lambda: compare.franz(env, "rawfetch", broker, topics["1"], args.step_timeout))
    finally:
        broker.stop()
        broker.cleanup()
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mala-bin", default=str(compare.REPO / "build" / "src" / "app" / "mala"))
    ap.add_argument("--shards", default="1,2", help="shard counts to compare; the first is the baseline")
    ap.add_argument("--broker-cpus", default="0,1", help="taskset CPU list for the broker")
    ap.add_argument("--client-cpus", default=None, help="taskset CPU list for the load tool (default: any)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--raw-mb", type=int, default=256, help="MiB per raw produce run")
    ap.add_argument("--partitions", type=int, default=8)
    ap.add_argument("--step-timeout", type=float, default=600)
    ap.add_argument("--json", help="write the raw results here")
    args = ap.parse_args()
    args.kafka_libs = ""  # compare.Env reads it

    work = Path(tempfile.mkdtemp(prefix="mala-bench-shards-"))
    env = compare.Env(args, work)
    if env.client_cpus:
        os.sched_setaffinity(0, env.client_cpus)
    env.build_franz_load()
    counts = [int(s) for s in args.shards.split(",")]
    configs = {n: shards_class(n, Path(args.mala_bin)) for n in counts}
    results = {n: [] for n in counts}
    for rnd in range(1, args.rounds + 1):
        order = counts if rnd % 2 == 1 else list(reversed(counts))
        for n in order:
            results[n].append(run_session(env, configs[n], rnd, args))

    base = counts[0]
    print(f"\nRaw load, broker on CPUs {args.broker_cpus}, {args.rounds} round(s), {args.raw_mb} MiB per produce "
          f"run, {args.partitions} partitions, {os.cpu_count()} CPUs; load average {os.getloadavg()[0]:.1f}\n")
    header = "| Row (median of rounds) | shards | MB/s | vs " + str(base) + " shard(s) | broker CPU s/GB | vs " + \
        str(base) + " | load tool cores |"
    print(header)
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    for key in results[base][0]:
        def med(n, field):
            vals = [r[key][field] for r in results[n] if key in r and r[key][field] is not None]
            return statistics.median(vals) if vals else None
        for n in counts:
            t, c, cl = med(n, "mb_per_sec"), med(n, "cpu_s_per_gb"), med(n, "client_cores")
            bt, bc = med(base, "mb_per_sec"), med(base, "cpu_s_per_gb")
            ratio = lambda a, b: f"{a / b:.2f}" if a is not None and b else "—"
            fmt = lambda v, spec: format(v, spec) if v is not None else "—"
            print(f"| {key} | {n} | {fmt(t, '.0f')} | {ratio(t, bt)} | {fmt(c, '.2f')} | {ratio(c, bc)} "
                  f"| {fmt(cl, '.2f')} |")
    if args.json:
        Path(args.json).write_text(json.dumps({"args": vars(args), "results": {str(k): v for k, v in
                                                                               results.items()},
                                               "finished": time.time()}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
