#!/usr/bin/env python3
"""Consumer-group comparison of one Mala node with one Apache Kafka 4.x node on this machine.

Starts each broker in turn with compare.py's machinery (the same server.properties, fresh temp data dir, free ports,
KRaft combined mode), alternating the order over the rounds, and drives both with librdkafka through
confluent-kafka, classic group protocol (group.protocol=classic, eager range/roundrobin assignment, assignment
computed by the group leader), session.timeout.ms 10000, heartbeat.interval.ms 1000, auto commit off:
  - rebalance time of a group of 10 members on a topic of 100 partitions (10 records in each, produced before):
    each member is a separate Python process; all of them create their Consumer, and once every one is ready they
    subscribe() together and poll. Measured from the latest subscribe() call until every member holds a non-empty
    assignment (on_assign callbacks, CLOCK_MONOTONIC timestamps sent to this process) and the assignments cover the
    100 partitions with no overlap. Then one member close()s (LeaveGroup): measured from the close() call until the
    9 others hold new assignments that again cover the 100 partitions with no overlap. A join either completes in
    one join phase (tens of ms) or needs members to learn of a further rebalance from a heartbeat (about
    heartbeat.interval.ms more), so the table also gives the range and how many joins were done in one go;
  - join-to-first-record latency: one consumer in a new group (fresh group id each time, auto.offset.reset
    earliest) on that topic, from the Consumer's creation (then subscribe()) to the first record poll() returns;
    also the part up to its on_assign;
  - offset commits per second: one consumer of a group, once it holds its assignment, commit()s synchronously one
    partition's offset at a time, round robin over the 100 partitions, for 10 seconds; also the broker CPU seconds
    (/proc/<pid>/stat) per 1,000 commits.
Before the measurements one group joins, reads and commits once (not measured), so Kafka's __consumer_offsets
topic exists and both brokers' coordinators are loaded. group.initial.rebalance.delay.ms is set to 0, the value of
Kafka's shipped config/server.properties (compare.py's file leaves it at the brokers' default, 3000 ms for both,
which would add 3 s to every new group's first rebalance); --initial-rebalance-delay-ms -1 leaves the default.
Prints a Markdown table of per-broker medians over the rounds with Mala/Kafka ratios and writes every raw number
to a JSON file. Nothing is asserted.

  bench/e2e/compare_groups.py            # default: 2 rounds, 5 rebalances per start, about 3 minutes (2 idle cores)
  bench/e2e/compare_groups.py --quick    # smoke run: 4 members, 2 joins, 3 s of commits, 1 round (under a minute)
  bench/e2e/compare_groups.py --only kafka|mala   # one broker only (no ratios)

Needs what compare.py needs apart from Go: build/src/app/mala (or --mala-bin), Apache Kafka's jars in
tests/integration/.deps/kafka-libs (scripts/install-test-clients.sh, or --kafka-libs), a JDK and confluent-kafka.
"""

import argparse
import datetime
import json
import multiprocessing as mp
import os
import queue
import sys
import time
import uuid
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import compare  # noqa: E402  (the single-node comparison: Env, the brokers, ports, topics, report helpers)

PROFILES = {
    # rebalance_reps: 10-member join + leave measurements per broker start; joins: join-to-first-record samples
    "quick": {"rounds": 1, "members": 4, "rebalance_reps": 1, "joins": 2, "commit_seconds": 3},
    "default": {"rounds": 2, "members": 10, "rebalance_reps": 5, "joins": 5, "commit_seconds": 10},
}
TOPIC = "groups-100"
PARTITIONS = 100
RECORDS_PER_PARTITION = 10
WAIT_S = 90.0  # the longest any one measurement may take

GROUP_CONF = {"group.protocol": "classic", "session.timeout.ms": 10000, "heartbeat.interval.ms": 1000,
              "enable.auto.commit": False, "auto.offset.reset": "earliest", "log_level": 3}


def consumer(bootstrap, group, **extra):
    from confluent_kafka import Consumer
    return Consumer({**GROUP_CONF, "bootstrap.servers": bootstrap, "group.id": group, **extra})


# --- the rebalance measurement ------------------------------------------------------------------------------------

