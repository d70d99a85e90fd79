"""kafka-consumer-groups.sh against Mala and against Apache Kafka 4.x, side by side (issue 5): the same topic,
records and groups on a Mala node and on a real Apache Kafka node (apache_kafka.py), the same commands of
Apache Kafka's own tool (ConsumerGroupCommand, the class the script runs), and the outputs compared line by
line after removing only what differs between any two runs: member ids (CONSUMER-ID) and the coordinator's
address (COORDINATOR (ID)).

Commands: --list; --describe (a group without members, then one with a live member: CURRENT-OFFSET,
LOG-END-OFFSET, LAG, HOST, CLIENT-ID); --describe --members --verbose; --describe --state; --reset-offsets
--to-earliest / --shift-by / --to-datetime --execute; --delete-offsets; --delete.
"""

import datetime
import re
import time

import pytest

from apache_kafka import ApacheKafkaNode
from real_clients import create_topic, shared_node, tool_batch
from real_clients import node_log_on_failure  # noqa: F401 (autouse: the shared node's log after a failure)

GROUPS_TOOL = "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand"  # kafka-consumer-groups.sh
TOPIC = "bus-events"
PARTITIONS = 6
# Both brokers: the initial rebalance delay Kafka's shipped config/server.properties sets.
CONFIG = {"group.initial.rebalance.delay.ms": 0}


@pytest.fixture(scope="module")
def node(request, tmp_path_factory):
    yield from shared_node(request, tmp_path_factory, "cgtool", extra_config=CONFIG)


@pytest.fixture(scope="module")
def kafka(tmp_path_factory):
    k = ApacheKafkaNode(tmp_path_factory.mktemp("apache-kafka"), extra_config=CONFIG).start()
    yield k
    k.stop()


def fill(bootstrap):
    """Partition p gets 10 * (p + 1) records, produced to it explicitly; returns the timestamp (ms) between the
    first half and the second half of every partition's records."""
    from confluent_kafka import Producer

    create_topic(bootstrap, TOPIC, partitions=PARTITIONS)
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    for p in range(PARTITIONS):
        for i in range(5 * (p + 1)):
            producer.produce(TOPIC, value=f"first-{p}-{i}".encode(), partition=p)
    assert producer.flush(30) == 0
    time.sleep(1.1)
    middle = datetime.datetime.now(datetime.timezone.utc)
    time.sleep(1.1)
    for p in range(PARTITIONS):
        for i in range(5 * (p + 1)):
            producer.produce(TOPIC, value=f"second-{p}-{i}".encode(), partition=p)
    assert producer.flush(30) == 0
    return middle


def commit_without_members(bootstrap, group, offsets):
    """Offsets of a group nobody is a member of (a "simple" group), as an admin or an assign() consumer does."""
    from confluent_kafka import Consumer, TopicPartition

    from confluent_kafka import KafkaError, KafkaException

    coordinator_moving = {KafkaError.NOT_COORDINATOR, KafkaError.COORDINATOR_LOAD_IN_PROGRESS,
                          KafkaError.COORDINATOR_NOT_AVAILABLE}

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                c.commit(offsets=[TopicPartition(TOPIC, p, o) for p, o in offsets.items()], asynchronous=False)
                return
            except KafkaException as e:
                # A fresh broker's __consumer_offsets is still being created or loaded: a synchronous commit
                # reports NOT_COORDINATOR / COORDINATOR_LOAD_IN_PROGRESS instead of retrying (both brokers).
                err = e.args[0]
                if (not err.retriable() and err.code() not in coordinator_moving) or time.monotonic() > deadline:
                    raise
                time.sleep(0.2)
    finally:
        c.close()


def live_member(bootstrap, group, client_id):
    """A classic member (librdkafka, range assignor) that has read and committed everything and stays."""
    from confluent_kafka import Consumer

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "client.id": client_id,
                  "group.protocol": "classic", "auto.offset.reset": "earliest", "enable.auto.commit": False,
                  "session.timeout.ms": 30000, "heartbeat.interval.ms": 1000})
    c.subscribe([TOPIC])
    total = sum(10 * (p + 1) for p in range(PARTITIONS))
    got = 0
    deadline = time.monotonic() + 60
    while got < total:
        assert time.monotonic() < deadline, f"read {got} of {total}"
        msg = c.poll(0.2)
        if msg is not None and not msg.error():
            got += 1
    c.commit(asynchronous=False)
    return c


