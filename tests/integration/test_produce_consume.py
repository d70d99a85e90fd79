"""A single Mala node is a drop-in Kafka for real producers and consumers (issue 4, "Proof with real clients").

Every client writes records and reads them back without a consumer group (assign + seek, or the client's
equivalent): librdkafka through confluent-kafka (each compression codec) and kcat, kafka-python, franz-go,
sarama, KafkaJS, Apache Kafka's Java producer (its defaults: acks=all, idempotence, murmur2) and consumer, and the
console producer / consumer, get-offsets and delete-records tools. The records read back must be exactly the ones
acknowledged: same partitions, offsets, keys and values. One node serves the whole module; every test uses its own
topics.
"""

import json
import subprocess
from collections import defaultdict

import pytest

from clients import kcat_metadata, run
from real_clients import (CONSOLE_CONSUMER, CONSOLE_PRODUCER, DELETE_RECORDS_TOOL, DUMP_LOG_TOOL, GET_OFFSETS_TOOL,
                          create_topic, go_client, java_json, java_partition, java_with_input, kafkajs,
                          rdkafka_admin, rdkafka_consume, rdkafka_produce, shared_node, step_ok, tool_batch)
from real_clients import node_log_on_failure  # noqa: F401 (autouse: the shared node's log after a failure)

CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]


@pytest.fixture(scope="module")
def node(request, tmp_path_factory):
    yield from shared_node(request, tmp_path_factory, "produce-consume")


def by_partition(records):
    """[(partition, offset, key, value)] -> {partition: [(offset, key, value)] sorted by offset}."""
    out = defaultdict(list)
    for p, o, k, v in records:
        out[p].append((o, k, v))
    return {p: sorted(rs) for p, rs in out.items()}


def assert_contiguous(parts, start=0):
    """Offsets of each partition run start, start+1, ... with no gap or duplicate."""
    for p, rs in parts.items():
        offsets = [o for o, _, _ in rs]
        assert offsets == list(range(start, start + len(offsets))), f"partition {p}: offsets {offsets[:20]}..."


def as_tuples(json_records):
    return [(r["partition"], r["offset"], r["key"], r["value"]) for r in json_records]


# --- librdkafka (confluent-kafka) ---------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def codec_topics(node):
    """One 3-partition topic per codec, 300 keyed records each, produced by librdkafka with that
    compression.type and a linger so records travel in multi-record compressed batches. (Idempotence is proven by
    the Java producer's defaults and the seed scenario; it is left out here so the codecs are proven on their own.)"""
    produced = {}
    for codec in CODECS:
        topic = f"rdkafka-{codec}"
        create_topic(node.bootstrap, topic, partitions=3)
        records = [(f"key-{i % 40}", f"{codec} value {i} " + "x" * (i % 50)) for i in range(300)]
        produced[codec] = rdkafka_produce(node.bootstrap, topic, records, **{
            "compression.type": codec, "linger.ms": 20, "acks": "all"})
    return produced


@pytest.mark.parametrize("codec", CODECS)
def test_confluent_kafka_roundtrip_with_compression(node, codec_topics, codec):
    produced = codec_topics[codec]
    parts = by_partition(produced)
    assert sorted(parts) == [0, 1, 2], "40 keys over 3 partitions must use every partition"
    assert_contiguous(parts)
    # The same key always lands in the same partition.
    key_parts = defaultdict(set)
    for p, _, k, _ in produced:
        key_parts[k].add(p)
    assert all(len(ps) == 1 for ps in key_parts.values())

    consumed = rdkafka_consume(node.bootstrap, f"rdkafka-{codec}", {0: 0, 1: 0, 2: 0})
    assert by_partition(consumed) == parts


