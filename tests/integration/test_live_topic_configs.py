"""Topic and broker config changes reach partitions that already exist (issue 18, item 3): each test changes one
config at run time, on a topic that already holds data, with Apache Kafka's kafka-configs.sh (its 4.4 main class) or
librdkafka's IncrementalAlterConfigs, and observes the effect with real clients or in the partition's files:
segment.bytes / segment.ms roll the active segment, segment.index.bytes sizes the next segment's indexes,
index.interval.bytes spaces the next index entries, retention.ms / retention.bytes delete old segments,
max.message.bytes / message.timestamp.* / cleanup.policy=compact refuse the next produce, message.timestamp.type
stamps it, flush.messages flushes it, and the broker-level dynamic defaults (--entity-default, --entity-name <id>)
reach topics without an override. On three nodes, followers roll by the new segment.bytes too, and a
min.insync.replicas raised above the ISR refuses acks=all.

docs/compatibility.md ("Topic config changes") lists when each config applies.
"""

import time
from pathlib import Path

import pytest
from confluent_kafka import KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType

from cluster import Cluster
from real_clients import (CONFIGS_TOOL, create_topic, rdkafka_admin, rdkafka_produce, shared_node, step_ok, tool_batch,
                          wait_until)
from real_clients import node_log_on_failure  # noqa: F401 (autouse: the shared node's log after a failure)

TIMEOUT = 30
MIB = 1024 * 1024

# Retention runs every second and recovery points are checkpointed every second, so that their effects are seen
# within seconds.
FAST_MAINTENANCE = {
    "log.retention.check.interval.ms": 1000,
    "log.flush.offset.checkpoint.interval.ms": 1000,
}


@pytest.fixture(scope="module")
def node(request, tmp_path_factory):
    yield from shared_node(request, tmp_path_factory, "live-configs", extra_config=FAST_MAINTENANCE)


# --- helpers --------------------------------------------------------------------------------------------------------

def describe_topic_config(bootstrap, topic, key):
    admin = rdkafka_admin(bootstrap)
    res = ConfigResource(ResourceType.TOPIC, topic)
    entries = admin.describe_configs([res], request_timeout=TIMEOUT)[res].result(timeout=TIMEOUT)
    return entries[key].value


def wait_described(bootstrap, topic, key, value):
    """DescribeConfigs answers from the node's published image, and the node hands a new image to its replicas
    before publishing it: once the node describes the value, its replicas have it."""
    wait_until(lambda: describe_topic_config(bootstrap, topic, key) == str(value), TIMEOUT,
               f"{topic}: {key}={value} described by {bootstrap}")


def kafka_configs_alter_topic(bootstrap, topic, **configs):
    """kafka-configs.sh --alter --entity-type topics --entity-name TOPIC --add-config k=v,..."""
    add = ",".join(f"{k.replace('_', '.')}={v}" for k, v in configs.items())
    (out,) = tool_batch((CONFIGS_TOOL, "--bootstrap-server", bootstrap, "--entity-type", "topics",
                         "--entity-name", topic, "--alter", "--add-config", add))
    assert f"Completed updating config for topic {topic}." in step_ok(out), out


def alter_topic(bootstrap, topic, configs):
    """IncrementalAlterConfigs SET with librdkafka's AdminClient."""
    admin = rdkafka_admin(bootstrap)
    res = ConfigResource(ResourceType.TOPIC, topic, incremental_configs=[
        ConfigEntry(k, str(v), incremental_operation=AlterConfigOpType.SET) for k, v in configs.items()])
    admin.incremental_alter_configs([res], request_timeout=TIMEOUT)[res].result(timeout=TIMEOUT)
    for k, v in configs.items():
        wait_described(bootstrap, topic, k, v)


def partition_dir(node, topic, partition=0) -> Path:
    return Path(node.log_dir) / f"{topic}-{partition}"


