"""Topic and config administration on a single Mala node with real admin tools and clients (issue 4): Apache
Kafka's kafka-topics.sh / kafka-configs.sh / kafka-log-dirs.sh (their 4.4 main classes, several in one JVM),
librdkafka's AdminClient, kafka-python's KafkaAdminClient, franz-go's kadm, sarama's ClusterAdmin and KafkaJS's
admin. Each test uses its own topics on one node shared by the module.
"""

import json
import re

import pytest
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import (AlterConfigOpType, ConfigEntry, ConfigResource, ConfigSource, NewPartitions,
                                   NewTopic, ResourceType)

from real_clients import (CONFIGS_TOOL, LOG_DIRS_TOOL, TOPICS_TOOL, create_topic, go_client, kafkajs, rdkafka_admin,
                          rdkafka_consume, rdkafka_produce, shared_node, step_ok, tool_batch)
from real_clients import node_log_on_failure  # noqa: F401 (autouse: the shared node's log after a failure)

TIMEOUT = 30


@pytest.fixture(scope="module")
def node(request, tmp_path_factory):
    yield from shared_node(request, tmp_path_factory, "topic-admin")


def kafka_error(future, timeout=TIMEOUT):
    """The KafkaError a confluent-kafka admin future failed with (None when it succeeded)."""
    try:
        future.result(timeout=timeout)
        return None
    except KafkaException as e:
        return e.args[0]


def source_of(entry):
    return ConfigSource(int(getattr(entry.source, "value", entry.source)))


def topic_names(node):
    return set(rdkafka_admin(node.bootstrap).list_topics(timeout=10).topics)


def describe_lines(text, topic):
    """kafka-topics --describe output: (the topic line's fields, [each partition line's fields])."""
    head, parts = None, []
    for line in text.splitlines():
        fields = dict(re.findall(r"(\w+): ?([^\t]*)", line))
        if fields.get("Topic") != topic:
            continue
        if "Partition" in fields:
            parts.append(fields)
        elif "PartitionCount" in fields:
            head = fields
    return head, parts


# --- kafka-topics.sh ------------------------------------------------------------------------------------------------

def test_kafka_topics_create_describe_list_alter_delete(node):
    topic = "tool-topic"
    b = ("--bootstrap-server", node.bootstrap)
    (created, again, described, listed, altered, described2, deleted, listed2, gone) = tool_batch(
        (TOPICS_TOOL, *b, "--create", "--topic", topic, "--partitions", 3, "--replication-factor", 1,
         "--config", "retention.ms=86400000"),
        (TOPICS_TOOL, *b, "--create", "--topic", topic, "--partitions", 3),
        (TOPICS_TOOL, *b, "--describe", "--topic", topic),
        (TOPICS_TOOL, *b, "--list"),
        (TOPICS_TOOL, *b, "--alter", "--topic", topic, "--partitions", 5),
        (TOPICS_TOOL, *b, "--describe", "--topic", topic),
        (TOPICS_TOOL, *b, "--delete", "--topic", topic),
        (TOPICS_TOOL, *b, "--list"),
        (TOPICS_TOOL, *b, "--describe", "--topic", topic),
    )
    assert f"Created topic {topic}." in step_ok(created)

    assert again["exit"] == 1, again
    assert "already exists" in again["stdout"] + again["stderr"], again

    head, parts = describe_lines(step_ok(described), topic)
    assert head is not None, described["stdout"]
    assert head["PartitionCount"] == "3" and head["ReplicationFactor"] == "1", head
    assert head["TopicId"] and head["TopicId"] != "AAAAAAAAAAAAAAAAAAAAAA", head
    assert "retention.ms=86400000" in head["Configs"], head
    assert [(p["Partition"], p["Leader"], p["Replicas"], p["Isr"]) for p in parts] == \
        [(str(i), "1", "1", "1") for i in range(3)], parts

    assert topic in step_ok(listed).split()

    step_ok(altered)
    head2, parts2 = describe_lines(step_ok(described2), topic)
    assert head2["PartitionCount"] == "5", described2["stdout"]
    assert head2["TopicId"] == head["TopicId"]
    assert [p["Partition"] for p in parts2] == [str(i) for i in range(5)]
    assert all(p["Leader"] == "1" for p in parts2), parts2

    step_ok(deleted)
    assert topic not in step_ok(listed2).split()
    assert gone["exit"] != 0 and "does not exist" in gone["stdout"] + gone["stderr"], gone


