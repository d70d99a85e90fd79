"""Log compaction of a topic written by transactions (issue 22, Kafka's LogCleaner with transactions): a dispatcher
assigns routes to buses with a confluent-kafka transactional producer, committing some waves of assignments and
aborting others that overwrite committed ones (the last wave of every bus is aborted). Once the node's cleaner has
compacted the closed segments, a read_committed consumer reading from offset 0 sees for every bus exactly its latest
committed route, and a read_uncommitted consumer sees no aborted record (the cleaner removes aborted data).
Later rounds past delete.retention.ms (markers going) keep the same committed view, and
so does a restart.

`__consumer_offsets` (one partition, segment.ms short) cleaned after transactional offset commits, committed and aborted
in turn with the last one aborted: after a restart the group coordinator loads from the cleaned log exactly the offset
of the last committed transaction.
"""

import re
import time

from confluent_kafka import Consumer, Producer, TopicPartition

from conftest import MalaNode
from real_clients import create_topic, rdkafka_read_to_end, wait_until
from test_live_topic_configs import alter_topic
from test_log_compaction import cleaned_rounds, node  # noqa: F401 (node: a fixture)

TIMEOUT = 60
BUSES = 20
TOPIC = "bus-route-assignment"


def read(bootstrap, isolation):
    return [(o, k.decode(), v.decode()) for o, k, v in
            rdkafka_read_to_end(bootstrap, TOPIC, isolation=isolation)]


def latest_view(records):
    view = {}
    for _, key, value in records:
        view[key] = value
    return view


def transaction(producer, records, commit):
    producer.begin_transaction()
    for key, value in records:
        producer.produce(TOPIC, key=key.encode(), value=value.encode(), partition=0)
    producer.flush(TIMEOUT)  # librdkafka's abort drops records not yet sent: these must reach the log
    if commit:
        producer.commit_transaction(TIMEOUT)
    else:
        producer.abort_transaction(TIMEOUT)


def test_read_committed_sees_the_latest_committed_route_of_every_bus_after_cleaning(node):
    b = node.bootstrap
    create_topic(b, TOPIC, config={"cleanup.policy": "compact", "segment.ms": "300",
                                   "min.cleanable.dirty.ratio": "0.01", "delete.retention.ms": "2000"})
    producer = Producer({"bootstrap.servers": b, "transactional.id": "dispatcher", "linger.ms": 5,
                         "socket.timeout.ms": 10000})
    producer.init_transactions(TIMEOUT)
    committed = {}
    written = 0
    for wave in range(7):
        commit = wave in (0, 2, 3, 4)  # waves 1, 5 and 6 (the last of every bus) overwrite committed routes, aborted
        buses = range(BUSES) if wave != 4 else range(0, BUSES, 2)
        records = [(f"bus-{i}", f"route-{wave}-{i}-{'c' if commit else 'aborted'}") for i in buses]
        transaction(producer, records, commit)
        written += len(records) + 1  # and the marker
        if commit:
            committed.update(records)
        time.sleep(0.4)  # the next transaction rolls the segment (segment.ms)
    # A committed record of another key closes the segment of the last (aborted) wave.
    time.sleep(0.4)
    transaction(producer, [("depot", "open")], True)
    committed["depot"] = "open"
    written += 2
    # Every record reached the log, aborted ones included (the cleaner may already be removing them).
    watermarks = Consumer({"bootstrap.servers": b, "group.id": "watermarks"})
    assert watermarks.get_watermark_offsets(TopicPartition(TOPIC, 0), timeout=30) == (0, written)
    watermarks.close()

    def aborted_gone():
        if cleaned_rounds(node, TOPIC) < 1:
            return False
        return not any(v.endswith("aborted") for _, _, v in read(b, "read_uncommitted"))

    wait_until(aborted_gone, TIMEOUT, "a cleaning round removing the aborted records", interval=1.0)
    after = read(b, "read_committed")
    assert latest_view(after) == committed
    offsets = [o for o, _, _ in after]
    assert offsets == sorted(set(offsets)), "offsets must increase"
    assert len(after) < written // 2, f"nothing was compacted: {len(after)} of {written}"
    assert latest_view(read(b, "read_uncommitted")) == committed

    # More rounds after delete.retention.ms (markers without data go): the committed view stays.
    time.sleep(2.5)
    rounds = cleaned_rounds(node, TOPIC)
    transaction(producer, [("depot", "closed")], True)
    time.sleep(0.4)
    transaction(producer, [("yard", "open")], True)
    committed.update({"depot": "closed", "yard": "open"})
    wait_until(lambda: cleaned_rounds(node, TOPIC) > rounds, TIMEOUT, "another cleaning round", interval=1.0)
    assert latest_view(read(b, "read_committed")) == committed
    assert latest_view(read(b, "read_uncommitted")) == committed
    producer.flush(TIMEOUT)

    # What a restart loads (the cleaned segments and their .txnindex) gives the same view.
    view = read(b, "read_committed")
    assert node.stop() == 0
    node.start()
    assert read(b, "read_committed") == view


