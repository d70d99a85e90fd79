"""A rolling restart of a 3-node cluster under load (issue 24): each node in turn is stopped with SIGTERM (controlled
shutdown: the controller moves its leaderships away before it exits), started again, and allowed back into every ISR
before the next one goes, while Apache Kafka's Java producer and an idempotent librdkafka producer (both acks=all)
send keyed records and a librdkafka consumer group reads them. What a user expects of a rolling restart of Kafka:
no send fails, nothing acknowledged is lost or written twice, order per key holds, and the group reads everything
and commits up to the end. Retriable errors the clients retry inside (NOT_LEADER_OR_FOLLOWER and the like) are
counted and printed, not failed on: Kafka's clients see them in a rolling restart of Kafka too."""

import threading
import time
from collections import defaultdict

import pytest

from test_replication_failover import (KeyedLoad, _fast, create_replicated_topic, every_send_acknowledged,
                                       read_back_exactly_once_in_key_order, start_java_keyed_producer)

MOVED = "controlled shutdown: the controller moved this broker's leaderships"
TIMED_OUT = "controlled shutdown timed out"


@pytest.fixture
def fast_cluster(request, tmp_path):
    yield from _fast(request, tmp_path)


class GroupReader:
    """A librdkafka consumer in group `group` (classic protocol, auto commit) reading `topic` in a thread; keeps
    every value it was handed and every error event it saw."""

    def __init__(self, bootstrap, topic, group):
        from confluent_kafka import Consumer

        self.errors = []
        self.fatal = []
        self.values = defaultdict(int)
        self.consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest",
                                  "enable.auto.commit": True, "auto.commit.interval.ms": 500,
                                  "session.timeout.ms": 10000, "socket.timeout.ms": 5000, "log_level": 3,
                                  "error_cb": self._error})
        self.consumer.subscribe([topic])
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _error(self, err):
        (self.fatal if err.fatal() else self.errors).append(err.name())

    def _run(self):
        while not self._stop.is_set():
            msg = self.consumer.poll(0.2)
            if msg is None:
                continue
            if msg.error() is not None:
                (self.fatal if msg.error().fatal() else self.errors).append(msg.error().name())
                continue
            self.values[msg.value().decode()] += 1

    def start(self):
        self._thread.start()

    def stop(self):
        self._stop.set()
        self._thread.join()
        self.consumer.close()  # commits what was read last


def every_isr_full(c, topics, via):
    md = c.rdkafka_metadata(via)
    for name in topics:
        t = md.topics.get(name)
        if t is None or t.error is not None:
            return False
        if any(p.leader < 0 or len(p.isrs) != len(p.replicas) for p in t.partitions.values()):
            return False
    return True


def test_a_rolling_restart_under_load_loses_nothing_and_fails_no_send(fast_cluster):
    from confluent_kafka import Consumer, TopicPartition

    c = fast_cluster
    topic = "rolling"
    partitions = 6
    create_replicated_topic(c, topic, partitions)
    java_count = 2500
    java_proc = start_java_keyed_producer(c.bootstrap, topic, java_count, "java-key-", interval_ms=20,
                                          delivery_timeout_ms=120000)
    load = KeyedLoad(c.bootstrap, topic)
    load.start()
    reader = GroupReader(c.bootstrap, topic, "rolling-readers")
    reader.start()
    stops = []
    try:
        c.wait_until(lambda: len(load.acked) > 200, timeout=30, interval=0.2, what="acknowledgements before the restart")
        for victim in c.ids:
            others = [i for i in c.ids if i != victim]
            before = len(load.acked)
            began = time.monotonic()
            code = c.stop(victim)
            took = time.monotonic() - began
            log = c.node(victim).log_text(tail_lines=400)
            assert code == 0, f"node-{victim} exited with {code} after SIGTERM"
            assert MOVED in log, f"node-{victim} did not log that its leaderships moved:\n{log[-3000:]}"
            assert TIMED_OUT not in log, f"node-{victim}'s controlled shutdown timed out:\n{log[-3000:]}"
            # The leaderships were moved before the process exited: the surviving nodes name other leaders within
            # moments (the time to apply the committed change; fencing after a missed session would take
            # broker.session.timeout.ms, 4 s here, and an election after it).
            def led_by_victim():
                md = c.rdkafka_metadata(others[0], topic=topic).topics[topic]
                return [p.id for p in md.partitions.values() if p.leader == victim]
            deadline = time.monotonic() + 2.0
            still_led = led_by_victim()
            while still_led and time.monotonic() < deadline:
                time.sleep(0.05)
                still_led = led_by_victim()
            c.wait_until(lambda: len(load.acked) > before + 50, timeout=30, interval=0.2,
                         what=f"acknowledgements while node-{victim} is down")
            c.start(victim)
            c.wait_until(lambda: every_isr_full(c, [topic, "__consumer_offsets"], others[0]), timeout=60,
                         interval=0.3, what=f"node-{victim} back in every ISR")
            stops.append((victim, took, still_led))
            print(f"node-{victim}: stopped in {took:.2f} s, partitions still led by it 2 s after: "
                  f"{still_led}; {len(load.acked)} acknowledged")
        c.wait_until(lambda: len(load.acked) > sum(1 for _ in stops) * 50 + 200, timeout=30, interval=0.2,
                     what="acknowledgements after the restart")
    finally:
        remaining = load.stop()
        java_out, java_err = java_proc.communicate(timeout=240)
    acked = every_send_acknowledged(load, remaining, java_proc, java_out, java_err, java_count)
    assert all(not led for _, _, led in stops), f"leaderships left on a stopped node: {stops}"
    retried = [line for line in java_err.splitlines() if "WARN" in line]
    print(f"{len(load.acked)} librdkafka + {java_count} Java records acknowledged; the Java producer logged "
          f"{len(retried)} warnings (retried errors), e.g. {retried[:3]}")

    ends = read_back_exactly_once_in_key_order(c, topic, partitions, acked)

    # The group read everything (at least once: a rebalance may hand a partition over before its last commit)
    # and its committed offsets reach the end.
    c.wait_until(lambda: all(reader.values[a[3]] > 0 for a in acked) or None, timeout=60, interval=0.5,
                 what="the consumer group to read every acknowledged record")
    reader.stop()
    assert not reader.fatal, f"the consumer group saw fatal errors: {reader.fatal}"
    probe = Consumer({"bootstrap.servers": c.bootstrap, "group.id": "rolling-readers", "socket.timeout.ms": 5000})
    try:
        committed = probe.committed([TopicPartition(topic, p) for p in range(partitions)], timeout=15)
    finally:
        probe.close()
    assert {tp.partition: tp.offset for tp in committed} == ends
    again = sum(1 for n in reader.values.values() if n > 1)
    print(f"the group read {len(reader.values)} records ({again} more than once), committed {ends}; "
          f"error events (connections to stopped nodes and the like): {sorted(set(reader.errors))}")