def normalize(text):
    """Output lines with the columns that differ between any two runs blanked: member ids and the coordinator's
    address. Blank lines dropped; table rows kept in the tool's order."""
    lines = []
    header = None
    for raw in text.splitlines():
        line = re.sub(r"COORDINATOR \(ID\)", "COORDINATOR(ID)", raw)
        line = re.sub(r"\S+:\d+\s+\(\d+\)", "<coordinator>", line)
        cols = line.split()
        if not cols:
            continue
        if "GROUP" in cols and ("TOPIC" in cols or "CONSUMER-ID" in cols or "STATE" in cols):
            header = cols
        elif header and len(cols) == len(header) and "CONSUMER-ID" in header:
            cols = ["<member>" if h == "CONSUMER-ID" and c != "-" else c for h, c in zip(header, cols)]
        lines.append(" ".join(cols))
    return lines


def scenario(bootstrap):
    """Runs the same steps against one broker; returns {step name: normalized output}."""
    middle = fill(bootstrap)
    out = {}
    commit_without_members(bootstrap, "safety-report", {p: 3 * (p + 1) for p in range(PARTITIONS)})
    member = live_member(bootstrap, "live-map", "live-map-1")
    try:
        steps = {
            "list": ("--list",),
            "describe-no-members": ("--describe", "--group", "safety-report"),
            "describe-live": ("--describe", "--group", "live-map"),
            "members-verbose": ("--describe", "--group", "live-map", "--members", "--verbose"),
            "state": ("--describe", "--group", "live-map", "--state"),
        }
        results = tool_batch(*[(GROUPS_TOOL, "--bootstrap-server", bootstrap, *a) for a in steps.values()])
        for name, r in zip(steps, results):
            out[name] = (r["exit"], normalize(r["stdout"]), r["stderr"][-2000:])
    finally:
        member.close()
    stamp = middle.strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3]
    steps = {
        "reset-earliest": ("--reset-offsets", "--group", "safety-report", "--topic", TOPIC, "--to-earliest",
                           "--execute"),
        "reset-shift": ("--reset-offsets", "--group", "safety-report", "--topic", TOPIC, "--shift-by", "4",
                        "--execute"),
        "reset-datetime": ("--reset-offsets", "--group", "safety-report", "--topic", TOPIC, "--to-datetime", stamp,
                           "--execute"),
        "describe-after-reset": ("--describe", "--group", "safety-report", "--offsets"),
        "delete-offsets": ("--delete-offsets", "--group", "safety-report", "--topic", TOPIC),
        "delete": ("--delete", "--group", "safety-report"),
        "list-after-delete": ("--list",),
    }
    results = tool_batch(*[(GROUPS_TOOL, "--bootstrap-server", bootstrap, *a) for a in steps.values()])
    for name, r in zip(steps, results):
        out[name] = (r["exit"], normalize(r["stdout"]), r["stderr"][-2000:])
    return out


def test_kafka_consumer_groups_prints_the_same_for_mala_and_apache_kafka(node, kafka):
    on_kafka = scenario(kafka.bootstrap)
    on_mala = scenario(node.bootstrap)
    # The scenario itself did what it says on Kafka (so the comparison compares something).
    assert on_kafka["describe-live"][0] == 0 and any("live-map-1" in ln for ln in on_kafka["describe-live"][1])
    assert any(ln.split()[-1] == "-" or "has no active members" in ln
               for ln in on_kafka["describe-no-members"][1])
    assert on_kafka["reset-datetime"][1], on_kafka
    for step in on_kafka:
        k, m = on_kafka[step], on_mala[step]
        assert m[:2] == k[:2], (
            f"{step}: Mala and Apache Kafka differ\n--- Kafka (exit {k[0]}):\n" + "\n".join(k[1]) + f"\n{k[2]}"
            + f"\n--- Mala (exit {m[0]}):\n" + "\n".join(m[1]) + f"\n{m[2]}")
