"""Elections after every node died (issue 18, item 6): a kill -9 of the whole cluster with a stale replica among a
partition's replicas, unclean.leader.election.enable off.

Five nodes: voters 1-3 (combined mode) and broker-only nodes 4 and 5; the topic's partitions live on 3, 4 and 5, so
every replica of a partition can be down while two voters (1 and 3, neither in the ISR) keep the metadata quorum
running. min.insync.replicas 2, RF 3, acks=all. Replica 3 is frozen (SIGSTOP) while 4 and 5 take more acknowledged
writes, so it falls out of every ISR; then every node is killed with SIGKILL. Node 3 comes back first, with node 1 for
the quorum: with 4 and 5 down it must not lead (it lacks acknowledged records). Once 4 and 5 are back each partition
is led again by the leader it had before the crash (KIP-966's last known leader: each replica registered again after
an unclean shutdown and left the ISR and ELR), every acknowledged record is read back, and no election is logged as
unclean."""

import re
import time

from confluent_kafka import Producer

from real_clients import rdkafka_consume
from test_replication_failover import _fast, create_replicated_topic, high_watermark, partition_view

import pytest

TOPIC = "crash-stale"
ASSIGNMENT = [[3, 4, 5], [4, 5, 3], [5, 3, 4]]


@pytest.fixture
def five_nodes(request, tmp_path):
    """Voters 1-3 (combined mode), broker-only nodes 4 and 5 (see test_replication_failover.five_nodes)."""
    yield from _fast(request, tmp_path, size=5, broker_only=(4, 5))


def produce_acked(bootstrap, phase, per_partition=200):
    """Idempotent acks=all records to every partition; returns the acknowledged values (all must be)."""
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True,
                         "linger.ms": 5, "message.timeout.ms": 60000, "socket.timeout.ms": 5000, "log_level": 3})
    acked, errors = [], []

    def cb(err, msg):
        if err is not None:
            errors.append(err.name())
        else:
            acked.append(msg.value().decode())
    for p in range(len(ASSIGNMENT)):
        for i in range(per_partition):
            producer.produce(TOPIC, value=f"{phase}-{p}-{i}", partition=p, on_delivery=cb)
            producer.poll(0)
    assert producer.flush(90) == 0, "records never acknowledged"
    assert not errors, f"delivery errors: {errors[:5]}"
    assert len(acked) == per_partition * len(ASSIGNMENT)
    return acked


def leaders(c, via):
    return [partition_view(c, TOPIC, p, via=via)["leader"] for p in range(len(ASSIGNMENT))]


def test_a_stale_replica_back_first_after_a_whole_cluster_crash_waits_for_the_last_leaders(five_nodes):
    c = five_nodes
    create_replicated_topic(c, TOPIC, len(ASSIGNMENT), assignment=ASSIGNMENT)
    acked = produce_acked(c.bootstrap_of(3, 4, 5), "before")

    # 3 freezes: fenced after broker.session.timeout.ms (its leadership of partition 0 moves to 4), dropped from
    # the other ISRs after replica.lag.time.max.ms. Then 4 and 5 alone take more acknowledged records.
    c.pause(3)
    c.wait_until(lambda: all(partition_view(c, TOPIC, p, via=4)["isr"] == [4, 5] and
                             partition_view(c, TOPIC, p, via=4)["leader"] in (4, 5) for p in range(len(ASSIGNMENT))),
                 timeout=30, interval=0.3, what="every ISR down to [4, 5]")
    acked += produce_acked(c.bootstrap_of(4, 5), "while-3-was-stale")
    last_leaders = leaders(c, via=4)
    print(f"leaders before the crash: {last_leaders}")

    for i in c.ids:
        c.kill(i)  # SIGKILL ends the frozen 3 too
    crash_mark = {i: len(c.node(i).log_path.read_text(errors="replace")) for i in c.ids}

    # 3 first, with voter 1 (no replica of the topic) so that the quorum has a majority; 2, 4 and 5 stay down.
    c.launch(3)
    c.launch(1)
    c.wait_serving(1, timeout=40)
    c.wait_serving(3, timeout=40)
    c.wait_until(lambda: all(l == -1 for l in leaders(c, via=1)) or None, timeout=20, interval=0.3,
                 what="the crashed cluster's partitions without a leader")
    # Sessions of the old incarnations have expired (both nodes serve only once registered again); watch for a
    # while that the stale replica is never elected.
    watch_until = time.monotonic() + 8
    while time.monotonic() < watch_until:
        for via in (1, 3):
            seen = leaders(c, via=via)
            assert all(l == -1 for l in seen), f"a partition was led with only the stale replica 3 back: {seen}"
        time.sleep(0.5)

    for i in (2, 4, 5):
        c.launch(i)
    for i in (2, 4, 5):
        c.wait_serving(i, timeout=40)
    c.wait_until(lambda: all(l >= 0 for l in leaders(c, via=4)) or None, timeout=40, interval=0.3,
                 what="every partition led again")
    after = leaders(c, via=4)
    print(f"leaders after the restart: {after}")
    # Each partition comes back under its own last leader, not all under one broker.
    assert after == last_leaders
    c.wait_until(lambda: all(len(partition_view(c, TOPIC, p, via=4)["isr"]) >= 2 for p in range(len(ASSIGNMENT)))
                 or None, timeout=60, interval=0.3, what="ISRs of at least 2 again")

    def everything_visible():
        ends = {p: high_watermark(c.bootstrap_of(4, 5), TOPIC, p) for p in range(len(ASSIGNMENT))}
        return ends if sum(ends.values()) >= len(acked) else None
    ends = c.wait_until(everything_visible, timeout=60, interval=0.5, what="every acknowledged record visible")
    consumed = rdkafka_consume(c.bootstrap_of(4, 5), TOPIC, {p: 0 for p in range(len(ASSIGNMENT))},
                               count=sum(ends.values()), timeout=90)
    got = [v for _, _, _, v in consumed]
    missing = set(acked) - set(got)
    assert not missing, f"{len(missing)} acknowledged records lost, e.g. {sorted(missing)[:5]}"
    assert len(got) == len(set(got)), "a record was read twice"

    # The controller's log since the crash: the elections were of the last known leaders, none unclean.
    since_crash = "\n".join(c.node(i).log_path.read_text(errors="replace")[crash_mark[i]:] for i in c.ids)
    elections = [line for line in since_crash.splitlines() if re.search(rf"\b{TOPIC}-\d+: ", line)]
    print("\n".join(elections))
    assert not [line for line in elections if "unclean" in line], "an election was logged as unclean"
    assert "unclean leader election" not in since_crash
    assert sum("as the last known leader" in line for line in elections) == len(ASSIGNMENT)