def test_dump_log_reads_the_codecs_as_sent(node, codec_topics):
    """Compressed batches are stored as the producer sent them: Apache Kafka's kafka-dump-log.sh, run on the
    node's own segment files, finds every codec and every record."""
    steps = []
    for codec in CODECS:
        segments = sorted((node.log_dir / f"rdkafka-{codec}-0").glob("*.log"))
        assert segments, f"no segment files in {node.log_dir / f'rdkafka-{codec}-0'}"
        steps.append((DUMP_LOG_TOOL, "--files", ",".join(map(str, segments)), "--deep-iteration"))
    outs = tool_batch(*steps)
    for codec, out in zip(CODECS, outs):
        text = step_ok(out)
        # Each batch line: "baseOffset: B lastOffset: L count: N ... compresscodec: C ...". librdkafka sends a
        # batch uncompressed when compressing would not shrink it (a batch of one or two small records), so only
        # larger batches must be in the codec. It also sends LZ4 only to a broker whose ApiVersions lists
        # FindCoordinator (its "LZ4" feature depends on it, rdkafka_feature.c); otherwise every batch is
        # silently uncompressed, which this catches.
        batches = [(int(line.split("count: ")[1].split()[0]), line.split("compresscodec: ")[1].split()[0])
                   for line in text.splitlines() if "compresscodec: " in line and "count: " in line]
        assert batches, f"{codec}: no batches in the dump\n{text[:2000]}"
        large = {c for n, c in batches if n > 2}
        assert large == {codec}, f"{codec}: dump-log saw codecs {large} in batches of 3+ records\n{text[:2000]}"
        assert {c for n, c in batches} <= {codec, "none"}, f"{codec}: dump-log saw {batches}"
        want = sum(1 for p, _, _, _ in codec_topics[codec] if p == 0)
        records = [line for line in text.splitlines() if line.startswith("| offset: ")]
        assert len(records) == want, f"{codec}: {len(records)} records in the dump, {want} produced"
        assert "isvalid: false" not in text


# --- kcat -----------------------------------------------------------------------------------------------------------

