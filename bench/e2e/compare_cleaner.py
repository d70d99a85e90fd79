#!/usr/bin/env python3
"""Log cleaner (compaction): one Mala node against one Apache Kafka 4.x node on the same data (issue 21).

For each key count K (default 10,000 and 2,000,000), each broker in turn, fresh, with compare.py's
server.properties plus log.cleaner.dedupe.buffer.size (--dedupe-mib, the same for both) and
log.cleaner.backoff.ms=1000:
  1. a topic `compacted` (1 partition, segment.bytes --segment-mib, min.cleanable.dirty.ratio 0.01) created with
     cleanup.policy=delete, so the cleaner leaves it alone while it fills;
  2. --records records produced to it (acks=1, librdkafka): key "k%09d" drawn from K keys by a seeded random
     generator (the same sequence for both brokers), --value-bytes random bytes each;
  3. baseline: a producer at --latency-rate records/s (acks=1, linger.ms=0, --value-bytes; a process of its own) to a second topic,
     --warmup-seconds first (a fresh JVM compiles its produce path), then --baseline-seconds measured: latency of
     each record from produce() to its delivery report (librdkafka's per-message latency), the broker's CPU by
     thread name;
  4. the dirty bytes: the sizes of the partition's segment files but the active one (nothing was ever cleaned,
     so all of it is dirty); peak RSS reset (/proc/PID/clear_refs 5) and RSS read;
  5. the same producer started again, then IncrementalAlterConfigs cleanup.policy=compact; the broker's log
     followed until a round has cleaned up to the active segment (Mala: "cleaned offsets a..b", Kafka: "Log
     cleaner thread 0 cleaned log ... (dirty section = [a, b])"), the RSS sampled every --poll-ms (250 ms;
     the harness reads the same /proc files and the log as often during the baseline, so that its own CPU use
     is in both phases, and not more often: on 2 cores every read of the harness delays the shards and the
     producer while the cleaner holds the other core);
  6. results: cleaning time = first round's start to last round's end, from the broker's own log timestamps
     (Mala: "cleaning round started" .. "cleaned offsets"; Kafka: "Beginning cleaning of log" .. its stats
     lines); throughput = dirty bytes (MiB) / cleaning time; peak RSS while cleaning (VmHWM after the reset) and
     its growth over the RSS before; CPU seconds of the cleaner thread (Kafka: kafka-log-cleaner-thread-0; Mala:
     its log-cleaner-N threads) and of the whole broker, from the
     first round's start to the end; produce p50/p99 of the records sent while cleaning against the baseline's;
     the size of the cleaned segments afterwards (the same data, so about the same for both). Diagnostics in the
     JSON: the cleaner thread's time runnable but waiting for a CPU (schedstat), every thread's CPU and run-queue
     time in the window, the machine's CPU by kind, the broker's thread states sampled every --poll-ms (and those
     sampled while a produce record had waited over 100 ms), the slowest records and when they were sent.

Kafka logs through slf4j-simple (the jars' binding) to its broker.log, at INFO, with timestamps turned on here.
Prints a Markdown table with Mala/Kafka ratios and writes the raw numbers to <work dir>/results.json. Nothing is
asserted.

  bench/e2e/compare_cleaner.py                                  # K = 10k and 2M, both brokers (about 4 min)
  bench/e2e/compare_cleaner.py --keys 10000 --records 300000 --only mala   # a quick look
  bench/e2e/compare_cleaner.py --from-json bench/e2e/results/2026-12-04-cleaner-default.json

Needs: build/src/app/mala (or --mala-bin), Kafka's jars in tests/integration/.deps/kafka-libs, java, confluent-kafka.
"""

import argparse
import datetime
import json
import os
import random
import re
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import compare  # noqa: E402  (the brokers, their configs and process helpers are compare.py's)
from compare_partition_scale import admin, quiet_logger, wait_metadata  # noqa: E402

log = compare.log
MIB = 2**20
TOPIC = "compacted"
LATENCY_TOPIC = "latency"


def extra_properties(args):
    return ["", "# compare_cleaner.py: the same key map for both, and a short idle backoff",
            f"log.cleaner.dedupe.buffer.size={args.dedupe_mib * MIB}", "log.cleaner.backoff.ms=1000"] + (
                [f"log.cleaner.io.max.bytes.per.second={int(args.io_max_mib * MIB)}"] if args.io_max_mib else []) + (
                    list(args.broker_property or [])) + [""]


class CleanerBrokerMixin:
    extra = []

    def __init__(self, env, tag):
        super().__init__(env, tag)
        with open(self.config_path, "a") as f:
            f.write("\n".join(self.extra))