def member_main(idx, bootstrap, group, go, leave, events):
    """One group member (a spawned process): reports ready, waits for `go`, subscribes and polls until `leave`.
    Every event goes to `events` as (member, kind, CLOCK_MONOTONIC seconds, partitions)."""
    c = consumer(bootstrap, group, **{"client.id": f"bench-member-{idx}"})

    def on_assign(_c, parts):
        events.put((idx, "assign", time.monotonic(), sorted(p.partition for p in parts)))

    def on_revoke(_c, parts):
        events.put((idx, "revoke", time.monotonic(), sorted(p.partition for p in parts)))

    events.put((idx, "ready", time.monotonic(), None))
    go.wait()
    t = time.monotonic()
    c.subscribe([TOPIC], on_assign=on_assign, on_revoke=on_revoke)
    events.put((idx, "subscribed", t, None))
    try:
        while not leave.is_set():
            c.poll(0.05)
    finally:
        events.put((idx, "closing", time.monotonic(), None))
        c.close()
        events.put((idx, "closed", time.monotonic(), None))


class Group:
    """`n` member processes of one new group and what they reported."""

    def __init__(self, broker, n):
        ctx = mp.get_context("spawn")  # no fork of a process that runs librdkafka threads
        self.broker = broker
        self.events = ctx.Queue()
        self.go = ctx.Event()
        self.leave = [ctx.Event() for _ in range(n)]
        self.assigned = {}  # member -> (time of its latest assignment, partitions); empty after a revoke
        self.times = {}  # (member, kind) -> time
        self.assignments = {}  # member -> on_assign calls so far (one per generation it took part in)
        group = f"bench-rebalance-{uuid.uuid4().hex[:8]}"
        self.procs = [ctx.Process(target=member_main, args=(i, broker.bootstrap, group, self.go, self.leave[i],
                                                            self.events), daemon=True) for i in range(n)]
        for p in self.procs:
            p.start()

    def pump(self, until, what):
        """Handles events until until() returns a time (returned), for at most WAIT_S."""
        deadline = time.monotonic() + WAIT_S
        while True:
            t = until()
            if t is not None:
                return t
            try:
                idx, kind, ts, parts = self.events.get(timeout=0.2)
            except queue.Empty:
                if not self.broker.alive():
                    raise RuntimeError(f"{what}: the broker exited with code {self.broker.proc.returncode}")
                dead = [i for i, p in enumerate(self.procs) if p.exitcode is not None and not self.leave[i].is_set()]
                if dead:
                    raise RuntimeError(f"{what}: member process(es) {dead} exited")
                if time.monotonic() > deadline:
                    state = {i: len(a[1]) for i, a in sorted(self.assigned.items())}
                    raise RuntimeError(f"{what}: not done within {WAIT_S:.0f} s (partitions per member: {state})")
                continue
            self.times[(idx, kind)] = ts
            if kind == "assign":
                self.assigned[idx] = (ts, set(parts))
                self.assignments[idx] = self.assignments.get(idx, 0) + 1
            elif kind == "revoke":
                self.assigned[idx] = (ts, set())

    def covered_at(self, members, after):
        """The time the members' assignments (each made after `after`, none empty) came to cover every partition
        with no overlap, or None."""
        got = [self.assigned.get(i) for i in members]
        if any(a is None or a[0] <= after or not a[1] for a in got):
            return None
        parts = [p for a in got for p in a[1]]
        if len(parts) != PARTITIONS or set(parts) != set(range(PARTITIONS)):
            return None
        return max(a[0] for a in got)

    def measure(self):
        n = len(self.procs)
        self.pump(lambda: 0 if all((i, "ready") in self.times for i in range(n)) else None, "members starting")
        time.sleep(1.0)  # connections and coordinator look-ups settle
        self.go.set()
        self.pump(lambda: 0 if all((i, "subscribed") in self.times for i in range(n)) else None, "subscribe")
        subs = [self.times[(i, "subscribed")] for i in range(n)]
        last_sub = max(subs)
        joined = self.pump(lambda: self.covered_at(range(n), 0), f"{n} members joining")
        res = {"members": n, "join_s": joined - last_sub, "join_from_first_subscribe_s": joined - min(subs),
               "join_assignment_sizes": sorted(len(self.assigned[i][1]) for i in range(n)),
               "join_on_assign_calls": [self.assignments[i] for i in range(n)]}
        leaver = n - 1
        self.leave[leaver].set()
        self.pump(lambda: 0 if (leaver, "closing") in self.times else None, "member leaving")
        t_leave = self.times[(leaver, "closing")]
        rest = range(n - 1)
        res["leave_s"] = self.pump(lambda: self.covered_at(rest, t_leave), f"{n - 1} members rebalancing") - t_leave
        res["leave_assignment_sizes"] = sorted(len(self.assigned[i][1]) for i in rest)
        return res

    def close(self):
        for e in self.leave:
            e.set()
        deadline = time.monotonic() + 30
        for p in self.procs:
            p.join(max(0.1, deadline - time.monotonic()))
            if p.is_alive():
                p.kill()
                p.join(5)