def segment_files(node, topic, suffix=".log", partition=0, settle=10):
    """[(name, size)] of the partition's live segment files, oldest first (.deleted ones excluded). A roll
    adopts the standby segment the file worker made and appends to it at once; the worker gives its files
    their names just after. Waits (up to `settle` s) until no standby holding data is left under its
    standby name."""
    d = partition_dir(node, topic, partition)

    def adopted_standby_pending():
        for p in d.iterdir():
            try:
                if p.name.endswith(".log.standby") and p.stat().st_size > 0:
                    return True
            except FileNotFoundError:
                continue  # renamed meanwhile
        return False
    deadline = time.monotonic() + settle
    while adopted_standby_pending() and time.monotonic() < deadline:
        time.sleep(0.05)
    return sorted((p.name, p.stat().st_size) for p in d.iterdir() if p.name.endswith(suffix))


def produce_bytes(bootstrap, topic, total, record_size=10_000, **conf):
    """About `total` bytes in records of `record_size`, in batches of at most 100 kB."""
    n = max(1, total // record_size)
    rdkafka_produce(bootstrap, topic, [(f"k{i}", "v" * record_size) for i in range(n)],
                    **{"batch.size": 100_000, "linger.ms": 5, **conf})


def produce_one(bootstrap, topic, value="v", key="k", timestamp=0, **conf):
    """One record, no retries: None when acknowledged, else the KafkaError code."""
    producer = Producer({"bootstrap.servers": bootstrap, "message.timeout.ms": 20000, "retries": 0,
                         "enable.idempotence": False, "linger.ms": 0, **conf})
    out = []
    producer.produce(topic, key=key, value=value, timestamp=timestamp,
                     on_delivery=lambda err, msg: out.append(err))
    assert producer.flush(30) == 0
    assert len(out) == 1
    return None if out[0] is None else out[0].code()


def consume_timestamps(bootstrap, topic, count):
    """(timestamp type, timestamp) of the first `count` records of partition 0."""
    from confluent_kafka import Consumer

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "mala-it-unused", "enable.auto.commit": False,
                         "fetch.wait.max.ms": 200})
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        out = []
        deadline = time.monotonic() + TIMEOUT
        while len(out) < count and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            assert msg.error() is None, msg.error()
            out.append(msg.timestamp())
        assert len(out) == count, out
        return out
    finally:
        consumer.close()


def watermarks(bootstrap, topic, partition=0):
    from confluent_kafka import Consumer

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "mala-it-unused"})
    try:
        return consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=10)
    finally:
        consumer.close()


def recovery_point(node, topic, partition=0):
    """The partition's entry in recovery-point-offset-checkpoint (None when absent)."""
    path = Path(node.log_dir) / "recovery-point-offset-checkpoint"
    try:
        lines = path.read_text().splitlines()
    except FileNotFoundError:
        return None
    for line in lines[2:]:
        fields = line.split()
        if len(fields) == 3 and fields[0] == topic and int(fields[1]) == partition:
            return int(fields[2])
    return None


# --- single node ----------------------------------------------------------------------------------------------------

def test_segment_bytes_lowered_rolls_the_existing_partition(node):
    """The issue's case: kafka-configs --alter --add-config segment.bytes=1048576 on a topic with data; the
    partition's next writes roll 1 MiB segments (the same value given at creation already did)."""
    topic = "live-segment-bytes"
    create_topic(node.bootstrap, topic)
    produce_bytes(node.bootstrap, topic, 500_000)
    assert len(segment_files(node, topic)) == 1

    kafka_configs_alter_topic(node.bootstrap, topic, segment_bytes=MIB)
    wait_described(node.bootstrap, topic, "segment.bytes", MIB)
    produce_bytes(node.bootstrap, topic, 3_500_000)
    logs = segment_files(node, topic)
    assert len(logs) >= 4, logs
    assert all(size <= MIB for _, size in logs[:-1]), logs
    assert sum(size for _, size in logs) >= 4_000_000, logs


