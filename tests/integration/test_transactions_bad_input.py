"""Bad input to the transaction APIs (issue 22), the same test bodies against Apache Kafka 4.4 (the oracle) and Mala:
Kafka's error codes, and nothing appended.

The requests are hand-built (no client sends them wrong on purpose); what they leave behind is read with real clients
(confluent-kafka watermarks and read_committed / read_uncommitted consumers).

- EndTxn for a transactional id the coordinator never saw: INVALID_PRODUCER_ID_MAPPING; for a producer id that is not
  the id's: INVALID_PRODUCER_ID_MAPPING; for a fenced epoch: INVALID_PRODUCER_EPOCH at v1, PRODUCER_FENCED at v2+;
  commit with no transaction open (EndTxn v1, the classic rules): INVALID_TXN_STATE.
- TxnOffsetCommit for a group whose offsets partition is not in the transaction (no AddOffsetsToTxn): the
  verification (KIP-890 part 1) finds it missing, INVALID_TXN_STATE at v2, and the group has no offset afterwards.
- Transactional Produce: a duplicate of the last batch is answered NONE with the first copy's offset and not appended
  again; a sequence gap is OUT_OF_ORDER_SEQUENCE_NUMBER; a fenced epoch is INVALID_PRODUCER_EPOCH; none of them
  appended. The transaction then aborts cleanly and read_committed sees none of it.
"""

import struct
import time
import uuid

import kafka_wire as kw
from real_clients import wait_until
from test_txn_markers import produce_transactional
from txn_harness import create_topics
from txn_harness import broker, broker_log_on_failure  # noqa: F401 (fixtures: Apache Kafka, then Mala)

FIND_COORDINATOR, INIT_PRODUCER_ID, ADD_PARTITIONS_TO_TXN, END_TXN, TXN_OFFSET_COMMIT = 10, 22, 24, 26, 28
NONE = 0
OUT_OF_ORDER_SEQUENCE_NUMBER = 45
INVALID_PRODUCER_EPOCH = 47
INVALID_TXN_STATE = 48
INVALID_PRODUCER_ID_MAPPING = 49
PRODUCER_FENCED = 90
RETRIABLE = {14, 15, 16, 51}  # COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR, CONCURRENT


def port_of(bootstrap):
    return int(bootstrap.rsplit(":", 1)[1])


def call(port, api_key, version, body, correlation_id=41):
    with kw.Connection(port, timeout=30) as conn:
        assert conn.send(kw.frame(kw.request_header_v1(api_key, version, correlation_id) + body))
        payload = conn.recv_frame()
    assert payload is not None, f"connection closed without an answer to api {api_key} v{version}"
    (corr,) = struct.unpack_from(">i", payload, 0)
    assert corr == correlation_id
    return payload[4:]


def retried(fn, what):
    """fn() -> (error, ...): repeated while the coordinator is loading, moving or busy."""
    deadline = time.time() + 60
    while True:
        out = fn()
        if out[0] not in RETRIABLE or time.time() > deadline:
            return out
        time.sleep(0.2)


def find_coordinator(port, key, key_type):
    def once():
        body = call(port, FIND_COORDINATOR, 1, kw.nullable_string(key) + struct.pack(">b", key_type))
        (error,) = struct.unpack_from(">h", body, 4)
        return (error,)

    assert retried(once, "FindCoordinator") == (NONE,)


def find_transaction_coordinator(port, transactional_id):
    find_coordinator(port, transactional_id, 1)


def init_producer_id(port, transactional_id, timeout_ms=60000):
    """InitProducerId v1 -> (error, producer_id, epoch)."""
    find_transaction_coordinator(port, transactional_id)

    def once():
        body = call(port, INIT_PRODUCER_ID, 1, kw.nullable_string(transactional_id) + struct.pack(">i", timeout_ms))
        _, error, producer_id, epoch = struct.unpack_from(">ihqh", body, 0)
        return error, producer_id, epoch

    return retried(once, "InitProducerId")


def add_partition(port, transactional_id, producer_id, epoch, topic, partition=0):
    """AddPartitionsToTxn v1 for one partition -> error."""
    req = kw.nullable_string(transactional_id) + struct.pack(">qh", producer_id, epoch)
    req += struct.pack(">i", 1) + kw.nullable_string(topic) + struct.pack(">ii", 1, partition)

    def once():
        body = call(port, ADD_PARTITIONS_TO_TXN, 1, req)
        pos = 4 + 4  # throttle, topic count
        (n,) = struct.unpack_from(">h", body, pos)
        pos += 2 + n + 4
        _, error = struct.unpack_from(">ih", body, pos)
        return (error,)

    return retried(once, "AddPartitionsToTxn")[0]


def end_txn(port, transactional_id, producer_id, epoch, commit, version=1):
    """EndTxn v1 or v2 (both non-flexible) -> error."""
    req = kw.nullable_string(transactional_id) + struct.pack(">qhb", producer_id, epoch, 1 if commit else 0)

    def once():
        _, error = struct.unpack_from(">ih", call(port, END_TXN, version, req), 0)
        return (error,)

    return retried(once, "EndTxn")[0]