def rebalance(broker, members):
    group = Group(broker, members)
    try:
        return group.measure()
    finally:
        group.close()


# --- the other measurements ---------------------------------------------------------------------------------------

def produce_records(broker):
    from confluent_kafka import Producer
    p = Producer({"bootstrap.servers": broker.bootstrap, "acks": "all", "linger.ms": 5, "log_level": 3})
    failed = []
    for part in range(PARTITIONS):
        for i in range(RECORDS_PER_PARTITION):
            p.produce(TOPIC, value=b"record-%d-%d" % (part, i), partition=part,
                      on_delivery=lambda err, _msg: err is not None and failed.append(str(err)))
    left = p.flush(60)
    if left or failed:
        raise RuntimeError(f"produce: {left} records not delivered, {len(failed)} failed: {failed[:1]}")


def first_record(broker, group):
    """(seconds from Consumer creation to the first record poll() returns, seconds to its on_assign)."""
    assigned = []
    t0 = time.monotonic()
    c = consumer(broker.bootstrap, group)
    try:
        c.subscribe([TOPIC], on_assign=lambda _c, _p: assigned.append(time.monotonic()))
        while True:
            msg = c.poll(0.5)
            if msg is not None and msg.error() is None:
                t1 = time.monotonic()
                break
            if time.monotonic() - t0 > WAIT_S or not broker.alive():
                raise RuntimeError(f"no record within {time.monotonic() - t0:.0f} s "
                                   f"(last error: {msg.error() if msg is not None else None})")
    finally:
        c.close()
    return t1 - t0, (assigned[0] - t0) if assigned else None


def warm_up(broker):
    """A group that joins, reads and commits once: Kafka creates __consumer_offsets here; not measured."""
    from confluent_kafka import TopicPartition
    group = f"bench-warmup-{uuid.uuid4().hex[:8]}"
    s, _ = first_record(broker, group)
    c = consumer(broker.bootstrap, group)
    try:
        c.commit(offsets=[TopicPartition(TOPIC, 0, 1)], asynchronous=False)
    finally:
        c.close()
    return s


