"""__transaction_state in Kafka's record format (issue 22), the same test body against Apache Kafka 4.4 (the oracle)
and Mala: a Java transactional producer commits one transaction and aborts the next over two partitions, and Kafka's
own kafka-dump-log.sh --transaction-log-decoder (TransactionLogKey / TransactionLogValue) reads the broker's
__transaction_state segments back: every record of the id decodes, in the order Empty, Ongoing (partitions added),
PrepareCommit, CompleteCommit, Ongoing, PrepareAbort, CompleteAbort, Prepare* naming both partitions and Complete*
none, the producer id and timeout the producer was given, and the Kafka layout of the key (version 0, then the id as an
int16-length string).
"""

import json
import re
import uuid

from real_clients import step_ok, tool_batch
from txn_harness import create_topics, txn_produce
from txn_harness import broker, broker_log_on_failure  # noqa: F401 (fixtures: Apache Kafka, then Mala)

DUMP_LOG_TOOL = "org.apache.kafka.tools.DumpLogSegments"  # kafka-dump-log.sh
RECORD_RE = re.compile(r"keySize: (?P<key_size>\d+) .* key: (?P<key>\{.*\}) payload: (?P<payload>\{.*\}|<DELETE>)$")


def transaction_log_records(log_dir, transactional_id):
    """(key size, key, value) of every __transaction_state record of the id, decoded by Kafka's tool."""
    segments = sorted(str(p) for p in log_dir.glob("__transaction_state-*/*.log") if p.stat().st_size > 0)
    assert segments, "no __transaction_state segment holds anything"
    dump = step_ok(tool_batch((DUMP_LOG_TOOL, "--files", ",".join(segments), "--transaction-log-decoder"))[0])
    out = []
    for line in dump.splitlines():
        m = RECORD_RE.search(line)
        if not m:
            continue
        key = json.loads(m["key"])
        if key.get("data", {}).get("transactionalId") != transactional_id:
            continue
        out.append((int(m["key_size"]), key, None if m["payload"] == "<DELETE>" else json.loads(m["payload"])))
    return out


def test_kafkas_decoder_reads_the_transaction_log(broker):
    b = broker.bootstrap
    topic, tid = f"txlog-{uuid.uuid4().hex[:6]}", "txlog-id-01"
    create_topics(b, topic, partitions=2)
    summary = txn_produce(b, topic, tid, 2, 4, abort_every=2)
    assert summary["committed"] == [0] and summary["aborted"] == [1], summary

    records = transaction_log_records(broker.log_dir, tid)
    assert records, f"no record of {tid} decoded"
    for key_size, key, value in records:
        assert key == {"type": "0", "data": {"transactionalId": tid}}
        assert key_size == 2 + 2 + len(tid)  # version int16, then an int16 length and the id's bytes
        assert value is not None and value["version"] in ("0", "1"), value
    values = [v["data"] for _, _, v in records]
    states = [v["transactionStatus"] for v in values]
    collapsed = [s for i, s in enumerate(states) if i == 0 or s != states[i - 1]]
    assert collapsed == ["Empty", "Ongoing", "PrepareCommit", "CompleteCommit", "Ongoing", "PrepareAbort",
                         "CompleteAbort"], states
    both = [{"topic": topic, "partitionIds": [0, 1]}]
    for v in values:
        if v["transactionStatus"].startswith("Prepare"):
            assert [{"topic": p["topic"], "partitionIds": sorted(p["partitionIds"])}
                    for p in v["transactionPartitions"]] == both, v
        if v["transactionStatus"].startswith("Complete"):
            assert v["transactionPartitions"] == [], v
        assert v["transactionTimeoutMs"] == 60000
        assert v["producerId"] == values[0]["producerId"]
    assert values[0]["transactionPartitions"] is None and values[0]["transactionStartTimestampMs"] == -1
    # The epoch never goes back, and a transaction's Complete* carries its Prepare*'s epoch.
    epochs = [v["producerEpoch"] for v in values]
    assert epochs == sorted(epochs), epochs
    for prepare, complete in zip(values, values[1:]):
        if prepare["transactionStatus"].startswith("Prepare"):
            assert complete["producerEpoch"] == prepare["producerEpoch"]
