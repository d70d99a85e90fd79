"""The seed scenario of issue 4: topic `bus-events` with 6 partitions, 1,200 buses as keys.

- Every bus's events land in one partition, with increasing offsets, whatever client wrote them as long as it
  hashes keys like the Java client (murmur2): librdkafka with partitioner=murmur2_random, Apache Kafka's Java
  producer, franz-go and KafkaJS.
- Reading from offset 0 twice returns the same records: reading deletes nothing.
- librdkafka's default partitioner (consistent_random: CRC32 of the key) places some keys elsewhere, as Kafka's
  documentation warns when mixing clients.
"""

import json
import zlib
from collections import defaultdict

import pytest

from real_clients import (create_topic, go_client, java_json, java_partition, kafkajs, rdkafka_consume,
                          rdkafka_produce, shared_node)
from real_clients import node_log_on_failure  # noqa: F401 (autouse: the shared node's log after a failure)

TOPIC = "bus-events"
PARTITIONS = 6
BUSES = 1200
EVENTS_PER_BUS = 5


def bus_id(i: int) -> str:
    return f"bus-{i}"


@pytest.fixture(scope="module")
def node(request, tmp_path_factory):
    yield from shared_node(request, tmp_path_factory, "seed")


@pytest.fixture(scope="module")
def seeded(node):
    """bus-events created with 6 partitions; 6,000 events (5 per bus, interleaved: every bus reports, then every
    bus again) from an idempotent librdkafka producer with the Java-compatible partitioner."""
    create_topic(node.bootstrap, TOPIC, partitions=PARTITIONS)
    events = [(bus_id(b), json.dumps({"bus": bus_id(b), "seq": n, "source": "librdkafka"}))
              for n in range(EVENTS_PER_BUS) for b in range(BUSES)]
    delivered = rdkafka_produce(node.bootstrap, TOPIC, events, timeout=90, **{
        "partitioner": "murmur2_random", "enable.idempotence": True, "linger.ms": 10,
        "compression.type": "lz4"})
    return delivered


def read_all(node):
    return rdkafka_consume(node.bootstrap, TOPIC, {p: 0 for p in range(PARTITIONS)}, timeout=60)


def test_every_bus_lands_in_one_partition_with_increasing_offsets(node, seeded):
    placement = defaultdict(set)
    offsets = defaultdict(list)
    for partition, offset, key, value in seeded:
        placement[key].add(partition)
        offsets[key].append(offset)
        assert json.loads(value)["bus"] == key
    assert len(placement) == BUSES
    assert all(len(ps) == 1 for ps in placement.values()), {k: ps for k, ps in placement.items() if len(ps) > 1}
    for key, offs in offsets.items():
        assert offs == sorted(offs) and len(set(offs)) == len(offs), (key, offs)
    # The partition is the Java client's choice: toPositive(murmur2(key)) % 6.
    assert all(placement[k] == {java_partition(k, PARTITIONS)} for k in placement)
    # All 6 partitions are used, and each holds a contiguous range of offsets from 0.
    per_partition = defaultdict(list)
    for partition, offset, _, _ in seeded:
        per_partition[partition].append(offset)
    assert sorted(per_partition) == list(range(PARTITIONS))
    for p, offs in per_partition.items():
        assert sorted(offs) == list(range(len(offs))), p

    # What a consumer reads agrees: per bus one partition, seq 0..4 in offset order.
    seqs = defaultdict(list)
    for partition, offset, key, value in sorted(read_all(node), key=lambda r: (r[0], r[1])):
        assert partition == java_partition(key, PARTITIONS)
        event = json.loads(value)
        if event["source"] == "librdkafka":
            seqs[key].append(event["seq"])
    assert len(seqs) == BUSES
    assert all(s == list(range(EVENTS_PER_BUS)) for s in seqs.values())


def test_reading_from_zero_twice_returns_the_same_records(node, seeded):
    first = read_all(node)
    second = read_all(node)
    assert len(first) >= BUSES * EVENTS_PER_BUS
    assert sorted(first) == sorted(second)
    # Nothing was removed by reading: the log start offsets are still 0, nothing beyond what was produced is missing.
    from confluent_kafka import Consumer, TopicPartition
    c = Consumer({"bootstrap.servers": node.bootstrap, "group.id": "mala-it-unused"})
    try:
        for p in range(PARTITIONS):
            low, high = c.get_watermark_offsets(TopicPartition(TOPIC, p), timeout=10)
            assert low == 0 and high == sum(1 for r in first if r[0] == p), (p, low, high)
    finally:
        c.close()
    assert set((p, o, k, v) for p, o, k, v in seeded) <= set(first)


def test_java_franz_and_kafkajs_place_each_bus_like_librdkafka_murmur2(node, seeded):
    """One more event per bus from Apache Kafka's Java producer (defaults), franz-go and KafkaJS: each lands in the
    partition librdkafka's murmur2_random put that bus in."""
    rdkafka_partition = {key: partition for partition, _, key, _ in seeded}
    _, java_out = java_json("mala.it.Produce", "--bootstrap", node.bootstrap, "--topic", TOPIC, "--count", BUSES,
                            "--key-prefix", "bus-", "--value-prefix", "java-event-", timeout=120)
    _, franz_out = go_client("franz", "produce", "--bootstrap", node.bootstrap, "--topic", TOPIC, "--count", BUSES,
                             "--key-prefix", "bus-", "--value-prefix", "franz-event-", timeout=90)
    _, js_out = kafkajs("produce", "--bootstrap", node.bootstrap, "--topic", TOPIC, "--count", BUSES,
                        "--key-prefix", "bus-", "--value-prefix", "kafkajs-event-", timeout=90)
    for name, out in [("java", java_out), ("franz-go", franz_out), ("kafkajs", js_out)]:
        assert len(out) == BUSES, name
        wrong = [(r["key"], r["partition"], rdkafka_partition[r["key"]]) for r in out
                 if r["partition"] != rdkafka_partition[r["key"]]]
        assert not wrong, f"{name} placed {len(wrong)} buses elsewhere: {wrong[:10]}"
    # Each bus's events still have increasing offsets in its one partition.
    last = {}
    for p, o, key, _ in sorted(read_all(node), key=lambda r: (r[0], r[1])):
        assert p == rdkafka_partition[key]
        assert o > last.get(key, -1)
        last[key] = o


def test_librdkafka_default_partitioner_differs(node, seeded):
    """librdkafka's default partitioner hashes keys with CRC32 (consistent_random), not murmur2: for the same
    keys on the same partition count, many buses land in another partition than the Java client would pick."""
    topic = "bus-events-crc32"
    create_topic(node.bootstrap, topic, partitions=PARTITIONS)
    delivered = rdkafka_produce(node.bootstrap, topic, [(bus_id(b), "event") for b in range(BUSES)])
    crc_partition = {key: partition for partition, _, key, _ in delivered}
    assert all(crc_partition[k] == zlib.crc32(k.encode()) % PARTITIONS for k in crc_partition)
    murmur_partition = {key: partition for partition, _, key, _ in seeded}
    differ = [k for k in crc_partition if crc_partition[k] != murmur_partition[k]]
    assert len(differ) > BUSES // 2, f"only {len(differ)} of {BUSES} keys differ"
    assert len(differ) < BUSES, "some keys agree by chance"
