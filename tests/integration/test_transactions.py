"""Transactions with Apache Kafka's Java client and tools (issue 22), the same test bodies against Apache Kafka 4.4
(the oracle, apache_kafka.py) and against Mala.

- Two transactional producers interleave commits and aborts over the same partitions: read_committed sees every
  committed transaction exactly once and whole and never an aborted record; read_uncommitted sees both.
- kafka-transactions.sh list / describe / describe-producers / find-hanging on finished and open transactions.
- transaction.timeout.ms: a producer that begins a transaction and never ends it is aborted by the coordinator; until
  then the last stable offset stays at the open transaction's first offset, afterwards it reaches the high watermark
  and read_committed never sees those records.
- Zombie fencing: a second producer with the same transactional.id fences the first (ProducerFencedException).
- Consume-transform-produce with sendOffsetsToTransaction (with aborted transactions, and with a crash mid-transaction
  followed by a restart): the output holds every committed input record exactly once, and kafka-consumer-groups.sh
  shows the group's offsets committed by the transactions with the lag the broker's end offsets give.
- kafka-transactions.sh abort --start-offset ends a transaction left open on a partition (the LSO moves there).
- transaction.version=1 (kafka-features.sh downgrade from 2): the Java producer's classic flow, same guarantees, no
  epoch bump per transaction.
"""

import pytest

from real_clients import wait_until
from txn_harness import (check_copy, check_group, check_producer, check_whole, copy_expectations, create_topics,
                         read_topic, run_java, run_java_parallel, transactions_seen, transactions_tool, txn_produce)
from txn_harness import broker, broker_log_on_failure  # noqa: F401 (fixtures: Apache Kafka, then Mala)

PARTITIONS = 3


def test_read_committed_sees_committed_transactions_whole_and_once(broker):
    b = broker.bootstrap
    create_topics(b, "interleaved", partitions=PARTITIONS)
    # Two producers at once on the same partitions: their transactions interleave in every partition's log, so the
    # last stable offset is held by one producer's open transaction while the other's commit or abort lands.
    common = ["--bootstrap", b, "--topic", "interleaved", "--transactions", 12, "--records", 7,
              "--partitions", PARTITIONS]
    (a,), (c,) = run_java_parallel(
        ("mala.it.TxnProduce", *common, "--transactional-id", "interleave-a", "--abort-every", 3),
        ("mala.it.TxnProduce", *common, "--transactional-id", "interleave-b", "--abort-every", 2))
    assert a["aborted"] == [2, 5, 8, 11] and c["aborted"] == [1, 3, 5, 7, 9, 11], (a, c)
    (committed, c_sum), (uncommitted, u_sum) = check_producer(b, "interleaved", a, PARTITIONS)
    check_whole(committed, "interleave-b", c["committed"], 7, PARTITIONS, "read_committed")
    check_whole(uncommitted, "interleave-b", c["committed"] + c["aborted"], 7, PARTITIONS, "read_uncommitted")
    assert len(committed) == 7 * (len(a["committed"]) + len(c["committed"]))
    assert len(uncommitted) == 7 * 24
    # Nothing open: the last stable offset is the high watermark; both consumers reached it (past the markers).
    assert c_sum["end_offsets"] == u_sum["end_offsets"] == c_sum["positions"] == u_sum["positions"]
    # Every data record and one marker per transaction per partition it wrote to (7 records over 3 partitions).
    assert sum(u_sum["end_offsets"].values()) == 7 * 24 + 24 * PARTITIONS
    # read_committed returns exactly the read_uncommitted records of committed transactions, at the same offsets.
    committed_tags = {f"interleave-a-{t}" for t in a["committed"]} | {f"interleave-b-{t}" for t in c["committed"]}
    assert sorted((r["partition"], r["offset"]) for r in committed) == sorted(
        (r["partition"], r["offset"]) for r in uncommitted if r["key"] in committed_tags)


