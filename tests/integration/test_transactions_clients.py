"""Transactions with the other real clients (issue 22), each against Apache Kafka 4.4 (the oracle) and Mala:

- confluent-kafka (librdkafka): transactional Producer (init/begin/commit/abort_transaction) and a
  consume-transform-produce loop with send_offsets_to_transaction;
- franz-go: a transactional kgo.Client and a kgo.GroupTransactSession loop (mala-go-client txn-produce / txn-copy);
- KafkaJS: producer.transaction() with commit/abort and transaction.sendOffsets (kafkajs-client.js txn-produce /
  txn-copy).

Every producer writes the record shape of txn_harness (TAG:t:i:M, partition i % P) so the Java consumer at both
isolation levels judges them: read_committed sees every committed transaction exactly once and whole and no aborted
record, read_uncommitted sees both. Every copy loop reads a Java TxnProduce input with aborted transactions, aborts
some of its own transactions, and must output exactly one copy of each committed input record, with the group's
offsets (kafka-consumer-groups.sh) where the committed transactions put them.
"""

import time

import pytest

from real_clients import go_client, kafkajs
from txn_harness import check_copy, check_group, check_producer, copy_expectations, create_topics, txn_produce
from txn_harness import broker, broker_log_on_failure  # noqa: F401 (fixtures: Apache Kafka, then Mala)

PARTITIONS = 3
TRANSACTIONS = 9
RECORDS = 6
ABORT_EVERY = 3
CLIENTS = ["confluent", "franz", "kafkajs"]


def summary_line(lines, key):
    found = [line for line in lines if isinstance(line, dict) and key in line]
    assert found, f"no summary line with {key!r} in {lines[-5:]}"
    return found[-1]


# --- confluent-kafka ----------------------------------------------------------------------------------------------

def confluent_produce(bootstrap, topic, txn_id):
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": txn_id, "socket.timeout.ms": 10000,
                  "message.timeout.ms": 30000})
    p.init_transactions(30)
    summary = {"transactional_id": txn_id, "tag": txn_id, "records_per_txn": RECORDS, "partitions": PARTITIONS,
               "committed": [], "aborted": [], "open": None}
    for t in range(TRANSACTIONS):
        p.begin_transaction()
        for i in range(RECORDS):
            p.produce(topic, key=f"{txn_id}-{t}", value=f"{txn_id}:{t}:{i}:{RECORDS}", partition=i % PARTITIONS)
        assert p.flush(30) == 0  # in the log before the marker: read_uncommitted must see aborted ones too
        if t % ABORT_EVERY == ABORT_EVERY - 1:
            p.abort_transaction(30)
            summary["aborted"].append(t)
        else:
            p.commit_transaction(30)
            summary["committed"].append(t)
    return summary


def confluent_copy(bootstrap, source, output, group, txn_id, count, abort_every=3, timeout=90):
    from confluent_kafka import Consumer, Producer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "isolation.level": "read_committed",
                         "enable.auto.commit": False, "auto.offset.reset": "earliest", "fetch.wait.max.ms": 200,
                         "session.timeout.ms": 10000, "heartbeat.interval.ms": 1000})
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": txn_id, "socket.timeout.ms": 10000})
    producer.init_transactions(30)
    consumer.subscribe([source])
    result = {"copied": 0, "committed": 0, "aborted": 0}
    transactions = 0
    deadline = time.monotonic() + timeout
    try:
        while result["copied"] < count:
            assert time.monotonic() < deadline, f"confluent copy: {result} of {count} before the deadline"
            msgs = consumer.consume(num_messages=5, timeout=0.5)
            msgs = [m for m in msgs if not m.error()]
            if not msgs:
                continue
            producer.begin_transaction()
            transactions += 1
            offsets = {}
            for m in msgs:
                producer.produce(output, key=m.key(), value=b"copy:" + m.value(), partition=m.partition())
                offsets[m.partition()] = m.offset() + 1
            producer.send_offsets_to_transaction(
                [TopicPartition(source, p, o) for p, o in offsets.items()], consumer.consumer_group_metadata(), 30)
            if abort_every and transactions % abort_every == 0:
                producer.abort_transaction(30)
                result["aborted"] += 1
                assignment = consumer.assignment()
                for tp in consumer.committed(assignment, timeout=30):
                    # Back to the group's committed offset (none yet: the partition's start).
                    tp.offset = tp.offset if tp.offset >= 0 else -2  # OFFSET_BEGINNING
                    consumer.seek(tp)
            else:
                producer.commit_transaction(30)
                result["committed"] += 1
                result["copied"] += len(msgs)
    finally:
        consumer.close()
    return result


# --- dispatch -----------------------------------------------------------------------------------------------------

def client_produce(client, bootstrap, topic, txn_id):
    args = ["--bootstrap", bootstrap, "--topic", topic, "--transactional-id", txn_id, "--transactions", TRANSACTIONS,
            "--records", RECORDS, "--partitions", PARTITIONS, "--abort-every", ABORT_EVERY]
    if client == "confluent":
        return confluent_produce(bootstrap, topic, txn_id)
    if client == "franz":
        _, lines = go_client("franz", "txn-produce", *args, timeout=90)
    else:
        _, lines = kafkajs("txn-produce", *args, timeout=90)
    return summary_line(lines, "committed")


def client_copy(client, bootstrap, source, output, group, txn_id, count):
    if client == "confluent":
        return confluent_copy(bootstrap, source, output, group, txn_id, count)
    args = ["--bootstrap", bootstrap, "--topic", source, "--output", output, "--group", group,
            "--transactional-id", txn_id, "--count", count, "--abort-every", 3]
    if client == "franz":
        _, lines = go_client("franz", "txn-copy", *args, "--max-poll-records", 5, timeout=90)
    else:
        _, lines = kafkajs("txn-copy", *args, timeout=90)
    return summary_line(lines, "copied")


@pytest.mark.parametrize("client", CLIENTS)
def test_transactional_producer(broker, client):
    b = broker.bootstrap
    topic = f"{client}-txn"
    create_topics(b, topic, partitions=PARTITIONS)
    summary = client_produce(client, b, topic, f"{client}-producer")
    assert summary["committed"] == [0, 1, 3, 4, 6, 7] and summary["aborted"] == [2, 5, 8], summary
    (committed, c_sum), (uncommitted, u_sum) = check_producer(b, topic, summary, PARTITIONS)
    assert len(committed) == RECORDS * 6 and len(uncommitted) == RECORDS * TRANSACTIONS
    assert c_sum["end_offsets"] == u_sum["end_offsets"]  # nothing left open: LSO = HW


@pytest.mark.parametrize("client", CLIENTS)
def test_consume_transform_produce(broker, client):
    b = broker.bootstrap
    source, output, group = f"{client}-copy-in", f"{client}-copy-out", f"{client}-copy-group"
    create_topics(b, source, output, partitions=PARTITIONS)
    txn_produce(b, source, f"{client}-copy-source", 8, 6, abort_every=4)
    expected, offsets = copy_expectations(b, source)
    count = sum(len(v) for v in expected.values())
    result = client_copy(client, b, source, output, group, f"{client}-copier", count)
    assert result["copied"] == count and result["aborted"] >= 1, result
    check_copy(b, output, expected)
    check_group(b, group, source, offsets)