class MalaCleaner(CleanerBrokerMixin, compare.MalaBroker):
    @staticmethod
    def is_cleaner_thread(tid, name, pid):
        return name.startswith("log-cleaner-")

    # [2026-12-04 02:30:00.123] [thread] [info] compacted-0: cleaning round started: dirty offsets 0..9, 1 of 2 bytes dirty
    TS = r"^\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3})\]"
    START_RE = re.compile(TS + rf".*\] {TOPIC}-0: cleaning round started: dirty offsets (\d+)\.\.(\d+), (\d+) of "
                          r"(\d+) bytes dirty", re.M)
    END_RE = re.compile(TS + rf".*\] {TOPIC}-0: cleaned offsets (\d+)\.\.(\d+) in (\d+) ms: (\d+) keys, (\d+) bytes "
                        r"read \((\d+) for the key map\), (\d+) written, (\d+) records removed", re.M)

    def rounds(self, text):
        """[(start datetime, end datetime, end offset exclusive, details)] of the finished rounds of TOPIC-0."""
        starts = [parse_ts(m.group(1)) for m in self.START_RE.finditer(text)]
        out = []
        for i, m in enumerate(self.END_RE.finditer(text)):
            details = {"ms": int(m.group(4)), "keys": int(m.group(5)), "bytes_read": int(m.group(6)),
                       "map_bytes_read": int(m.group(7)), "bytes_written": int(m.group(8)),
                       "records_removed": int(m.group(9))}
            start = starts[i] if i < len(starts) else None
            out.append((start, parse_ts(m.group(1)), int(m.group(3)) + 1, details))
        return out


class KafkaCleaner(CleanerBrokerMixin, compare.KafkaBroker):
    @staticmethod
    def is_cleaner_thread(tid, name, pid):
        return name.startswith("kafka-log-clean")  # kafka-log-cleaner-thread-N, cut to 15 characters

    # slf4j-simple with timestamps: "2026-12-04 02:30:00.123 [kafka-log-cleaner-thread-0] INFO <logger> - <msg>"
    TS = r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3}) "
    START_RE = re.compile(TS + rf".*Beginning cleaning of log {TOPIC}-0", re.M)
    # The stats message starts with a newline: the timestamp is on the line before "Log cleaner thread".
    END_RE = re.compile(TS + r"[^\n]*\n\s*Log cleaner thread \d+ cleaned log " + TOPIC +
                        r"-0 \(dirty section = \[(\d+), (\d+)\]\)\s*\n\s*([\d,.]+) MB of log processed in ([\d,.]+) "
                        r"seconds(?:.*\n)*?\s*Start size: ([\d,.]+) MB \(([\d,]+) messages\)\s*\n\s*End size: "
                        r"([\d,.]+) MB \(([\d,]+) messages\)", re.M)

    def command(self):
        cmd = super().command()
        at = cmd.index(compare.KAFKA_MAIN)
        return cmd[:at] + ["-Dorg.slf4j.simpleLogger.showDateTime=true",
                           "-Dorg.slf4j.simpleLogger.dateTimeFormat=yyyy-MM-dd HH:mm:ss.SSS"] + cmd[at:]

    def rounds(self, text):
        starts = [parse_ts(m.group(1)) for m in self.START_RE.finditer(text)]
        out = []
        for i, m in enumerate(self.END_RE.finditer(text)):
            num = lambda s: float(s.replace(",", ""))  # noqa: E731
            details = {"mb_processed": num(m.group(4)), "seconds": num(m.group(5)),
                       "start_mb": num(m.group(6)), "start_messages": int(num(m.group(7))),
                       "end_mb": num(m.group(8)), "end_messages": int(num(m.group(9)))}
            start = starts[i] if i < len(starts) else None
            out.append((start, parse_ts(m.group(1)), int(m.group(3)), details))
        return out


def thread_cpu(pid):
    """{tid: (name, user + system CPU seconds)} of every live thread of the process."""
    return {tid: (name, cpu) for tid, (name, cpu, _) in thread_sched(pid).items()}


def thread_sched(pid):
    """{tid: (name, user + system CPU seconds, seconds runnable but waiting for a CPU)} of every live thread:
    /proc/PID/task/TID/stat and schedstat (its second field: time on a run queue)."""
    out = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        name = stat[stat.find("(") + 1:stat.rfind(")")]
        fields = stat[stat.rfind(")") + 2:].split()
        try:
            with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                waited = int(f.read().split()[1]) / 1e9
        except (OSError, IndexError, ValueError):
            waited = 0.0
        out[int(tid)] = (name, (int(fields[11]) + int(fields[12])) / compare.clk_tck(), waited)
    return out


def cpu_by_thread_name(before, after):
    """CPU seconds between two thread_cpu() readings, summed by thread name without its digits."""
    out = {}
    for tid, (name, cpu) in after.items():
        key = re.sub(r"\d+", "N", name)
        out[key] = out.get(key, 0.0) + cpu - before.get(tid, (name, 0.0))[1]
    return {k: round(v, 2) for k, v in sorted(out.items(), key=lambda kv: -kv[1]) if v > 0}


def sample_thread_states(pid, seen):
    """Counts the broker's threads by name (digits as N), state (R running or runnable, S sleeping, D waiting on
    the disk or the file system) and kernel wait channel, now; returns the counts and adds them to `seen`."""
    now = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/stat") as f:
                stat = f.read()
            state = stat[stat.rfind(")") + 2]
            with open(f"/proc/{pid}/task/{tid}/wchan") as f:
                wchan = f.read().strip() or "-"
        except OSError:
            continue
        name = re.sub(r"\d+", "N", stat[stat.find("(") + 1:stat.rfind(")")])
        key = f"{name} {state} {wchan if state != 'R' else ''}".strip()
        now[key] = now.get(key, 0) + 1
    for key, n in now.items():
        seen[key] = seen.get(key, 0) + n
    return now