# --- kafka-configs.sh and kafka-log-dirs.sh -------------------------------------------------------------------------

def test_kafka_configs_describe_alter_and_log_dirs(node):
    topic = "configs-topic"
    create_topic(node.bootstrap, topic, partitions=2)
    rdkafka_produce(node.bootstrap, topic, [(f"k{i}", "v" * 100) for i in range(50)])
    b = ("--bootstrap-server", node.bootstrap)
    t = ("--entity-type", "topics", "--entity-name", topic)
    (before, altered, after, topics_describe, deleted, all_configs, broker, log_dirs) = tool_batch(
        (CONFIGS_TOOL, *b, *t, "--describe"),
        (CONFIGS_TOOL, *b, *t, "--alter", "--add-config", "retention.ms=3600000,max.message.bytes=2000000"),
        (CONFIGS_TOOL, *b, *t, "--describe"),
        (TOPICS_TOOL, *b, "--describe", "--topic", topic),
        (CONFIGS_TOOL, *b, *t, "--alter", "--delete-config", "retention.ms"),
        (CONFIGS_TOOL, *b, *t, "--describe", "--all"),
        (CONFIGS_TOOL, *b, "--entity-type", "brokers", "--entity-name", 1, "--describe", "--all"),
        (LOG_DIRS_TOOL, *b, "--describe", "--topic-list", topic),
    )
    assert f"Dynamic configs for topic {topic} are:" in step_ok(before)
    assert "retention.ms" not in before["stdout"]

    assert f"Completed updating config for topic {topic}." in step_ok(altered)
    text = step_ok(after)
    assert re.search(r"^\s*retention\.ms=3600000 sensitive=false synonyms=\{DYNAMIC_TOPIC_CONFIG:retention\.ms="
                     r"3600000", text, re.M), text
    assert re.search(r"^\s*max\.message\.bytes=2000000 ", text, re.M), text

    head, _ = describe_lines(step_ok(topics_describe), topic)
    assert "retention.ms=3600000" in head["Configs"] and "max.message.bytes=2000000" in head["Configs"], head

    step_ok(deleted)
    text = step_ok(all_configs)
    assert f"All configs for topic {topic} are:" in text
    # Back to the broker default (log.retention.hours=168 -> 604800000 ms); the other override stays.
    # (Apache Kafka lists no synonym here: the default comes from log.retention.hours.)
    m = re.search(r"^\s*retention\.ms=604800000 sensitive=false synonyms=\{([^}]*)\}", text, re.M)
    assert m and "DYNAMIC_TOPIC_CONFIG" not in m.group(1), text
    assert re.search(r"^\s*max\.message\.bytes=2000000 sensitive=false synonyms=\{DYNAMIC_TOPIC_CONFIG", text,
                     re.M), text
    assert re.search(r"^\s*cleanup\.policy=delete ", text, re.M), text

    text = step_ok(broker)
    assert "All configs for broker 1 are:" in text
    assert re.search(r"^\s*num\.partitions=1 ", text, re.M), text
    assert re.search(r"^\s*auto\.create\.topics\.enable=true ", text, re.M), text

    text = step_ok(log_dirs)
    doc = json.loads(next(line for line in text.splitlines() if line.startswith("{")))
    (b1,) = doc["brokers"]
    assert b1["broker"] == 1
    parts = {p["partition"]: p for d in b1["logDirs"] for p in d["partitions"]}
    assert set(parts) == {f"{topic}-0", f"{topic}-1"}, parts
    assert sum(p["size"] for p in parts.values()) > 50 * 100, parts
    assert all(d["error"] is None for d in b1["logDirs"]), b1


