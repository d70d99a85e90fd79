"""Cluster metadata as real Kafka clients see it: librdkafka (kcat, confluent-kafka), kafka-python, and Apache
Kafka's own Java AdminClient and kafka-broker-api-versions tool, against one combined-mode node."""

import json
import re

import pytest
from confluent_kafka import KafkaError
from confluent_kafka.admin import AdminClient

from clients import java, kcat_metadata

UNKNOWN_TOPIC = "mala-no-such-topic"


def user_topics(names):
    return sorted(n for n in names if not n.startswith("__"))


def confluent_admin(node):
    return AdminClient({"bootstrap.servers": node.bootstrap, "socket.timeout.ms": 10000})


def test_kcat_lists_the_broker(node):
    md = kcat_metadata(node.bootstrap)
    assert md["brokers"] == [{"id": 1, "name": f"127.0.0.1:{node.port}"}]
    assert md["controllerid"] == 1
    assert user_topics(t["topic"] for t in md["topics"]) == []


def test_confluent_admin_list_topics(node):
    md = confluent_admin(node).list_topics(timeout=10)
    assert isinstance(md.cluster_id, str) and md.cluster_id
    assert md.controller_id == 1
    assert list(md.brokers) == [1]
    broker = md.brokers[1]
    assert (broker.id, broker.host, broker.port) == (1, "127.0.0.1", node.port)
    assert user_topics(md.topics) == []


def test_kafka_python_describe_cluster(node):
    import kafka.errors
    from kafka.admin import KafkaAdminClient

    try:
        admin = KafkaAdminClient(bootstrap_servers=node.bootstrap, request_timeout_ms=10000,
                                 client_id="mala-it")
    except (kafka.errors.UnrecognizedBrokerVersion, kafka.errors.IncompatibleBrokerVersion) as e:
        # kafka-python guesses the broker release from the ApiVersions table (dpkp/kafka-python#2002): with only
        # ApiVersions and Metadata served, the guess may fail until more APIs exist.
        pytest.xfail(f"kafka-python version probing rejected the ApiVersions table: {e!r}")
    try:
        info = admin.describe_cluster()
    finally:
        admin.close()
    assert info["cluster_id"]
    assert info["controller_id"] == 1
    brokers = [(b["broker_id"], b["host"], b["port"]) for b in info["brokers"]]
    assert brokers == [(1, "127.0.0.1", node.port)]


def test_broker_api_versions_tool(node):
    """What `kafka-broker-api-versions.sh --bootstrap-server` prints (the script runs this class)."""
    out = java("org.apache.kafka.tools.BrokerApiVersionsCommand", "--bootstrap-server", node.bootstrap).stdout
    assert re.search(rf"^127\.0\.0\.1:{node.port} \(id: 1 rack: null\b.*\) -> \(", out, re.M), out
    assert re.search(r"^\s*ApiVersions\(18\): 0 to 4 \[usable: 4\],?$", out, re.M), out
    assert re.search(r"^\s*Metadata\(3\): 0 to 12 \[usable: 12\],?$", out, re.M), out


def test_java_admin_describe_cluster_matches_librdkafka(node):
    described = json.loads(java("mala.it.DescribeCluster", node.bootstrap).stdout.strip().splitlines()[-1])
    rdkafka = confluent_admin(node).list_topics(timeout=10)
    kcat = kcat_metadata(node.bootstrap)

    assert described["clusterId"] == rdkafka.cluster_id
    assert described["controller"] is not None and described["controller"]["id"] == kcat["controllerid"]
    java_nodes = [(n["id"], f"{n['host']}:{n['port']}") for n in described["nodes"]]
    kcat_nodes = [(b["id"], b["name"]) for b in kcat["brokers"]]
    assert java_nodes == kcat_nodes == [(1, f"127.0.0.1:{node.port}")]


# Metadata for a topic that does not exist. Expected today: UNKNOWN_TOPIC_OR_PARTITION (3), because topic
# auto-creation (auto.create.topics.enable) is a later milestone. When auto-creation lands, these tests must change
# to expect the topic to be created (with auto-creation enabled) and keep this expectation with it disabled.

@pytest.fixture
def node_without_auto_create(mala_factory):
    """A node with auto.create.topics.enable=false: Metadata for an unknown topic reports it unknown."""
    return mala_factory(extra_config={"auto.create.topics.enable": False}).start()


def test_unknown_topic_kcat(node_without_auto_create):
    node = node_without_auto_create
    md = kcat_metadata(node.bootstrap, topic=UNKNOWN_TOPIC)
    topics = {t["topic"]: t for t in md["topics"]}
    assert UNKNOWN_TOPIC in topics, md
    assert "Unknown topic or partition" in topics[UNKNOWN_TOPIC].get("error", topics[UNKNOWN_TOPIC].get("err", "")), md


def test_auto_created_topic_kcat(node):
    """auto.create.topics.enable (Kafka's default, true): asking for an unknown topic creates it with
    num.partitions (1) and default.replication.factor (1), led by this node."""
    md = kcat_metadata(node.bootstrap, topic=UNKNOWN_TOPIC)
    topics = {t["topic"]: t for t in md["topics"]}
    assert UNKNOWN_TOPIC in topics, md
    assert "error" not in topics[UNKNOWN_TOPIC], md
    parts = topics[UNKNOWN_TOPIC]["partitions"]
    assert [p["partition"] for p in parts] == [0], md
    assert parts[0]["leader"] == node.node_id, md


def test_unknown_topic_confluent(node_without_auto_create):
    node = node_without_auto_create
    md = confluent_admin(node).list_topics(topic=UNKNOWN_TOPIC, timeout=10)
    assert UNKNOWN_TOPIC in md.topics
    error = md.topics[UNKNOWN_TOPIC].error
    assert error is not None and error.code() == KafkaError.UNKNOWN_TOPIC_OR_PART, error


def test_unknown_topic_java_admin(node):
    out = java("mala.it.DescribeTopics", node.bootstrap, UNKNOWN_TOPIC).stdout.strip().splitlines()
    result = json.loads(out[-1])
    assert result == {"topic": UNKNOWN_TOPIC, "error": "UnknownTopicOrPartitionException", "partitions": -1}