def test_kafka_transactions_tool_on_finished_transactions(broker):
    b = broker.bootstrap
    create_topics(b, "tooled", partitions=PARTITIONS)
    s1 = txn_produce(b, "tooled", "tool-commit", 3, 6)
    s2 = txn_produce(b, "tooled", "tool-abort", 2, 6, abort_every=2)
    assert s1["committed"] == [0, 1, 2] and s2["aborted"] == [1]
    listed, d1, d2, producers0, hanging = transactions_tool(
        b, ("list",), ("describe", "--transactional-id", "tool-commit"),
        ("describe", "--transactional-id", "tool-abort"),
        ("describe-producers", "--topic", "tooled", "--partition", 0),
        ("find-hanging", "--broker-id", broker.broker_id))
    by_id = {r["TransactionalId"]: r for r in listed}
    # Transactions v2 (Kafka 4.x's default) bump the epoch at every commit or abort; v1 (what Mala finalizes
    # until it builds v2) keeps initTransactions' epoch 0. The epochs must match the version in force.
    bumps = transaction_version(b) >= 2
    assert by_id["tool-commit"]["TransactionState"] == "CompleteCommit", listed
    assert by_id["tool-abort"]["TransactionState"] == "CompleteAbort", listed
    assert by_id["tool-commit"]["Coordinator"] == str(broker.broker_id)
    for desc, listed_row, ends in ((d1, by_id["tool-commit"], 3), (d2, by_id["tool-abort"], 2)):
        assert len(desc) == 1, desc
        d = desc[0]
        assert d["ProducerId"] == listed_row["ProducerId"] and d["TransactionState"] == listed_row["TransactionState"]
        assert d["CoordinatorId"] == str(broker.broker_id)
        assert d["TransactionTimeoutMs"] == "60000"  # the Java producer's default transaction.timeout.ms
        assert d["TopicPartitions"] == "", d  # a finished transaction holds no partitions
        assert int(d["ProducerEpoch"]) == (ends if bumps else 0), d
    assert d1[0]["ProducerId"] != d2[0]["ProducerId"]
    rows = {r["ProducerId"]: r for r in producers0}
    for d, ends in ((d1[0], 3), (d2[0], 2)):
        row = rows[d["ProducerId"]]
        assert row["CurrentTransactionStartOffset"] == "None", row  # no open transaction on the partition
        assert int(row["ProducerEpoch"]) == (ends if bumps else 0), row  # the last marker's epoch
        assert int(row["LastTimestamp"]) > 0
    assert hanging == [], hanging


def test_transaction_timeout_aborts_and_moves_the_last_stable_offset(broker):
    b = broker.bootstrap
    create_topics(b, "expiring", partitions=2)
    s = txn_produce(b, "expiring", "expiring", 2, 4, leave_open=True, props=["transaction.timeout.ms=20000"])
    assert s["committed"] == [0, 1] and s["open"] == 2, s
    # Right after the producer died: transaction 2 is open on both partitions.
    uncommitted, u_sum = read_topic(b, "expiring", "read_uncommitted")
    committed, c_sum = read_topic(b, "expiring", "read_committed")
    open_first = {p: min(o for q, o, _, _ in transactions_seen(uncommitted, "expiring")[2] if q == p)
                  for p in (0, 1)}
    for p in (0, 1):
        # The last stable offset is the open transaction's first offset; the high watermark is past its records.
        assert c_sum["end_offsets"][str(p)] == open_first[p], (c_sum, open_first)
        assert u_sum["end_offsets"][str(p)] == open_first[p] + 2
    check_whole(committed, "expiring", [0, 1], 4, 2, "read_committed while open")
    desc, producers = transactions_tool(b, ("describe", "--transactional-id", "expiring"),
                                        ("describe-producers", "--topic", "expiring", "--partition", 1))
    assert desc[0]["TransactionState"] == "Ongoing", desc
    assert desc[0]["TransactionTimeoutMs"] == "20000"
    assert sorted(desc[0]["TopicPartitions"].split(",")) == ["expiring-0", "expiring-1"], desc
    assert int(desc[0]["CurrentTransactionStartTimeMs"]) > 0
    row = [r for r in producers if r["ProducerId"] == desc[0]["ProducerId"]]
    assert len(row) == 1 and row[0]["CurrentTransactionStartOffset"] == str(open_first[1]), (producers, open_first)
    open_epoch = int(desc[0]["ProducerEpoch"])

    # The coordinator aborts it after transaction.timeout.ms (plus one scan interval).
    def aborted():
        d = transactions_tool(b, ("describe", "--transactional-id", "expiring"))[0][0]
        return d if d["TransactionState"] == "CompleteAbort" else None
    d = wait_until(aborted, 60, "the coordinator to abort the timed-out transaction", interval=1)
    assert int(d["ProducerEpoch"]) > open_epoch  # the zombie is fenced
    assert d["TopicPartitions"] == ""
    committed, c_sum = read_topic(b, "expiring", "read_committed")
    uncommitted, u_sum = read_topic(b, "expiring", "read_uncommitted")
    check_whole(committed, "expiring", [0, 1], 4, 2, "read_committed after the abort")
    check_whole(uncommitted, "expiring", [0, 1, 2], 4, 2, "read_uncommitted after the abort")
    for p in (0, 1):
        # The abort marker follows the open transaction's records: LSO = HW = past the marker.
        assert c_sum["end_offsets"][str(p)] == u_sum["end_offsets"][str(p)] == open_first[p] + 3, (c_sum, u_sum)
        assert c_sum["positions"][str(p)] == c_sum["end_offsets"][str(p)]
    producers, hanging = transactions_tool(b, ("describe-producers", "--topic", "expiring", "--partition", 0),
                                           ("find-hanging", "--broker-id", broker.broker_id))
    assert [r["CurrentTransactionStartOffset"] for r in producers] == ["None"], producers
    assert hanging == []