def test_segment_ms_lowered_rolls_by_time(node):
    topic = "live-segment-ms"
    create_topic(node.bootstrap, topic)
    assert produce_one(node.bootstrap, topic) is None
    alter_topic(node.bootstrap, topic, {"segment.ms": 1500})
    time.sleep(2)
    assert produce_one(node.bootstrap, topic) is None  # 2 s after the segment's first record: rolls
    assert len(segment_files(node, topic)) == 2
    assert produce_one(node.bootstrap, topic) is None  # the new segment is young
    assert len(segment_files(node, topic)) == 2


def test_segment_index_bytes_sizes_the_next_segments_indexes(node):
    topic = "live-segment-index-bytes"
    create_topic(node.bootstrap, topic)
    assert produce_one(node.bootstrap, topic) is None
    assert segment_files(node, topic, ".index") == [("00000000000000000000.index", 10 * MIB)]

    alter_topic(node.bootstrap, topic, {"segment.index.bytes": 4096, "segment.bytes": MIB})
    # As in Kafka, the active segment keeps its preallocated index; the segments rolled from now on get 4 kB.
    produce_bytes(node.bootstrap, topic, 1_500_000)
    indexes = segment_files(node, topic, ".index")
    assert len(indexes) >= 2, indexes
    assert indexes[-1][1] == 4096, indexes
    assert segment_files(node, topic, ".timeindex")[-1][1] == 4092  # 341 entries of 12 bytes


def test_index_interval_bytes_spaces_the_next_index_entries(node):
    topic = "live-index-interval-bytes"
    create_topic(node.bootstrap, topic)
    producer = Producer({"bootstrap.servers": node.bootstrap, "linger.ms": 0})

    def produce_batches(n):
        for i in range(n):  # one batch each
            producer.produce(topic, key="k", value=f"record-{i}")
            assert producer.flush(10) == 0

    produce_batches(30)  # about 2.5 kB: no entry with index.interval.bytes=4096
    alter_topic(node.bootstrap, topic, {"index.interval.bytes": 0})
    produce_batches(30)  # an entry per batch
    # A roll trims the segment's index to its entries: 8 bytes each.
    alter_topic(node.bootstrap, topic, {"segment.ms": 1000})
    time.sleep(1.5)
    produce_batches(1)
    # The file worker renames the segment the roll adopted and trims the rolled one's index, just after.
    def rolled_and_trimmed():
        indexes = segment_files(node, topic, ".index")
        return indexes if len(indexes) == 2 and 30 * 8 <= indexes[0][1] <= 31 * 8 else None
    wait_until(rolled_and_trimmed, 10, "two segments, the first one's index trimmed to its 30 entries")


def test_retention_ms_lowered_deletes_old_segments(node):
    topic = "live-retention-ms"
    create_topic(node.bootstrap, topic, config={"segment.bytes": str(MIB)})
    produce_bytes(node.bootstrap, topic, 3_500_000)
    assert len(segment_files(node, topic)) >= 4
    low, high = watermarks(node.bootstrap, topic)
    assert low == 0
    time.sleep(2.5)  # retention runs every second: with 7 days nothing goes
    assert watermarks(node.bootstrap, topic)[0] == 0

    alter_topic(node.bootstrap, topic, {"retention.ms": 1000})
    # Every segment but the active one is older than a second.
    wait_until(lambda: len(segment_files(node, topic)) == 1, TIMEOUT, "one segment left")
    low2, high2 = watermarks(node.bootstrap, topic)
    assert 0 < low2 <= high2 == high, (low2, high2, high)


