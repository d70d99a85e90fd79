"""Every real client in a consumer group (issue 5): joins, consumes, commits, resumes after a restart of the
consumer and after a restart of the node.

Clients and protocols: confluent-kafka (librdkafka 2.16) classic and consumer (KIP-848); kafka-python (classic);
franz-go classic and consumer (kgo.ServerSideBalancer); KafkaJS (classic; it has no KIP-848 support); Apache
Kafka's Java consumer (kafka-console-consumer, kafka-clients 4.4) classic and consumer.

One node for the whole matrix: each client reads 300 records of its own topic and commits (first join), then 60
more after its restart (only the new ones), then the node restarts and each client reads the next 60 (the groups'
offsets and the consumer groups come back from __consumer_offsets).
"""

import time
import uuid

import pytest

from clients import java
from real_clients import CONSOLE_CONSUMER, create_topic, go_client, kafkajs, rdkafka_produce

PARTITIONS = 6
NODE_CONFIG = {
    "group.initial.rebalance.delay.ms": 200,
    "group.consumer.session.timeout.ms": 6000,
    "group.consumer.min.session.timeout.ms": 1000,
    "group.consumer.heartbeat.interval.ms": 500,
    "group.consumer.min.heartbeat.interval.ms": 100,
    "group.min.session.timeout.ms": 1000,
}


def unique(name: str) -> str:
    return f"{name}-{uuid.uuid4().hex[:8]}"


def produce(bootstrap, topic, start, count):
    rdkafka_produce(bootstrap, topic, [(f"k{i % 50}", f"event-{i}") for i in range(start, start + count)],
                    **{"partitioner": "murmur2_random", "linger.ms": 5})


def read_confluent(protocol):
    def read(bootstrap, topic, group, count):
        from confluent_kafka import Consumer

        conf = {"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest",
                "enable.auto.commit": False, "fetch.wait.max.ms": 100, "group.protocol": protocol}
        if protocol == "classic":
            conf.update({"session.timeout.ms": 6000, "heartbeat.interval.ms": 500})
        c = Consumer(conf)
        values = []
        try:
            c.subscribe([topic])
            deadline = time.monotonic() + 40
            while len(values) < count:
                assert time.monotonic() < deadline, f"read {len(values)} of {count}"
                m = c.poll(0.1)
                if m is None:
                    continue
                assert not m.error(), m.error()
                values.append(m.value().decode())
            c.commit(asynchronous=False)
        finally:
            c.close()
        return values
    return read


def read_kafka_python(bootstrap, topic, group, count):
    from kafka import KafkaConsumer

    c = KafkaConsumer(topic, bootstrap_servers=bootstrap, group_id=group, auto_offset_reset="earliest",
                      enable_auto_commit=False, session_timeout_ms=6000, heartbeat_interval_ms=500,
                      fetch_max_wait_ms=100)
    values = []
    try:
        deadline = time.monotonic() + 40
        while len(values) < count:
            assert time.monotonic() < deadline, f"read {len(values)} of {count}"
            for records in c.poll(timeout_ms=200, max_records=count - len(values)).values():
                values.extend(r.value.decode() for r in records)
        c.commit()
    finally:
        c.close()
    return values


def read_franz(protocol):
    def read(bootstrap, topic, group, count):
        _, lines = go_client("franz", "group-consume", "--bootstrap", bootstrap, "--topic", topic, "--group", group,
                             "--count", count, "--group-protocol", protocol, "--commit", timeout=60)
        return [line["value"] for line in lines]
    return read


def read_kafkajs(bootstrap, topic, group, count):
    _, lines = kafkajs("group-consume", "--bootstrap", bootstrap, "--topic", topic, "--group", group,
                       "--count", count, "--commit", timeout=60)
    return [line["value"] for line in lines]


def read_java(protocol):
    def read(bootstrap, topic, group, count):
        out = java(CONSOLE_CONSUMER, "--bootstrap-server", bootstrap, "--topic", topic, "--group", group,
                   "--consumer-property", f"group.protocol={protocol}",
                   "--consumer-property", "auto.offset.reset=earliest",
                   *(("--consumer-property", "session.timeout.ms=6000") if protocol == "classic" else ()),
                   "--max-messages", str(count), "--timeout-ms", "40000", timeout=90)
        return [line for line in out.stdout.splitlines() if line.startswith("event-")]
    return read


CLIENTS = {
    "confluent-classic": read_confluent("classic"),
    "confluent-consumer": read_confluent("consumer"),
    "kafka-python-classic": read_kafka_python,
    "franz-classic": read_franz("classic"),
    "franz-consumer": read_franz("consumer"),
    "kafkajs-classic": read_kafkajs,
    "java-classic": read_java("classic"),
    "java-consumer": read_java("consumer"),
}


def expect(values, start, count, who):
    assert sorted(values) == sorted(f"event-{i}" for i in range(start, start + count)), who


def test_every_client_joins_commits_and_resumes(mala_factory):
    node = mala_factory(extra_config=NODE_CONFIG).start()
    topics = {name: unique(name) for name in CLIENTS}
    groups = {name: unique("g-" + name) for name in CLIENTS}
    for name, topic in topics.items():
        create_topic(node.bootstrap, topic, partitions=PARTITIONS)
        produce(node.bootstrap, topic, 0, 300)

    # First join: everything, then commit.
    for name, read in CLIENTS.items():
        expect(read(node.bootstrap, topics[name], groups[name], 300), 0, 300, name)

    # Consumer restart: only the new records.
    for name, topic in topics.items():
        produce(node.bootstrap, topic, 300, 60)
    for name, read in CLIENTS.items():
        expect(read(node.bootstrap, topics[name], groups[name], 60), 300, 60, name)

    # Node restart: the committed offsets (and the consumer groups) are replayed from __consumer_offsets.
    assert node.stop() == 0
    node.close_log()
    node.start()
    for name, topic in topics.items():
        produce(node.bootstrap, topic, 360, 60)
    for name, read in CLIENTS.items():
        expect(read(node.bootstrap, topics[name], groups[name], 60), 360, 60, name)
