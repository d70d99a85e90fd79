"""Consumer groups over the KIP-848 consumer protocol (issue 5): ConsumerGroupHeartbeat with the server-side
assignors, ConsumerGroupDescribe, offsets with member epochs, persistence of the consumer group records.

- confluent-kafka (librdkafka 2.16, group.protocol=consumer): two members of `alerts` get 3 partitions each and
  read everything; `live-map` and `safety-report` each read every record; 8 members on 6 partitions leave 2
  idle; a member killed with SIGKILL is replaced after group.consumer.session.timeout.ms and its partitions
  move; a consumer killed after processing but before committing re-reads that record; the group resumes from
  its committed offsets after a consumer restart and after a node restart (the group comes back from
  __consumer_offsets, in Kafka's record schemas as kafka-dump-log decodes them).
- Apache Kafka's Java consumer (kafka-console-consumer) with group.protocol=consumer.
- kafka-consumer-groups: --describe --members --verbose, --reset-offsets --shift-by / --to-datetime, --delete-offsets,
  --delete on consumer groups.

Session timeouts are short (group.consumer.session.timeout.ms 6000) to keep the module fast.
"""

import datetime
import os
import signal
import subprocess
import sys
import textwrap
import time
import uuid

import pytest

from real_clients import (CONSOLE_CONSUMER, DUMP_LOG_TOOL, create_topic, rdkafka_produce, shared_node, step_ok,
                          tool_batch)
from real_clients import node_log_on_failure  # noqa: F401 (autouse: the shared node's log after a failure)

GROUPS_TOOL = "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand"  # kafka-consumer-groups.sh
PARTITIONS = 6
RECORDS = 600
SESSION_MS = 6000
NODE_CONFIG = {
    "group.initial.rebalance.delay.ms": 300,
    "group.consumer.session.timeout.ms": SESSION_MS,
    "group.consumer.min.session.timeout.ms": 1000,
    "group.consumer.heartbeat.interval.ms": 500,
    "group.consumer.min.heartbeat.interval.ms": 100,
}


@pytest.fixture(scope="module")
def node(request, tmp_path_factory):
    yield from shared_node(request, tmp_path_factory, "groups848", extra_config=NODE_CONFIG)


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


def consumer(bootstrap, group, **conf):
    """A librdkafka consumer of the KIP-848 protocol (session and heartbeat settings are the broker's)."""
    from confluent_kafka import Consumer

    return Consumer({"bootstrap.servers": bootstrap, "group.id": group, "group.protocol": "consumer",
                     "auto.offset.reset": "earliest", "enable.auto.commit": False, "fetch.wait.max.ms": 100,
                     "socket.timeout.ms": 10000, **conf})


def consume_until(consumers, want, timeout=40, stop=None):
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


def poll_until(consumers, condition, timeout=40, what="condition"):
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, (
            f"{what} not reached; assignments {[sorted(p.partition for p in c.assignment()) for c in consumers]}")
        for c in consumers:
            msg = c.poll(0.02)
            if msg is not None and msg.error():
                pytest.fail(f"consumer error: {msg.error()}")


def committed(bootstrap, group, topic):
    from confluent_kafka import TopicPartition

    c = consumer(bootstrap, unique("probe"))
    try:
        from confluent_kafka.admin import AdminClient
        admin = AdminClient({"bootstrap.servers": bootstrap})
        from confluent_kafka import ConsumerGroupTopicPartitions
        fut = admin.list_consumer_group_offsets(
            [ConsumerGroupTopicPartitions(group, [TopicPartition(topic, p) for p in range(PARTITIONS)])])
        res = list(fut.values())[0].result(timeout=20)
        return {tp.partition: tp.offset for tp in res.topic_partitions}
    finally:
        c.close()


def test_alerts_two_members_three_partitions_each(node, bus_events):
    alerts = unique("alerts")
    a, b = consumer(node.bootstrap, alerts), consumer(node.bootstrap, alerts)
    try:
        a.subscribe([bus_events])
        b.subscribe([bus_events])

        def balanced():
            return len(a.assignment()) == 3 and len(b.assignment()) == 3

        got = consume_until([a, b], RECORDS, stop=balanced)
        mine = [{p.partition for p in c.assignment()} for c in (a, b)]
        assert not mine[0] & mine[1]
        assert len(mine[0] | mine[1]) == PARTITIONS
        assert {v for _, _, v in got[0] + got[1]} == {f"event-{i}" for i in range(RECORDS)}
        a.commit(asynchronous=False)
        b.commit(asynchronous=False)
    finally:
        a.close()
        b.close()
    assert sum(committed(node.bootstrap, alerts, bus_events).values()) == RECORDS


