#!/usr/bin/env python3
"""librdkafka-based load for bench/e2e/compare.py (confluent-kafka, several processes so the Python side is not the
bottleneck). Prints one JSON object on stdout; exits 1 (with the JSON still printed, "error" set) on failure.

  rdkafka_load.py produce --bootstrap B --topic T --records N --size S --acks 1|all [--procs P]
      N records of S bytes (no key, one random payload reused, as ProducerPerformance does) split over P producer
      processes, librdkafka defaults otherwise (linger.ms 5, no compression). Throughput = all bytes / (last
      flush() end - first produce() start); the processes start together after fetching metadata.
  rdkafka_load.py consume --bootstrap B --topic T [--procs P]
      reads every partition from the beginning to the high watermark it had at the start, partitions spread over P
      processes, with assign() (no consumer group: group.id is set only because the Python binding asks for one;
      nothing is committed). Throughput = value bytes / (last record - first consume() call).
  rdkafka_load.py latency --bootstrap B --topic T --rate R --seconds D --size S [--acks all]
      one producer at a fixed rate with linger.ms=0; latency of each record from produce() to its delivery report
      (librdkafka's rd_kafka_message_latency, microseconds). The first 10 % of the records are a warm-up and are
      not counted. Reports p50/p99/p99.9 in ms, and from librdkafka's statistics (1 s windows after the warm-up)
      the broker round trip of its requests (rtt: request sent to response read) and the time records waited in
      the producer's queue before being sent (int_latency): the medians of the windows' p50/p99 and the largest
      window p99.
"""

import argparse
import json
import math
import multiprocessing as mp
import os
import statistics
import sys
import time

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition

IDLE_TIMEOUT_S = 30.0
STATS_WINDOW_MS = 1000  # librdkafka statistics window of the latency mode


def quiet_logger():
    """librdkafka logs connection errors through the binding; keep stderr readable (errors still fail the run)."""
    import logging
    log = logging.getLogger("rdkafka_load")
    log.addHandler(logging.NullHandler())
    log.propagate = False
    return log


def produce_worker(args, idx, count, barrier, out):
    result = {"records": 0, "bytes": 0, "errors": 0, "first_error": None, "t0": None, "t1": None}
    try:
        p = Producer({"bootstrap.servers": args.bootstrap, "acks": args.acks, "client.id": f"bench-rd-prod-{idx}",
                      "queue.buffering.max.messages": 1000000, "logger": quiet_logger()})
        p.list_topics(args.topic, timeout=30)
        payload = os.urandom(args.size)
        errors = [0, None]
        acked = [0]

        def on_delivery(err, _msg):
            if err is not None:
                errors[0] += 1
                if errors[1] is None:
                    errors[1] = str(err)
            else:
                acked[0] += 1

        barrier.wait(timeout=60)
        result["t0"] = time.perf_counter()
        produce = p.produce
        topic = args.topic
        for i in range(count):
            while True:
                try:
                    produce(topic, payload, on_delivery=on_delivery)
                    break
                except BufferError:
                    p.poll(0.002)
            if (i & 1023) == 0:
                p.poll(0)
        left = p.flush(IDLE_TIMEOUT_S * 4)
        result["t1"] = time.perf_counter()
        result["records"] = acked[0]
        result["bytes"] = acked[0] * args.size
        result["errors"] = errors[0] + left
        result["first_error"] = errors[1] or (f"{left} records not delivered after flush()" if left else None)
    except Exception as e:  # reported, never raised across the process boundary
        result["first_error"] = f"{type(e).__name__}: {e}"
        result["errors"] += 1
    out.put(result)


