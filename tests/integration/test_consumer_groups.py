"""Consumer groups with real clients (issue 5, classic protocol): the group coordinator, committed offsets in
__consumer_offsets, and Apache Kafka's kafka-consumer-groups tool.

- Two confluent-kafka consumers of one group split the 6 partitions of bus-events, 3 each, with the eager and with
  the cooperative-sticky assignor (both run in the client); 8 members on 6 partitions leave 2 idle; two other
  groups each read every record (independent positions).
- A group commits, mala restarts, and the group resumes from its committed offsets (replayed from
  __consumer_offsets).
- kafka-consumer-groups (org.apache.kafka.tools.consumer.group.ConsumerGroupCommand): --list, --describe with
  CURRENT-OFFSET / LOG-END-OFFSET / LAG, --reset-offsets --to-earliest --execute, after which the group reads
  everything again.
- Apache Kafka's Java consumer with group.protocol=classic (kafka-console-consumer --group) subscribes, reads and
  commits.
"""

import time
import uuid

import pytest

from clients import java
from real_clients import (CONSOLE_CONSUMER, DUMP_LOG_TOOL, create_topic, rdkafka_produce, shared_node, step_ok,
                          tool_batch)
from real_clients import node_log_on_failure  # noqa: F401 (autouse: the shared node's log after a failure)

GROUPS_TOOL = "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand"  # kafka-consumer-groups.sh
PARTITIONS = 6
RECORDS = 600
# A new group waits group.initial.rebalance.delay.ms for more members; short here to keep the tests quick (Kafka's
# own test configurations use 0).
NODE_CONFIG = {"group.initial.rebalance.delay.ms": 300}


@pytest.fixture(scope="module")
def node(request, tmp_path_factory):
    yield from shared_node(request, tmp_path_factory, "groups", extra_config=NODE_CONFIG)


def group_partition(group: str, partitions=50) -> int:
    """Kafka's placement: Utils.abs(groupId.hashCode()) % offsets.topic.num.partitions (Java's String.hashCode over
    UTF-16 code units; Utils.abs maps Integer.MIN_VALUE to 0)."""
    data = group.encode("utf-16-be")
    h = 0
    for i in range(0, len(data), 2):
        h = (h * 31 + int.from_bytes(data[i:i + 2], "big")) & 0xFFFFFFFF
    if h >= 1 << 31:
        h -= 1 << 32
    return (0 if h == -(1 << 31) else abs(h)) % partitions


def unique(name: str) -> str:
    return f"{name}-{uuid.uuid4().hex[:8]}"


def produce_events(bootstrap, topic, count=RECORDS, start=0):
    records = [(f"bus-{i % 120}", f"event-{i}") for i in range(start, start + count)]
    return rdkafka_produce(bootstrap, topic, records, **{"partitioner": "murmur2_random", "linger.ms": 5})


@pytest.fixture(scope="module")
def bus_events(node):
    topic = unique("bus-events")
    create_topic(node.bootstrap, topic, partitions=PARTITIONS)
    produce_events(node.bootstrap, topic)
    return topic


def group_consumer(bootstrap, group, **conf):
    from confluent_kafka import Consumer

    return Consumer({"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest",
                     "enable.auto.commit": False, "session.timeout.ms": 10000, "heartbeat.interval.ms": 500,
                     "fetch.wait.max.ms": 100, "socket.timeout.ms": 10000, **conf})


def consume_until(consumers, want, timeout=40, stop=None):
    """Polls every consumer in turn until `want` distinct records (partition, offset) arrived (and `stop()` holds,
    if given). Returns {consumer index: [(partition, offset, value)]}; a record read again after a rebalance
    (nothing committed yet) appears twice."""
    got = {i: [] for i in range(len(consumers))}
    seen = set()
    deadline = time.monotonic() + timeout
    while len(seen) < want or (stop is not None and not stop()):
        if time.monotonic() > deadline:
            pytest.fail(f"consumed {len(seen)} of {want} records in {timeout} s; "
                        f"assignments: {[sorted(p.partition for p in c.assignment()) for c in consumers]}")
        for i, c in enumerate(consumers):
            msg = c.poll(0.05)
            if msg is None:
                continue
            if msg.error():
                pytest.fail(f"consumer {i}: {msg.error()}")
            got[i].append((msg.partition(), msg.offset(), msg.value().decode()))
            seen.add((msg.partition(), msg.offset()))
    return got