def test_live_map_and_safety_report_each_read_everything(node, bus_events):
    for name in ("live-map", "safety-report"):
        c = consumer(node.bootstrap, unique(name))
        try:
            c.subscribe([bus_events])
            got = consume_until([c], RECORDS)
            assert sorted(v for _, _, v in got[0]) == sorted(f"event-{i}" for i in range(RECORDS))
            assert len(c.assignment()) == PARTITIONS
        finally:
            c.close()


def test_eight_members_on_six_partitions_leave_two_idle(node, bus_events):
    group = unique("alerts-8")
    members = [consumer(node.bootstrap, group) for _ in range(8)]
    try:
        for c in members:
            c.subscribe([bus_events])
        poll_until(members, lambda: sorted(len(c.assignment()) for c in members) == [0, 0, 1, 1, 1, 1, 1, 1],
                   what="8 members on 6 partitions")
        owned = [p.partition for c in members for p in c.assignment()]
        assert sorted(owned) == list(range(PARTITIONS))
    finally:
        for c in members:
            c.close()


def test_regex_subscription(node, bus_events):
    group = unique("regex")
    c = consumer(node.bootstrap, group)
    try:
        # librdkafka sends a subscription starting with ^ as SubscribedTopicRegex (without the ^).
        c.subscribe(["^" + bus_events.split("-")[0] + "-events-.*"])
        poll_until([c], lambda: len([p for p in c.assignment() if p.topic == bus_events]) == PARTITIONS,
                   what="regex assignment")
        print("regex assignment", sorted((p.topic, p.partition) for p in c.assignment()))
    finally:
        c.close()


CHILD = textwrap.dedent("""
    import sys, time
    from confluent_kafka import Consumer
    bootstrap, group, topic, mode = sys.argv[1:5]
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "group.protocol": "consumer",
                  "auto.offset.reset": "earliest", "enable.auto.commit": False, "fetch.wait.max.ms": 100})
    c.subscribe([topic])
    while True:
        m = c.poll(0.1)
        if m is None or m.error():
            if mode == "hold":
                print("ASSIGNED", len(c.assignment()), flush=True)
            continue
        print("RECORD", m.partition(), m.offset(), m.value().decode(), flush=True)
        if mode == "process-then-wait":
            # Processed, not committed: the parent kills us now.
            time.sleep(60)
""")


def spawn_child(bootstrap, group, topic, mode):
    return subprocess.Popen([sys.executable, "-c", CHILD, bootstrap, group, topic, mode], stdout=subprocess.PIPE,
                            text=True)


def read_line_with(proc, prefix, timeout=30):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        if line.startswith(prefix):
            return line.split()
    pytest.fail(f"child printed no {prefix} line")


def test_sigkilled_member_is_replaced_after_its_session_timeout(node, bus_events):
    group = unique("alerts-kill")
    child = spawn_child(node.bootstrap, group, bus_events, "hold")
    survivor = consumer(node.bootstrap, group)
    try:
        survivor.subscribe([bus_events])
        # Both members hold 3 partitions.
        poll_until([survivor], lambda: len(survivor.assignment()) == 3, what="survivor with 3 partitions")
        child.send_signal(signal.SIGKILL)
        child.wait(10)
        killed_at = time.monotonic()
        poll_until([survivor], lambda: len(survivor.assignment()) == PARTITIONS, timeout=SESSION_MS / 1000 + 20,
                   what="survivor with every partition")
        # Not before the session timeout (minus the heartbeat slack).
        assert time.monotonic() - killed_at >= SESSION_MS / 1000 - 1.5
    finally:
        survivor.close()
        if child.poll() is None:
            child.kill()


def test_record_processed_but_not_committed_is_read_again(node):
    topic = unique("at-least-once")
    create_topic(node.bootstrap, topic, partitions=1)
    produce_events(node.bootstrap, topic, count=3)
    group = unique("at-least-once")
    # Commit the first record only.
    c = consumer(node.bootstrap, group)
    try:
        c.subscribe([topic])
        got = consume_until([c], 1)
        from confluent_kafka import TopicPartition
        first = got[0][0]
        c.commit(offsets=[TopicPartition(topic, first[0], first[1] + 1)], asynchronous=False)
    finally:
        c.close()
    # A consumer processes the next record and dies (SIGKILL) before committing it.
    child = spawn_child(node.bootstrap, group, topic, "process-then-wait")
    try:
        rec = read_line_with(child, "RECORD")
        assert int(rec[2]) == 1
        child.send_signal(signal.SIGKILL)
        child.wait(10)
    finally:
        if child.poll() is None:
            child.kill()
    # After its session timeout, a new consumer starts at the same record again.
    c = consumer(node.bootstrap, group)
    try:
        c.subscribe([topic])
        got = consume_until([c], 2, timeout=SESSION_MS / 1000 + 30)
        assert got[0][0][1] == 1
    finally:
        c.close()


