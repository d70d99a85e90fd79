"""Transactions under faults (issue 22's Jepsen-style proof): transactional Java producers loop commit and abort over
six partitions (several transactional ids at once, each reused across rounds so every round fences the previous
one's epoch) while faults are injected; the checks, the same for every broker:

- read_committed never returns a record of an aborted transaction;
- every committed transaction is seen exactly once and whole across its partitions (no torn transaction); a
  transaction whose producer failed mid-way ("uncertain": its commit may or may not have happened) is seen whole or
  not at all;
- afterwards no transaction is left open: kafka-transactions.sh list shows only Empty / Complete* states,
  find-hanging on every broker finds nothing, and the last stable offset of every partition reaches its high
  watermark.

Apache Kafka (one node, the oracle) gets the faults one node allows: its process SIGSTOPped and resumed mid-round.
Mala (three nodes) gets SIGKILL + restart and SIGSTOP + SIGCONT of
the transaction coordinator's node and of other nodes (one node down at a time: RF 3, min.insync.replicas 2), and,
in the Compose topology of netns_topology.py, network partitions: the coordinator's node (or another) cut off from
the others and from the clients while its process keeps running, then healed.
"""

import random
import signal
import subprocess
import threading
import time

import pytest

from apache_kafka import ApacheKafkaNode
from cluster import own_cluster
from netns_topology import ComposeTopology
from real_clients import json_lines, wait_until
from txn_harness import (BROKER_CONFIG, check_offsets_unique, check_whole, create_topics, java_cmd,
                         read_topic, transactions_seen, transactions_tool)

PARTITIONS = 6
PRODUCERS = 3
ROUNDS = 3
TRANSACTIONS = 12
RECORDS = 8
FINISHED_STATES = {"Empty", "CompleteCommit", "CompleteAbort"}


def run_round(bootstrap, round_no, fault):
    """PRODUCERS TxnProduce processes at once (ids fault-p<k>, tags p<k>r<round>) while fault(stop) runs in a thread
    until they are done. Returns their summaries; a producer that failed reports what it could not settle."""
    procs = []
    for k in range(PRODUCERS):
        procs.append(subprocess.Popen(java_cmd(
            "mala.it.TxnProduce", "--bootstrap", bootstrap, "--topic", "chaos", "--transactional-id", f"fault-p{k}",
            "--tag", f"p{k}r{round_no}", "--transactions", TRANSACTIONS, "--records", RECORDS,
            "--partitions", PARTITIONS, "--abort-every", 3, "--pause-ms", 150,
            "--prop", "transaction.timeout.ms=10000", "--prop", "delivery.timeout.ms=20000",
            "--prop", "max.block.ms=20000"), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, text=True))
    stop = threading.Event()
    injector = threading.Thread(target=fault, args=(stop,), daemon=True)
    injector.start()
    summaries = []
    try:
        for p in procs:
            out, err = p.communicate(timeout=240)
            lines = [line for line in json_lines(out) if "committed" in line]
            assert lines, f"TxnProduce printed no summary (exit {p.returncode})\n{err[-3000:]}"
            summary = lines[-1]
            assert (p.returncode == 0) == ("error" not in summary), (p.returncode, summary, err[-2000:])
            summaries.append(summary)
    finally:
        stop.set()
        injector.join(timeout=60)
        for p in procs:
            if p.poll() is None:
                p.kill()
    return summaries


def check_rounds(bootstrap, summaries):
    committed, c_sum = read_topic(bootstrap, "chaos", "read_committed", timeout_ms=60000)
    check_offsets_unique(committed, "read_committed")
    uncertain_seen = 0
    for s in summaries:
        seen = set(transactions_seen(committed, s["tag"]))
        assert not seen & set(s["aborted"]), f"{s['tag']}: aborted transactions seen: {seen & set(s['aborted'])}"
        missing = set(s["committed"]) - seen
        assert not missing, f"{s['tag']}: committed transactions missing: {sorted(missing)}"
        allowed = set(s["committed"]) | ({s["uncertain"]} if s.get("uncertain") is not None else set())
        assert seen <= allowed, f"{s['tag']}: unexpected transactions {sorted(seen - allowed)} ({s})"
        uncertain_seen += len(seen - set(s["committed"]))
        check_whole(committed, s["tag"], sorted(seen), RECORDS, PARTITIONS, "read_committed")
    return c_sum, uncertain_seen


def check_nothing_hanging(bootstrap, broker_ids):
    def settled():
        listed = transactions_tool(bootstrap, ("list",))[0]
        states = {r["TransactionalId"]: r["TransactionState"] for r in listed}
        return states if states and set(states.values()) <= FINISHED_STATES else None

    states = wait_until(settled, 120, "every transaction finished (list)", interval=2)
    assert {f"fault-p{k}" for k in range(PRODUCERS)} <= set(states)
    hanging = transactions_tool(bootstrap, *[("find-hanging", "--broker-id", i) for i in broker_ids])
    assert all(h == [] for h in hanging), hanging
    _, c_sum = read_topic(bootstrap, "chaos", "read_committed", timeout_ms=60000)
    _, u_sum = read_topic(bootstrap, "chaos", "read_uncommitted", timeout_ms=60000)
    assert c_sum["end_offsets"] == u_sum["end_offsets"], (c_sum, u_sum)  # LSO = HW on every partition