# --- librdkafka's AdminClient ---------------------------------------------------------------------------------------

def test_confluent_admin_create_errors_partitions_and_delete(node):
    admin = rdkafka_admin(node.bootstrap)
    topic = "rdkafka-admin-topic"

    # validate_only: answered as a real create would be, but nothing is created.
    fs = admin.create_topics([NewTopic(topic, 2, 1)], validate_only=True, request_timeout=TIMEOUT)
    assert kafka_error(fs[topic]) is None
    assert topic not in topic_names(node)

    fs = admin.create_topics([NewTopic(topic, 2, 1, config={"cleanup.policy": "compact"})], request_timeout=TIMEOUT)
    assert kafka_error(fs[topic]) is None
    assert len(admin.list_topics(topic, timeout=10).topics[topic].partitions) == 2

    errors = {}
    for name, new in [("exists", NewTopic(topic, 1, 1)),
                      ("bad-name", NewTopic("bad/name", 1, 1)),
                      ("too-long", NewTopic("x" * 250, 1, 1)),
                      ("bad-config-value", NewTopic("bad-config-topic", 1, 1, config={"retention.ms": "soon"})),
                      ("unknown-config", NewTopic("bad-config-topic2", 1, 1, config={"no.such.config": "1"})),
                      ("zero-partitions", NewTopic("zero-partitions-topic", 0, 1))]:
        fs = admin.create_topics([new], request_timeout=TIMEOUT)
        err = kafka_error(fs[new.topic])
        errors[name] = err.code() if err else None
    assert errors["exists"] == KafkaError.TOPIC_ALREADY_EXISTS, errors
    assert errors["bad-name"] == KafkaError.TOPIC_EXCEPTION, errors
    assert errors["too-long"] == KafkaError.TOPIC_EXCEPTION, errors
    # Apache Kafka answers INVALID_CONFIG for a bad value or unknown name (ConfigurationControlManager).
    assert errors["bad-config-value"] in (KafkaError.INVALID_CONFIG, KafkaError.POLICY_VIOLATION), errors
    assert errors["unknown-config"] in (KafkaError.INVALID_CONFIG, KafkaError.POLICY_VIOLATION), errors
    assert errors["zero-partitions"] == KafkaError.INVALID_PARTITIONS, errors
    assert not {"bad/name", "bad-config-topic", "bad-config-topic2", "zero-partitions-topic"} & topic_names(node)

    # CreatePartitions: grow, then refuse to shrink.
    fs = admin.create_partitions([NewPartitions(topic, 4)], request_timeout=TIMEOUT)
    assert kafka_error(fs[topic]) is None
    assert len(admin.list_topics(topic, timeout=10).topics[topic].partitions) == 4
    fs = admin.create_partitions([NewPartitions(topic, 3)], request_timeout=TIMEOUT)
    assert kafka_error(fs[topic]).code() == KafkaError.INVALID_PARTITIONS

    fs = admin.delete_topics([topic], request_timeout=TIMEOUT)
    assert kafka_error(fs[topic]) is None
    assert topic not in topic_names(node)
    fs = admin.delete_topics(["never-existed"], request_timeout=TIMEOUT)
    assert kafka_error(fs["never-existed"]).code() == KafkaError.UNKNOWN_TOPIC_OR_PART