def test_restart_of_consumer_and_node_resumes_from_committed_offsets(mala_factory):
    node = mala_factory(extra_config=NODE_CONFIG).start()
    topic = unique("resume")
    create_topic(node.bootstrap, topic, partitions=PARTITIONS)
    produce_events(node.bootstrap, topic, count=300)
    group = unique("resumer")
    c = consumer(node.bootstrap, group)
    try:
        c.subscribe([topic])
        consume_until([c], 300)
        c.commit(asynchronous=False)
    finally:
        c.close()
    before = committed(node.bootstrap, group, topic)
    assert sum(before.values()) == 300

    # Consumer restart.
    produce_events(node.bootstrap, topic, count=60, start=300)
    c = consumer(node.bootstrap, group)
    try:
        c.subscribe([topic])
        got = consume_until([c], 60)
        assert sorted(v for _, _, v in got[0]) == sorted(f"event-{i}" for i in range(300, 360))
        c.commit(asynchronous=False)
    finally:
        c.close()

    # Node restart: the group and its offsets come back from __consumer_offsets.
    assert node.stop() == 0
    node.close_log()
    from test_consumer_groups import group_partition
    segments = sorted((node.log_dir / f"__consumer_offsets-{group_partition(group)}").glob("*.log"))
    dump = step_ok(tool_batch((DUMP_LOG_TOOL, "--files", ",".join(map(str, segments)), "--offsets-decoder"))[0])
    # Kafka's decoder names the consumer group records by their key type.
    assert group in dump
    for key_type in ("3", "5", "6", "7", "8"):
        assert f'"type":"{key_type}"' in dump, (key_type, dump[:3000])
    node.start()
    produce_events(node.bootstrap, topic, count=60, start=360)
    c = consumer(node.bootstrap, group)
    try:
        c.subscribe([topic])
        got = consume_until([c], 60)
        assert sorted(v for _, _, v in got[0]) == sorted(f"event-{i}" for i in range(360, 420))
    finally:
        c.close()
    node.stop()


def test_java_consumer_with_group_protocol_consumer(node, bus_events):
    from clients import java
    group = unique("java-848")
    out = java(CONSOLE_CONSUMER, "--bootstrap-server", node.bootstrap, "--topic", bus_events, "--group", group,
               "--consumer-property", "group.protocol=consumer", "--consumer-property", "auto.offset.reset=earliest",
               "--max-messages", str(RECORDS), "--timeout-ms", "60000", timeout=120)
    lines = [line for line in out.stdout.splitlines() if line.startswith("event-")]
    assert sorted(lines) == sorted(f"event-{i}" for i in range(RECORDS))
    # The console consumer commits on close.
    assert sum(committed(node.bootstrap, group, bus_events).values()) == RECORDS