@pytest.mark.parametrize("assignor", ["range,roundrobin", "cooperative-sticky"])
def test_one_group_splits_the_partitions(node, bus_events, assignor):
    """Two members of one group get 3 partitions each and together read every record; the assignor runs in the
    client, so the eager and the cooperative-sticky ones both work over the classic protocol."""
    alerts = unique("alerts")
    conf = {"partition.assignment.strategy": assignor}
    a, b = group_consumer(node.bootstrap, alerts, **conf), group_consumer(node.bootstrap, alerts, **conf)
    try:
        a.subscribe([bus_events])
        b.subscribe([bus_events])

        def balanced():
            return len(a.assignment()) == 3 and len(b.assignment()) == 3

        got = consume_until([a, b], RECORDS, stop=balanced)
        mine = [{p.partition for p in c.assignment()} for c in (a, b)]
        assert not mine[0] & mine[1]
        assert len(mine[0] | mine[1]) == PARTITIONS
        # Every record reached the group (one that moved to the other member in the rebalance before anything
        # was committed may have been read by both).
        assert {v for _, _, v in got[0] + got[1]} == {f"event-{i}" for i in range(RECORDS)}
        a.commit(asynchronous=False)
        b.commit(asynchronous=False)
    finally:
        a.close()
        b.close()


def test_two_groups_each_read_everything(node, bus_events):
    for name in ("live-map", "safety-report"):
        group = unique(name)
        c = group_consumer(node.bootstrap, group)
        try:
            c.subscribe([bus_events])
            got = consume_until([c], RECORDS)
            assert sorted(v for _, _, v in got[0]) == sorted(f"event-{i}" for i in range(RECORDS))
            assert len(c.assignment()) == PARTITIONS
        finally:
            c.close()


def test_more_members_than_partitions_leaves_some_idle(node, bus_events):
    group = unique("alerts-8")
    members = [group_consumer(node.bootstrap, group) for _ in range(8)]
    try:
        for c in members:
            c.subscribe([bus_events])
        deadline = time.monotonic() + 40
        while True:
            for c in members:
                c.poll(0.02)
            sizes = sorted(len(c.assignment()) for c in members)
            if sizes == [0, 0, 1, 1, 1, 1, 1, 1]:
                break
            assert time.monotonic() < deadline, f"assignment sizes {sizes}"
        owned = [p.partition for c in members for p in c.assignment()]
        assert sorted(owned) == list(range(PARTITIONS))
    finally:
        for c in members:
            c.close()


def committed_offsets(bootstrap, group, topic):
    from confluent_kafka import TopicPartition

    c = group_consumer(bootstrap, group)
    try:
        parts = c.committed([TopicPartition(topic, p) for p in range(PARTITIONS)], timeout=20)
        return {tp.partition: tp.offset for tp in parts}
    finally:
        c.close()


def test_commit_restart_and_resume_from_committed_offsets(mala_factory):
    node = mala_factory(extra_config=NODE_CONFIG).start()
    topic = unique("resume")
    create_topic(node.bootstrap, topic, partitions=PARTITIONS)
    produce_events(node.bootstrap, topic, count=300)
    group = unique("resumer")
    c = group_consumer(node.bootstrap, group)
    try:
        c.subscribe([topic])
        got = consume_until([c], 300)
        c.commit(asynchronous=False)
    finally:
        c.close()
    before = committed_offsets(node.bootstrap, group, topic)
    assert sum(before.values()) == 300
    per_partition = {}
    for p, o, _ in got[0]:
        per_partition[p] = max(per_partition.get(p, -1), o + 1)
    assert before == per_partition

    # Restart the node: the group's offsets come back from __consumer_offsets.
    assert node.stop() == 0
    node.close_log()
    # Meanwhile Kafka's own dump tool reads the group's partition of __consumer_offsets: the group metadata
    # (key type 2) and the commits (key type 1) in Kafka's record schemas.
    segments = sorted((node.log_dir / f"__consumer_offsets-{group_partition(group)}").glob("*.log"))
    assert segments
    dump = step_ok(tool_batch((DUMP_LOG_TOOL, "--files", ",".join(map(str, segments)), "--offsets-decoder"))[0])
    assert f'{{"type":"2","data":{{"group":"{group}"}}}}' in dump, dump[:3000]
    assert f'{{"type":"1","data":{{"group":"{group}","topic":"{topic}","partition":' in dump, dump[:3000]
    assert '"protocolType":"consumer"' in dump
    node.start()
    assert committed_offsets(node.bootstrap, group, topic) == before
    produce_events(node.bootstrap, topic, count=120, start=300)
    c = group_consumer(node.bootstrap, group)
    try:
        c.subscribe([topic])
        got = consume_until([c], 120)
        # Only the new records: each partition resumes where the group committed.
        assert sorted(v for _, _, v in got[0]) == sorted(f"event-{i}" for i in range(300, 420))
        for p, o, _ in got[0]:
            assert o >= before.get(p, 0)
    finally:
        c.close()


