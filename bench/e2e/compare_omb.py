#!/usr/bin/env python3
"""OpenMessaging Benchmark workload shapes: one Mala node against one Apache Kafka 4.x node.

The shape of OMB's workloads/1-topic-100-partitions-1kb-4p-4c-*.yaml: 1 topic of 100 partitions, 1 KiB records,
4 producers and 4 consumers (one subscription, i.e. one consumer group) running at the same time, the consumers
reading what the producers write. Producer and consumer settings are those of OMB's driver-kafka/
kafka-throughput.yaml (acks=all, linger.ms=1, batch.size=1 MiB; consumer max.partition.fetch.bytes=10 MiB, no
auto-commit, an asynchronous commit after every poll). The load is franzload's omb mode (franzload/omb.go: 4
producer and 4 consumer franz-go clients in one process); each record carries its send time, so it measures
publish latency (send to acknowledgement) and end-to-end latency (send to arrival at a consumer) as OMB does.

Each broker in turn (compare.py's brokers: fresh temp dir, free ports, the same server.properties) runs, on a new
topic each:
  - max rate: the producers as fast as they can;
  - fixed rates (--rates, records/s over the 4 producers; default 51,200 = 50 MiB/s of 1 KiB, OMB's usual
    50 MB/s row, and 10,240 = 10 MiB/s, which a 2-core machine shared by broker and clients can keep up).
Every workload has a warm-up (not measured), a measured window and a drain (the consumers read what is left);
each round starts both brokers once, in alternating order, and the table shows medians over the rounds.
Reported per workload: produce and consume MB/s over the window, publish and end-to-end latency p50/p99/p99.9,
whether a fixed rate was kept (achieved rate and how late sends fell behind the schedule), the backlog at the end
of the window, and the CPU the broker and the load tool used during the window (cores, CPU seconds per GB
produced; each produced byte is also consumed once), and how many Produce requests, batches and Fetch responses
carried the bytes (franz-go's hooks). Prints a Markdown table with Mala/Kafka ratios and writes the
raw numbers to JSON. Nothing is asserted.

  bench/e2e/compare_omb.py                 # both brokers, 3 rounds, about 13 minutes
  bench/e2e/compare_omb.py --quick         # short windows, 1 round (about 3 minutes)
  bench/e2e/compare_omb.py --only mala --json mala.json
  bench/e2e/compare_omb.py --from-json mala.json kafka.json   # one table from earlier runs, run nothing

Needs what compare.py needs for its franzload rows: build/src/app/mala (or --mala-bin), Kafka's jars in
tests/integration/.deps/kafka-libs (or --kafka-libs), a JDK, confluent-kafka (start-up probe, topic creation)
and Go (franzload is built from its pinned go.mod/go.sum).
"""

import argparse
import datetime
import json
import os
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import compare  # noqa: E402  (brokers, configs, CPU accounting and the franzload driver are compare.py's)

log = compare.log

PROFILES = {
    # rounds (each starts both brokers once, order alternating); seconds of warm-up, of measurement, and at most
    # of draining after the window
    "quick": {"rounds": 1, "warmup": 3, "seconds": 10, "drain": 30},
    "default": {"rounds": 3, "warmup": 10, "seconds": 20, "drain": 60},
}
RECORD_SIZE = 1024
# A fixed rate counts as kept when the producers reached this share of it during the window, the consumers kept
# up with them, and no send fell more than KEPT_DELAY_MS behind the schedule at p99.
KEPT_SHARE = 0.97
KEPT_DELAY_MS = 100.0


def workloads(rates):
    """[(key, records/s or 0 for max rate)]"""
    return [("max", 0)] + [(f"rate{r}", r) for r in rates]


def rate_kept(res):
    target = res.get("target_records_per_sec") or 0
    if not target:
        return None
    delay = res.get("publish_delay", {}).get("p99_ms", 0)
    return (res["produce_records_per_sec"] >= KEPT_SHARE * target
            and res["consume_records_per_sec"] >= KEPT_SHARE * res["produce_records_per_sec"]
            and delay <= KEPT_DELAY_MS)