def run_produce(args):
    per = [args.records // args.procs + (1 if i < args.records % args.procs else 0) for i in range(args.procs)]
    ctx = mp.get_context("fork")
    barrier = ctx.Barrier(args.procs)
    out = ctx.Queue()
    procs = [ctx.Process(target=produce_worker, args=(args, i, per[i], barrier, out)) for i in range(args.procs)]
    for pr in procs:
        pr.start()
    results = [out.get() for _ in procs]
    for pr in procs:
        pr.join()
    records = sum(r["records"] for r in results)
    total_bytes = sum(r["bytes"] for r in results)
    errors = sum(r["errors"] for r in results)
    first_error = next((r["first_error"] for r in results if r["first_error"]), None)
    res = {"mode": "produce", "records": records, "bytes": total_bytes, "errors": errors}
    if all(r["t0"] is not None and r["t1"] is not None for r in results):
        secs = max(r["t1"] for r in results) - min(r["t0"] for r in results)
        res["seconds"] = secs
        res["records_per_sec"] = records / secs
        res["mb_per_sec"] = total_bytes / secs / 2**20
    if errors or records != args.records:
        res["error"] = first_error or f"{records} of {args.records} records acknowledged"
    return res


def consume_worker(args, idx, partitions, barrier, out):
    result = {"records": 0, "bytes": 0, "t0": None, "t1": None, "error": None}
    try:
        c = Consumer({"bootstrap.servers": args.bootstrap, "group.id": "bench-rd-unused",
                      "enable.auto.commit": False, "client.id": f"bench-rd-cons-{idx}", "logger": quiet_logger()})
        ends = {}
        for part in partitions:
            _low, high = c.get_watermark_offsets(TopicPartition(args.topic, part), timeout=30)
            if high > 0:
                ends[part] = high
        c.assign([TopicPartition(args.topic, part, -2) for part in ends])  # -2 = OFFSET_BEGINNING
        barrier.wait(timeout=60)
        result["t0"] = time.perf_counter()
        last_progress = time.monotonic()
        nbytes = 0
        nrec = 0
        while ends:
            msgs = c.consume(num_messages=10000, timeout=0.5)
            now = time.monotonic()
            if not msgs:
                if now - last_progress > IDLE_TIMEOUT_S:
                    raise RuntimeError(f"no records for {IDLE_TIMEOUT_S} s with partitions {sorted(ends)} unfinished")
                continue
            last_progress = now
            for m in msgs:
                if m.error() is not None:
                    if m.error().code() == -191:  # _PARTITION_EOF (only when enabled); harmless
                        continue
                    raise KafkaException(m.error())
                v = m.value()
                nbytes += len(v) if v is not None else 0
                nrec += 1
                part = m.partition()
                if part in ends and m.offset() + 1 >= ends[part]:
                    del ends[part]
            result["t1"] = time.perf_counter()
        result["records"] = nrec
        result["bytes"] = nbytes
        c.close()
    except Exception as e:
        result["error"] = f"{type(e).__name__}: {e}"
    out.put(result)


def run_consume(args):
    c = Consumer({"bootstrap.servers": args.bootstrap, "group.id": "bench-rd-unused", "logger": quiet_logger()})
    md = c.list_topics(args.topic, timeout=30)
    c.close()
    topic_md = md.topics.get(args.topic)
    if topic_md is None or topic_md.error is not None:
        return {"mode": "consume", "error": f"topic metadata: {topic_md.error if topic_md else 'missing'}"}
    parts = sorted(topic_md.partitions)
    nprocs = max(1, min(args.procs, len(parts)))
    groups = [parts[i::nprocs] for i in range(nprocs)]
    ctx = mp.get_context("fork")
    barrier = ctx.Barrier(nprocs)
    out = ctx.Queue()
    procs = [ctx.Process(target=consume_worker, args=(args, i, groups[i], barrier, out)) for i in range(nprocs)]
    for pr in procs:
        pr.start()
    results = [out.get() for _ in procs]
    for pr in procs:
        pr.join()
    res = {"mode": "consume", "records": sum(r["records"] for r in results),
           "bytes": sum(r["bytes"] for r in results)}
    err = next((r["error"] for r in results if r["error"]), None)
    if err:
        res["error"] = err
    t0s = [r["t0"] for r in results if r["t0"] is not None]
    t1s = [r["t1"] for r in results if r["t1"] is not None]
    if t0s and t1s and res["bytes"]:
        secs = max(t1s) - min(t0s)
        res["seconds"] = secs
        res["mb_per_sec"] = res["bytes"] / secs / 2**20
        res["records_per_sec"] = res["records"] / secs
    return res


def percentile(sorted_vals, q):
    """Nearest-rank percentile (what ProducerPerformance prints too)."""
    if not sorted_vals:
        return None
    k = max(0, math.ceil(q * len(sorted_vals)) - 1)
    return sorted_vals[min(k, len(sorted_vals) - 1)]


def broker_windows(stats_json):
    """(rtt, int_latency) summaries of every broker connection in one librdkafka statistics window: rtt is a
    request's round trip on the wire (sent to answered, the broker's share), int_latency a record's wait in the
    producer's own queue before it is sent (the client's)."""
    stats = json.loads(stats_json)
    return [{"rtt": b["rtt"], "int_latency": b["int_latency"]} for b in stats.get("brokers", {}).values()
            if b.get("nodeid", -1) >= 0 and b.get("rtt", {}).get("cnt", 0) > 0]


def run_latency(args):
    windows = []  # (time, [{"rtt": ..., "int_latency": ...} per broker]) per statistics window of STATS_WINDOW_MS
    p = Producer({"bootstrap.servers": args.bootstrap, "acks": args.acks, "linger.ms": 0,
                  "client.id": "bench-rd-latency", "logger": quiet_logger(),
                  "statistics.interval.ms": STATS_WINDOW_MS,
                  "stats_cb": lambda js: windows.append((time.perf_counter(), broker_windows(js)))})
    p.list_topics(args.topic, timeout=30)
    payload = os.urandom(args.size)
    total = int(args.rate * args.seconds)
    lat = []
    errors = [0, None]

    def on_delivery(err, msg):
        if err is not None:
            errors[0] += 1
            if errors[1] is None:
                errors[1] = str(err)
        else:
            lat.append(msg.latency())

    interval = 1.0 / args.rate
    start = time.perf_counter()
    next_t = start
    sent = 0
    while sent < total:
        now = time.perf_counter()
        if now >= next_t:
            p.produce(args.topic, payload, on_delivery=on_delivery)
            sent += 1
            next_t += interval
            p.poll(0)
        else:
            p.poll(next_t - now)  # wakes early for a delivery report, so latencies are read promptly
    left = p.flush(IDLE_TIMEOUT_S)
    elapsed = time.perf_counter() - start
    warm = total // 10
    # Delivery reports arrive in produce order per partition; dropping the first 10 % by arrival is close enough to
    # dropping the first 10 % sent.
    samples = sorted(lat[warm:])
    res = {"mode": "latency", "records": len(lat), "target_rate": args.rate, "achieved_rate": total / elapsed,
           "samples": len(samples)}
    for name, q in (("p50_ms", 0.50), ("p99_ms", 0.99), ("p999_ms", 0.999)):
        v = percentile(samples, q)
        res[name] = v * 1000.0 if v is not None else None
    # librdkafka's own split of the delay, per 1 s window after the warm-up: the broker round trip (rtt) and the
    # producer queue (int_latency). Its windows cannot be merged into one distribution, so these are the
    # medians (and the largest) of the windows' percentiles, in ms.
    # A window is stamped when librdkafka emits it, at its end: keep those that began after the warm-up.
    warm_end = start + args.seconds / 10
    measured = [w for t, ws in windows if t - STATS_WINDOW_MS / 1000.0 >= warm_end for w in ws]
    for name, field, pick in (("rtt_p50_ms", "rtt", "p50"), ("rtt_p99_ms", "rtt", "p99"),
                              ("queue_p99_ms", "int_latency", "p99")):
        vals = sorted(w[field][pick] / 1000.0 for w in measured)
        res[name] = statistics.median(vals) if vals else None
        if name == "rtt_p99_ms":
            res["rtt_p99_max_ms"] = vals[-1] if vals else None
    res["stats_windows"] = len(measured)
    if errors[0] or left:
        res["error"] = errors[1] or f"{left} records not delivered"
    return res


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("mode", choices=["produce", "consume", "latency"])
    ap.add_argument("--bootstrap", required=True)
    ap.add_argument("--topic", required=True)
    ap.add_argument("--records", type=int, default=100000)
    ap.add_argument("--size", type=int, default=1024)
    ap.add_argument("--acks", default="all")
    ap.add_argument("--procs", type=int, default=2)
    ap.add_argument("--rate", type=float, default=1000)
    ap.add_argument("--seconds", type=float, default=10)
    args = ap.parse_args()
    try:
        res = {"produce": run_produce, "consume": run_consume, "latency": run_latency}[args.mode](args)
    except Exception as e:
        res = {"mode": args.mode, "error": f"{type(e).__name__}: {e}"}
    print(json.dumps(res))
    sys.exit(1 if res.get("error") else 0)


if __name__ == "__main__":
    main()