def test_confluent_describe_and_incremental_alter_configs(node):
    admin = rdkafka_admin(node.bootstrap)
    topic = "rdkafka-configs-topic"
    create_topic(node.bootstrap, topic, config={"segment.bytes": "10485760"})

    res = ConfigResource(ResourceType.TOPIC, topic)
    configs = admin.describe_configs([res], request_timeout=TIMEOUT)[res].result(timeout=TIMEOUT)
    assert configs["segment.bytes"].value == "10485760"
    assert source_of(configs["segment.bytes"]) == ConfigSource.DYNAMIC_TOPIC_CONFIG
    assert configs["retention.ms"].value == "604800000"
    assert configs["retention.ms"].is_default
    assert configs["cleanup.policy"].value == "delete"

    alter = ConfigResource(ResourceType.TOPIC, topic, incremental_configs=[
        ConfigEntry("retention.ms", "120000", incremental_operation=AlterConfigOpType.SET),
        ConfigEntry("segment.bytes", None, incremental_operation=AlterConfigOpType.DELETE),
        ConfigEntry("cleanup.policy", "compact", incremental_operation=AlterConfigOpType.APPEND),
    ])
    assert kafka_error(admin.incremental_alter_configs([alter], request_timeout=TIMEOUT)[alter]) is None
    configs = admin.describe_configs([res], request_timeout=TIMEOUT)[res].result(timeout=TIMEOUT)
    assert configs["retention.ms"].value == "120000"
    assert configs["segment.bytes"].value == "1073741824" and configs["segment.bytes"].is_default
    assert configs["cleanup.policy"].value == "delete,compact"

    bad = ConfigResource(ResourceType.TOPIC, topic, incremental_configs=[
        ConfigEntry("retention.ms", "not-a-number", incremental_operation=AlterConfigOpType.SET)])
    assert kafka_error(admin.incremental_alter_configs([bad], request_timeout=TIMEOUT)[bad]).code() == \
        KafkaError.INVALID_CONFIG

    broker = ConfigResource(ResourceType.BROKER, "1")
    bconfigs = admin.describe_configs([broker], request_timeout=TIMEOUT)[broker].result(timeout=TIMEOUT)
    assert bconfigs["num.partitions"].value == "1"
    assert bconfigs["auto.create.topics.enable"].value == "true"


def test_topic_config_takes_effect_without_restart(node):
    """max.message.bytes lowered on a live topic: the next produce of a larger batch gets MESSAGE_TOO_LARGE."""
    from confluent_kafka import Producer

    admin = rdkafka_admin(node.bootstrap)
    topic = "live-config-topic"
    create_topic(node.bootstrap, topic)
    rdkafka_produce(node.bootstrap, topic, [("k", "v" * 5000)])
    alter = ConfigResource(ResourceType.TOPIC, topic, incremental_configs=[
        ConfigEntry("max.message.bytes", "1000", incremental_operation=AlterConfigOpType.SET)])
    assert kafka_error(admin.incremental_alter_configs([alter], request_timeout=TIMEOUT)[alter]) is None

    producer = Producer({"bootstrap.servers": node.bootstrap, "message.timeout.ms": 20000, "retries": 0})
    errors = []
    producer.produce(topic, key="k", value="v" * 5000, on_delivery=lambda err, msg: errors.append(err))
    assert producer.flush(30) == 0
    assert len(errors) == 1 and errors[0] is not None and errors[0].code() == KafkaError.MSG_SIZE_TOO_LARGE, errors
    # Small records still go through.
    rdkafka_produce(node.bootstrap, topic, [("k", "small")])


# --- kafka-python -----------------------------------------------------------------------------------------------------

