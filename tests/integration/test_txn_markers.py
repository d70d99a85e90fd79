"""Transaction markers before the transaction coordinator exists: WriteTxnMarkers (key 27) and DescribeProducers
(key 61) on the partition leader, the last stable offset, and read_committed fetches with AbortedTransactions.

No client can open a transaction against Mala yet (that needs InitProducerId with a transactional id), so a
transaction is opened here with a hand-built Produce request carrying a transactional id and a transactional
batch (built by kafka-python's record batch builder). From there on everything is a real client: Apache Kafka's
`kafka-transactions.sh describe-producers` and `abort` (Admin.abortTransaction sends WriteTxnMarkers), and
confluent-kafka consumers reading committed and uncommitted data.

Bad input, as Apache Kafka answers it: a marker whose coordinator epoch is older than the producer's last
marker's is TRANSACTION_COORDINATOR_FENCED and nothing is appended; a marker for a partition the metadata does not
know is UNKNOWN_TOPIC_OR_PARTITION.

The hand-built transactional producer never talks to a transaction coordinator, so these nodes run with
transaction.partition.verification.enable=false (as Kafka would need: with verification its batches are refused,
which test_transactions_v2.py checks).
"""

import struct
import time
import uuid

from kafka.record.default_records import DefaultRecordBatchBuilder

import pytest

import kafka_wire as kw
from clients import java
from real_clients import create_topic, rdkafka_consume, rdkafka_produce

WRITE_TXN_MARKERS = 27
PRODUCE = 0
NONE = 0
UNKNOWN_TOPIC_OR_PARTITION = 3
TRANSACTION_COORDINATOR_FENCED = 52


@pytest.fixture
def node(mala_factory):
    """A single node whose leaders take transactional batches without asking a coordinator."""
    return mala_factory(extra_config={"transaction.partition.verification.enable": False}).start()


def write_txn_markers(port, markers, correlation_id=11):
    """WriteTxnMarkers v1. markers = [(producer_id, epoch, commit, {topic: [partitions]}, coordinator_epoch)].
    Returns [(producer_id, {(topic, partition): error_code})] in answer order."""
    body = kw.uvarint(len(markers) + 1)
    for producer_id, epoch, commit, topics, coordinator_epoch in markers:
        body += struct.pack(">qhb", producer_id, epoch, 1 if commit else 0)
        body += kw.uvarint(len(topics) + 1)
        for name, partitions in topics.items():
            body += kw.compact_string(name) + kw.uvarint(len(partitions) + 1)
            body += b"".join(struct.pack(">i", p) for p in partitions) + kw.uvarint(0)
        body += struct.pack(">i", coordinator_epoch) + kw.uvarint(0)
    body += kw.uvarint(0)
    with kw.Connection(port, timeout=40) as conn:
        assert conn.send(kw.frame(kw.request_header_v2(WRITE_TXN_MARKERS, 1, correlation_id) + body))
        payload = conn.recv_frame()
    assert payload is not None, "connection closed without a WriteTxnMarkers response"
    (corr,) = struct.unpack_from(">i", payload, 0)
    assert corr == correlation_id
    _, pos = kw.read_uvarint(payload, 4)  # response header v1 tagged fields
    out = []
    count, pos = kw.read_uvarint(payload, pos)
    for _ in range(count - 1):
        (producer_id,) = struct.unpack_from(">q", payload, pos)
        pos += 8
        errors = {}
        topics, pos = kw.read_uvarint(payload, pos)
        for _ in range(topics - 1):
            n, pos = kw.read_uvarint(payload, pos)
            name = payload[pos:pos + n - 1].decode()
            pos += n - 1
            parts, pos = kw.read_uvarint(payload, pos)
            for _ in range(parts - 1):
                partition, error = struct.unpack_from(">ih", payload, pos)
                pos += 6
                _, pos = kw.read_uvarint(payload, pos)
                errors[(name, partition)] = error
            _, pos = kw.read_uvarint(payload, pos)
        _, pos = kw.read_uvarint(payload, pos)
        out.append((producer_id, errors))
    return out


def produce_transactional(port, topic, transactional_id, producer_id, epoch, values, correlation_id=21, version=3,
                          sequence=0):
    """Produce (v3-v11, same layout) of one transactional batch to partition 0 as a transactional producer sends it.
    Returns (error_code, base_offset)."""
    builder = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=1, producer_id=producer_id,
                                        producer_epoch=epoch, base_sequence=sequence, batch_size=1 << 20)
    now = int(time.time() * 1000)
    for i, value in enumerate(values):
        builder.append(i, timestamp=now, key=None, value=value.encode(), headers=[])
    records = bytes(builder.build())
    body = kw.nullable_string(transactional_id) + struct.pack(">hi", -1, 10000)
    body += struct.pack(">i", 1) + kw.nullable_string(topic)
    body += struct.pack(">i", 1) + struct.pack(">ii", 0, len(records)) + records
    with kw.Connection(port, timeout=20) as conn:
        assert conn.send(kw.frame(kw.request_header_v1(PRODUCE, version, correlation_id) + body))
        payload = conn.recv_frame()
    assert payload is not None, "connection closed without a Produce response"
    pos = 4 + 4  # correlation id, topic count
    (n,) = struct.unpack_from(">h", payload, pos)
    pos += 2 + n + 4  # topic name, partition count
    _, error, base_offset = struct.unpack_from(">ihq", payload, pos)
    return error, base_offset


