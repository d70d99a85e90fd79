#!/usr/bin/env python3
"""Two Mala builds side by side on the raw produce load: did a change make the produce path slower?

Starts each build in turn on this machine (compare.py's single-node KRaft config, fresh data dir, free ports),
alternating the order over several rounds, and drives both with franzload's raw modes (Produce requests carrying one
prebuilt 1 MB batch per partition on plain connections: no client library work per record, so these rows show what
the broker itself takes). Reports per build the medians of throughput and broker CPU seconds per GB, and the ratio
of the new build to the baseline. Nothing is asserted.

  bench/e2e/compare_builds.py --baseline-bin /tmp/mala-base [--mala-bin build/src/app/mala] [--rounds 3]

Needs what compare.py needs for franzload (Go) and confluent-kafka (topic creation).
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


def build_class(tag, binary):
    class Build(compare.MalaBroker):
        name = tag

        def command(self):
            return [str(binary), "--config", str(self.config_path)]

    return Build


def run_session(env, broker_cls, round_no, args):
    broker = broker_cls(env, f"round{round_no}-{broker_cls.name}")
    rows = {}
    try:
        broker.prepare()
        compare.time_to_first_produce(broker)
        topics = {(size, acks): f"raw-{size}b-acks{acks}" for size in compare.SIZES for acks in compare.ACKS}
        compare.create_topics(broker, sorted(topics.values()), args.partitions)
        for (size, acks), topic in topics.items():
            os.sync()
            user0, sys0 = broker.cpu_times()
            res = compare.franz(env, "rawproduce", broker, topic, args.step_timeout,
                                records=args.raw_mb * compare.MIB // size, size=size, acks=acks)
            user1, sys1 = broker.cpu_times()
            cpu = (user1 - user0) + (sys1 - sys0)
            key = f"raw_produce_{size}b_acks{acks}"
            rows[key] = {"mb_per_sec": res.get("mb_per_sec"),
                         "cpu_s_per_gb": cpu / (res["bytes"] / compare.GB) if res.get("bytes") else None}
            compare.log(f"  {broker.name} round {round_no}: {key} {rows[key]}")
    finally:
        broker.stop()
        broker.cleanup()
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--baseline-bin", required=True, help="the Mala binary to compare against")
    ap.add_argument("--mala-bin", default=str(compare.REPO / "build" / "src" / "app" / "mala"))
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--raw-mb", type=int, default=256, help="MiB per raw produce run")
    ap.add_argument("--partitions", type=int, default=2)
    ap.add_argument("--step-timeout", type=float, default=600)
    ap.add_argument("--json", help="write the raw results here")
    args = ap.parse_args()
    # compare.Env reads these.
    args.kafka_libs, args.broker_cpus, args.client_cpus = "", None, None

    work = Path(tempfile.mkdtemp(prefix="mala-bench-builds-"))
    env = compare.Env(args, work)
    env.build_franz_load()
    builds = {"baseline": build_class("baseline", Path(args.baseline_bin)),
              "new": build_class("new", Path(args.mala_bin))}
    results = {"baseline": [], "new": []}
    for rnd in range(1, args.rounds + 1):
        order = ["baseline", "new"] if rnd % 2 == 1 else ["new", "baseline"]
        for b in order:
            results[b].append(run_session(env, builds[b], rnd, args))

    print(f"\nRaw produce, {args.rounds} round(s), {args.raw_mb} MiB per run, {args.partitions} partitions; "
          f"load average {os.getloadavg()[0]:.1f}\n")
    print("| Row (median of rounds) | baseline MB/s | new MB/s | new/baseline | baseline CPU s/GB | new CPU s/GB "
          "| new/baseline |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    for key in results["baseline"][0]:
        def med(b, field):
            vals = [r[key][field] for r in results[b] if key in r and r[key][field] is not None]
            return statistics.median(vals) if vals else None
        bt, nt = med("baseline", "mb_per_sec"), med("new", "mb_per_sec")
        bc, nc = med("baseline", "cpu_s_per_gb"), med("new", "cpu_s_per_gb")
        ratio = lambda n, d: f"{n / d:.2f}" if n is not None and d else "—"
        print(f"| {key} | {bt:.0f} | {nt:.0f} | {ratio(nt, bt)} | {bc:.2f} | {nc:.2f} | {ratio(nc, bc)} |")
    if args.json:
        Path(args.json).write_text(json.dumps({"args": vars(args), "results": results,
                                               "finished": time.time()}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
