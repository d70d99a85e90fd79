#!/usr/bin/env python3
"""Transactions: one Mala node against one Apache Kafka 4.x node on this machine (issue 22).

Starts each broker in turn with compare.py's machinery (the same server.properties, fresh temp data dir, free ports,
KRaft combined mode), alternating the order over the rounds, and drives both with Apache Kafka's Java client through
TxnPerf.java:
  - transactional produce throughput: one transactional producer (client defaults: acks=all, idempotence,
    linger.ms 5, batch.size 16 KiB; keys null, the default partitioner) writes 1 KiB records, committing every 100
    and every 10,000 records, into a topic of 1 and of 4 partitions (a fresh topic per run). Records/s and MB/s from
    the first beginTransaction() to the last commitTransaction(); broker CPU seconds per GB from the broker
    process's utime+stime in /proc/<pid>/stat read before and after the client program (JVM start and
    initTransactions included: a few ms of broker CPU);
  - end-to-end read_committed latency: a transactional producer (linger.ms 0) commits a transaction of a few 1 KiB
    records at a steady rate into a topic of 1 partition while a read_committed consumer (assign(), client defaults:
    fetch.max.wait.ms 500) in the same JVM reads them; per record, the time from its transaction's scheduled start
    (a slow commit that delays the next transactions counts) to poll() handing it over (System.nanoTime(), one
    clock), p50/p99/p99.9, and the transactions/s achieved. TxnPerf fails the run when a committed record was not
    read, or was read twice.
Before the measurements a transactional run (30,000 records, 100 per transaction; not measured) makes Kafka create
__transaction_state, both brokers load their transaction coordinators, and Kafka's JIT compile the paths. The table
also gives, per throughput row, the CPU cores the broker and the client kept busy, which says whether a row is bound
by the client (the machine has 2 cores, shared).
Prints a Markdown table of per-broker medians over the rounds with Mala/Kafka ratios and writes every raw number
to a JSON file. Nothing is asserted.

  bench/e2e/compare_txn.py            # default: 2 rounds, about 9 minutes
  bench/e2e/compare_txn.py --quick    # smoke run: small counts (about 3 minutes)
  bench/e2e/compare_txn.py --only kafka|mala   # one broker only (no ratios)
  bench/e2e/compare_txn.py --latency-only --latency-rate 20   # the latency run only, at 20 transactions/s
  bench/e2e/compare_txn.py --kafka-transaction-version 1   # Kafka formatted with transaction.version=1, as Mala
  bench/e2e/compare_txn.py --from-json results.json   # print an earlier run's table again

Needs what compare.py needs apart from Go and confluent-kafka's load tool: build/src/app/mala (or --mala-bin),
Apache Kafka's jars in tests/integration/.deps/kafka-libs (scripts/install-test-clients.sh), a JDK and
confluent-kafka (start-up probe and topic creation).
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
import compare  # noqa: E402  (the single-node comparison: Env, the brokers, ports, topics, report helpers)

TXN_PERF_SRC = HERE / "TxnPerf.java"
RECORD_SIZE = 1024
TXN_SIZES = (100, 10_000)
PARTITION_COUNTS = (1, 4)
PROFILES = {
    # records per throughput run, by transaction size; latency: transactions/s, records each, seconds measured
    "quick": {"rounds": 1, "records_txn100": 20_000, "records_txn10000": 40_000, "latency_rate": 50,
              "latency_txn_records": 5, "latency_seconds": 5, "latency_warmup_seconds": 2, "warmup_records": 5_000},
    "default": {"rounds": 2, "records_txn100": 100_000, "records_txn10000": 300_000, "latency_rate": 100,
                "latency_txn_records": 5, "latency_seconds": 30, "latency_warmup_seconds": 5,
                "warmup_records": 30_000},
}
LATENCY_TOPIC = "txn-latency"


def throughput_key(txn, parts):
    return f"produce_txn{txn}_p{parts}"


def txn_perf(env, broker, args, timeout):
    r = compare.run_checked(env.java_cmd("TxnPerf", [str(a) for a in args], extra_cp=env.assign_classes), timeout,
                            f"TxnPerf {args[0]}", broker)
    line = next((ln for ln in reversed(r.stdout.splitlines()) if "=" in ln), "")
    fields = dict(kv.split("=", 1) for kv in line.split())
    if r.returncode != 0 or not fields:
        raise RuntimeError(f"TxnPerf {args[0]} exit {r.returncode}: {compare.short(r.stdout + r.stderr, 1500)}")
    return {k: float(v) if "." in v or "N" in v else int(v) for k, v in fields.items()}


def produce(env, broker, topic, records, txn, timeout):
    res = txn_perf(env, broker, ["produce", broker.bootstrap, topic, records, RECORD_SIZE, txn], timeout)
    s = res["seconds"]
    res.update({"records_per_sec": res["records"] / s, "mb_per_sec": res["bytes"] / s / compare.MIB,
                "txn_per_sec": res["transactions"] / s})
    return res


def latency(env, broker, prof, timeout):
    res = txn_perf(env, broker, ["latency", broker.bootstrap, LATENCY_TOPIC, prof["latency_rate"],
                                 prof["latency_seconds"], prof["latency_txn_records"], RECORD_SIZE,
                                 prof["latency_warmup_seconds"]], timeout)
    res["txn_per_sec"] = res["transactions"] / res["seconds"]
    return res


def run_session(env, broker_cls, round_no, prof, args):
    """One broker start: every workload once. Returns (metrics, errors, info)."""
    broker = broker_cls(env, f"round{round_no}-{broker_cls.name}")
    metrics, errors, info = {}, [], {"loadavg_start": os.getloadavg()}
    timeout = args.step_timeout

    def step(key, fn):
        if not broker.alive():
            errors.append(f"{key}: not run, broker exited with code {broker.proc.returncode}")
            return
        compare.log(f"  {broker.name} round {round_no}: {key}")
        user0, sys0 = broker.cpu_times()
        wall0, children0 = time.monotonic(), compare.children_cpu_seconds()
        try:
            res = fn()
        except Exception as e:  # one failed workload must not hide the others
            msg = str(e) + (f" (broker exited with code {broker.proc.returncode})" if not broker.alive() else "")
            errors.append(f"{key}: {msg}")
            compare.log(f"    FAILED: {compare.short(msg, 1500)}")
            return
        user1, sys1 = broker.cpu_times()
        res["broker_cpu_s"] = (user1 - user0) + (sys1 - sys0)
        res["broker_sys_s"] = sys1 - sys0
        res["step_wall_s"] = time.monotonic() - wall0
        res["client_cpu_s"] = compare.children_cpu_seconds() - children0  # the JVM's start included
        if res.get("bytes"):
            res["cpu_s_per_gb"] = res["broker_cpu_s"] / (res["bytes"] / compare.GB)
        if res.get("seconds"):
            res["broker_cores"] = res["broker_cpu_s"] / res["seconds"]
            res["client_cores"] = res["client_cpu_s"] / res["step_wall_s"]
        metrics[key] = res
        compare.log("    " + ", ".join(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}"
                                       for k, v in res.items()))

    try:
        broker.prepare()
        info["startup_s"] = compare.time_to_first_produce(broker)
        topics = {(txn, parts): f"txn{txn}-p{parts}" for txn in TXN_SIZES for parts in PARTITION_COUNTS}
        for parts in PARTITION_COUNTS:
            compare.create_topics(broker, [t for (_, p), t in topics.items() if p == parts], parts)
        compare.create_topics(broker, [LATENCY_TOPIC, "txn-warmup"], 1)
        # Not measured: Kafka creates __transaction_state here, and its JIT compiles the transactional paths.
        step("warm_up", lambda: produce(env, broker, "txn-warmup", prof["warmup_records"], 100, timeout))
        info["warm_up"] = metrics.pop("warm_up", None)
        for txn in TXN_SIZES if not args.latency_only else ():
            for parts in PARTITION_COUNTS:
                step(throughput_key(txn, parts),
                     lambda txn=txn, parts=parts: produce(env, broker, topics[(txn, parts)],
                                                          prof[f"records_txn{txn}"], txn, timeout))
        step("latency", lambda: latency(env, broker, prof, timeout))
        if broker.alive():
            info["peak_rss_mb"] = broker.peak_rss_kb() / 1024.0
    except Exception as e:
        errors.append(f"start-up: {e}")
        compare.log(f"    FAILED: {compare.short(str(e), 300)}")
    finally:
        alive = broker.alive()
        info["exit_code"] = broker.stop()
        info["loadavg_end"] = os.getloadavg()
        info["log"] = str(broker.log_path)
        if not alive:
            errors.append(f"broker was not running at the end (exit code {info['exit_code']}); log tail:\n"
                          f"{broker.log_tail(30)}")
        if not args.keep:
            broker.cleanup()
    return metrics, errors, info


# --- report -------------------------------------------------------------------------------------------------------

def report_rows(prof):
    """(label, metric key, field, better, target)"""
    rows = []
    for txn in TXN_SIZES:
        for parts in PARTITION_COUNTS:
            what = f"{txn:,} records/txn, {parts} partition{'s' if parts > 1 else ''}"
            key = throughput_key(txn, parts)
            rows.append((f"Produce {what}: records/s", key, "records_per_sec", "higher", ""))
            rows.append((f"  MB/s", key, "mb_per_sec", "higher", ""))
            rows.append((f"  broker CPU s per GB", key, "cpu_s_per_gb", "lower", "≤ 0.5 (≥ 2x per CPU s)"))
    lat = (f"read_committed latency, {prof['latency_rate']} txn/s x {prof['latency_txn_records']} records of 1 KiB, "
           f"1 partition")
    for field, q in (("p50_ms", "p50"), ("p99_ms", "p99"), ("p999_ms", "p99.9"), ("max_ms", "max")):
        rows.append((f"{lat}: {q} ms" if q == "p50" else f"  {q} ms", "latency", field, "lower",
                     "≤ 0.5" if q == "p99" else ""))
    rows.append(("  of which the producer: scheduled start to commitTransaction() return, p50 ms", "latency",
                 "commit_p50_ms", "lower", ""))
    rows.append(("  of which the producer: scheduled start to commitTransaction() return, p99 ms", "latency",
                 "commit_p99_ms", "lower", ""))
    rows.append(("  transactions/s achieved", "latency", "txn_per_sec", "higher", ""))
    return rows


def render_table(out):
    lines = ["| Metric (median of rounds; latency: (each round)) | Mala | Kafka | Mala/Kafka | Better | "
             "Issue 22 target |", "| --- | ---: | ---: | ---: | --- | --- |"]
    for label, key, field, better, target in report_rows(out["profile"]):
        vals, cells = {}, []
        for b in ("mala", "kafka"):
            vals[b] = compare.collect(out["sessions"], b, key, field)
            if b not in out["brokers"]:
                cells.append("not run")
            elif vals[b] is None:
                failed = any(e.startswith(key) for s in out["sessions"] if s["broker"] == b for e in s["errors"])
                cells.append("FAILED" if failed else "—")
            else:
                cells.append(compare.fmt_num(vals[b]))
                rounds = [s["metrics"][key][field] for s in out["sessions"]
                          if s["broker"] == b and field in s["metrics"].get(key, {})]
                if key == "latency" and len(rounds) > 1:  # a median of a few rounds hides a bad one
                    cells[-1] += " (" + " / ".join(compare.fmt_num(v) for v in rounds) + ")"
        if all(c in ("—", "not run") for c in cells):
            continue  # a workload this run left out (--latency-only)
        ratio = f"{vals['mala'] / vals['kafka']:.2f}" if vals["mala"] is not None and vals["kafka"] else "—"
        lines.append(f"| {label} | {cells[0]} | {cells[1]} | {ratio} | {better} | {target} |")
    return "\n".join(lines)


def render_bound_table(out):
    """CPU cores the broker kept busy during the client's measured phase, and the client JVM's cores over its whole
    run (start included): on 2 shared cores, a client near 1 or more cores with a broker well below 1 is the limit."""
    lines = ["| Workload (median of rounds) | Mala broker cores | Kafka broker cores | client cores with Mala | "
             "client cores with Kafka |", "| --- | ---: | ---: | ---: | ---: |"]
    for txn in TXN_SIZES:
        for parts in PARTITION_COUNTS:
            key = throughput_key(txn, parts)
            cells = [compare.fmt_num(compare.collect(out["sessions"], b, key, f))
                     for f in ("broker_cores", "client_cores") for b in ("mala", "kafka")]
            if any(c != "—" for c in cells):
                lines.append(f"| {txn:,} records/txn, {parts} partition(s) | " + " | ".join(cells) + " |")
    cells = [compare.fmt_num(compare.collect(out["sessions"], b, "latency", f))
             for f in ("broker_cores", "client_cores") for b in ("mala", "kafka")]
    lines.append("| read_committed latency run | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def caption(out):
    m, prof = out["machine"], out["profile"]
    return (f"Mala (transaction.version 2 since 3a45fb7, 1 before) vs Apache Kafka {m['kafka']} (transaction.version "
            f"{out.get('kafka_transaction_version', 'default (2)')}), single node, transactions: {prof['rounds']} "
            f"round(s), Java client {m['kafka']}, 1 KiB records; {m['cpus']} CPUs ({m['cpu_model']}); elapsed "
            f"{out['elapsed_s'] / 60:.1f} min; load average {compare.load_range(out['sessions'])}")


def print_report(out, json_path, args):
    print()
    print(caption(out))
    print()
    table = render_table(out)
    print(table)
    bound = render_bound_table(out)
    print("\nWhat limits each row (broker cores: broker CPU over the client's measured phase; client cores: the "
          "client JVM's CPU over its whole run, start-up included):\n")
    print(bound)
    all_errors = [(s["broker"], s["round"], e) for s in out["sessions"] for e in s["errors"]]
    if all_errors:
        print("\nFailures:")
        for b, r, e in all_errors:
            print(f"- {b} round {r}: {e}")
    print(f"\nRaw results: {json_path}")
    if args.markdown:
        Path(args.markdown).write_text(caption(out) + "\n\n" + table + "\n\n" + bound + "\n")
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="smoke run: small counts, 1 round")
    ap.add_argument("--rounds", type=int, help="rounds (each starts both brokers once, order alternating)")
    ap.add_argument("--records-txn100", type=int, help="records per run with 100-record transactions")
    ap.add_argument("--records-txn10000", type=int, help="records per run with 10,000-record transactions")
    ap.add_argument("--latency-rate", type=int, help="transactions/s of the latency run")
    ap.add_argument("--latency-txn-records", type=int, help="records per transaction of the latency run")
    ap.add_argument("--latency-seconds", type=float, help="measured seconds of the latency run")
    ap.add_argument("--latency-only", action="store_true", help="run the read_committed latency run only")
    ap.add_argument("--only", choices=["mala", "kafka"], help="run one broker only")
    ap.add_argument("--kafka-transaction-version", type=int,
                    help="format Kafka with --feature transaction.version=N (default: Kafka's, 2 on 4.x; Mala "
                         "serves 1, so 1 compares the same client flow)")
    ap.add_argument("--mala-bin", default=str(compare.REPO / "build" / "src" / "app" / "mala"))
    ap.add_argument("--kafka-libs", default=str(compare.REPO / "tests" / "integration" / ".deps" / "kafka-libs"))
    ap.add_argument("--work-dir", help="where configs, logs and data go (default: a new temp dir)")
    ap.add_argument("--json", help="write all raw results here (default: <work dir>/results.json)")
    ap.add_argument("--markdown", help="also write the tables here")
    ap.add_argument("--keep", action="store_true", help="keep the brokers' data dirs")
    ap.add_argument("--step-timeout", type=float, default=600, help="seconds any one workload may take")
    ap.add_argument("--from-json", help="run nothing: print the tables of an earlier run's results.json")
    args = ap.parse_args()
    if args.from_json:
        return print_report(json.loads(Path(args.from_json).read_text()), args.from_json, args)

    prof = compare.profile_from_args(args, PROFILES, ("rounds", "records_txn100", "records_txn10000", "latency_rate",
                                                      "latency_txn_records", "latency_seconds"))
    brokers, work, env = compare.run_setup(args, "mala-bench-txn-")
    compare.exit_on_problems(env, brokers, "compare_txn.py", needs_go=False)
    env.compile_java_tool(TXN_PERF_SRC)
    machine = compare.machine_info(env)
    compare.log(f"work dir {work}; profile {prof}; brokers {brokers}")

    sessions = []
    started = time.time()
    classes = {"mala": compare.MalaBroker, "kafka": compare.KafkaBroker}
    if args.kafka_transaction_version is not None:
        classes["kafka"] = type("KafkaBroker", (compare.KafkaBroker,), {
            "format_args": ("--feature", f"transaction.version={args.kafka_transaction_version}")})
    for rnd in range(1, prof["rounds"] + 1):
        for b in (brokers if rnd % 2 == 1 else list(reversed(brokers))):
            compare.log(f"round {rnd}/{prof['rounds']}: {b}")
            t = time.time()
            metrics, errors, info = run_session(env, classes[b], rnd, prof, args)
            info["seconds"] = time.time() - t
            sessions.append({"broker": b, "round": rnd, "metrics": metrics, "errors": errors, "info": info})

    out = {"machine": machine, "profile": prof, "record_size": RECORD_SIZE, "brokers": brokers,
           "kafka_transaction_version": args.kafka_transaction_version or "default (2)",
           "started": datetime.datetime.fromtimestamp(started).isoformat(timespec="seconds"),
           "elapsed_s": time.time() - started, "sessions": sessions}
    json_path = Path(args.json) if args.json else work / "results.json"
    json_path.write_text(json.dumps(out, indent=1, default=str))
    return print_report(out, json_path, args)


if __name__ == "__main__":
    sys.exit(main())