STAT_FIELDS = ("user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal")


def machine_cpu():
    """The machine's CPU seconds so far by kind, from the first line of /proc/stat."""
    with open("/proc/stat") as f:
        values = f.readline().split()[1:1 + len(STAT_FIELDS)]
    return [int(v) / compare.clk_tck() for v in values]


def machine_cpu_share(before, after):
    """Cores busy with each kind of work between two machine_cpu() readings."""
    total = sum(after) - sum(before)
    cpus = os.cpu_count() or 1
    return {k: round(cpus * (a - b) / total, 2) for k, a, b in zip(STAT_FIELDS, after, before)} if total else {}


def parse_ts(s):
    return datetime.datetime.strptime(s, "%Y-%m-%d %H:%M:%S.%f")


def partition_dir(broker, topic):
    found = [p for p in broker.data_dir.rglob(f"{topic}-0") if p.is_dir()]
    if not found:
        raise RuntimeError(f"no directory {topic}-0 under {broker.data_dir}")
    return found[0]


def segments(broker, topic):
    """[(base offset, bytes)] of the partition's .log files, in offset order."""
    d = partition_dir(broker, topic)
    return sorted((int(p.stem), p.stat().st_size) for p in d.glob("*.log") if p.stem.isdigit())


def create_topics(broker, args):
    from confluent_kafka.admin import NewTopic
    a = admin(broker)
    topics = [NewTopic(TOPIC, 1, 1, config={"cleanup.policy": "delete", "segment.bytes": str(args.segment_mib * MIB),
                                            "min.cleanable.dirty.ratio": "0.01"}),
              NewTopic(LATENCY_TOPIC, 1, 1)]
    for _, fut in a.create_topics(topics, operation_timeout=60, request_timeout=60).items():
        fut.result(timeout=60)
    deadline = time.monotonic() + 60
    while True:
        md = a.list_topics(timeout=10)
        if all(t in md.topics and md.topics[t].error is None and md.topics[t].partitions[0].leader >= 0
               for t in (TOPIC, LATENCY_TOPIC)):
            return
        if time.monotonic() > deadline:
            raise RuntimeError("topics without a leader after 60 s")
        time.sleep(0.1)


def fill(broker, args, keys):
    """--records records to TOPIC, keys from a seeded generator; returns seconds."""
    from confluent_kafka import Producer
    p = Producer({"bootstrap.servers": broker.bootstrap, "acks": "1", "linger.ms": 20, "batch.size": 1_000_000,
                  "queue.buffering.max.messages": 500_000, "queue.buffering.max.kbytes": 1_048_576,
                  "message.timeout.ms": 300_000, "logger": quiet_logger()})
    rng = random.Random(args.seed)
    blob = random.Random(args.seed + 1).randbytes(1 << 20)
    errors = []

    def on_delivery(err, _msg):
        if err is not None:
            errors.append(err)

    t0 = time.perf_counter()
    span = len(blob) - args.value_bytes
    for i in range(args.records):
        key = b"k%09d" % rng.randrange(keys)
        at = (i * 7919) % span
        while True:
            try:
                p.produce(TOPIC, blob[at:at + args.value_bytes], key=key, on_delivery=on_delivery)
                break
            except BufferError:
                p.poll(0.01)
        if i % 10_000 == 0:
            p.poll(0)
    left = p.flush(300)
    if left or errors:
        raise RuntimeError(f"fill: {left} records not delivered, errors {errors[:3]}")
    return time.perf_counter() - t0


def latency_worker(bootstrap, rate, value_bytes, ready, reset, stopping, oldest, conn):
    """The latency producer's loop, in a process of its own (see LatencyProducer)."""
    from confluent_kafka import Producer
    p = Producer({"bootstrap.servers": bootstrap, "acks": "1", "linger.ms": 0,
                  "message.timeout.ms": 60_000, "logger": quiet_logger()})
    p.list_topics(LATENCY_TOPIC, timeout=30)
    payload = os.urandom(value_bytes)
    samples, outstanding, errors = [], {}, [0]
    interval = 1.0 / rate
    ready.set()
    next_at = time.monotonic()
    while not stopping.is_set():
        if reset.is_set():
            samples.clear()
            reset.clear()
        now = time.monotonic()
        if now < next_at:
            # Blocks in librdkafka until a delivery report arrives or 1 ms passes (its timeouts are whole
            # milliseconds: a shorter one is 0, and this loop would spin a core, which it did before 2026-12-05,
            # leaving the shards one core to share with the cleaner). Records due meanwhile are sent late, back to
            # back, each timed from its own produce().
            p.poll(0.001)
            oldest.value = next(iter(outstanding), 0.0)
            continue
        sent = now

        def on_delivery(err, msg, sent=sent):
            outstanding.pop(sent, None)
            if err is not None:
                errors[0] += 1
            else:
                samples.append((sent, msg.latency()))

        outstanding[sent] = True
        p.produce(LATENCY_TOPIC, payload, on_delivery=on_delivery)
        p.poll(0)
        oldest.value = next(iter(outstanding), 0.0)
        next_at += interval
        if next_at < now - 1.0:  # fell a second behind (a stall): do not burst to catch up
            next_at = now
    p.flush(60)
    conn.send((samples, errors[0]))
    conn.close()


