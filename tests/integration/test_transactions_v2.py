"""KIP-890 on the data path (issue 22), the same test bodies against Apache Kafka 4.4 (the oracle) and Mala, both with
transaction.version 2 finalized.

- Transactions v2 with the Java producer: consume-transform-produce with sendOffsetsToTransaction, commits and
  aborts; read_committed sees exactly the committed copies and the group's offsets are the committed ones. The
  producer never sent AddPartitionsToTxn / AddOffsetsToTxn: its partitions and the group's __consumer_offsets
  partition joined the transactions through Produce v12 and TxnOffsetCommit v5 (the leaders' implicit add), and its
  epoch went up at every commit and abort (EndTxn v5), which kafka-transactions.sh describe shows.
- Part 1, a late write: a transactional batch of a producer whose transaction was aborted, sent after the abort
  (Produce v8, as a transactions v1 producer sends it, built by hand: no real client can be made to send late), is
  refused INVALID_TXN_STATE by the leader after asking the coordinator, and nothing is appended.
"""

import uuid

from test_txn_markers import produce_transactional
from txn_harness import (check_copy, check_group, copy_expectations, create_topics, run_java, transactions_tool,
                         txn_produce)
from txn_harness import broker, broker_log_on_failure  # noqa: F401 (fixtures: Apache Kafka, then Mala)

PARTITIONS = 3
INVALID_TXN_STATE = 48


def end_offsets(bootstrap, topic):
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "unused", "isolation.level": "read_uncommitted"})
    try:
        return [consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in range(PARTITIONS)]
    finally:
        consumer.close()


def test_tv2_producer_copies_with_send_offsets_and_bumps_its_epoch_per_transaction(broker):
    b = broker.bootstrap
    create_topics(b, "v2-in", "v2-out", partitions=PARTITIONS)
    s = txn_produce(b, "v2-in", "v2-source", 8, 6, abort_every=3)
    assert s["aborted"] == [2, 5], s
    expected, offsets = copy_expectations(b, "v2-in")
    _, lines, _ = run_java("mala.it.TxnCopy", "--bootstrap", b, "--input", "v2-in", "--output", "v2-out",
                           "--group", "v2-group", "--transactional-id", "v2-copier", "--abort-every", 3,
                           "--max-poll-records", 5)
    result = lines[-1]
    assert result["copied"] == sum(len(v) for v in expected.values()) and result["aborted"] >= 1, result
    check_copy(b, "v2-out", expected)
    check_group(b, "v2-group", "v2-in", offsets)
    (source,), (copier,) = transactions_tool(b, ("describe", "--transactional-id", "v2-source"),
                                             ("describe", "--transactional-id", "v2-copier"))
    # Transactions v2: every EndTxn (v5) bumps the epoch, starting from initTransactions' 0.
    assert int(source["ProducerEpoch"]) == 8, source
    assert int(copier["ProducerEpoch"]) == result["committed"] + result["aborted"], (copier, result)
    assert source["TransactionState"] == "CompleteCommit" and copier["TopicPartitions"] == "", (source, copier)


def test_late_transactional_write_after_abort_is_refused(broker):
    b = broker.bootstrap
    topic = f"late-{uuid.uuid4().hex[:8]}"
    txn_id = f"late-{uuid.uuid4().hex[:8]}"
    create_topics(b, topic, partitions=PARTITIONS)
    s = txn_produce(b, topic, txn_id, 1, 3, abort_every=1)
    assert s["aborted"] == [0], s
    (d,), = transactions_tool(b, ("describe", "--transactional-id", txn_id))
    assert d["TransactionState"] == "CompleteAbort", d
    before = end_offsets(b, topic)
    port = int(b.rsplit(":", 1)[1])
    # The producer's current id and epoch, a batch the transaction no longer holds: the coordinator answers
    # TRANSACTION_ABORTABLE, which Produce v8 gets as INVALID_TXN_STATE.
    error, _ = produce_transactional(port, topic, txn_id, int(d["ProducerId"]), int(d["ProducerEpoch"]),
                                     ["late-1", "late-2"], version=8)
    assert error == INVALID_TXN_STATE
    assert end_offsets(b, topic) == before
    # The transaction stays finished and holds no partition: nothing hangs.
    (after,), hanging = transactions_tool(b, ("describe", "--transactional-id", txn_id),
                                          ("find-hanging", "--broker-id", broker.broker_id))
    assert after["TransactionState"] == "CompleteAbort" and after["TopicPartitions"] == "", after
    assert hanging == [], hanging