def test_retention_bytes_lowered_deletes_old_segments(node):
    topic = "live-retention-bytes"
    create_topic(node.bootstrap, topic, config={"segment.bytes": str(MIB)})
    produce_bytes(node.bootstrap, topic, 4_500_000)
    assert len(segment_files(node, topic)) >= 5
    assert watermarks(node.bootstrap, topic)[0] == 0

    alter_topic(node.bootstrap, topic, {"retention.bytes": 2 * MIB})
    wait_until(lambda: watermarks(node.bootstrap, topic)[0] > 0, TIMEOUT, "the log start offset to rise")
    wait_until(lambda: sum(size for _, size in segment_files(node, topic)) <= 3 * MIB, TIMEOUT,
               "at most 3 MiB left (whole segments go while more than retention.bytes remains)")


def test_max_message_bytes_lowered_refuses_larger_batches(node):
    topic = "live-max-message-bytes"
    create_topic(node.bootstrap, topic)
    assert produce_one(node.bootstrap, topic, value="v" * 5000) is None
    kafka_configs_alter_topic(node.bootstrap, topic, max_message_bytes=1000)
    wait_described(node.bootstrap, topic, "max.message.bytes", 1000)
    assert produce_one(node.bootstrap, topic, value="v" * 5000) == KafkaError.MSG_SIZE_TOO_LARGE
    assert produce_one(node.bootstrap, topic, value="small") is None


def test_message_timestamp_type_log_append_time_stamps_the_next_records(node):
    from confluent_kafka import TIMESTAMP_CREATE_TIME, TIMESTAMP_LOG_APPEND_TIME

    topic = "live-timestamp-type"
    create_topic(node.bootstrap, topic)
    old = int(time.time() * 1000) - 3_600_000
    assert produce_one(node.bootstrap, topic, timestamp=old) is None
    alter_topic(node.bootstrap, topic, {"message.timestamp.type": "LogAppendTime"})
    before = int(time.time() * 1000)
    assert produce_one(node.bootstrap, topic, timestamp=old) is None
    after = int(time.time() * 1000)
    first, second = consume_timestamps(node.bootstrap, topic, 2)
    assert first == (TIMESTAMP_CREATE_TIME, old)
    assert second[0] == TIMESTAMP_LOG_APPEND_TIME and before - 1000 <= second[1] <= after + 1000, second


def test_message_timestamp_bounds_refuse_the_next_records(node):
    topic = "live-timestamp-bounds"
    create_topic(node.bootstrap, topic)
    now = int(time.time() * 1000)
    hour_ago, in_two_hours = now - 3_600_000, now + 7_200_000
    assert produce_one(node.bootstrap, topic, timestamp=hour_ago) is None  # before.max.ms: unbounded
    assert produce_one(node.bootstrap, topic, timestamp=in_two_hours) == KafkaError.INVALID_TIMESTAMP  # 1 h

    alter_topic(node.bootstrap, topic, {"message.timestamp.before.max.ms": 60_000,
                                        "message.timestamp.after.max.ms": 86_400_000})
    assert produce_one(node.bootstrap, topic, timestamp=hour_ago) == KafkaError.INVALID_TIMESTAMP
    assert produce_one(node.bootstrap, topic, timestamp=in_two_hours) is None


def test_cleanup_policy_compact_requires_keys_from_the_next_produce(node):
    topic = "live-cleanup-policy"
    create_topic(node.bootstrap, topic)
    assert produce_one(node.bootstrap, topic, key=None) is None
    alter_topic(node.bootstrap, topic, {"cleanup.policy": "compact"})
    assert produce_one(node.bootstrap, topic, key=None) == KafkaError.INVALID_RECORD
    assert produce_one(node.bootstrap, topic, key="k") is None


def test_flush_messages_flushes_the_next_writes(node):
    topic = "live-flush-messages"
    create_topic(node.bootstrap, topic)
    for _ in range(3):
        assert produce_one(node.bootstrap, topic) is None
    time.sleep(2.5)  # two checkpoints: nothing was flushed (flush.messages is unbounded)
    assert recovery_point(node, topic) in (None, 0)

    alter_topic(node.bootstrap, topic, {"flush.messages": 1})
    assert produce_one(node.bootstrap, topic) is None
    wait_until(lambda: recovery_point(node, topic) == 4, TIMEOUT, "the recovery point at the log end (4)")


