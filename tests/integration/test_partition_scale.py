"""Partition scale (issue 20): tens of thousands of partitions created with kafka-topics.sh, a record produced to
every one of them and read back per partition, across a clean restart and a kill -9.

- One node with 20,000 partitions (4 topics of 5,000): produce (librdkafka, idempotent, acks=all) two records to
  every partition, read everything back and check each partition's records and offsets; SIGTERM and restart: the
  same records, and kafka-get-offsets.sh agrees on every end offset; one more record everywhere, kill -9 and
  restart: all three records of every partition are there.
- Three nodes with 10,000 partitions of replication factor 3 (2 topics of 5,000, so 30,000 replicas): produce
  acks=all to every partition, kill -9 the node leading the most partitions, produce again (the producer follows
  the new leaders), read everything back through the survivors: every acknowledged record is there, once, in order.

The brokers run with the machine's open-files limit (20,000 here, below the partition count): a segment's
descriptor is opened when it is used and the least recently used ones are closed, so Mala needs no raised limit
(Kafka keeps one per segment, and its docs ask for 100,000 or more).
"""

import time

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition

from cluster import Cluster
from real_clients import GET_OFFSETS_TOOL, TOPICS_TOOL, step_ok, tool_batch

ONE_NODE_TOPICS = [(f"scale-{i}", 5000) for i in range(4)]  # 20,000 partitions
CLUSTER_TOPICS = [(f"scale-rf3-{i}", 5000) for i in range(2)]  # 10,000 partitions x RF 3
# Kafka's 9 s broker session: creating 5,000 logs happens on the metadata publisher's own thread, so the shard
# that sends the broker's heartbeats is not held up by it (it was, and the node fenced itself, before).
SCALE_CONFIG = {"num.partitions": 1}
START_TIMEOUT_S = 120
STOP_TIMEOUT_S = 300  # a clean shutdown flushes every one of the 20,000 logs


def create_topics(bootstrap, topics, replication_factor):
    """kafka-topics.sh --create for every topic (one JVM), then --describe to check the partition counts."""
    steps = [(TOPICS_TOOL, "--bootstrap-server", bootstrap, "--create", "--topic", name, "--partitions", count,
              "--replication-factor", replication_factor, "--command-config", "/dev/null")
             for name, count in topics]
    for out in tool_batch(*steps, timeout=300):
        step_ok(out)


def wait_all_leaders(bootstrap, topics, timeout):
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap})
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        try:
            md = admin.list_topics(timeout=30)
            missing = sum(1 for name, count in topics for p in range(count)
                          if name not in md.topics or p not in md.topics[name].partitions
                          or md.topics[name].partitions[p].leader < 0)
            if missing == 0:
                return md
            last = f"{missing} partitions without a leader"
        except Exception as e:  # noqa: BLE001 (not answering yet)
            last = repr(e)
        time.sleep(0.5)
    pytest.fail(f"partitions not led after {timeout} s: {last}")


def value_of(topic, partition, round_no):
    return f"{topic}/{partition}/{round_no}"


def produce_round(bootstrap, topics, round_no, timeout=180, **conf):
    """One record (key and value f"{topic}/{partition}/{round}") to every partition, idempotent, acks=all.
    Returns {(topic, partition): offset} of the acknowledged records; fails on any delivery error."""
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True,
                         "linger.ms": 20, "queue.buffering.max.messages": 200_000,
                         "message.timeout.ms": int(timeout * 1000 * 0.9), **conf})
    acked, errors = {}, []

    def report(err, msg):
        if err is not None:
            errors.append((msg.topic(), msg.partition(), err))
        else:
            acked[(msg.topic(), msg.partition())] = msg.offset()

    for name, count in topics:
        for p in range(count):
            v = value_of(name, p, round_no).encode()
            producer.produce(name, key=v, value=v, partition=p, on_delivery=report)
            producer.poll(0)
    left = producer.flush(timeout)
    if errors:
        # Which leaders the failed partitions had, from a fresh metadata request: a stall on one node shows there.
        leaders = {}
        try:
            metadata = producer.list_topics(timeout=30)
            for topic, partition, _ in errors:
                known = metadata.topics.get(topic)
                known = known.partitions.get(partition) if known else None
                leader = known.leader if known else None
                leaders[leader] = leaders.get(leader, 0) + 1
        except KafkaException as e:  # the delivery errors below still fail the round
            leaders = f"unknown (metadata: {e})"
        codes = sorted({str(err.code()) for _, _, err in errors})
        errors_text = (f"{len(errors)} delivery errors {codes}, failed partitions by leader now {leaders}, "
                       f"first {errors[:5]}")
    else:
        errors_text = "no delivery errors"
    assert left == 0 and not errors, f"round {round_no}: {left} not delivered, {errors_text}"
    assert len(acked) == sum(c for _, c in topics)
    return acked


