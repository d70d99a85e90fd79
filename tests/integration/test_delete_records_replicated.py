"""DeleteRecords on replicated topics (issue 18, item 1): kafka-delete-records on an RF=3 topic completes within
seconds, every replica deletes the records (followers take the leader's log start offset from their fetch answers
and checkpoint it), the deleted records stay deleted through leader changes and restarts, and a follower that is
down holds the deletion back only until the controller fences it (Kafka's Partition.lowWatermarkIfLeader counts
the replicas on live brokers).

Three real `mala` processes (cluster.py, with test_replication_failover.py's short failure timeouts), Apache Kafka's
kafka-delete-records (DeleteRecordsCommand) and confluent-kafka (ListOffsets through get_watermark_offsets, an
assign() consumer starting at offset 0)."""

import json
import re
import time

import pytest

from real_clients import DELETE_RECORDS_TOOL, rdkafka_consume, step_ok, tool_batch
from test_replication_failover import _fast, create_replicated_topic, partition_view

RECORDS = 20
DELETE_BEFORE = 8


@pytest.fixture
def fast_cluster(request, tmp_path):
    yield from _fast(request, tmp_path)


def produce_to(bootstrap, topic, partition, count):
    """`count` records to one partition with acks=all; returns their offsets."""
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 0, "socket.timeout.ms": 10000,
                         "message.timeout.ms": 30000})
    offsets, errors = [], []

    def cb(err, msg):
        (errors.append(err) if err is not None else offsets.append(msg.offset()))
    for i in range(count):
        producer.produce(topic, value=f"{topic}-{partition}-{i}", partition=partition, on_delivery=cb)
    assert producer.flush(40) == 0
    assert not errors, errors
    return sorted(offsets)


def delete_records(c, tmp_path, topic, offsets):
    """kafka-delete-records --offset-json-file for {partition: offset}; returns (its stdout, seconds taken)."""
    spec = tmp_path / f"delete-{topic}-{time.monotonic_ns()}.json"
    spec.write_text(json.dumps({"version": 1, "partitions": [{"topic": topic, "partition": p, "offset": o}
                                                              for p, o in offsets.items()]}))
    started = time.monotonic()
    (out,) = tool_batch((DELETE_RECORDS_TOOL, "--bootstrap-server", c.bootstrap, "--offset-json-file", spec))
    return step_ok(out), time.monotonic() - started


def watermarks(c, topic, partition):
    """(earliest, latest) from the partition's current leader (ListOffsets -2 and -1), retried while leadership
    moves."""
    from confluent_kafka import Consumer, KafkaException, TopicPartition

    def ask():
        consumer = Consumer({"bootstrap.servers": c.bootstrap, "group.id": "mala-it-watermarks",
                             "socket.timeout.ms": 5000, "topic.metadata.refresh.interval.ms": 500})
        try:
            return consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=5)
        except KafkaException:
            return None
        finally:
            consumer.close()
    return c.wait_until(ask, timeout=30, interval=0.5, what=f"ListOffsets of {topic}-{partition}")


def check_deleted(c, topic, partitions, expected_leaders=None):
    """Every partition answers earliest 8 and latest 20 from its leader, and a consumer asking for offset 0 is
    moved to 8: the records before it are not readable."""
    for p in partitions:
        view = partition_view(c, topic, p, via=c.running_ids()[0])
        if expected_leaders is not None:
            assert view["leader"] == expected_leaders[p], view
        assert watermarks(c, topic, p) == (DELETE_BEFORE, RECORDS), f"{topic}-{p} led by {view['leader']}"
        consumed = rdkafka_consume(c.bootstrap, topic, {p: 0}, count=RECORDS - DELETE_BEFORE)
        assert [o for _, o, _, _ in consumed] == list(range(DELETE_BEFORE, RECORDS)), f"{topic}-{p}"
        assert consumed[0][3] == f"{topic}-{p}-{DELETE_BEFORE}"


def wait_full_isr(c, topic, partitions):
    c.wait_until(lambda: all(len(partition_view(c, topic, p, via=c.running_ids()[0])["isr"]) == 3
                             for p in partitions) or None,
                 timeout=40, interval=0.25, what=f"{topic}: every ISR full")


def leader_moved(c, topic, partition, away_from):
    def moved():
        leader = partition_view(c, topic, partition, via=c.running_ids()[0])["leader"]
        return leader if leader >= 0 and leader != away_from else None
    return c.wait_until(moved, timeout=20, interval=0.2, what=f"{topic}-{partition} led by another node")


def checkpointed_log_starts(c, node_id, topic):
    """The node's log-start-offset-checkpoint ("0", count, then "topic partition offset" lines): {partition: offset}."""
    lines = (c.node(node_id).log_dir / "log-start-offset-checkpoint").read_text().splitlines()
    out = {}
    for line in lines[2:]:
        name, partition, offset = line.split()
        if name == topic:
            out[int(partition)] = int(offset)
    return out