def test_kafka_python_admin(node):
    from kafka.admin import ConfigResource as KpConfigResource
    from kafka.admin import ConfigResourceType, KafkaAdminClient
    from kafka.admin import NewPartitions as KpNewPartitions
    from kafka.admin import NewTopic as KpNewTopic

    topic = "kafka-python-admin-topic"
    admin = KafkaAdminClient(bootstrap_servers=node.bootstrap, request_timeout_ms=15000, client_id="mala-it")
    try:
        admin.create_topics([KpNewTopic(topic, 2, 1, topic_configs={"retention.ms": "7200000"})])
        assert topic in admin.list_topics()
        (desc,) = admin.describe_topics([topic])
        assert desc["error_code"] == 0 and len(desc["partitions"]) == 2
        assert all(p["leader_id"] == 1 and p["isr_nodes"] == [1] for p in desc["partitions"]), desc
        admin.create_partitions({topic: KpNewPartitions(3)})
        (desc,) = admin.describe_topics([topic])
        assert len(desc["partitions"]) == 3
        # kafka-python 3.x answers {"topic": {name: {config: {"value", "config_source", ...}}}}, the dynamic
        # configs only unless asked for all.
        resp = admin.describe_configs([KpConfigResource(ConfigResourceType.TOPIC, topic)])
        entry = resp["topic"][topic]["retention.ms"]
        assert entry["value"] == "7200000" and entry["config_source"] == "DYNAMIC_TOPIC_CONFIG", resp
        admin.delete_topics([topic])
        assert topic not in admin.list_topics()
    finally:
        admin.close()


# --- Go (franz-go kadm, sarama ClusterAdmin) and KafkaJS --------------------------------------------------------------

@pytest.mark.parametrize("lib", ["franz", "sarama"])
def test_go_admin(node, lib):
    topic = f"go-admin-{lib}"
    b = ("--bootstrap", node.bootstrap, "--topic", topic)

    def admin(*args, check=True):
        return go_client(lib, "admin", *args, check=check)[1]

    assert admin("create", *b, "--partitions", 2, "--config", "retention.ms=5000000") == \
        [{"topic": topic, "error": None, "error_code": 0}]
    (again,) = admin("create", *b, "--partitions", 2)
    assert again["error_code"] == 36, again  # TOPIC_ALREADY_EXISTS

    (listed,) = admin("list", "--bootstrap", node.bootstrap)
    assert listed["topics"][topic] == 2

    (desc,) = admin("describe", *b)
    assert desc["error"] is None
    assert [(p["partition"], p["leader"], p["replicas"], p["isr"]) for p in desc["partitions"]] == \
        [(0, 1, [1], [1]), (1, 1, [1], [1])]

    assert admin("add-partitions", *b, "--partitions", 4)[0]["error"] is None
    (desc,) = admin("describe", *b)
    assert len(desc["partitions"]) == 4

    (cfg,) = admin("describe-configs", *b)
    assert cfg["configs"]["retention.ms"]["value"] == "5000000", cfg
    assert admin("alter-configs", *b, "--config", "retention.ms=6000000")[0]["error"] is None
    (cfg,) = admin("describe-configs", *b)
    assert cfg["configs"]["retention.ms"]["value"] == "6000000"

    _, produced = go_client(lib, "produce", *b, "--count", 40, "--partition", 0)
    assert [r["offset"] for r in produced] == list(range(40))
    offsets = admin("offsets", *b)
    assert [(o["partition"], o["start"], o["end"]) for o in offsets] == [(0, 0, 40), (1, 0, 0), (2, 0, 0), (3, 0, 0)]
    (dr,) = admin("delete-records", *b, "--partition", 0, "--offset", 25)
    assert dr["error"] is None and dr["low_watermark"] == 25, dr
    assert admin("offsets", *b)[0] == {"partition": 0, "start": 25, "end": 40}

    assert admin("delete", *b)[0]["error"] is None
    (listed,) = admin("list", "--bootstrap", node.bootstrap)
    assert topic not in listed["topics"]
    (gone,) = admin("delete", *b)
    assert gone["error_code"] == 3, gone  # UNKNOWN_TOPIC_OR_PARTITION