class LatencyProducer:
    """A producer at a fixed rate in a process of its own; (send time, latency seconds) of every delivered record.

    Its own process, not a thread of the harness: librdkafka's per-record latency is taken when the delivery
    callback runs, and a Python thread that waits for the GIL while the harness samples /proc and parses the
    broker's log (then every 50 ms, only while cleaning) adds up to the interpreter's 5 ms switch interval to the
    records it reports then; that was most of the p99 "while cleaning" this bench measured before 2026-12-05.
    Send times are CLOCK_MONOTONIC, the same clock in both processes."""

    def __init__(self, broker, args):
        import multiprocessing
        ctx = multiprocessing.get_context("spawn")  # no fork of a process that runs librdkafka threads
        self.ready, self.reset, self.stopping = ctx.Event(), ctx.Event(), ctx.Event()
        self.oldest = ctx.Value("d", 0.0, lock=False)
        self.conn, child = ctx.Pipe(duplex=False)
        self.proc = ctx.Process(target=latency_worker, daemon=True,
                                args=(broker.bootstrap, args.latency_rate, args.value_bytes, self.ready,
                                      self.reset, self.stopping, self.oldest, child))
        self.errors = 0

    def start(self):
        self.proc.start()
        if not self.ready.wait(60):
            raise RuntimeError("the latency producer did not start")
        return self

    def clear_samples(self):
        self.reset.set()

    def oldest_outstanding(self):
        v = self.oldest.value
        return v if v > 0 else None

    def stop(self):
        self.stopping.set()
        if not self.conn.poll(120):
            self.proc.kill()
            raise RuntimeError("the latency producer did not report")
        samples, self.errors = self.conn.recv()
        self.proc.join(30)
        return samples


def set_sched_slice(tid, slice_ns):
    """sched_setattr(2) of a SCHED_OTHER thread with sched_runtime = its requested slice (EEVDF, Linux 6.12+)."""
    import ctypes
    u32, u64, i32 = ctypes.c_uint32, ctypes.c_uint64, ctypes.c_int32

    class SchedAttr(ctypes.Structure):
        _fields_ = [("size", u32), ("sched_policy", u32), ("sched_flags", u64), ("sched_nice", i32),
                    ("sched_priority", u32), ("sched_runtime", u64), ("sched_deadline", u64),
                    ("sched_period", u64), ("sched_util_min", u32), ("sched_util_max", u32)]

    libc = ctypes.CDLL(None, use_errno=True)
    attr = SchedAttr(size=ctypes.sizeof(SchedAttr), sched_policy=os.SCHED_OTHER,
                     sched_nice=os.getpriority(os.PRIO_PROCESS, tid), sched_runtime=slice_ns)
    if libc.syscall(314, tid, ctypes.byref(attr), 0) != 0:  # 314: sched_setattr on x86-64
        raise OSError(ctypes.get_errno(), f"sched_setattr of thread {tid}")


def percentiles(lat_s):
    if not lat_s:
        return {"count": 0}
    v = sorted(lat_s)

    def pct(q):
        return 1000 * v[min(len(v) - 1, int(q * len(v)))]
    return {"count": len(v), "p50_ms": pct(0.50), "p99_ms": pct(0.99), "p999_ms": pct(0.999),
            "max_ms": 1000 * v[-1]}


def set_compact(broker):
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType
    res = ConfigResource(ResourceType.TOPIC, TOPIC, incremental_configs=[
        ConfigEntry("cleanup.policy", "compact", incremental_operation=AlterConfigOpType.SET)])
    a = admin(broker)  # referenced until the answer: destroying the client fails the future
    a.incremental_alter_configs([res], request_timeout=30)[res].result(timeout=30)


class BrokerWatch:
    """What the harness reads of the broker every --poll-ms: its RSS (VmRSS, RssAnon, RssFile, one read of
    /proc/PID/status), its threads' states (optional) and the log text written since `log_offset`, read
    incrementally."""

    def __init__(self, broker, log_offset=None, seen=None):
        self.broker = broker
        self.seen = {} if seen is None else seen
        self.rss_max = self.anon_max = self.file_max = 0
        self.log = open(broker.log_path, "rb")
        self.log.seek(broker.log_path.stat().st_size if log_offset is None else log_offset)
        self.text = ""

    def poll(self, states):
        with open(f"/proc/{self.broker.proc.pid}/status") as f:
            for line in f:
                if line.startswith(("VmRSS:", "RssAnon:", "RssFile:")):
                    kb = int(line.split()[1])
                    if line[1] == "m":
                        self.rss_max = max(self.rss_max, kb)
                    elif line[3] == "A":
                        self.anon_max = max(self.anon_max, kb)
                    else:
                        self.file_max = max(self.file_max, kb)
        self.text += self.log.read().decode(errors="replace")
        return sample_thread_states(self.broker.proc.pid, self.seen) if states else None