def run_broker(env, cls, args, prof, round_no):
    """Starts one broker and runs every workload on it. Returns {"workloads": {key: result}, "errors": [...]}."""
    broker = cls(env, f"omb-round{round_no}-{cls.name}")
    out = {"workloads": {}, "errors": [], "loadavg_start": os.getloadavg()}
    try:
        broker.prepare()
        out["startup_s"] = compare.time_to_first_produce(broker)
        log(f"{broker.name}: first produce acknowledged {out['startup_s'] * 1000:.0f} ms after spawn")
        for key, rate in workloads(args.rates):
            if not broker.alive():
                out["errors"].append(f"{key}: not run, broker exited with code {broker.proc.returncode}")
                continue
            topic = f"omb-{key}"
            log(f"{broker.name}: {key} ({'max rate' if not rate else f'{rate:,} records/s'}), "
                f"{args.producers} producers, {args.consumers} consumers, {args.partitions} partitions")
            try:
                compare.create_topics(broker, [topic], args.partitions)
                wall0, children0 = time.monotonic(), compare.children_cpu_seconds()
                res = compare.franz(env, "omb", broker, topic, args.step_timeout, producers=args.producers,
                                    consumers=args.consumers, size=RECORD_SIZE, rate=rate,
                                    warmup=f"{prof['warmup']}s", seconds=f"{prof['seconds']}s",
                                    drain=f"{prof['drain']}s", group=f"omb-{key}",
                                    **{"stat-pid": broker.proc.pid})
                res["step_wall_s"] = time.monotonic() - wall0
                res["step_load_cpu_s"] = compare.children_cpu_seconds() - children0
            except Exception as e:  # one failed workload must not hide the others
                out["errors"].append(f"{key}: {compare.short(str(e), 600)}")
                log(f"  FAILED: {compare.short(str(e), 300)}")
                continue
            out["workloads"][key] = res
            log(f"  produce {res['produce_mb_per_sec']:.1f} MB/s, consume {res['consume_mb_per_sec']:.1f} MB/s, "
                f"publish p99 {res['publish']['p99_ms']:.2f} ms, end-to-end p99 {res['end_to_end']['p99_ms']:.2f} "
                f"ms, broker {res['broker_cpu_s'] / res['seconds']:.2f} cores, load "
                f"{res['load_cpu_s'] / res['seconds']:.2f} cores")
        return out
    except Exception as e:
        out["errors"].append(f"start-up: {e}")
        log(f"{broker.name}: FAILED {compare.short(str(e), 300)}")
        return out
    finally:
        alive = broker.alive()
        code = broker.stop()
        out["loadavg_end"] = os.getloadavg()
        out["log"] = str(broker.log_path)
        if not alive:
            out["errors"].append(f"broker was not running at the end (exit code {code}); log tail:\n"
                                 f"{broker.log_tail(30)}")
        if not args.keep:
            broker.cleanup()


# --- report -------------------------------------------------------------------------------------------------------

def per_gb(res, field):
    produced = res["produce_records_per_sec"] * res["seconds"] * RECORD_SIZE
    return res[field] / (produced / compare.GB) if produced else None