def test_zombie_producer_is_fenced(broker):
    b = broker.bootstrap
    create_topics(b, "fenced", partitions=1)
    _, lines, _ = run_java("mala.it.TxnFence", "--bootstrap", b, "--topic", "fenced", "--transactional-id", "zombie")
    result = lines[-1]
    assert result["successor_committed"] is True
    assert result["zombie_error"] == "org.apache.kafka.common.errors.ProducerFencedException", result
    committed, _ = read_topic(b, "fenced", "read_committed")
    uncommitted, _ = read_topic(b, "fenced", "read_uncommitted")
    assert [r["value"] for r in committed] == ["zombie:successor"]
    # The zombie's record is in the log, aborted when the successor's initTransactions fenced it.
    assert [r["value"] for r in uncommitted] == ["zombie:zombie", "zombie:successor"]


def test_consume_transform_produce_with_send_offsets(broker):
    b = broker.bootstrap
    create_topics(b, "ctp-in", "ctp-out", partitions=PARTITIONS)
    s = txn_produce(b, "ctp-in", "ctp-source", 10, 6, abort_every=4)
    assert s["aborted"] == [3, 7]
    expected, offsets = copy_expectations(b, "ctp-in")
    _, lines, _ = run_java("mala.it.TxnCopy", "--bootstrap", b, "--input", "ctp-in", "--output", "ctp-out",
                           "--group", "ctp-group", "--transactional-id", "ctp-copier", "--abort-every", 3,
                           "--max-poll-records", 5)
    result = lines[-1]
    assert result["copied"] == sum(len(v) for v in expected.values()) and result["aborted"] >= 1, result
    check_copy(b, "ctp-out", expected)
    check_group(b, "ctp-group", "ctp-in", offsets)


def test_consume_transform_produce_crash_and_restart(broker):
    b = broker.bootstrap
    create_topics(b, "crash-in", "crash-out", partitions=PARTITIONS)
    txn_produce(b, "crash-in", "crash-source", 8, 6, abort_every=3)
    expected, offsets = copy_expectations(b, "crash-in")
    copy = ["--bootstrap", b, "--input", "crash-in", "--output", "crash-out", "--group", "crash-group",
            "--transactional-id", "crash-copier", "--max-poll-records", 4]
    _, lines, _ = run_java("mala.it.TxnCopy", *copy, "--halt-after-commits", 2)
    first = lines[-1]
    assert first["halted"] is True and first["committed"] == 2, first
    # The crashed copier's open transaction (records and offsets) is in the logs; a restart with the same
    # transactional.id fences it, and the group resumes from the offsets the committed transactions stored.
    _, lines, _ = run_java("mala.it.TxnCopy", *copy)
    second = lines[-1]
    assert first["copied"] + second["copied"] == sum(len(v) for v in expected.values()), (first, second)
    check_copy(b, "crash-out", expected)
    uncommitted, _ = read_topic(b, "crash-out", "read_uncommitted")
    assert len(uncommitted) > sum(len(v) for v in expected.values())  # the crashed transaction's copies, aborted
    check_group(b, "crash-group", "crash-in", offsets)