def describe_producers(bootstrap, topic):
    """kafka-transactions.sh describe-producers: {producer id: row} with the tool's column names."""
    out = java("org.apache.kafka.tools.TransactionsCommand", "--bootstrap-server", bootstrap,
               "describe-producers", "--topic", topic, "--partition", "0").stdout
    lines = [line.split() for line in out.splitlines() if line.strip()]
    header, rows = lines[0], lines[1:]
    return {int(row[0]): dict(zip(header, row)) for row in rows}


def watermarks(bootstrap, topic, isolation):
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "unused", "isolation.level": isolation})
    try:
        return consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
    finally:
        consumer.close()


def test_stale_coordinator_epoch_is_fenced_and_unknown_partitions_refused(node):
    topic = f"markers-{uuid.uuid4().hex[:8]}"
    create_topic(node.bootstrap, topic)
    # A producer this partition never saw takes any marker: this one records coordinator epoch 5.
    assert write_txn_markers(node.port, [(4242, 0, True, {topic: [0]}, 5)]) == [(4242, {(topic, 0): NONE})]
    assert watermarks(node.bootstrap, topic, "read_uncommitted") == (0, 1)

    # A coordinator with an older epoch is fenced, and writes nothing; unknown partitions are refused in the
    # same answer.
    answer = write_txn_markers(node.port, [
        (4242, 0, False, {topic: [0, 7], "no-such-topic": [0]}, 4),
    ])
    assert answer == [(4242, {(topic, 0): TRANSACTION_COORDINATOR_FENCED, (topic, 7): UNKNOWN_TOPIC_OR_PARTITION,
                              ("no-such-topic", 0): UNKNOWN_TOPIC_OR_PARTITION})]
    assert watermarks(node.bootstrap, topic, "read_uncommitted") == (0, 1)
    # The current coordinator epoch is still served, and an empty request is answered.
    assert write_txn_markers(node.port, [(4242, 0, False, {topic: [0]}, 5)]) == [(4242, {(topic, 0): NONE})]
    assert write_txn_markers(node.port, []) == []
    assert watermarks(node.bootstrap, topic, "read_uncommitted") == (0, 2)
    assert node.alive(), node.log_text()


def test_aborted_transaction_is_hidden_from_read_committed_consumers(node):
    topic = f"txn-{uuid.uuid4().hex[:8]}"
    create_topic(node.bootstrap, topic)
    error, base = produce_transactional(node.port, topic, "txn-a", 1000, 0, ["aborted-0", "aborted-1", "aborted-2"])
    assert (error, base) == (NONE, 0)
    rdkafka_produce(node.bootstrap, topic, [(None, "plain-0"), (None, "plain-1")])  # offsets 3, 4

    # The open transaction holds the last stable offset at its first offset.
    assert watermarks(node.bootstrap, topic, "read_committed") == (0, 0)
    assert watermarks(node.bootstrap, topic, "read_uncommitted") == (0, 5)
    producers = describe_producers(node.bootstrap, topic)
    assert producers[1000]["CurrentTransactionStartOffset"] == "0", producers

    # Admin.abortTransaction (WriteTxnMarkers to the leader) ends it with an ABORT marker at offset 5.
    java("org.apache.kafka.tools.TransactionsCommand", "--bootstrap-server", node.bootstrap,
         "abort", "--topic", topic, "--partition", "0", "--start-offset", "0")
    assert watermarks(node.bootstrap, topic, "read_committed") == (0, 6)
    producers = describe_producers(node.bootstrap, topic)
    assert producers[1000]["CurrentTransactionStartOffset"] == "None", producers  # the tool prints no offset so

    committed = rdkafka_consume(node.bootstrap, topic, {0: 0}, **{"isolation.level": "read_committed"})
    assert [(o, v) for _, o, _, v in committed] == [(3, "plain-0"), (4, "plain-1")]
    uncommitted = rdkafka_consume(node.bootstrap, topic, {0: 0}, **{"isolation.level": "read_uncommitted"})
    assert [v for _, _, _, v in uncommitted] == ["aborted-0", "aborted-1", "aborted-2", "plain-0", "plain-1"]