def txn_offset_commit(port, transactional_id, group, producer_id, epoch, topic, offset):
    """TxnOffsetCommit v2 (non-flexible) of one offset for partition 0 -> error."""
    req = kw.nullable_string(transactional_id) + kw.nullable_string(group) + struct.pack(">qh", producer_id, epoch)
    req += struct.pack(">i", 1) + kw.nullable_string(topic)
    req += struct.pack(">i", 1) + struct.pack(">iqi", 0, offset, -1) + kw.nullable_string(None)

    def once():
        body = call(port, TXN_OFFSET_COMMIT, 2, req)
        pos = 4 + 4  # throttle, topic count
        (n,) = struct.unpack_from(">h", body, pos)
        pos += 2 + n + 4
        _, error = struct.unpack_from(">ih", body, pos)
        return (error,)

    return retried(once, "TxnOffsetCommit")[0]


def committed_offset(bootstrap, group, topic):
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        (tp,) = consumer.committed([TopicPartition(topic, 0)], timeout=20)
        return tp.offset
    finally:
        consumer.close()


def watermarks(bootstrap, topic):
    """(low, high watermark) of partition 0, as read_uncommitted sees them."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "unused", "isolation.level": "read_uncommitted"})
    try:
        return consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
    finally:
        consumer.close()


def read_values(bootstrap, topic, isolation, expect_end):
    """Every value of partition 0 up to offset expect_end, with `isolation`."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"g-{uuid.uuid4().hex[:6]}",
                         "isolation.level": isolation, "enable.auto.commit": False})
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        values, deadline = [], time.time() + 20
        while time.time() < deadline:
            m = consumer.poll(0.5)
            if m is None:
                (pos,) = consumer.position([TopicPartition(topic, 0)])
                if pos.offset >= expect_end:
                    break
                continue
            if m.error() is None:
                values.append(m.value().decode())
        return values
    finally:
        consumer.close()


def test_end_txn_for_unknown_mismatched_and_fenced_producers(broker):
    port = port_of(broker.bootstrap)
    never = f"never-{uuid.uuid4().hex[:6]}"
    find_transaction_coordinator(port, never)
    assert end_txn(port, never, 1234, 0, commit=True) == INVALID_PRODUCER_ID_MAPPING

    tid = f"fenced-{uuid.uuid4().hex[:6]}"
    error, pid, first_epoch = init_producer_id(port, tid)
    assert error == NONE
    error, pid2, epoch = init_producer_id(port, tid)  # a second instance: the first is fenced
    assert error == NONE and pid2 == pid and epoch == first_epoch + 1
    assert end_txn(port, tid, pid, first_epoch, commit=True, version=1) == INVALID_PRODUCER_EPOCH
    assert end_txn(port, tid, pid, first_epoch, commit=True, version=2) == PRODUCER_FENCED
    assert end_txn(port, tid, pid + 1000, epoch, commit=False, version=2) == INVALID_PRODUCER_ID_MAPPING
    # The current producer, no transaction open: the classic EndTxn has nothing to end.
    assert end_txn(port, tid, pid, epoch, commit=True, version=1) == INVALID_TXN_STATE


def test_out_of_order_duplicate_and_fenced_transactional_batches_are_not_appended(broker):
    b, port = broker.bootstrap, port_of(broker.bootstrap)
    topic = f"bad-txn-{uuid.uuid4().hex[:6]}"
    create_topics(b, topic, partitions=1)
    tid = f"seq-{uuid.uuid4().hex[:6]}"
    assert init_producer_id(port, tid)[0] == NONE
    error, pid, epoch = init_producer_id(port, tid)  # epoch 1: epoch 0 is now a zombie's
    assert error == NONE and epoch >= 1
    assert add_partition(port, tid, pid, epoch, topic) == NONE

    error, base = produce_transactional(port, topic, tid, pid, epoch, ["a0", "a1", "a2"], sequence=0)
    assert error == NONE
    retried_batch = produce_transactional(port, topic, tid, pid, epoch, ["a0", "a1", "a2"], sequence=0)
    assert retried_batch == (NONE, base)
    assert produce_transactional(port, topic, tid, pid, epoch, ["gap"], sequence=7)[0] == OUT_OF_ORDER_SEQUENCE_NUMBER
    assert produce_transactional(port, topic, tid, pid, epoch - 1, ["zombie"], sequence=3)[0] == INVALID_PRODUCER_EPOCH
    assert watermarks(b, topic) == (0, base + 3), "a refused or duplicate batch was appended"

    assert end_txn(port, tid, pid, epoch, commit=False) == NONE
    wait_until(lambda: watermarks(b, topic)[1] == base + 4, timeout=30, what="the abort marker")
    assert read_values(b, topic, "read_committed", base + 4) == []
    assert read_values(b, topic, "read_uncommitted", base + 4) == ["a0", "a1", "a2"]


def test_txn_offset_commit_for_a_group_not_in_the_transaction(broker):
    b, port = broker.bootstrap, port_of(broker.bootstrap)
    topic = f"bad-tocommit-{uuid.uuid4().hex[:6]}"
    create_topics(b, topic, partitions=1)
    tid, group = f"tocommit-{uuid.uuid4().hex[:6]}", f"g-{uuid.uuid4().hex[:6]}"
    error, pid, epoch = init_producer_id(port, tid)
    assert error == NONE
    find_coordinator(port, group, 0)
    assert add_partition(port, tid, pid, epoch, topic) == NONE  # a transaction is open, without the group
    assert txn_offset_commit(port, tid, group, pid, epoch, topic, 42) == INVALID_TXN_STATE
    assert end_txn(port, tid, pid, epoch, commit=True) == NONE
    assert committed_offset(b, group, topic) < 0, "an offset the transaction never held was committed"