def committed_offset(bootstrap, group, topic):
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False,
                         "socket.timeout.ms": 10000})
    try:
        return consumer.committed([TopicPartition(topic, 0)], timeout=30)[0].offset
    finally:
        consumer.close()


def test_transactional_offset_commits_survive_cleaning_of_the_offsets_topic(tmp_path):
    offsets_node = MalaNode(tmp_path, name="offsets-txn", extra_config={
        "log.cleaner.backoff.ms": 200, "offsets.topic.num.partitions": 1, "group.initial.rebalance.delay.ms": 0})
    offsets_node.start()
    try:
        b = offsets_node.bootstrap
        create_topic(b, "ticket-scans")
        create_topic(b, "fare-audits")
        consumer = Consumer({"bootstrap.servers": b, "group.id": "fare-audit", "enable.auto.commit": False,
                             "socket.timeout.ms": 10000})
        consumer.assign([TopicPartition("ticket-scans", 0, 0)])
        producer = Producer({"bootstrap.servers": b, "transactional.id": "fare-audit-0", "socket.timeout.ms": 10000})
        producer.init_transactions(TIMEOUT)
        last_committed = None
        rounds = 0
        for t in range(40):
            if t == 25:
                rounds = cleaned_rounds(offsets_node, "__consumer_offsets")
            commit = t % 3 == 0 and t < 20  # then only aborted ones, overwriting the committed offset
            producer.begin_transaction()
            producer.produce("fare-audits", key=b"audit", value=str(t).encode(), partition=0)
            producer.send_offsets_to_transaction([TopicPartition("ticket-scans", 0, 100 + t)],
                                                 consumer.consumer_group_metadata(), TIMEOUT)
            if commit:
                producer.commit_transaction(TIMEOUT)
                last_committed = 100 + t
            else:
                producer.abort_transaction(TIMEOUT)
            if t == 0:  # the first offset commit created the offsets topic: small segments, cleaned soon
                alter_topic(b, "__consumer_offsets", {"segment.ms": 300, "min.cleanable.dirty.ratio": 0.01})
            time.sleep(0.35)  # the next transaction rolls the segment
        consumer.close()
        assert committed_offset(b, "fare-audit", "ticket-scans") == last_committed
        # A round that started after aborted commits followed the committed one (the one running at t=25 may not).
        wait_until(lambda: cleaned_rounds(offsets_node, "__consumer_offsets") >= rounds + 2, TIMEOUT,
                   "cleaning rounds of __consumer_offsets", interval=1.0)
        assert committed_offset(b, "fare-audit", "ticket-scans") == last_committed
        # The group coordinator reloads the offsets from the cleaned log.
        assert offsets_node.stop() == 0
        offsets_node.start()
        assert committed_offset(b, "fare-audit", "ticket-scans") == last_committed
    finally:
        offsets_node.stop()
