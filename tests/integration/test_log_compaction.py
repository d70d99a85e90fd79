"""Log compaction with real clients (issue 21): the seed's `bus-latest-position` topic (compacted, keyed by bus id)
takes position updates and tombstones from confluent-kafka; the node's cleaner (log.cleaner.backoff.ms short,
segment.ms short so data leaves the active segment) compacts it; a new service reading from offset 0 gets every
bus's latest position once below the cleaned point, offsets increasing, no older value of a deleted bus, and the
tombstones gone once delete.retention.ms has passed after the clean that first kept them. The cleaned segments
are what a restart loads, and the cleaner-offset-checkpoint records where the dirty part starts.
"""

import re
import time

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from conftest import MalaNode
from real_clients import create_topic, rdkafka_read_to_end, wait_until

TIMEOUT = 60
BUSES = 40


def read_from_start(bootstrap, topic):
    """Every record of partition 0 from offset 0: [(offset, key, value)]."""
    return [(o, k.decode(), None if v is None else v.decode()) for o, k, v in rdkafka_read_to_end(bootstrap, topic)]


def produce(bootstrap, topic, records):
    """[(key, value or None)] with confluent-kafka, acks=all; fails the test on any delivery error."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "socket.timeout.ms": 10000})
    errors = []
    for key, value in records:
        producer.produce(topic, key=key, value=value, on_delivery=lambda err, msg: err and errors.append(err))
    assert producer.flush(TIMEOUT) == 0, "undelivered records"
    assert not errors, errors


def produce_wave(bootstrap, topic, wave, buses=range(BUSES)):
    produce(bootstrap, topic, [(f"bus-{b}".encode(), f"pos-{wave}-{b}".encode()) for b in buses])


def cleaned_rounds(node, topic):
    return len(re.findall(rf"{topic}-0: cleaned offsets", node.stderr_path.read_text(errors="replace")))


@pytest.fixture
def node(tmp_path):
    n = MalaNode(tmp_path, name="compaction", extra_config={"log.cleaner.backoff.ms": 200})
    n.start()
    yield n
    n.stop()


def test_a_new_service_reads_every_bus_latest_position_from_a_cleaned_topic(node):
    topic = "bus-latest-position"
    create_topic(node.bootstrap, topic, config={
        "cleanup.policy": "compact", "segment.ms": "300", "min.cleanable.dirty.ratio": "0.01",
        "delete.retention.ms": "4000"})
    latest = {}
    in_service = [b for b in range(BUSES) if b not in (7, 8)]
    produced = 0
    for wave in range(8):
        buses = range(BUSES) if wave <= 5 else in_service
        produce_wave(node.bootstrap, topic, wave, buses)
        produced += len(buses)
        for b in buses:
            latest[f"bus-{b}"] = f"pos-{wave}-{b}"
        if wave == 5:
            # Two buses leave service: tombstones.
            produce(node.bootstrap, topic, [(b"bus-7", None), (b"bus-8", None)])
            produced += 2
            latest.pop("bus-7")
            latest.pop("bus-8")
        time.sleep(0.4)  # the next wave rolls the segment (segment.ms)
    # One more wave of other keys pushes the last bus updates out of the active segment.
    time.sleep(0.4)
    produce(node.bootstrap, topic, [(b"depot", b"open")])
    latest["depot"] = "open"

    wait_until(lambda: cleaned_rounds(node, topic) >= 1, TIMEOUT, "a cleaning round of the topic")
    records = read_from_start(node.bootstrap, topic)
    offsets = [o for o, _, _ in records]
    assert offsets == sorted(set(offsets)), "offsets must increase"
    assert len(records) < produced // 2, f"nothing was removed: {len(records)} records"
    view = {}
    for _, key, value in records:
        view[key] = value
    assert {k: v for k, v in view.items() if v is not None} == latest
    # A deleted bus has no value left before its tombstone.
    for key in ("bus-7", "bus-8"):
        values = [v for _, k, v in records if k == key]
        assert values in ([], [None]), f"{key}: {values}"

    # After delete.retention.ms, the next clean removes the tombstones (more updates make the log dirty again).
    time.sleep(4.5)
    rounds = cleaned_rounds(node, topic)
    for wave in range(8, 11):
        produce_wave(node.bootstrap, topic, wave, in_service)
        time.sleep(0.4)
    produce(node.bootstrap, topic, [(b"depot", b"closed")])

    def tombstones_gone():
        if cleaned_rounds(node, topic) <= rounds:
            return False
        return all(k not in ("bus-7", "bus-8") for _, k, _ in read_from_start(node.bootstrap, topic))

    wait_until(tombstones_gone, TIMEOUT, "the tombstones removed past delete.retention.ms", interval=1.0)

    # The cleaned segments are what a restart serves; the checkpoint names the partition.
    before = read_from_start(node.bootstrap, topic)
    assert node.stop() == 0
    checkpoint = (node.log_dir / "cleaner-offset-checkpoint").read_text().split("\n")
    assert checkpoint[0] == "0" and any(line.startswith(f"{topic} 0 ") for line in checkpoint), checkpoint
    node.start()
    assert read_from_start(node.bootstrap, topic) == before


def test_keyless_records_are_refused_by_a_compacted_topic(node):
    from confluent_kafka import KafkaError

    topic = "compacted-keyless"
    create_topic(node.bootstrap, topic, config={"cleanup.policy": "compact"})
    errors = []
    p = Producer({"bootstrap.servers": node.bootstrap, "message.timeout.ms": 20000, "retries": 0})
    p.produce(topic, value=b"no key", on_delivery=lambda err, msg: errors.append(err))
    p.flush(30)
    assert len(errors) == 1 and errors[0] is not None
    assert errors[0].code() == KafkaError.INVALID_RECORD, errors[0]


def test_offset_commits_of_a_group_stay_bounded_in_the_cleaned_offsets_topic(tmp_path):
    """Many commits of one group: __consumer_offsets (1 MiB segments here) is cleaned down to a few segments, and
    the group's committed offset replays from the cleaned partition after a restart."""
    node = MalaNode(tmp_path, name="offsets-compaction", extra_config={
        "log.cleaner.backoff.ms": 200, "offsets.topic.segment.bytes": 1048576, "offsets.topic.num.partitions": 1})
    node.start()
    try:
        topic = "positions-read"
        create_topic(node.bootstrap, topic)
        produce(node.bootstrap, topic, [(b"k", b"v")])
        consumer = Consumer({"bootstrap.servers": node.bootstrap, "group.id": "committer",
                             "enable.auto.commit": False, "socket.timeout.ms": 10000})
        commits = 30_000
        try:
            consumer.assign([TopicPartition(topic, 0, 0)])
            for i in range(1, commits + 1):
                consumer.commit(offsets=[TopicPartition(topic, 0, i)], asynchronous=i % 500 != 0)
                # librdkafka leaves each asynchronous commit's result in the queue the application serves with
                # poll(); unserved, that queue grows by one op per commit and the client's own queue work walks
                # it, so every commit would take longer than the last (with Apache Kafka too; the broker's cost
                # per commit stays flat).
                consumer.poll(0)
        finally:
            consumer.close()
        offsets_dir = node.log_dir / "__consumer_offsets-0"

        def segments():
            return sorted(p.name for p in offsets_dir.glob("*.log"))

        def cleaned_down():
            size = sum(p.stat().st_size for p in offsets_dir.glob("*.log"))
            return cleaned_rounds(node, "__consumer_offsets") >= 1 and len(segments()) <= 3 and size < 2 * 1048576

        # 30,000 commits fill several 1 MiB segments; the cleaner leaves one cleaned segment and the active one
        # (a deleted segment's files wait file.delete.delay.ms under .deleted, not counted here). A round that
        # starts while the commits go on cleans the segments closed by then, a later round the rest.
        wait_until(cleaned_down, TIMEOUT, "__consumer_offsets cleaned down to at most 3 segments under 2 MiB")
        assert node.stop() == 0
        node.start()
        check = Consumer({"bootstrap.servers": node.bootstrap, "group.id": "committer", "socket.timeout.ms": 10000})
        try:
            committed = check.committed([TopicPartition(topic, 0)], timeout=TIMEOUT)
        finally:
            check.close()
        assert committed[0].offset == commits
    finally:
        node.stop()