def test_kafka_consumer_groups_on_a_consumer_group(node, bus_events):
    group = unique("safety-report")
    c = consumer(node.bootstrap, group, **{"client.id": "report-client"})
    try:
        c.subscribe([bus_events])
        consume_until([c], RECORDS)
        c.commit(asynchronous=False)
        before_second_batch = datetime.datetime.now(datetime.timezone.utc) - datetime.timedelta(seconds=1)
        time.sleep(1.5)
        produce_events(node.bootstrap, bus_events, count=60, start=RECORDS)
        outs = tool_batch(
            (GROUPS_TOOL, "--bootstrap-server", node.bootstrap, "--describe", "--group", group, "--members",
             "--verbose"),
            (GROUPS_TOOL, "--bootstrap-server", node.bootstrap, "--describe", "--group", group, "--state"),
            (GROUPS_TOOL, "--bootstrap-server", node.bootstrap, "--list", "--type", "consumer"),
        )
        members = step_ok(outs[0])
        assert "report-client" in members, members
        assert "EPOCH" in members or "MEMBER-EPOCH" in members, members
        state = step_ok(outs[1])
        assert "Stable" in state and "uniform" in state.lower(), state
        assert group in step_ok(outs[2])
    finally:
        c.close()

    stamp = before_second_batch.strftime("%Y-%m-%dT%H:%M:%S.000")
    outs = tool_batch(
        (GROUPS_TOOL, "--bootstrap-server", node.bootstrap, "--reset-offsets", "--group", group, "--topic",
         bus_events, "--shift-by", "-10", "--execute"),
        (GROUPS_TOOL, "--bootstrap-server", node.bootstrap, "--reset-offsets", "--group", group, "--topic",
         bus_events, "--to-datetime", stamp, "--execute"),
    )
    step_ok(outs[0])
    step_ok(outs[1])
    # --to-datetime went back to the first record after the stamp: the group reads the second batch again.
    after = committed(node.bootstrap, group, bus_events)
    assert sum(after.values()) == RECORDS, after
    c = consumer(node.bootstrap, group)
    try:
        c.subscribe([bus_events])
        got = consume_until([c], 60)
        assert sorted(v for _, _, v in got[0]) == sorted(f"event-{i}" for i in range(RECORDS, RECORDS + 60))
    finally:
        c.close()

    outs = tool_batch(
        (GROUPS_TOOL, "--bootstrap-server", node.bootstrap, "--delete-offsets", "--group", group, "--topic",
         bus_events),
        (GROUPS_TOOL, "--bootstrap-server", node.bootstrap, "--delete", "--group", group),
        (GROUPS_TOOL, "--bootstrap-server", node.bootstrap, "--list"),
    )
    step_ok(outs[0])
    assert "was successful" in step_ok(outs[1]), outs[1]
    assert group not in step_ok(outs[2]).split()


def test_empty_classic_group_upgrades_to_a_consumer_group(node):
    """group.consumer.migration.policy (bidirectional by default in Kafka 4.x): a classic group left empty becomes
    a consumer group when a KIP-848 member joins it, and keeps its committed offsets."""
    topic = unique("upgrade")
    create_topic(node.bootstrap, topic, partitions=PARTITIONS)
    produce_events(node.bootstrap, topic, count=120)
    group = unique("upgrade")
    classic = consumer(node.bootstrap, group, **{"group.protocol": "classic", "session.timeout.ms": 6000,
                                                 "heartbeat.interval.ms": 500})
    try:
        classic.subscribe([topic])
        consume_until([classic], 120)
        classic.commit(asynchronous=False)
    finally:
        classic.close()
    produce_events(node.bootstrap, topic, count=30, start=120)
    c = consumer(node.bootstrap, group)
    try:
        c.subscribe([topic])
        got = consume_until([c], 30)
        assert sorted(v for _, _, v in got[0]) == sorted(f"event-{i}" for i in range(120, 150))
        # ListGroups reports the group's new type.
        from confluent_kafka.admin import AdminClient
        admin = AdminClient({"bootstrap.servers": node.bootstrap})
        listed = admin.list_consumer_groups().result(timeout=20)
        types = {g.group_id: str(g.type) for g in listed.valid}
        assert "CONSUMER" in types.get(group, ""), types.get(group)
    finally:
        c.close()