def test_broker_dynamic_defaults_reach_existing_topics(mala_factory):
    """kafka-configs --entity-type brokers --entity-default (cluster-wide) and --entity-name 1 (this broker): the
    broker defaults of topic configs, applied to a topic without overrides that already holds data; a topic
    override still wins."""
    node = mala_factory(extra_config=FAST_MAINTENANCE).start()
    topic = "live-broker-defaults"
    create_topic(node.bootstrap, topic)
    produce_bytes(node.bootstrap, topic, 500_000)
    assert len(segment_files(node, topic)) == 1
    b = ("--bootstrap-server", node.bootstrap)

    (default,) = tool_batch((CONFIGS_TOOL, *b, "--entity-type", "brokers", "--entity-default", "--alter",
                             "--add-config", f"log.segment.bytes={MIB},log.message.timestamp.before.max.ms=60000"))
    assert "Completed updating default config for brokers in the cluster." in step_ok(default), default
    wait_described(node.bootstrap, topic, "segment.bytes", MIB)
    wait_described(node.bootstrap, topic, "message.timestamp.before.max.ms", 60000)
    hour_ago = int(time.time() * 1000) - 3_600_000
    assert produce_one(node.bootstrap, topic, timestamp=hour_ago) == KafkaError.INVALID_TIMESTAMP
    produce_bytes(node.bootstrap, topic, 3_000_000)
    logs = segment_files(node, topic)
    assert len(logs) >= 4, logs
    assert all(size <= MIB for _, size in logs[:-1]), logs

    (per_broker,) = tool_batch((CONFIGS_TOOL, *b, "--entity-type", "brokers", "--entity-name", 1, "--alter",
                                "--add-config", "message.max.bytes=2000"))
    assert "Completed updating config for broker 1." in step_ok(per_broker), per_broker
    wait_described(node.bootstrap, topic, "max.message.bytes", 2000)
    assert produce_one(node.bootstrap, topic, value="v" * 5000) == KafkaError.MSG_SIZE_TOO_LARGE

    alter_topic(node.bootstrap, topic, {"max.message.bytes": 100_000})
    assert produce_one(node.bootstrap, topic, value="v" * 5000) is None


def test_topic_configs_apply_to_logs_loaded_at_restart(mala_factory):
    """A restarted node loads its logs before it knows their topics' configs: each replica takes its topic's
    config when the metadata is applied, so a topic's segment.bytes and max.message.bytes still hold, and the
    active segment's indexes take the topic's segment.index.bytes again (as Kafka opens them), not the default."""
    node = mala_factory(extra_config=FAST_MAINTENANCE).start()
    topic = "live-configs-restart"
    create_topic(node.bootstrap, topic, config={"segment.bytes": str(MIB), "max.message.bytes": "2000",
                                                "segment.index.bytes": "65536"})
    produce_bytes(node.bootstrap, topic, 500_000, record_size=1000, **{"batch.size": 1900})
    assert segment_files(node, topic, ".index")[-1][1] == 65536
    assert node.stop() == 0
    node.start()
    assert produce_one(node.bootstrap, topic, value="v" * 5000) == KafkaError.MSG_SIZE_TOO_LARGE
    assert segment_files(node, topic, ".index")[-1][1] == 65536, segment_files(node, topic, ".index")
    produce_bytes(node.bootstrap, topic, 2_000_000, record_size=1000, **{"batch.size": 1900})
    logs = segment_files(node, topic)
    assert len(logs) >= 3, logs
    assert all(size <= MIB for _, size in logs[:-1]), logs


# --- three nodes ----------------------------------------------------------------------------------------------------

