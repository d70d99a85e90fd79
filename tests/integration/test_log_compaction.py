"""Log compaction with real clients (issue 21): the seed's `bus-latest-position` topic (compacted, keyed by bus id)
takes position updates and tombstones from confluent-kafka; the node's cleaner (log.cleaner.backoff.ms short,
segment.ms short so data leaves the active segment) compacts it; a new service reading from offset 0 gets every
bus's latest position once below the cleaned point, offsets increasing, no older value of a deleted bus, and the
tombstones gone once delete.retention.ms has passed after the clean that first kept them. The cleaned segments
are what a restart loads, and the cleaner-offset-checkpoint records where the dirty part starts.
"""

import json
import re
import time

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from clients import java
from conftest import MalaNode
from real_clients import create_topic, rdkafka_admin, rdkafka_read_to_end, wait_until

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
    n = MalaNode(tmp_path, name="compaction", extra_config={"log.cleaner.backoff.ms": 200,
                                                            "log.retention.check.interval.ms": 500})
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


def batch_codecs(segment_path):
    """The compression codec (attribute bits 0-2) of every batch of a segment file."""
    data = segment_path.read_bytes()
    position, codecs = 0, []
    while position + 61 <= len(data):
        length = int.from_bytes(data[position + 8:position + 12], "big")
        if length <= 0:
            break  # preallocated tail
        codecs.append(int.from_bytes(data[position + 21:position + 23], "big") & 0x7)
        position += 12 + length
    return codecs


def test_offset_commits_of_a_group_stay_bounded_in_the_cleaned_offsets_topic(tmp_path):
    """A million offset commits of one group (issue 21): __consumer_offsets (1 MiB segments here, zstd batches through
    offsets.topic.compression.codec 4) is cleaned down to a few segments, every batch still zstd, and the group's
    committed offset replays from the cleaned partition after a restart."""
    node = MalaNode(tmp_path, name="offsets-compaction", extra_config={
        "log.cleaner.backoff.ms": 200, "offsets.topic.segment.bytes": 1048576, "offsets.topic.num.partitions": 1,
        "offsets.topic.compression.codec": 4})
    node.start()
    try:
        topic = "positions-read"
        create_topic(node.bootstrap, topic)
        produce(node.bootstrap, topic, [(b"k", b"v")])
        consumer = Consumer({"bootstrap.servers": node.bootstrap, "group.id": "committer",
                             "enable.auto.commit": False, "socket.timeout.ms": 10000})
        commits = 1_000_000
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

        seen = {}

        def cleaned_down():
            sizes = [p.stat().st_size for p in offsets_dir.glob("*.log")]
            seen.update(rounds=cleaned_rounds(node, "__consumer_offsets"), segments=sum(1 for n in sizes if n),
                        files=len(sizes), bytes=sum(sizes))
            return seen["rounds"] >= 1 and seen["segments"] <= 3 and seen["bytes"] < 2 * 1048576

        # A million commits fill many 1 MiB segments; the cleaner leaves one cleaned segment and the active one
        # (a deleted segment's files wait file.delete.delay.ms under .deleted, not counted here). A round that
        # starts while the commits go on cleans the segments closed by then, a later round the rest. A round
        # over several full segments makes a group of each (Kafka's groupSegmentsBySize goes by their sizes
        # before cleaning), and a group whose records all went is an empty segment until a later round merges
        # it: segments with data are counted, and the bytes bound the whole.
        try:
            wait_until(cleaned_down, TIMEOUT, "__consumer_offsets cleaned down to at most 3 segments under 2 MiB")
        except BaseException:
            print(f"last seen: {seen}; the node's cleaner lines:")
            print("\n".join(line for line in node.log_text(100000).splitlines() if "clean" in line.lower())[-4000:])
            raise
        codecs = {codec for name in segments() for codec in batch_codecs(offsets_dir / name)}
        assert codecs == {4}, codecs  # zstd
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


def java_records(out):
    return [json.loads(line) for line in out.splitlines() if line.startswith("{")]