def commits(broker, seconds):
    from confluent_kafka import TopicPartition
    assigned = []
    c = consumer(broker.bootstrap, f"bench-commit-{uuid.uuid4().hex[:8]}")
    try:
        c.subscribe([TOPIC], on_assign=lambda _c, parts: assigned.append(len(parts)))
        t0 = time.monotonic()
        while not assigned:
            c.poll(0.1)
            if time.monotonic() - t0 > WAIT_S or not broker.alive():
                raise RuntimeError("no assignment for the committing consumer")

        def commit(n):
            tp = c.commit(offsets=[TopicPartition(TOPIC, n % PARTITIONS, 1 + (n // PARTITIONS) %
                                                  RECORDS_PER_PARTITION)], asynchronous=False)
            if tp[0].error is not None:
                raise RuntimeError(f"commit {n}: {tp[0].error}")

        for n in range(PARTITIONS):  # warm-up, not measured
            commit(n)
        n = 0
        cpu0 = broker.cpu_seconds()
        t0 = time.monotonic()
        end = t0 + seconds
        while time.monotonic() < end:
            commit(n)
            n += 1
        elapsed = time.monotonic() - t0
        cpu = broker.cpu_seconds() - cpu0
    finally:
        c.close()
    return {"commits": n, "seconds": elapsed, "commits_per_sec": n / elapsed, "broker_cpu_s": cpu,
            "cpu_s_per_1000": cpu / n * 1000 if n else None, "assigned_partitions": assigned[0]}


def run_session(env, broker_cls, round_no, prof, args):
    """One broker start: every measurement. Returns (metrics, errors, info)."""
    broker = broker_cls(env, f"round{round_no}-{broker_cls.name}")
    if args.initial_rebalance_delay_ms >= 0:
        with open(broker.config_path, "a") as f:
            f.write(f"group.initial.rebalance.delay.ms={args.initial_rebalance_delay_ms}\n")
    metrics, errors, info = {"join_first_record": [], "rebalance": []}, [], {"loadavg_start": os.getloadavg()}

    def step(key, fn):
        if not broker.alive():
            errors.append(f"{key}: not run, broker exited with code {broker.proc.returncode}")
            return None
        compare.log(f"  {broker.name} round {round_no}: {key}")
        try:
            res = fn()
        except Exception as e:  # one failed measurement must not hide the others
            errors.append(f"{key}: {e}")
            compare.log(f"    FAILED: {compare.short(str(e), 300)}")
            return None
        compare.log(f"    {res}")
        return res

    try:
        broker.prepare()
        info["startup_s"] = compare.time_to_first_produce(broker)
        compare.create_topics(broker, [TOPIC], PARTITIONS)
        produce_records(broker)
        info["warm_up_s"] = step("warm-up group", lambda: warm_up(broker))
        for _ in range(prof["rebalance_reps"]):
            res = step(f"rebalance, {prof['members']} members", lambda: rebalance(broker, prof["members"]))
            if res:
                metrics["rebalance"].append(res)
        for _ in range(prof["joins"]):
            res = step("join to first record",
                       lambda: first_record(broker, f"bench-first-{uuid.uuid4().hex[:8]}"))
            if res:
                metrics["join_first_record"].append({"first_record_s": res[0], "assigned_s": res[1]})
        res = step(f"offset commits, {prof['commit_seconds']} s", lambda: commits(broker, prof["commit_seconds"]))
        if res:
            metrics["commits"] = res
        if broker.alive():
            info["peak_rss_mb"] = broker.peak_rss_kb() / 1024.0
    except Exception as e:
        errors.append(f"start-up: {e}")
        compare.log(f"    FAILED: {compare.short(str(e), 300)}")
    finally:
        alive = broker.alive()
        info["exit_code"] = broker.stop()
        info["loadavg_end"] = os.getloadavg()
        # Kafka prints its configuration at start-up: the value it applied (Mala does not print it).
        info["logged_initial_rebalance_delay"] = broker.log_tail(1, r"\bgroup\.initial\.rebalance\.delay\.ms = ")
        info["log"] = str(broker.log_path)
        if not alive:
            errors.append(f"broker was not running at the end (exit code {info['exit_code']}); log tail:\n"
                          f"{broker.log_tail(30)}")
        if not args.keep:
            broker.cleanup()
    return metrics, errors, info


# --- report -------------------------------------------------------------------------------------------------------

ROWS = [  # label, values of one session, unit scale, better, show the range of the samples
    ("Rebalance, {members} members join a new group (last subscribe() to full assignment), ms (min-max)",
     lambda m: [r["join_s"] for r in m["rebalance"]], 1000, "lower", True),
    ("  share of those joins done in one go (under half a heartbeat interval, 500 ms)",
     lambda m: [r["join_s"] < 0.5 for r in m["rebalance"]], None, "higher", False),
    ("Rebalance after 1 of {members} members leaves (close() to the rest covering all), ms (min-max)",
     lambda m: [r["leave_s"] for r in m["rebalance"]], 1000, "lower", True),
    ("Join to first record, new group, ms ({joins} per start)",
     lambda m: [j["first_record_s"] for j in m["join_first_record"]], 1000, "lower", False),
    ("  of which: Consumer creation to on_assign, ms",
     lambda m: [j["assigned_s"] for j in m["join_first_record"]], 1000, "lower", False),
    ("Offset commits/s (synchronous, 1 partition each, 1 consumer)",
     lambda m: [m["commits"]["commits_per_sec"]] if "commits" in m else [], 1, "higher", False),
    ("Broker CPU s per 1,000 commits",
     lambda m: [m["commits"]["cpu_s_per_1000"]] if "commits" in m else [], 1, "lower", False),
]


def render_table(out):
    prof = out["profile"]
    lines = ["| Metric (median of all samples) | Mala | Kafka | Mala/Kafka | Better |",
             "| --- | ---: | ---: | ---: | --- |"]
    for label, values, scale, better, show_range in ROWS:
        vals, cells = {}, []
        for b in ("mala", "kafka"):
            samples = [v for s in out["sessions"] if s["broker"] == b for v in values(s["metrics"]) if v is not None]
            if scale is None:  # a share: "k of n"
                vals[b] = sum(samples) / len(samples) if samples else None
                cells.append(f"{sum(samples)} of {len(samples)}" if b in out["brokers"] else "not run")
                continue
            samples = [v * scale for v in samples]
            vals[b] = compare.median(samples)
            cell = compare.fmt_num(vals[b]) if b in out["brokers"] else "not run"
            if show_range and samples:
                cell += f" ({compare.fmt_num(min(samples))}-{compare.fmt_num(max(samples))})"
            cells.append(cell)
        ratio = f"{vals['mala'] / vals['kafka']:.2f}" if vals["mala"] is not None and vals["kafka"] else "—"
        lines.append(f"| {label.format(**prof)} | {cells[0]} | {cells[1]} | {ratio} | {better} |")
    return "\n".join(lines)


def caption(out):
    m, prof = out["machine"], out["profile"]
    delay = out["initial_rebalance_delay_ms"]
    delay_txt = f"{delay} ms (set in server.properties)" if delay >= 0 else "broker default (3000 ms, not set)"
    loads = [s["info"][k][0] for s in out["sessions"] for k in ("loadavg_start", "loadavg_end") if k in s["info"]]
    return (f"Mala vs Apache Kafka {m['kafka']}, single node, consumer groups: {prof['rounds']} round(s), "
            f"topic of {PARTITIONS} partitions, librdkafka {m['librdkafka']} classic protocol; "
            f"group.initial.rebalance.delay.ms {delay_txt}; {m['cpus']} CPUs ({m['cpu_model']}); "
            f"elapsed {out['elapsed_s'] / 60:.1f} min; load average "
            f"{f'{min(loads):.1f}-{max(loads):.1f}' if loads else '?'}")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="smoke run: 4 members, 2 joins, 3 s of commits, 1 round")
    ap.add_argument("--rounds", type=int, help="rounds (each starts both brokers once, order alternating)")
    ap.add_argument("--members", type=int, help="members of the rebalancing group")
    ap.add_argument("--commit-seconds", type=float, help="duration of the commit loop")
    ap.add_argument("--initial-rebalance-delay-ms", type=int, default=0,
                    help="group.initial.rebalance.delay.ms for both brokers (default 0, as Kafka's shipped "
                         "server.properties); -1 leaves the brokers' default (3000 ms)")
    ap.add_argument("--only", choices=["mala", "kafka"], help="run one broker only")
    ap.add_argument("--mala-bin", default=str(compare.REPO / "build" / "src" / "app" / "mala"))
    ap.add_argument("--kafka-libs", default=str(compare.REPO / "tests" / "integration" / ".deps" / "kafka-libs"))
    ap.add_argument("--work-dir", help="where configs, logs and data go (default: a new temp dir)")
    ap.add_argument("--json", help="write all raw results here (default: <work dir>/results.json)")
    ap.add_argument("--markdown", help="also write the table here")
    ap.add_argument("--keep", action="store_true", help="keep the brokers' data dirs")
    args = ap.parse_args()

    prof = compare.profile_from_args(args, PROFILES, ("rounds", "members", "commit_seconds"))
    brokers, work, env = compare.run_setup(args, "mala-bench-groups-")
    compare.exit_on_problems(env, brokers, "compare_groups.py", needs_go=False)  # franzload is not used here
    machine = compare.machine_info(env)
    compare.log(f"work dir {work}; profile {prof}; group.initial.rebalance.delay.ms "
                f"{args.initial_rebalance_delay_ms if args.initial_rebalance_delay_ms >= 0 else 'default'}; "
                f"brokers {brokers}")

    sessions = []
    started = time.time()
    classes = {"mala": compare.MalaBroker, "kafka": compare.KafkaBroker}
    for rnd in range(1, prof["rounds"] + 1):
        for b in (brokers if rnd % 2 == 1 else list(reversed(brokers))):
            compare.log(f"round {rnd}/{prof['rounds']}: {b}")
            t = time.time()
            metrics, errors, info = run_session(env, classes[b], rnd, prof, args)
            info["seconds"] = time.time() - t
            sessions.append({"broker": b, "round": rnd, "metrics": metrics, "errors": errors, "info": info})

    out = {"machine": machine, "profile": prof, "partitions": PARTITIONS,
           "records_per_partition": RECORDS_PER_PARTITION, "client_config": GROUP_CONF,
           "initial_rebalance_delay_ms": args.initial_rebalance_delay_ms, "brokers": brokers,
           "started": datetime.datetime.fromtimestamp(started).isoformat(timespec="seconds"),
           "elapsed_s": time.time() - started, "sessions": sessions}
    json_path = Path(args.json) if args.json else work / "results.json"
    json_path.write_text(json.dumps(out, indent=1, default=str))
    table = render_table(out)
    print()
    print(caption(out))
    print()
    print(table)
    all_errors = [(s["broker"], s["round"], e) for s in sessions for e in s["errors"]]
    if all_errors:
        print("\nFailures:")
        for b, r, e in all_errors:
            print(f"- {b} round {r}: {e}")
    print(f"\nRaw results: {json_path}")
    if args.markdown:
        Path(args.markdown).write_text(caption(out) + "\n\n" + table + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