def run_fault_test(bootstrap, broker_ids, fault, replication_factor):
    create_topics(bootstrap, "chaos", partitions=PARTITIONS, replication_factor=replication_factor)
    summaries = []
    for r in range(ROUNDS):
        summaries += run_round(bootstrap, r, fault)
    # Most transactions ended as planned: the faults must not stop the run from proving anything.
    assert sum(len(s["committed"]) for s in summaries) >= ROUNDS * PRODUCERS * TRANSACTIONS // 3, summaries
    check_nothing_hanging(bootstrap, broker_ids)
    check_rounds(bootstrap, summaries)


# --- Apache Kafka (one node) ------------------------------------------------------------------------------------

def test_transactions_under_faults_kafka(tmp_path):
    (tmp_path / "kafka").mkdir()
    kafka = ApacheKafkaNode(tmp_path / "kafka", extra_config=BROKER_CONFIG).start()

    def pause_the_node(stop):
        """Once per round: the whole broker frozen for 3 s (producers and the coordinator stall), then resumed."""
        if stop.wait(1.0):
            return
        kafka.proc.send_signal(signal.SIGSTOP)
        try:
            stop.wait(3.0)
        finally:
            kafka.proc.send_signal(signal.SIGCONT)

    try:
        run_fault_test(kafka.bootstrap, [1], pause_the_node, 1)
    except BaseException:
        print(kafka.log_tail(80))
        raise
    finally:
        kafka.stop()


# --- Mala (three nodes) -----------------------------------------------------------------------------------------

def test_transactions_under_faults_mala_3_nodes(tmp_path):
    (tmp_path / "mala").mkdir()
    rnd = random.Random(22)
    with own_cluster(tmp_path / "mala", extra_config=BROKER_CONFIG) as c:
        c.start_all()
        c.wait_until(c.agreed_leader, timeout=20, what="a quorum leader all three nodes agree on")

        def coordinator_node():
            try:
                d = transactions_tool(c.bootstrap, ("describe", "--transactional-id", "fault-p0"))[0]
                return int(d[0]["CoordinatorId"])
            except BaseException:  # not known yet, or the tool failed during a fault: pick another node
                return rnd.choice(c.ids)

        def faults(stop):
            """Until the round ends: every ~2 s one node (the coordinator's half of the time) is SIGKILLed and
            restarted 2 s later, or SIGSTOPped for 3 s; always healed before the next fault."""
            while not stop.wait(2.0):
                target = coordinator_node() if rnd.random() < 0.5 else rnd.choice(c.ids)
                if rnd.random() < 0.5:
                    c.kill(target)
                    time.sleep(2.0)
                    c.start(target)
                else:
                    c.pause(target)
                    time.sleep(3.0)
                    c.resume(target)

        run_fault_test(c.bootstrap, c.ids, faults, 3)


def test_transactions_under_network_partitions_mala_compose(tmp_path):
    """The Compose topology (three network namespaces): every ~2 s one node, the transaction coordinator's two times
    in three, loses its network for 4 s (long enough for the others to fence it: broker.session.timeout.ms 3 s) while
    its process keeps running and believes it still coordinates and leads; then it is healed."""
    rnd = random.Random(2022)
    overrides = ["broker.session.timeout.ms=3000", "broker.heartbeat.interval.ms=500", "replica.lag.time.max.ms=3000"]
    overrides += [f"{k}={v}" for k, v in BROKER_CONFIG.items()]
    t = ComposeTopology(tmp_path, overrides=overrides)
    failed = True
    try:
        t.start_all()
        bootstrap = t.external_bootstrap
        ids = [1, 2, 3]

        def coordinator_node():
            try:
                d = transactions_tool(bootstrap, ("describe", "--transactional-id", "fault-p0"))[0]
                return int(d[0]["CoordinatorId"])
            except BaseException:  # not known yet, or the tool timed out during a partition
                return rnd.choice(ids)

        cut_off = []  # (node, was the coordinator's)

        def faults(stop):
            while not stop.wait(2.0):
                coordinator = coordinator_node()
                target = coordinator if rnd.random() < 0.67 else rnd.choice(ids)
                t.partition(target)
                cut_off.append((target, target == coordinator))
                try:
                    time.sleep(4.0)
                finally:
                    t.heal(target)

        run_fault_test(bootstrap, ids, faults, 3)
        print(f"network partitions: {cut_off}")
        assert len(cut_off) >= ROUNDS and any(was for _, was in cut_off), cut_off
        failed = False
    finally:
        codes = t.close()
        if failed:
            for n in (1, 2, 3):
                print(f"--- node-{n} ---\n{t.log_text(n, 60)}")
    assert all(code in (0, None) for code in codes.values()), f"exit codes after SIGTERM: {codes}"