def consume_all(bootstrap, topics, expected_rounds, timeout=180):
    """Reads every partition from the beginning to its high watermark with assign(); checks that partition p of
    topic t holds exactly the records of `expected_rounds` in order at offsets 0, 1, ..."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "scale-unused", "enable.auto.commit": False,
                         "enable.partition.eof": True, "auto.offset.reset": "earliest",
                         "fetch.wait.max.ms": 100, "socket.timeout.ms": 30000})
    try:
        want = len(expected_rounds)
        consumer.assign([TopicPartition(name, p, 0) for name, count in topics for p in range(count)])
        got = {(name, p): [] for name, count in topics for p in range(count)}
        at_end = set()
        deadline = time.monotonic() + timeout
        while len(at_end) < len(got):
            assert time.monotonic() < deadline, \
                f"consumed {sum(map(len, got.values()))} records; {len(got) - len(at_end)} partitions unfinished"
            for msg in consumer.consume(num_messages=10_000, timeout=0.5):
                tp = (msg.topic(), msg.partition())
                if msg.error():
                    assert msg.error().code() == KafkaError._PARTITION_EOF, f"consumer error: {msg.error()}"
                    if len(got[tp]) >= want:
                        at_end.add(tp)
                    continue
                got[tp].append((msg.offset(), msg.value().decode()))
                if len(got[tp]) >= want:
                    at_end.add(tp)
    finally:
        consumer.close()
    wrong = {tp: records for tp, records in got.items()
             if records != [(i, value_of(tp[0], tp[1], r)) for i, r in enumerate(expected_rounds)]}
    assert not wrong, f"{len(wrong)} partitions differ, e.g. {list(wrong.items())[:3]}"


def end_offsets_by_tool(bootstrap, topics):
    """kafka-get-offsets.sh --time -1 for every topic (one JVM): {(topic, partition): end offset}."""
    outs = tool_batch(*[(GET_OFFSETS_TOOL, "--bootstrap-server", bootstrap, "--topic", name, "--time", "-1")
                        for name, _ in topics], timeout=300)
    ends = {}
    for out in outs:
        for line in step_ok(out).split():
            topic, partition, offset = line.rsplit(":", 2)
            ends[(topic, int(partition))] = int(offset)
    return ends


def test_twenty_thousand_partitions_one_node(mala_factory):
    node = mala_factory(extra_config=SCALE_CONFIG)
    node.stop_timeout = STOP_TIMEOUT_S
    node.start(timeout=START_TIMEOUT_S)
    create_topics(node.bootstrap, ONE_NODE_TOPICS, 1)
    wait_all_leaders(node.bootstrap, ONE_NODE_TOPICS, 120)
    total = sum(c for _, c in ONE_NODE_TOPICS)

    first = produce_round(node.bootstrap, ONE_NODE_TOPICS, 0)
    second = produce_round(node.bootstrap, ONE_NODE_TOPICS, 1)
    assert set(first.values()) == {0} and set(second.values()) == {1}
    consume_all(node.bootstrap, ONE_NODE_TOPICS, [0, 1])

    assert node.stop() == 0, node.log_text()
    node.start(timeout=START_TIMEOUT_S)
    wait_all_leaders(node.bootstrap, ONE_NODE_TOPICS, 120)
    ends = end_offsets_by_tool(node.bootstrap, ONE_NODE_TOPICS)
    assert len(ends) == total and set(ends.values()) == {2}, sorted(set(ends.values()))
    consume_all(node.bootstrap, ONE_NODE_TOPICS, [0, 1])

    third = produce_round(node.bootstrap, ONE_NODE_TOPICS, 2)
    assert set(third.values()) == {2}
    node.proc.kill()
    node.proc.wait(timeout=30)
    node.start(timeout=START_TIMEOUT_S)
    wait_all_leaders(node.bootstrap, ONE_NODE_TOPICS, 120)
    consume_all(node.bootstrap, ONE_NODE_TOPICS, [0, 1, 2])


@pytest.fixture
def scale_cluster(tmp_path):
    c = Cluster(tmp_path, extra_config=SCALE_CONFIG)
    c.stop_timeout = STOP_TIMEOUT_S
    yield c
    died, codes = c.close()
    bad = {i: code for i, code in codes.items() if code != 0}
    if died or bad:
        print(c.logs())
        pytest.fail(f"nodes died during the test: {died}; non-zero exits after SIGTERM: {bad}")


def test_ten_thousand_partitions_rf3_cluster_kill_leader(scale_cluster):
    c = scale_cluster
    c.start_all(wait=False)
    for i in c.ids:
        c.wait_serving(i, timeout=START_TIMEOUT_S)
    create_topics(c.bootstrap, CLUSTER_TOPICS, 3)
    md = wait_all_leaders(c.bootstrap, CLUSTER_TOPICS, 180)
    led = {i: 0 for i in c.ids}
    for name, _ in CLUSTER_TOPICS:
        for pm in md.topics[name].partitions.values():
            assert sorted(pm.replicas) == c.ids
            led[pm.leader] += 1
    assert sum(led.values()) == sum(n for _, n in CLUSTER_TOPICS)

    produce_round(c.bootstrap, CLUSTER_TOPICS, 0)
    victim = max(led, key=led.get)
    c.kill(victim)
    survivors = [i for i in c.ids if i != victim]
    # acks=all with min.insync.replicas 2: the two survivors take over every partition the victim led.
    produce_round(c.bootstrap_of(*survivors), CLUSTER_TOPICS, 1)
    consume_all(c.bootstrap_of(*survivors), CLUSTER_TOPICS, [0, 1])

    c.start(victim, wait=False)
    c.wait_serving(victim, timeout=START_TIMEOUT_S)
    produce_round(c.bootstrap, CLUSTER_TOPICS, 2)
    consume_all(c.bootstrap, CLUSTER_TOPICS, [0, 1, 2])