def test_abort_command_ends_a_transaction_left_open(broker):
    b = broker.bootstrap
    create_topics(b, "hung", partitions=1)
    s = txn_produce(b, "hung", "hung", 1, 3, leave_open=True, props=["transaction.timeout.ms=120000"])
    assert s["open"] == 1
    producers = transactions_tool(b, ("describe-producers", "--topic", "hung", "--partition", 0))[0]
    open_rows = [r for r in producers if r["CurrentTransactionStartOffset"] != "None"]
    assert len(open_rows) == 1, producers
    start = int(open_rows[0]["CurrentTransactionStartOffset"])
    _, c_sum = read_topic(b, "hung", "read_committed")
    assert c_sum["end_offsets"]["0"] == start == 4  # 3 records + a commit marker before the open transaction
    transactions_tool(b, ("abort", "--topic", "hung", "--partition", 0, "--start-offset", start))
    producers = transactions_tool(b, ("describe-producers", "--topic", "hung", "--partition", 0))[0]
    assert [r["CurrentTransactionStartOffset"] for r in producers] == ["None"], producers
    committed, c_sum = read_topic(b, "hung", "read_committed")
    _, u_sum = read_topic(b, "hung", "read_uncommitted")
    assert c_sum["end_offsets"] == u_sum["end_offsets"] == {"0": start + 3 + 1}  # past the admin's abort marker
    check_whole(committed, "hung", [0], 3, 1, "read_committed after abort")
    assert transactions_tool(b, ("find-hanging", "--broker-id", broker.broker_id))[0] == []


FEATURES_TOOL = "org.apache.kafka.tools.FeatureCommand"  # kafka-features.sh


def transaction_version(bootstrap):
    from real_clients import step_ok, tool_batch

    out = step_ok(tool_batch((FEATURES_TOOL, "--bootstrap-server", bootstrap, "describe"))[0])
    for line in out.splitlines():
        cols = line.split()
        if len(cols) >= 2 and cols[1] == "transaction.version":
            return int(cols[cols.index("FinalizedVersionLevel:") + 1])
    pytest.fail(f"no transaction.version in kafka-features describe:\n{out}")


def set_transaction_version(bootstrap, level):
    from real_clients import step_ok, tool_batch

    command = "upgrade" if level > transaction_version(bootstrap) else "downgrade"
    step_ok(tool_batch((FEATURES_TOOL, "--bootstrap-server", bootstrap, command, "--feature",
                        f"transaction.version={level}"))[0])
    assert transaction_version(bootstrap) == level


def test_transactions_v1_after_feature_downgrade(broker):
    """transaction.version=1 (classic transactions, no epoch bump at commit/abort) finalized with kafka-features.sh
    downgrade from 2: the Java producer falls back to the TV1 flow and the same guarantees hold; the level the broker
    started with (2 on both, Kafka 4.x's default) is restored at the end."""
    b = broker.bootstrap
    initial = transaction_version(b)
    assert initial == 2
    try:
        set_transaction_version(b, 1)
        create_topics(b, "classic", partitions=PARTITIONS)
        s = txn_produce(b, "classic", "classic", 6, 5, abort_every=2)
        assert s["committed"] == [0, 2, 4] and s["aborted"] == [1, 3, 5]
        check_producer(b, "classic", s, PARTITIONS)
        d = transactions_tool(b, ("describe", "--transactional-id", "classic"))[0][0]
        assert d["TransactionState"] == "CompleteAbort" and d["ProducerEpoch"] == "0", d  # TV1: no bump per end
    finally:
        if transaction_version(b) != initial:
            set_transaction_version(b, initial)
    assert transaction_version(b) == initial