def rss_kb(broker):
    return compare.proc_status_kb(broker.proc.pid, "VmRSS")


def run_one(env, cls, keys, args):
    broker = cls(env, f"{cls.name}-{keys}")
    res = {"keys": keys}
    try:
        broker.prepare()
        broker.spawn()
        wait_metadata(broker, args.timeout)
        create_topics(broker, args)
        if args.shard_slice_us:
            # An experiment: the EEVDF time slice the shard threads request (Linux 6.12+), set from outside before the
            # baseline, so that both phases run with it.
            pid = broker.proc.pid
            shards = [tid for tid, (name, _) in thread_cpu(pid).items() if name.startswith("shard-")]
            for tid in shards:
                set_sched_slice(tid, int(args.shard_slice_us * 1000))
            res["sliced_threads"] = len(shards)
        res["fill_s"] = fill(broker, args, keys)
        time.sleep(args.settle)
        log(f"{broker.name} K={keys}: filled in {res['fill_s']:.1f} s; baseline latency")
        # Baseline: the latency load alone, after --warmup-seconds of it (a fresh JVM compiles its produce path).
        lp = LatencyProducer(broker, args).start()
        time.sleep(args.warmup_seconds)
        lp.clear_samples()
        c0, t0, threads0 = broker.cpu_seconds(), time.monotonic(), thread_cpu(broker.proc.pid)
        machine0 = machine_cpu()
        # The harness watches the broker in the baseline as it does while cleaning (the same /proc and log reads
        # every --poll-ms), so that its own CPU use, which competes with the shards and the producer, is in both.
        watch = BrokerWatch(broker)
        while time.monotonic() - t0 < args.baseline_seconds:
            time.sleep(args.poll_ms / 1000)
            watch.poll(states=True)
        base_cpu_rate = (broker.cpu_seconds() - c0) / (time.monotonic() - t0)
        res["baseline_cpu_by_thread"] = cpu_by_thread_name(threads0, thread_cpu(broker.proc.pid))
        res["baseline_machine_cores"] = machine_cpu_share(machine0, machine_cpu())
        samples = lp.stop()
        res["baseline_latency"] = percentiles([lat for _, lat in samples])
        if args.save_samples:
            res["baseline_samples_ms"] = [round(1000 * lat, 3) for _, lat in samples]
        res["baseline_cpu_per_s"] = base_cpu_rate
        segs = segments(broker, TOPIC)
        active_base = segs[-1][0]
        res["segments_before"] = len(segs)
        res["dirty_bytes"] = sum(size for _, size in segs[:-1])
        res["log_bytes_before"] = sum(size for _, size in segs)
        with open(f"/proc/{broker.proc.pid}/clear_refs", "w") as f:
            f.write("5")  # resets VmHWM to the current RSS
        res["rss_before_mb"] = rss_kb(broker) / 1024
        res["rss_anon_before_mb"] = compare.proc_status_kb(broker.proc.pid, "RssAnon") / 1024
        if args.cleaner_nice is not None or args.cleaner_sched:
            # An experiment: the cleaner thread(s) at another scheduling policy and/or nice value, set from
            # outside (Mala's own: nice 10 under SCHED_OTHER).
            pid = broker.proc.pid
            reniced = [tid for tid, (name, _) in thread_cpu(pid).items() if cls.is_cleaner_thread(tid, name, pid)]
            policy = {"idle": os.SCHED_IDLE, "other": os.SCHED_OTHER}.get(args.cleaner_sched)
            for tid in reniced:
                if policy is not None:
                    os.sched_setscheduler(tid, policy, os.sched_param(0))
                if args.cleaner_nice is not None:
                    os.setpriority(os.PRIO_PROCESS, tid, args.cleaner_nice)
            res["reniced_threads"] = len(reniced)
        # Cleaning, under the same latency load.
        lp = LatencyProducer(broker, args).start()
        time.sleep(1.0)
        log_offset = broker.log_path.stat().st_size
        set_compact(broker)
        t_trigger = time.monotonic()
        c_start = t_start = t_end = None
        rss_max = anon_max = file_max = 0
        state_samples, slow_samples, polls = {}, [], 0
        done = []
        deadline = t_trigger + args.timeout
        watch = BrokerWatch(broker, log_offset, state_samples)
        while True:
            time.sleep(args.poll_ms / 1000)
            if not broker.alive():
                raise RuntimeError(f"{broker.name} exited with {broker.proc.returncode}:\n{broker.log_tail()}")
            states = watch.poll(states=t_start is not None)
            rss_max, anon_max, file_max = watch.rss_max, watch.anon_max, watch.file_max
            if t_start is not None:
                polls += 1
                oldest = lp.oldest_outstanding()
                if oldest is not None and time.monotonic() - oldest > 0.1:
                    slow_samples.append([round(time.monotonic() - t_start, 3), states])
            text = watch.text
            if t_start is None and cls.START_RE.search(text):
                t_start, c_start = time.monotonic(), broker.cpu_seconds()
                threads_start = thread_sched(broker.proc.pid)
                machine_start = machine_cpu()
            done = broker.rounds(text)
            if done and done[-1][2] >= active_base:
                t_end, c_end = time.monotonic(), broker.cpu_seconds()
                threads_end = thread_sched(broker.proc.pid)
                res["cleaning_machine_cores"] = machine_cpu_share(machine_start, machine_cpu())
                break
            if time.monotonic() > deadline:
                raise RuntimeError(f"not cleaned up to offset {active_base} after {args.timeout} s; rounds {done}")
        samples = lp.stop()
        res["peak_rss_mb"] = compare.proc_status_kb(broker.proc.pid, "VmHWM") / 1024
        res["sampled_max_rss_mb"] = rss_max / 1024
        # VmRSS counts mapped file pages too (segments and indexes a broker maps); RssAnon is its own memory.
        res["sampled_max_rss_anon_mb"] = anon_max / 1024
        res["sampled_max_rss_file_mb"] = file_max / 1024
        res["rss_anon_growth_mb"] = res["sampled_max_rss_anon_mb"] - res["rss_anon_before_mb"]
        res["rss_growth_mb"] = res["peak_rss_mb"] - res["rss_before_mb"]
        res["rounds"] = len(done)
        res["round_details"] = [d for *_, d in done]
        first_start = done[0][0]
        clean_s = (done[-1][1] - first_start).total_seconds() if first_start else None
        res["clean_s"] = clean_s
        res["clean_mib_per_s"] = res["dirty_bytes"] / MIB / clean_s if clean_s else None
        res["trigger_to_done_s"] = t_end - t_trigger
        window = t_end - t_start
        res["window_s"] = window
        # Every thread's CPU and time waiting for a CPU in the window, summed by name (digits as N).
        by_name = {}
        for tid, (name, cpu, waited) in threads_end.items():
            _, cpu0, waited0 = threads_start.get(tid, (name, 0.0, 0.0))
            k = re.sub(r"\d+", "N", name)
            c, w = by_name.get(k, (0.0, 0.0))
            by_name[k] = (c + cpu - cpu0, w + waited - waited0)
        res["window_cpu_and_runqueue_wait_by_thread"] = {k: [round(c, 2), round(w, 2)] for k, (c, w) in
                                                         sorted(by_name.items(), key=lambda kv: -kv[1][0])
                                                         if c > 0 or w > 0.01}
        res["thread_states"] = {"polls": polls, "seen": dict(sorted(state_samples.items(), key=lambda kv: -kv[1]))}
        res["thread_states_while_a_record_waited_over_100ms"] = slow_samples[:40]
        res["process_cpu_s"] = c_end - c_start
        res["process_cpu_less_baseline_s"] = (c_end - c_start) - base_cpu_rate * window
        pid = broker.proc.pid
        per_thread = {f"{name}/{tid}": (cpu - threads_start.get(tid, (name, 0.0, 0.0))[1],
                                        waited - threads_start.get(tid, (name, 0.0, 0.0))[2])
                      for tid, (name, cpu, waited) in threads_end.items() if cls.is_cleaner_thread(tid, name, pid)}
        res["cleaner_threads_cpu"] = {k: v[0] for k, v in per_thread.items() if v[0] > 0}
        res["clean_cpu_s"] = sum(v[0] for v in per_thread.values())
        # Where the cleaner thread's wall time went: on a CPU, runnable but waiting for one (the machine's other
        # load), or neither (blocked: I/O, fsync, locks, sleeps).
        res["mib_per_cleaner_cpu_s"] = res["dirty_bytes"] / MIB / res["clean_cpu_s"] if res["clean_cpu_s"] else None
        res["clean_runqueue_wait_s"] = sum(v[1] for v in per_thread.values())
        res["clean_blocked_s"] = max(0.0, window - res["clean_cpu_s"] - res["clean_runqueue_wait_s"])
        during = [(sent, lat) for sent, lat in samples if t_start <= sent <= t_end]
        res["cleaning_latency"] = percentiles([lat for _, lat in during])
        if args.save_samples:
            res["cleaning_samples"] = [[round(sent - t_start, 4), round(1000 * lat, 3)] for sent, lat in during]
        # When the slowest records were sent, against when the rounds ended (seconds from the first round's start
        # as the broker logged it; the first round's start as seen here is up to --poll-ms later).
        res["slowest_while_cleaning"] = [[round(sent - t_start, 3), round(1000 * lat, 1)]
                                         for sent, lat in sorted(during, key=lambda x: -x[1])[:10]]
        if first_start:
            res["round_ends_s"] = [round((end - first_start).total_seconds(), 3) for _, end, _, _ in done]
        res["latency_errors"] = lp.errors
        b, c = res["baseline_latency"].get("p99_ms"), res["cleaning_latency"].get("p99_ms")
        res["p99_ratio"] = c / b if b and c else None
        time.sleep(args.settle)
        segs_after = segments(broker, TOPIC)
        res["log_bytes_after"] = sum(size for _, size in segs_after)
        res["cleaned_bytes_after"] = sum(size for _, size in segs_after[:-1])
        res["segments_after"] = len(segs_after)
        log(f"{broker.name} K={keys}: {res['dirty_bytes'] / MIB:.0f} MiB dirty cleaned in {clean_s:.2f} s "
            f"({res['clean_mib_per_s']:.1f} MiB/s, {res['rounds']} rounds), peak RSS {res['peak_rss_mb']:.0f} MiB "
            f"(before {res['rss_before_mb']:.0f}), produce p99 {b:.2f} -> {c:.2f} ms "
            f"({res['cleaning_latency']['count']} samples)")
    except Exception as e:  # noqa: BLE001  (a failed run is reported, the others go on)
        res["error"] = str(e)[-2000:]
        log(f"{broker.name} K={keys}: FAILED {res['error'][-800:]}")
    finally:
        broker.stop(timeout=args.timeout)
        if not args.keep:
            broker.cleanup()
    return res