def test_followers_take_config_changes_and_min_isr_refuses_acks_all(request, tmp_path):
    """RF 3: segment.bytes lowered with kafka-configs rolls the partition on the leader and on both followers
    (each applies the topic config to its own log); min.insync.replicas raised above the ISR refuses acks=all with
    NOT_ENOUGH_REPLICAS and lowered again accepts it."""
    c = Cluster(tmp_path, extra_config={"replica.lag.time.max.ms": 3000, "broker.session.timeout.ms": 4000,
                                        "broker.heartbeat.interval.ms": 500})
    try:
        c.start_all()
        c.wait_until(c.agreed_leader, timeout=20, what="a quorum leader all three nodes agree on")
        topic = "live-configs-replicated"

        def created():
            admin = rdkafka_admin(c.bootstrap)
            from confluent_kafka.admin import NewTopic
            fs = admin.create_topics([NewTopic(topic, 1, 3)], request_timeout=5, operation_timeout=5)
            try:
                fs[topic].result(timeout=10)
            except KafkaException as e:
                if e.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
                    return None
            t = c.rdkafka_metadata(c.ids[0], topic=topic).topics[topic]
            return t.error is None and len(t.partitions[0].isrs) == 3 or None
        c.wait_until(created, timeout=30, interval=0.5, what=f"{topic} with a full ISR")

        produce_bytes(c.bootstrap, topic, 300_000, acks="all")
        kafka_configs_alter_topic(c.bootstrap, topic, segment_bytes=MIB)
        wait_described(c.bootstrap, topic, "segment.bytes", MIB)
        # librdkafka may ask any node; each applies the committed record within milliseconds of the others.
        time.sleep(1)
        produce_bytes(c.bootstrap, topic, 3_500_000, acks="all")
        _, high = watermarks(c.bootstrap, topic)

        def replicated_and_rolled():
            out = {}
            for i in c.ids:
                logs = segment_files(c.node(i), topic)
                out[i] = logs
                if len(logs) < 4 or any(size > MIB for _, size in logs[:-1]):
                    return None
            return out
        rolled = wait_until(replicated_and_rolled, TIMEOUT, "every replica rolled 1 MiB segments")
        sizes = {i: sum(size for _, size in logs) for i, logs in rolled.items()}
        assert len(set(sizes.values())) == 1, sizes  # the followers have the same data
        assert high > 0

        t = c.rdkafka_metadata(c.ids[0], topic=topic).topics[topic]
        leader = t.partitions[0].leader
        follower = next(r for r in t.partitions[0].replicas if r != leader)
        c.stop(follower)  # controlled shutdown: leaves the ISR at once
        c.wait_until(lambda: len(c.rdkafka_metadata(leader, topic=topic).topics[topic].partitions[0].isrs) == 2,
                     timeout=20, interval=0.2, what=f"ISR without node {follower}")
        leader_bootstrap = c.node(leader).bootstrap
        assert produce_one(leader_bootstrap, topic, acks="all") is None

        # The describe that alter_topic waits for may be answered by another node than the leader: the leader's
        # answers are polled (each acks=all success before it applied the change is one more record).
        alter_topic(leader_bootstrap, topic, {"min.insync.replicas": 3})
        wait_until(lambda: produce_one(leader_bootstrap, topic, acks="all") == KafkaError.NOT_ENOUGH_REPLICAS,
                   TIMEOUT, "acks=all refused with min.insync.replicas 3 and ISR 2")
        assert produce_one(leader_bootstrap, topic, acks="all") == KafkaError.NOT_ENOUGH_REPLICAS
        assert produce_one(leader_bootstrap, topic, acks="1") is None

        alter_topic(leader_bootstrap, topic, {"min.insync.replicas": 2})
        wait_until(lambda: produce_one(leader_bootstrap, topic, acks="all") is None, TIMEOUT,
                   "acks=all accepted again with min.insync.replicas 2")
    except BaseException:
        print(c.logs())
        raise
    finally:
        died, codes = c.close()
    assert not died, f"nodes died during the test: {died}"
    assert all(code == 0 for code in codes.values()), codes