def metric_rows(fixed):
    """(label, function of a workload result -> number or None, better); `fixed`: a fixed-rate workload."""
    rows = []
    if fixed:
        rows.append(("rate kept (≥ 97 % produced and consumed, send delay p99 ≤ 100 ms)",
                     lambda r: rate_kept(r), ""))
    rows += [("produce MB/s", lambda r: r["produce_mb_per_sec"], "higher"),
             ("consume MB/s", lambda r: r["consume_mb_per_sec"], "higher")]
    for q, field in (("p50", "p50_ms"), ("p99", "p99_ms"), ("p99.9", "p999_ms")):
        rows.append((f"publish latency {q} ms", lambda r, f=field: r["publish"][f], "lower"))
    for q, field in (("p50", "p50_ms"), ("p99", "p99_ms"), ("p99.9", "p999_ms")):
        rows.append((f"end-to-end latency {q} ms", lambda r, f=field: r["end_to_end"][f], "lower"))
    if fixed:
        rows.append(("send delay behind the schedule p99 ms", lambda r: r["publish_delay"]["p99_ms"], "lower"))
    rows += [("backlog at the end of the window, records", lambda r: r["backlog_records_at_end"], "lower"),
             ("broker cores busy", lambda r: r["broker_cpu_s"] / r["seconds"], ""),
             ("load tool cores busy (4 producers + 4 consumers)", lambda r: r["load_cpu_s"] / r["seconds"], ""),
             ("broker CPU s per GB produced (and consumed once)", lambda r: per_gb(r, "broker_cpu_s"), "lower"),
             ("load tool CPU s per GB", lambda r: per_gb(r, "load_cpu_s"), "lower"),
             ("kernel share of the broker's CPU",
              lambda r: r["broker_sys_s"] / r["broker_cpu_s"] if r["broker_cpu_s"] else None, "")]
    # How many requests carry the bytes (franz-go's hooks in the load tool): fewer, larger requests cost both
    # sides less CPU per GB.
    for label, field in (("Produce requests/s", "produce_requests_per_sec"),
                         ("KiB per Produce request", "produce_request_kib"),
                         ("records per produced batch", "records_per_batch"),
                         ("Fetch responses/s", "fetch_responses_per_sec"),
                         ("KiB per Fetch response", "fetch_response_kib"),
                         ("OffsetCommit requests/s", "commit_requests_per_sec")):
        rows.append((label, lambda r, f=field: r["requests"][f], ""))
    return rows


def round_values(out, broker, key, fn):
    """fn of the workload's result in each round of the broker that has one."""
    vals = []
    for rnd in out["results"].get(broker, {}).get("rounds", []):
        res = rnd.get("workloads", {}).get(key)
        try:
            v = fn(res) if res else None
        except (KeyError, TypeError, ZeroDivisionError):
            v = None
        if v is not None:
            vals.append(v)
    return vals


def cell(vals):
    """The median of the rounds' values; for yes/no values, how many rounds said yes."""
    if not vals:
        return "—", None
    if all(isinstance(v, bool) for v in vals):
        yes = sum(vals)
        return ("yes" if yes == len(vals) else "no" if not yes else f"{yes} of {len(vals)} rounds"), None
    v = compare.median(vals)
    return compare.fmt_num(v), v


def render(out):
    brokers = out["brokers"]
    both = brokers == ["mala", "kafka"]
    lines = ["| Workload | Metric | " + " | ".join(b.capitalize() for b in brokers) +
             (" | Mala/Kafka | Better |" if both else " |"),
             "| --- | --- | " + " | ".join("---:" for _ in brokers) + (" | ---: | --- |" if both else " |")]
    for key, rate in workloads(out["rates"]):
        name = "max rate" if not rate else f"fixed {rate:,} rec/s ({rate * RECORD_SIZE / compare.MIB:.0f} MB/s)"
        for label, fn, better in metric_rows(bool(rate)):
            cells = [cell(round_values(out, b, key, fn)) for b in brokers]
            row = f"| {name} | {label} | " + " | ".join(text for text, _ in cells)
            if both:
                m, k = (v for _, v in cells)
                ratio = f"{m / k:.2f}" if m is not None and k else "—"
                row += f" | {ratio} | {better}"
            lines.append(row + " |")
    return "\n".join(lines)


def merge(runs):
    """One results dict from several runs (e.g. an --only mala and an --only kafka run)."""
    out = dict(runs[0])
    out["results"] = {}
    for run in runs:
        out["results"].update(run["results"])
    out["brokers"] = [b for b in ("mala", "kafka") if b in out["results"]]
    return out