ROWS = [
    ("dirty_bytes", "dirty bytes cleaned (MiB)", lambda v: f"{v / MIB:.0f}"),
    ("rounds", "cleaning rounds", "{:.0f}"),
    ("clean_s", "cleaning time, first round start to last round end (s)", "{:.2f}"),
    ("clean_mib_per_s", "cleaner throughput (MiB of dirty log / s)", "{:.1f}"),
    ("clean_cpu_s", "CPU of the cleaner thread(s) during the clean (s)", "{:.2f}"),
    ("mib_per_cleaner_cpu_s", "dirty MiB cleaned per CPU second of the cleaner thread(s)", "{:.0f}"),
    ("clean_runqueue_wait_s", "cleaner thread runnable, waiting for a CPU (s)", "{:.2f}"),
    ("clean_blocked_s", "cleaner thread blocked: I/O, fsync, locks (s, the rest of the window)", "{:.2f}"),
    ("process_cpu_s", "CPU of the whole broker during the clean, latency load included (s)", "{:.2f}"),
    ("rss_before_mb", "RSS before cleaning (MiB)", "{:.0f}"),
    ("peak_rss_mb", "peak RSS while cleaning, VmHWM (MiB)", "{:.0f}"),
    ("rss_growth_mb", "peak RSS growth over RSS before (MiB)", "{:.0f}"),
    ("sampled_max_rss_anon_mb", "largest anonymous RSS while cleaning, sampled every --poll-ms (MiB)", "{:.0f}"),
    ("rss_anon_growth_mb", "its growth over the anonymous RSS before (MiB)", "{:.0f}"),
    ("cleaned_bytes_after", "cleaned segments' size after (MiB; active segment not counted)",
     lambda v: f"{v / MIB:.1f}"),
    (("baseline_latency", "p99_ms"), "produce p99 without cleaning (ms)", "{:.2f}"),
    (("cleaning_latency", "p99_ms"), "produce p99 while cleaning (ms)", "{:.2f}"),
    ("p99_ratio", "p99 while cleaning / p99 without", "{:.2f}"),
    (("baseline_latency", "p50_ms"), "produce p50 without cleaning (ms)", "{:.2f}"),
    (("cleaning_latency", "p50_ms"), "produce p50 while cleaning (ms)", "{:.2f}"),
    (("cleaning_latency", "count"), "records sent while cleaning", "{:.0f}"),
]