def test_java_clients_read_kafkas_compacted_view_and_kafka_dump_log_reads_the_cleaned_segments(node):
    """Apache Kafka's Java producer (idempotent, acks=all) writes waves of account updates and tombstones; after
    cleaning, the Java consumer reading from offset 0 gets exactly what Kafka's cleaner leaves: below the active
    segment the last record of every key (tombstones kept inside delete.retention.ms), the active segment as
    written. kafka-dump-log then reads the cleaned segments and their indexes with no error."""
    topic = "accounts"
    create_topic(node.bootstrap, topic, config={  # index.interval.bytes small: the cleaned segment gets index entries
        "cleanup.policy": "compact", "segment.ms": "300", "min.cleanable.dirty.ratio": "0.01",
        "index.interval.bytes": "100"})
    written = []
    for wave in range(5):
        written += java_records(java("mala.it.Produce", "--bootstrap", node.bootstrap, "--topic", topic, "--count", 30,
                                     "--key-prefix", "acct-", "--value-prefix", f"w{wave}-").stdout)
        time.sleep(0.4)
    written += java_records(java("mala.it.Produce", "--bootstrap", node.bootstrap, "--topic", topic, "--count", 3,
                                 "--key-prefix", "acct-", "--tombstones", "true").stdout)
    time.sleep(0.4)  # the tail rolls the segment: every account record becomes cleanable
    written += java_records(java("mala.it.Produce", "--bootstrap", node.bootstrap, "--topic", topic, "--count", 1,
                                 "--key-prefix", "tail-").stdout)
    assert len(written) == 154 and [r["offset"] for r in written] == list(range(154))

    last_of_key = {r["key"]: r["offset"] for r in written}
    expected = [(r["offset"], r["key"], r["value"]) for r in written if last_of_key[r["key"]] == r["offset"]]
    assert len(expected) == 31 and sum(1 for e in expected if e[2] is None) == 3

    def consumed():
        out = java("mala.it.Consume", "--bootstrap", node.bootstrap, "--topic", topic, "--offset", -2).stdout
        return [(r["offset"], r["key"], r["value"]) for r in java_records(out)]

    wait_until(lambda: consumed() == expected, TIMEOUT, "the Java consumer reading Kafka's compacted view",
               interval=1.0)

    part = node.log_dir / f"{topic}-0"
    segments = sorted(p.name[:-len(".log")] for p in part.glob("*.log"))
    result = java("org.apache.kafka.tools.DumpLogSegments", "--deep-iteration", "--print-data-log",
                  "--files", ",".join(str(part / f"{s}.log") for s in segments), timeout=120)
    dumped = [int(m.group(1)) for m in re.finditer(r"^\| offset: (\d+) ", result.stdout, re.MULTILINE)]
    assert dumped == [e[0] for e in expected], result.stdout
    assert "isvalid: false" not in result.stdout and "isvalid: true" in result.stdout
    # Gaps between the offsets of a cleaned log are reported as non-consecutive (so they are for Kafka's own
    # cleaned segments); anything else is a problem.
    problems = re.sub(r"Non-consecutive offsets in \S+\n(  \d+ is followed by \d+\n)*", "", result.stderr)
    assert not re.search(r"exception|error|corrupt|invalid", problems, re.IGNORECASE), result.stderr
    # The indexes of the cleaned segments (the active one's are preallocated, which the tool misreads for any
    # broker's active segment).
    cleaned = segments[:-1]
    assert cleaned and all(int(s) < 153 for s in cleaned) and int(segments[-1]) == 153, segments
    indexes = [f"{s}{ext}" for s in cleaned for ext in (".index", ".timeindex")]
    checked = java("org.apache.kafka.tools.DumpLogSegments", "--index-sanity-check",
                   "--files", ",".join(str(part / f) for f in indexes), timeout=120)
    for f in indexes:
        assert f"{f} passed sanity check." in checked.stdout, checked.stdout + checked.stderr
    verified = java("org.apache.kafka.tools.DumpLogSegments", "--verify-index-only",
                    "--files", ",".join(str(part / f) for f in indexes), timeout=120)
    # A time index entry may name the empty batch a cleaned producer's last batch leaves (Kafka 4.x's segments index
    # every batch's max timestamp, empty ones too): the tool then finds no record and reports "log timestamp: -1".
    # Any other mismatch is a problem.
    report = re.sub(r"Found timestamp mismatch in :\S+\n  Index timestamp: \d+, log timestamp: -1\n", "",
                    verified.stdout + verified.stderr)
    assert not re.search(r"mismatch|out of order|not found|exception", report, re.IGNORECASE), report


def alter_topic(bootstrap, topic, configs):
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType

    admin = rdkafka_admin(bootstrap)
    res = ConfigResource(ResourceType.TOPIC, topic, incremental_configs=[
        ConfigEntry(k, str(v), incremental_operation=AlterConfigOpType.SET) for k, v in configs.items()])
    admin.incremental_alter_configs([res], request_timeout=TIMEOUT)[res].result(timeout=TIMEOUT)


def test_cleanup_policy_changes_at_run_time_and_compact_delete_applies_both(node):
    """A topic created with cleanup.policy=delete is never cleaned; switched to compact at run time (no restart) the
    cleaner compacts it; switched to compact,delete with a short retention.ms, retention also removes whole old
    segments, compacted or not, while the recent records stay."""
    topic = "policy-change"
    create_topic(node.bootstrap, topic, config={
        "cleanup.policy": "delete", "segment.ms": "300", "min.cleanable.dirty.ratio": "0.01"})
    latest = {}
    for wave in range(4):
        produce_wave(node.bootstrap, topic, wave)
        latest.update({f"bus-{b}": f"pos-{wave}-{b}" for b in range(BUSES)})
        time.sleep(0.4)
    produce(node.bootstrap, topic, [(b"depot", b"open")])
    latest["depot"] = "open"
    produced = 4 * BUSES + 1

    time.sleep(2)  # ten cleaner backoffs: a delete-only topic is left alone
    assert cleaned_rounds(node, topic) == 0
    assert len(read_from_start(node.bootstrap, topic)) == produced

    alter_topic(node.bootstrap, topic, {"cleanup.policy": "compact"})

    def compacted():
        records = read_from_start(node.bootstrap, topic)
        return len(records) == len(latest) and {k: v for _, k, v in records} == latest and records

    records = wait_until(compacted, TIMEOUT, "the topic compacted after the switch to compact", interval=1.0)
    assert cleaned_rounds(node, topic) >= 1
    compacted_end = records[-1][0]

    # compact,delete: retention.ms now also applies; the old segments (the cleaned one included) age out, the
    # records written after the change stay.
    alter_topic(node.bootstrap, topic, {"cleanup.policy": "compact,delete", "retention.ms": "3000"})
    time.sleep(3.5)
    fresh = [(f"fresh-{i}".encode(), b"v") for i in range(5)]
    produce(node.bootstrap, topic, fresh)

    def retained_only_fresh():
        records = read_from_start(node.bootstrap, topic)
        return all(o > compacted_end for o, _, _ in records) and records

    records = wait_until(retained_only_fresh, TIMEOUT, "retention removing the old segments of compact,delete",
                         interval=1.0)
    assert [k for _, k, _ in records] == [k.decode() for k, _ in fresh]