def test_kafkajs_admin(node):
    topic = "kafkajs-admin"
    b = ("--bootstrap", node.bootstrap, "--topic", topic)

    def admin(*args):
        return kafkajs("admin", *args)[1]

    assert admin("create", *b, "--partitions", 2, "--config", "retention.ms=5000000")[0]["created"] is True
    (again,) = admin("create", *b, "--partitions", 2)
    assert again["created"] is False and again["error_type"] == "TOPIC_ALREADY_EXISTS", again
    assert topic in admin("list", "--bootstrap", node.bootstrap)[0]["topics"]
    (desc,) = admin("describe", *b)
    assert [(p["partition"], p["leader"], p["replicas"], p["isr"]) for p in desc["partitions"]] == \
        [(0, 1, [1], [1]), (1, 1, [1], [1])]
    admin("add-partitions", *b, "--partitions", 3)
    assert len(admin("describe", *b)[0]["partitions"]) == 3

    (cfg,) = admin("describe-configs", *b)
    assert cfg["error_code"] == 0 and cfg["configs"]["retention.ms"]["value"] == "5000000", cfg
    admin("alter-configs", *b, "--config", "retention.ms=7000000")  # AlterConfigs (the non-incremental API)
    assert admin("describe-configs", *b)[0]["configs"]["retention.ms"]["value"] == "7000000"

    _, produced = kafkajs("produce", *b, "--count", 30, "--partition", 1)
    assert [r["offset"] for r in produced] == list(range(30))
    assert admin("offsets", *b) == [{"partition": 0, "start": 0, "end": 0}, {"partition": 1, "start": 0, "end": 30},
                                     {"partition": 2, "start": 0, "end": 0}]
    admin("delete-records", *b, "--partition", 1, "--offset", 12)
    assert admin("offsets", *b)[1] == {"partition": 1, "start": 12, "end": 30}

    admin("delete", *b)
    assert topic not in admin("list", "--bootstrap", node.bootstrap)[0]["topics"]


# --- deletion and re-creation across a crash --------------------------------------------------------------------

def test_a_deleted_topic_recreated_under_its_name_keeps_its_data_across_kill_9(tmp_path):
    """Deleting a topic renames its partition dirs on the shards; the log manager's deleter thread then syncs the
    log dir, rewrites the checkpoints without the partitions and deletes the files. Once it has, no "-delete"
    dir and no checkpoint entry of the topic is left. A topic created again under the same name starts empty,
    takes records, and keeps exactly them through kill -9 and a restart (the removed logs' recovery points are
    not applied to the new ones)."""
    from cluster import own_cluster
    from txn_harness import create_topics

    with own_cluster(tmp_path, size=1) as c:
        c.start_all()
        n = c.node(1)
        create_topics(n.bootstrap, "reborn", partitions=40, replication_factor=1)
        rdkafka_produce(n.bootstrap, "reborn", [(f"k{i}", f"old-{i}") for i in range(400)], acks="all")
        out = tool_batch((TOPICS_TOOL, "--bootstrap-server", n.bootstrap, "--delete", "--topic", "reborn"))[0]
        assert out["exit"] == 0, out

        def settled():
            names = [p.name for p in n.log_dir.iterdir()]
            if any(name.startswith("reborn-") for name in names):
                return False
            checkpoint = n.log_dir / "recovery-point-offset-checkpoint"
            return checkpoint.exists() and not any(line.startswith("reborn ")
                                                  for line in checkpoint.read_text().splitlines())
        c.wait_until(settled, 30, what="the deleted topic's dirs and checkpoint entries gone")

        create_topics(n.bootstrap, "reborn", partitions=40, replication_factor=1)
        fresh = [(f"k{i}", f"new-{i}") for i in range(200)]
        rdkafka_produce(n.bootstrap, "reborn", fresh, acks="all")
        c.kill(1)
        c.start(1)
        got = rdkafka_consume(n.bootstrap, "reborn", {p: 0 for p in range(40)}, timeout=60)
        assert sorted(v for _, _, _, v in got) == sorted(v for _, v in fresh)