def test_classic_and_consumer_members_share_a_group_through_upgrade_and_downgrade(node):
    """Kafka 4.x's upgrade path with group.consumer.migration.policy=bidirectional (the default): a classic group
    with a live member becomes a consumer group when a KIP-848 member joins; the classic member stays in it,
    speaking JoinGroup/SyncGroup/Heartbeat, and the server-side assignor splits the partitions between both;
    when the KIP-848 member leaves, the group goes back to the classic protocol and the classic member gets
    everything again. No record is lost while the group changes type (at least once: a record whose offset was
    not committed before its partition moved may be read again by the new owner)."""
    from confluent_kafka.admin import AdminClient

    topic = unique("mixed")
    create_topic(node.bootstrap, topic, partitions=PARTITIONS)
    produce_events(node.bootstrap, topic, count=120)
    group = unique("mixed")
    admin = AdminClient({"bootstrap.servers": node.bootstrap})

    def group_type():
        listed = admin.list_consumer_groups().result(timeout=20)
        return {g.group_id: str(g.type) for g in listed.valid}.get(group, "")

    classic = consumer(node.bootstrap, group, **{"group.protocol": "classic", "session.timeout.ms": 6000,
                                                 "heartbeat.interval.ms": 500, "enable.auto.commit": True,
                                                 "auto.commit.interval.ms": 200, "client.id": "classic-client"})
    modern = None
    seen = []
    try:
        classic.subscribe([topic])
        seen += consume_until([classic], 120)[0]
        assert "CLASSIC" in group_type(), group_type()

        modern = consumer(node.bootstrap, group, **{"enable.auto.commit": True, "auto.commit.interval.ms": 200,
                                                    "client.id": "consumer-client"})
        modern.subscribe([topic])
        both = [classic, modern]
        # The group is a consumer group now, with both members holding partitions: 6 in all, none twice.
        poll_until(both, lambda: len(classic.assignment()) > 0 and len(modern.assignment()) > 0
                   and len(classic.assignment()) + len(modern.assignment()) == PARTITIONS,
                   timeout=60, what="partitions split between the classic and the consumer member")
        assert "CONSUMER" in group_type(), group_type()
        owned = [{p.partition for p in c.assignment()} for c in both]
        assert not (owned[0] & owned[1]), owned
        desc = admin.describe_consumer_groups([group])[group].result(timeout=20)
        assert {m.client_id for m in desc.members} == {"classic-client", "consumer-client"}, desc.members

        produce_events(node.bootstrap, topic, count=240, start=120)
        got = consume_until(both, 240)
        assert got[0] and got[1], "both members read part of the new records"
        seen += got[0] + got[1]

        # The KIP-848 member leaves: back to a classic group, the classic member rejoins and gets everything.
        modern.close()
        modern = None
        poll_until([classic], lambda: len(classic.assignment()) == PARTITIONS, timeout=60,
                   what="the classic member holding every partition after the downgrade")
        assert "CLASSIC" in group_type(), group_type()
        produce_events(node.bootstrap, topic, count=60, start=360)
        seen += consume_until([classic], 60)[0]
    finally:
        if modern is not None:
            modern.close()
        classic.close()
    values = {v for _, _, v in seen}
    assert values == {f"event-{i}" for i in range(420)}, sorted({f"event-{i}" for i in range(420)} - values)[:10]


def test_java_classic_consumer_joins_a_consumer_group(node):
    """Apache Kafka's Java consumer with group.protocol=classic (kafka-console-consumer) joins a group that a
    KIP-848 member (librdkafka) already holds: the coordinator hosts it as a classic member, the server-side
    assignor gives it part of the partitions through JoinGroup/SyncGroup, and it reads from them."""
    from clients import java_classpath

    topic = unique("mixed-java")
    create_topic(node.bootstrap, topic, partitions=PARTITIONS)
    produce_events(node.bootstrap, topic, count=120)
    group = unique("mixed-java")
    modern = consumer(node.bootstrap, group, **{"enable.auto.commit": True, "auto.commit.interval.ms": 200})
    java_proc = None
    try:
        modern.subscribe([topic])
        consume_until([modern], 120)
        modern.commit(asynchronous=False)
        cmd = ["java", "-Xmx256m", "-XX:TieredStopAtLevel=1", "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn",
               "-cp", java_classpath(), CONSOLE_CONSUMER, "--bootstrap-server", node.bootstrap, "--topic", topic,
               "--group", group, "--consumer-property", "group.protocol=classic", "--consumer-property",
               "client.id=java-classic", "--timeout-ms", "20000", "--max-messages", "20"]
        java_proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        from confluent_kafka.admin import AdminClient
        admin = AdminClient({"bootstrap.servers": node.bootstrap})

        def java_has_partitions():
            desc = admin.describe_consumer_groups([group])[group].result(timeout=20)
            return any(m.client_id == "java-classic" and m.assignment.topic_partitions for m in desc.members)

        # The KIP-848 member keeps polling so that it gives partitions up.
        checked = [0.0]

        def ready():
            if time.monotonic() - checked[0] < 1:
                return False
            checked[0] = time.monotonic()
            return java_has_partitions()

        poll_until([modern], ready, timeout=60, what="the Java classic member holding partitions")
        assert len(modern.assignment()) < PARTITIONS
        produce_events(node.bootstrap, topic, count=120, start=120)
        deadline = time.monotonic() + 60
        while java_proc.poll() is None and time.monotonic() < deadline:
            modern.poll(0.1)
        out, err = java_proc.communicate(timeout=30)
        lines = [ln for ln in out.splitlines() if ln.startswith("event-")]
        assert java_proc.returncode == 0 and len(lines) == 20, (java_proc.returncode, out[-1000:], err[-2000:])
        assert all(int(ln.split("-")[1]) >= 120 for ln in lines), lines  # it started at the committed offsets
    finally:
        if java_proc is not None and java_proc.poll() is None:
            java_proc.kill()
        modern.close()