def describe_rows(text):
    """Rows of `kafka-consumer-groups --describe` as dicts keyed by its header."""
    rows = []
    header = None
    for line in text.splitlines():
        parts = line.split()
        if not parts:
            continue
        if parts[0] == "GROUP":
            header = parts
            continue
        if header and len(parts) == len(header):
            rows.append(dict(zip(header, parts)))
    return rows


def test_kafka_consumer_groups_list_describe_and_reset(node, bus_events):
    group = unique("safety-report")
    c = group_consumer(node.bootstrap, group)
    try:
        c.subscribe([bus_events])
        consume_until([c], RECORDS)
        c.commit(asynchronous=False)
    finally:
        c.close()
    produce_events(node.bootstrap, bus_events, count=60, start=RECORDS)  # lag of 60 in total

    outs = tool_batch(
        (GROUPS_TOOL, "--bootstrap-server", node.bootstrap, "--list"),
        (GROUPS_TOOL, "--bootstrap-server", node.bootstrap, "--describe", "--group", group),
        (GROUPS_TOOL, "--bootstrap-server", node.bootstrap, "--describe", "--group", group, "--state"),
        (GROUPS_TOOL, "--bootstrap-server", node.bootstrap, "--reset-offsets", "--group", group, "--topic",
         bus_events, "--to-earliest", "--execute"),
        (GROUPS_TOOL, "--bootstrap-server", node.bootstrap, "--describe", "--group", group),
    )
    listed = step_ok(outs[0]).split()
    assert group in listed

    rows = describe_rows(step_ok(outs[1]))
    assert len(rows) == PARTITIONS, outs[1]
    total_lag = 0
    for row in rows:
        assert row["TOPIC"] == bus_events
        current, end, lag = int(row["CURRENT-OFFSET"]), int(row["LOG-END-OFFSET"]), int(row["LAG"])
        assert lag == end - current
        total_lag += lag
    assert total_lag == 60
    assert sum(int(r["CURRENT-OFFSET"]) for r in rows) == RECORDS

    state = step_ok(outs[2])
    assert "Empty" in state, state

    reset = describe_rows(step_ok(outs[3]))
    assert len(reset) == PARTITIONS, outs[3]
    assert all(r["NEW-OFFSET"] == "0" for r in reset), outs[3]

    after = describe_rows(step_ok(outs[4]))
    assert sum(int(r["CURRENT-OFFSET"]) for r in after) == 0
    assert sum(int(r["LAG"]) for r in after) == RECORDS + 60

    # The group replays everything from the start.
    c = group_consumer(node.bootstrap, group)
    try:
        c.subscribe([bus_events])
        got = consume_until([c], RECORDS + 60)
        assert sorted(v for _, _, v in got[0]) == sorted(f"event-{i}" for i in range(RECORDS + 60))
    finally:
        c.close()


def test_java_consumer_classic_protocol_subscribes_and_commits(node):
    topic = unique("java-classic")
    create_topic(node.bootstrap, topic, partitions=3)
    produce_events(node.bootstrap, topic, count=90)
    group = unique("java-group")
    result = java(CONSOLE_CONSUMER, "--bootstrap-server", node.bootstrap, "--topic", topic, "--group", group,
                  "--from-beginning", "--max-messages", "90", "--timeout-ms", "30000",
                  "--consumer-property", "group.protocol=classic",
                  "--consumer-property", "session.timeout.ms=10000",
                  "--consumer-property", "auto.commit.interval.ms=200", timeout=90)
    lines = [line for line in result.stdout.splitlines() if line.startswith("event-")]
    assert sorted(lines) == sorted(f"event-{i}" for i in range(90)), result.stderr[-2000:]
    # The console consumer commits on close: the group's offsets are at the end of every partition.
    offsets = committed_offsets(node.bootstrap, group, topic)
    assert sum(o for p, o in offsets.items() if p < 3) == 90, offsets