def test_delete_records_reaches_every_replica_and_survives_leader_changes_and_restarts(fast_cluster, tmp_path):
    """Three partitions with RF 3 whose preferred leaders are nodes 1, 2 and 3. kafka-delete-records before offset 8
    completes within seconds with low watermark 8 everywhere; then each node in turn is killed with SIGKILL (so
    every partition changes leader, and each node leads a purged partition after the deletion, node 1 again after
    its own crash, having taken the log start back from its leader), then the whole cluster is restarted:
    earliest stays 8 on every leader, no record below 8 is readable, and every node's log-start-offset-checkpoint
    says 8."""
    c = fast_cluster
    topic = "purged"
    partitions = [0, 1, 2]
    create_replicated_topic(c, topic, 3, assignment=[[1, 2, 3], [2, 3, 1], [3, 1, 2]])
    c.wait_until(lambda: [partition_view(c, topic, p)["leader"] for p in partitions] == [1, 2, 3] or None,
                 timeout=20, interval=0.25, what="the preferred leaders 1, 2, 3")
    for p in partitions:
        assert produce_to(c.bootstrap, topic, p, RECORDS) == list(range(RECORDS))

    out, took = delete_records(c, tmp_path, topic, {p: DELETE_BEFORE for p in partitions})
    print(f"kafka-delete-records took {took:.2f} s (JVM start included)\n{out}")
    for p in partitions:
        assert f"partition: {topic}-{p}\tlow_watermark: {DELETE_BEFORE}" in out, out
    assert "error" not in out.lower(), out
    assert took < 15, f"kafka-delete-records took {took:.1f} s"
    check_deleted(c, topic, partitions, expected_leaders={0: 1, 1: 2, 2: 3})

    # Node 1 first: it restarts from a crash before any periodic checkpoint (60 s), takes the log start of 8 back
    # from its leaders, and leads partition 0 again once node 2 dies.
    leaders_seen = {p: {n} for p, n in zip(partitions, [1, 2, 3])}
    for victim in (1, 2, 3):
        led = [p for p in partitions if partition_view(c, topic, p, via=c.running_ids()[0])["leader"] == victim]
        c.kill(victim)
        for p in led:
            leaders_seen[p].add(leader_moved(c, topic, p, victim))
        check_deleted(c, topic, partitions)
        c.start(victim)
        wait_full_isr(c, topic, partitions)
    print(f"leaders per partition after the deletion: {leaders_seen}")
    assert all(len(s) >= 2 for s in leaders_seen.values()), leaders_seen
    assert set().union(*leaders_seen.values()) == {1, 2, 3}

    codes = c.stop_all()
    assert all(code == 0 for code in codes.values()), codes
    for n in c.ids:
        assert checkpointed_log_starts(c, n, topic) == {p: DELETE_BEFORE for p in partitions}, f"node {n}"
    c.start_all()
    c.wait_until(c.agreed_leader, timeout=20, what="a quorum leader after the full restart")
    wait_full_isr(c, topic, partitions)
    check_deleted(c, topic, partitions)


def test_delete_records_with_a_follower_down_answers_once_it_is_fenced(fast_cluster, tmp_path):
    """A follower is killed just before kafka-delete-records: the deletion waits for it only until the controller
    fences it (broker.session.timeout.ms 4 s here; it leaves the ISR about then too), then answers low watermark 8.
    A second deletion while it is still down answers at once. Back up, the follower takes the new log start from
    its first fetch (its checkpoint says so after a clean stop)."""
    c = fast_cluster
    topic = "purged-one-down"
    create_replicated_topic(c, topic, 1)
    assert produce_to(c.bootstrap, topic, 0, RECORDS) == list(range(RECORDS))
    view = partition_view(c, topic, 0)
    leader = view["leader"]
    follower = next(r for r in view["replicas"] if r != leader)

    c.kill(follower)
    killed_at = time.monotonic()
    out, took = delete_records(c, tmp_path, topic, {0: DELETE_BEFORE})
    print(f"with node {follower} down, kafka-delete-records answered after {time.monotonic() - killed_at:.2f} s "
          f"({took:.2f} s in the tool)\n{out}")
    assert f"partition: {topic}-0\tlow_watermark: {DELETE_BEFORE}" in out, out
    assert took < 20, f"kafka-delete-records took {took:.1f} s"
    c.wait_until(lambda: follower not in partition_view(c, topic, 0, via=leader)["isr"], timeout=10, interval=0.2,
                 what=f"node {follower} out of the ISR")

    out, took = delete_records(c, tmp_path, topic, {0: 12})
    print(f"second deletion with node {follower} still down: {took:.2f} s\n{out}")
    assert f"partition: {topic}-0\tlow_watermark: 12" in out, out
    assert took < 10, f"kafka-delete-records took {took:.1f} s"
    assert watermarks(c, topic, 0) == (12, RECORDS)

    c.start(follower)
    c.wait_until(lambda: len(partition_view(c, topic, 0, via=leader)["isr"]) == 3 or None, timeout=40,
                 interval=0.25, what=f"node {follower} back in the ISR")
    # The leader adds the follower to the ISR as the fetch that caught it up arrives, before the follower has
    # the answer (which carries the log start): wait for the follower to take it before stopping it.
    took_start = re.compile(rf"{topic}-0: log start offset \d+ -> 12\b")
    c.wait_until(lambda: took_start.search(c.nodes[follower].log_path.read_text(errors="replace")) or None,
                 timeout=20, interval=0.1, what=f"node {follower} taking log start 12 from its leader")
    assert c.stop(follower) == 0
    assert checkpointed_log_starts(c, follower, topic) == {0: 12}
    c.start(follower)