def print_report(out, json_path):
    m, prof = out["machine"], out["profile"]
    rounds = [rnd for r in out["results"].values() for rnd in r["rounds"]]
    loads = [rnd[k][0] for rnd in rounds for k in ("loadavg_start", "loadavg_end") if k in rnd]
    print(f"\nOMB workload shape, Mala vs Apache Kafka {m.get('kafka')}, single node: 1 topic, "
          f"{out['partitions']} partitions, {RECORD_SIZE} B records, {out['producers']} producers + "
          f"{out['consumers']} consumers (one group), acks=all, linger 1 ms, 1 MiB batches; warm-up "
          f"{prof['warmup']} s, measured {prof['seconds']} s, medians of {prof['rounds']} round(s); "
          f"{m.get('cpus')} CPUs ({m.get('cpu_model')}); "
          f"load average {min(loads, default=0):.1f}-{max(loads, default=0):.1f}\n")
    print(render(out))
    errors = [(b, i + 1, e) for b, r in out["results"].items() for i, rnd in enumerate(r["rounds"])
              for e in rnd.get("errors", [])]
    if errors:
        print("\nFailures:")
        for b, rnd, e in errors:
            print(f"- {b} round {rnd}: {e}")
    if json_path:
        print(f"\nRaw results: {json_path}")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="short windows, 1 round")
    ap.add_argument("--rounds", type=int, help="rounds (each starts both brokers once, order alternating)")
    ap.add_argument("--rates", default="51200,10240",
                    help="fixed rates, records/s over all producers, comma-separated (default 51200,10240)")
    ap.add_argument("--warmup", type=float, help="seconds of warm-up per workload")
    ap.add_argument("--seconds", type=float, help="measured seconds per workload")
    ap.add_argument("--partitions", type=int, default=100)
    ap.add_argument("--producers", type=int, default=4)
    ap.add_argument("--consumers", type=int, default=4)
    ap.add_argument("--only", choices=["mala", "kafka"], help="run one broker only")
    ap.add_argument("--broker-cpus", help="run the broker on these CPUs only (taskset syntax)")
    ap.add_argument("--client-cpus", help="run this harness and the load on these CPUs only")
    ap.add_argument("--mala-bin", default=str(compare.REPO / "build" / "src" / "app" / "mala"))
    ap.add_argument("--kafka-libs", default=str(compare.REPO / "tests" / "integration" / ".deps" / "kafka-libs"))
    ap.add_argument("--work-dir", help="where configs, logs and data go (default: a new temp dir)")
    ap.add_argument("--json", help="write all raw results here (default: <work dir>/results.json)")
    ap.add_argument("--keep", action="store_true", help="keep the brokers' data dirs")
    ap.add_argument("--step-timeout", type=float, default=600, help="seconds any one workload may take")
    ap.add_argument("--from-json", nargs="+", metavar="FILE",
                    help="run nothing: print the table of earlier runs (several files: merged)")
    args = ap.parse_args()
    if args.from_json:
        print_report(merge([json.loads(Path(f).read_text()) for f in args.from_json]), None)
        return 0

    args.rates = [int(r) for r in args.rates.split(",") if r]
    prof = compare.profile_from_args(args, PROFILES, ("rounds", "warmup", "seconds"))
    brokers, work, env = compare.run_setup(args, "mala-bench-omb-")
    compare.exit_on_problems(env, brokers, "compare_omb.py")
    env.build_franz_load()
    started = time.time()
    out = {"machine": compare.machine_info(env), "profile": prof, "rates": args.rates,
           "partitions": args.partitions, "producers": args.producers, "consumers": args.consumers,
           "brokers": brokers, "started": datetime.datetime.fromtimestamp(started).isoformat(timespec="seconds"),
           "results": {b: {"rounds": []} for b in brokers}}
    json_path = Path(args.json) if args.json else work / "results.json"
    log(f"work dir {work}; profile {prof}; rates {args.rates}; brokers {brokers}")
    classes = {"mala": compare.MalaBroker, "kafka": compare.KafkaBroker}
    for rnd in range(1, prof["rounds"] + 1):
        for b in (brokers if rnd % 2 else list(reversed(brokers))):
            log(f"round {rnd}/{prof['rounds']}: {b}")
            out["results"][b]["rounds"].append(run_broker(env, classes[b], args, prof, rnd))
            json_path.write_text(json.dumps(out, indent=1, default=str))
    out["elapsed_s"] = time.time() - started
    json_path.write_text(json.dumps(out, indent=1, default=str))
    print_report(out, json_path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