def test_kcat_produce_consume_and_list(node):
    topic = "kcat-topic"
    create_topic(node.bootstrap, topic, partitions=2)
    lines = "".join(f"k{i}:v{i}\n" for i in range(50))
    produce = ["kcat", "-P", "-b", node.bootstrap, "-t", topic, "-K:", "-X", "acks=all", "-X",
               "message.timeout.ms=20000"]
    result = subprocess.run(produce, input=lines, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr

    md = kcat_metadata(node.bootstrap, topic)
    (t,) = [t for t in md["topics"] if t["topic"] == topic]
    assert sorted(p["partition"] for p in t["partitions"]) == [0, 1]
    assert all(p["leader"] == 1 for p in t["partitions"])

    consumed = run(["kcat", "-C", "-b", node.bootstrap, "-t", topic, "-o", "beginning", "-e", "-J", "-m", "20"],
                   timeout=60)
    msgs = [json.loads(line) for line in consumed.stdout.splitlines() if line.startswith("{")]
    assert sorted((m["key"], m["payload"]) for m in msgs) == sorted((f"k{i}", f"v{i}") for i in range(50))
    per_part = defaultdict(list)
    for m in msgs:
        per_part[m["partition"]].append(m["offset"])
    for p, offsets in per_part.items():
        assert offsets == list(range(len(offsets))), f"partition {p}: {offsets}"
    # kcat's partitioner (librdkafka's consistent_random) is deterministic per key: same key, same partition.
    again = subprocess.run(produce, input="k7:again\n", capture_output=True, text=True, timeout=60)
    assert again.returncode == 0, again.stderr
    tail = run(["kcat", "-C", "-b", node.bootstrap, "-t", topic, "-o", "beginning", "-e", "-J", "-m", "20"],
               timeout=60)
    k7 = [json.loads(line) for line in tail.stdout.splitlines() if '"key":"k7"' in line]
    assert len(k7) == 2 and k7[0]["partition"] == k7[1]["partition"]


# --- kafka-python ---------------------------------------------------------------------------------------------------

def test_kafka_python_produce_consume(node):
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition

    topic = "kafka-python-topic"
    create_topic(node.bootstrap, topic, partitions=2)
    producer = KafkaProducer(bootstrap_servers=node.bootstrap, acks="all", request_timeout_ms=15000,
                             max_block_ms=20000, compression_type="gzip", linger_ms=10)
    try:
        futures = [producer.send(topic, key=f"k{i % 10}".encode(), value=f"v{i}".encode()) for i in range(100)]
        producer.flush(timeout=30)
        produced = [(md.partition, md.offset, f"k{i % 10}", f"v{i}")
                    for i, md in enumerate(f.get(timeout=30) for f in futures)]
    finally:
        producer.close(timeout=10)
    parts = by_partition(produced)
    assert_contiguous(parts)

    consumer = KafkaConsumer(bootstrap_servers=node.bootstrap, enable_auto_commit=False, group_id=None,
                             request_timeout_ms=15000, fetch_max_wait_ms=200, consumer_timeout_ms=20000)
    try:
        tps = [TopicPartition(topic, p) for p in (0, 1)]
        consumer.assign(tps)
        for tp in tps:
            consumer.seek(tp, 0)
        got = []
        for msg in consumer:
            got.append((msg.partition, msg.offset, msg.key.decode(), msg.value.decode()))
            if len(got) == len(produced):
                break
    finally:
        consumer.close()
    assert by_partition(got) == parts


# --- Go: franz-go and sarama ----------------------------------------------------------------------------------------

@pytest.mark.parametrize("lib,codec", [("franz", "zstd"), ("franz", "none"), ("sarama", "snappy"),
                                       ("sarama", "lz4")])
def test_go_client_produce_consume(node, lib, codec):
    topic = f"go-{lib}-{codec}"
    _, created = go_client(lib, "admin", "create", "--bootstrap", node.bootstrap, "--topic", topic,
                           "--partitions", 3)
    assert created == [{"topic": topic, "error": None, "error_code": 0}]
    _, produced = go_client(lib, "produce", "--bootstrap", node.bootstrap, "--topic", topic, "--count", 300,
                            "--key-prefix", "key-", "--compression", codec)
    assert len(produced) == 300
    parts = by_partition(as_tuples(produced))
    assert_contiguous(parts)
    for p, rs in parts.items():
        _, consumed = go_client(lib, "consume", "--bootstrap", node.bootstrap, "--topic", topic, "--partition", p,
                                "--offset", 0, "--count", len(rs))
        assert [(r["offset"], r["key"], r["value"]) for r in consumed] == rs
    # Seek to the middle of a partition (inside a batch): the client gets the batch whole and skips to the offset.
    p, rs = max(parts.items(), key=lambda kv: len(kv[1]))
    mid = len(rs) // 2
    _, tail = go_client(lib, "consume", "--bootstrap", node.bootstrap, "--topic", topic, "--partition", p,
                        "--offset", mid, "--count", len(rs) - mid)
    assert [(r["offset"], r["key"], r["value"]) for r in tail] == rs[mid:]


def test_franz_go_places_keys_like_java(node):
    """franz-go's default partitioner hashes keys with murmur2 as the Java client does."""
    topic = "franz-keys"
    create_topic(node.bootstrap, topic, partitions=5)
    _, produced = go_client("franz", "produce", "--bootstrap", node.bootstrap, "--topic", topic, "--count", 200,
                            "--key-prefix", "order-")
    for r in produced:
        assert r["partition"] == java_partition(r["key"], 5), r


# --- KafkaJS --------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("idempotent", [False, True], ids=["plain", "idempotent"])
def test_kafkajs_produce_consume(node, idempotent):
    topic = f"kafkajs-{'idem' if idempotent else 'plain'}"
    _, created = kafkajs("admin", "create", "--bootstrap", node.bootstrap, "--topic", topic, "--partitions", 3)
    assert created[0]["created"] is True, created
    extra = ["--idempotent"] if idempotent else ["--compression", "gzip"]
    _, produced = kafkajs("produce", "--bootstrap", node.bootstrap, "--topic", topic, "--count", 150,
                          "--key-prefix", "user-", *extra)
    assert len(produced) == 150
    for r in produced:  # KafkaJS 2.x's default partitioner is the Java-compatible murmur2 one
        assert r["partition"] == java_partition(r["key"], 3), r
    parts = by_partition(as_tuples(produced))
    assert_contiguous(parts)
    for p, rs in parts.items():
        _, consumed = kafkajs("consume", "--bootstrap", node.bootstrap, "--topic", topic, "--partition", p,
                              "--offset", 0, "--count", len(rs))
        assert [(r["offset"], r["key"], r["value"]) for r in consumed] == rs


# --- Apache Kafka's Java clients and tools --------------------------------------------------------------------------

def test_java_producer_defaults_and_consumer_assign_seek(node):
    """kafka-clients' producer at its defaults (acks=all, enable.idempotence=true: InitProducerId and sequence
    numbers; murmur2 partitioner) and its consumer with assign() + seek()."""
    topic = "java-topic"
    create_topic(node.bootstrap, topic, partitions=4)
    _, produced = java_json("mala.it.Produce", "--bootstrap", node.bootstrap, "--topic", topic, "--count", 400,
                            "--key-prefix", "k", "--key-count", 60)
    assert len(produced) == 400
    for r in produced:
        assert r["partition"] == java_partition(r["key"], 4), r
    parts = by_partition(as_tuples(produced))
    assert_contiguous(parts)

    _, consumed = java_json("mala.it.Consume", "--bootstrap", node.bootstrap, "--topic", topic, "--offset", 0)
    assert by_partition(as_tuples(consumed)) == parts
    # librdkafka reads the Java producer's idempotent batches the same way.
    assert by_partition(rdkafka_consume(node.bootstrap, topic, {p: 0 for p in range(4)})) == parts


def test_console_producer_and_consumer(node):
    topic = "console-topic"
    create_topic(node.bootstrap, topic, partitions=1)
    lines = "".join(f"key{i}:line {i}\n" for i in range(30))
    result = java_with_input(CONSOLE_PRODUCER, "--bootstrap-server", node.bootstrap, "--topic", topic,
                             "--reader-property", "parse.key=true", "--reader-property", "key.separator=:",
                             "--producer-property", "acks=all", input_text=lines)
    assert result.returncode == 0, result.stderr
    # Without --group and with --partition the console consumer uses assign() and seek(): no consumer group.
    result = java_with_input(CONSOLE_CONSUMER, "--bootstrap-server", node.bootstrap, "--topic", topic,
                             "--partition", "0", "--offset", "earliest", "--max-messages", "30",
                             "--timeout-ms", "20000", "--formatter-property", "print.key=true",
                             "--formatter-property", "print.offset=true", "--formatter-property",
                             "key.separator=|", input_text="")
    assert result.returncode == 0, result.stderr
    got = [line for line in result.stdout.splitlines() if line.startswith("Offset:")]
    assert got == [f"Offset:{i}|key{i}|line {i}" for i in range(30)], result.stdout


def test_get_offsets_and_delete_records(node, tmp_path):
    """kafka-get-offsets.sh before and after kafka-delete-records.sh; a consumer starting at offset 0 afterwards
    is moved to the new log start offset, and the records before it are gone for every reader."""
    topic = "delete-records-topic"
    create_topic(node.bootstrap, topic, partitions=2)
    produced = rdkafka_produce(node.bootstrap, topic, [(f"k{i}", f"v{i}") for i in range(100)])
    counts = {p: sum(1 for q, _, _, _ in produced if q == p) for p in (0, 1)}
    assert min(counts.values()) > 15, counts
    spec = tmp_path / "delete.json"
    spec.write_text(json.dumps({"version": 1, "partitions": [{"topic": topic, "partition": 0, "offset": 10}]}))
    before, deleted, after_start, after_end = tool_batch(
        (GET_OFFSETS_TOOL, "--bootstrap-server", node.bootstrap, "--topic", topic, "--time", "-1"),
        (DELETE_RECORDS_TOOL, "--bootstrap-server", node.bootstrap, "--offset-json-file", spec),
        (GET_OFFSETS_TOOL, "--bootstrap-server", node.bootstrap, "--topic", topic, "--time", "-2"),
        (GET_OFFSETS_TOOL, "--bootstrap-server", node.bootstrap, "--topic", topic, "--time", "latest"),
    )
    assert sorted(step_ok(before).split()) == [f"{topic}:{p}:{counts[p]}" for p in (0, 1)]
    text = step_ok(deleted)
    assert "low_watermark: 10" in text, text
    assert sorted(step_ok(after_start).split()) == [f"{topic}:0:10", f"{topic}:1:0"]
    assert sorted(step_ok(after_end).split()) == [f"{topic}:{p}:{counts[p]}" for p in (0, 1)]

    # A consumer asking for offset 0 gets OFFSET_OUT_OF_RANGE and resets to the earliest offset: 10.
    consumed = rdkafka_consume(node.bootstrap, topic, {0: 0})
    assert [o for _, o, _, _ in consumed] == list(range(10, counts[0]))
    # So does the Java consumer seeking to the beginning.
    _, java_consumed = java_json("mala.it.Consume", "--bootstrap", node.bootstrap, "--topic", topic,
                                 "--partitions", "0", "--offset", -2)
    assert [r["offset"] for r in java_consumed] == list(range(10, counts[0]))


# --- Auto topic creation --------------------------------------------------------------------------------------------

def test_producing_to_an_unknown_topic_creates_it(node):
    """auto.create.topics.enable defaults to true: a producer's metadata request creates the topic with
    num.partitions (default 1) and the records are accepted."""
    topic = "auto-created-by-rdkafka"
    produced = rdkafka_produce(node.bootstrap, topic, [(f"k{i}", f"v{i}") for i in range(20)])
    assert [(p, o) for p, o, _, _ in produced] == [(0, i) for i in range(20)]
    md = rdkafka_admin(node.bootstrap).list_topics(topic, timeout=10)
    assert len(md.topics[topic].partitions) == 1
    assert [o for _, o, _, _ in rdkafka_consume(node.bootstrap, topic, {0: 0})] == list(range(20))

    # franz-go and sarama ask for creation only when told to (AllowAutoTopicCreation); KafkaJS's producer by default.
    for name, (result, produced) in {
        "franz": go_client("franz", "produce", "--bootstrap", node.bootstrap, "--topic", "auto-created-by-franz",
                           "--count", 5, "--auto-create"),
        "sarama": go_client("sarama", "produce", "--bootstrap", node.bootstrap, "--topic", "auto-created-by-sarama",
                            "--count", 5, "--auto-create"),
        "kafkajs": kafkajs("produce", "--bootstrap", node.bootstrap, "--topic", "auto-created-by-kafkajs",
                           "--count", 5, "--auto-create"),
    }.items():
        assert [(r["partition"], r["offset"]) for r in produced] == [(0, i) for i in range(5)], name
    # Without the flag, franz-go's metadata request does not create the topic: the produce fails with
    # UNKNOWN_TOPIC_OR_PARTITION once the client stops retrying, and no topic appears.
    result, produced = go_client("franz", "produce", "--bootstrap", node.bootstrap, "--topic", "not-auto-created",
                                 "--count", 1, check=False, timeout=40)
    assert result.returncode == 1 and "UNKNOWN_TOPIC_OR_PARTITION" in result.stderr, result.stderr
    assert "not-auto-created" not in rdkafka_admin(node.bootstrap).list_topics(timeout=10).topics