def get(res, key):
    if isinstance(key, tuple):
        return (res.get(key[0]) or {}).get(key[1])
    return res.get(key)


def cell(v, fmt):
    if v is None:
        return "-"
    return fmt(v) if callable(fmt) else fmt.format(v)


def render(out):
    brokers = out["brokers"]
    both = len(brokers) == 2
    head = ["keys", "measure"] + brokers + (["Mala/Kafka"] if both else [])
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for keys in out["keys"]:
        for key, label, fmt in ROWS:
            vals = [get(out["results"].get(b, {}).get(str(keys), {}), key) for b in brokers]
            row = [f"{keys:,}", label] + [cell(v, fmt) for v in vals]
            if both:
                row.append(f"{vals[0] / vals[1]:.3g}x" if None not in vals and vals[1] else "-")
            lines.append("| " + " | ".join(row) + " |")
    errors = [(b, k, r["error"]) for b in brokers for k, r in out["results"].get(b, {}).items() if "error" in r]
    table = "\n".join(lines)
    if errors:
        table += "\n\nFailures:\n" + "\n".join(f"- {b} K={k}: {e[-400:]}" for b, k, e in errors)
    return table


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--keys", default="10000,2000000", help="distinct key counts, one run each, comma-separated")
    ap.add_argument("--records", type=int, default=2_000_000)
    ap.add_argument("--value-bytes", type=int, default=100)
    ap.add_argument("--segment-mib", type=int, default=32)
    ap.add_argument("--dedupe-mib", type=int, default=16, help="log.cleaner.dedupe.buffer.size for both, in MiB")
    ap.add_argument("--latency-rate", type=int, default=2000, help="records/s of the latency producer")
    ap.add_argument("--warmup-seconds", type=float, default=10, help="latency load before the baseline")
    ap.add_argument("--baseline-seconds", type=float, default=15)
    ap.add_argument("--settle", type=float, default=2)
    ap.add_argument("--seed", type=int, default=21)
    ap.add_argument("--io-max-mib", type=float, default=0,
                    help="log.cleaner.io.max.bytes.per.second for both, in MiB/s (default: unlimited)")
    ap.add_argument("--cleaner-nice", type=int,
                    help="experiment: set this nice value on the cleaner thread(s) (Mala: every thread but the "
                         "shards and the main thread) before cleaning")
    ap.add_argument("--shard-slice-us", type=float, default=0,
                    help="an experiment: the EEVDF slice the shard threads request (sched_setattr), from outside")
    ap.add_argument("--cleaner-sched", choices=["idle", "other"],
                    help="experiment: set this scheduling policy (SCHED_IDLE or SCHED_OTHER) on the cleaner thread(s) "
                         "before cleaning, before --cleaner-nice")
    ap.add_argument("--broker-cpus", help="run the broker on these CPUs only (taskset syntax, e.g. 1)")
    ap.add_argument("--client-cpus", help="run this harness and its producers on these CPUs only (e.g. 0)")
    ap.add_argument("--broker-property", action="append", metavar="KEY=VALUE",
                    help="one more server.properties line for both brokers (repeatable)")
    ap.add_argument("--poll-ms", type=float, default=250,
                    help="how often the harness reads the broker's /proc files and log, in both phases (every 50 ms, "
                         "as before 2026-12-05 22:00, was itself a p99 stall every 50 ms while cleaning)")
    ap.add_argument("--save-samples", action="store_true",
                    help="keep every record sent while cleaning (seconds from the first round's start, ms) in the JSON")
    ap.add_argument("--timeout", type=float, default=600, help="seconds any one step may take")
    ap.add_argument("--only", choices=["mala", "kafka"])
    ap.add_argument("--mala-bin", default=str(compare.REPO / "build" / "src" / "app" / "mala"))
    ap.add_argument("--kafka-libs", default=str(compare.REPO / "tests" / "integration" / ".deps" / "kafka-libs"))
    ap.add_argument("--work-dir")
    ap.add_argument("--json")
    ap.add_argument("--keep", action="store_true")
    ap.add_argument("--from-json", metavar="FILE", help="run nothing: print the table of an earlier run")
    args = ap.parse_args()
    if args.from_json:
        print(render(json.loads(Path(args.from_json).read_text())))
        return 0
    args.broker_cpus = args.client_cpus = None
    brokers = [args.only] if args.only else ["mala", "kafka"]
    key_counts = [int(k) for k in args.keys.split(",") if k]
    work = Path(args.work_dir) if args.work_dir else Path(tempfile.mkdtemp(prefix="mala-bench-cleaner-"))
    work.mkdir(parents=True, exist_ok=True)
    env = compare.Env(args, work)
    problems = [p for p in env.check(brokers) if not p.startswith("go ")]  # no Go load tool here
    if problems:
        print("\n".join(problems), file=sys.stderr)
        return 2
    if env.client_cpus:
        os.sched_setaffinity(0, env.client_cpus)  # inherited by the producers' threads
    CleanerBrokerMixin.extra = extra_properties(args)
    classes = {"mala": MalaCleaner, "kafka": KafkaCleaner}
    started = time.time()
    out = {"machine": compare.machine_info(env), "brokers": brokers, "keys": key_counts,
           "settings": {k: getattr(args, k) for k in ("records", "value_bytes", "segment_mib", "dedupe_mib",
                                                      "latency_rate", "warmup_seconds", "baseline_seconds", "seed",
                                                      "cleaner_nice", "cleaner_sched", "shard_slice_us", "io_max_mib", "broker_cpus",
                                                      "client_cpus", "poll_ms", "broker_property")},
           "started": datetime.datetime.fromtimestamp(started).isoformat(timespec="seconds"),
           "results": {b: {} for b in brokers}}
    json_path = Path(args.json) if args.json else work / "results.json"
    log(f"work dir {work}; keys {key_counts}; brokers {brokers}")
    for keys in key_counts:
        for b in brokers:
            out["results"][b][str(keys)] = run_one(env, classes[b], keys, args)
            json_path.write_text(json.dumps(out, indent=1, default=str))
    out["elapsed_s"] = time.time() - started
    json_path.write_text(json.dumps(out, indent=1, default=str))
    m, s = out["machine"], out["settings"]
    print(f"\nMala vs Apache Kafka {m.get('kafka')}, log cleaner, single node; {m.get('cpus')} CPUs; "
          f"{s['records']:,} records of {s['value_bytes']} B, segments {s['segment_mib']} MiB, key map "
          f"{s['dedupe_mib']} MiB; elapsed {out['elapsed_s'] / 60:.1f} min\n")
    print(render(out))
    print(f"\nRaw results: {json_path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
