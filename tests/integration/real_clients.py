"""Helpers for the drop-in-Kafka tests (issue 4): one node shared by a test module, the Go client (franz-go and
sarama), the KafkaJS client, Apache Kafka's Java programs and tool classes (several tools in one JVM), and
librdkafka/kafka-python conveniences. Everything runs with a timeout; nothing sleeps to wait for a result.

Programs installed by scripts/install-test-clients.sh:
  tests/integration/.deps/bin/mala-go-client        (tests/integration/go)
  tests/integration/node/kafkajs-client.js          (KafkaJS in tests/integration/node/node_modules)
  tests/integration/.deps/classes/mala/it/*.class   (tests/integration/java)
"""

import json
import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from clients import IT_DIR, java, java_classpath, run
from conftest import MalaNode

GO_CLIENT = IT_DIR / ".deps" / "bin" / "mala-go-client"
KAFKAJS_CLIENT = IT_DIR / "node" / "kafkajs-client.js"

# The main classes Apache Kafka 4.4's bin/*.sh scripts run (checked against the kafka-tools 4.4.0 jar: in 4.x
# kafka-configs.sh runs org.apache.kafka.tools.ConfigCommand, no longer kafka.admin.ConfigCommand).
TOPICS_TOOL = "org.apache.kafka.tools.TopicCommand"  # kafka-topics.sh
CONFIGS_TOOL = "org.apache.kafka.tools.ConfigCommand"  # kafka-configs.sh
CONSOLE_PRODUCER = "org.apache.kafka.tools.ConsoleProducer"  # kafka-console-producer.sh
CONSOLE_CONSUMER = "org.apache.kafka.tools.consumer.ConsoleConsumer"  # kafka-console-consumer.sh
GET_OFFSETS_TOOL = "org.apache.kafka.tools.GetOffsetShell"  # kafka-get-offsets.sh
DELETE_RECORDS_TOOL = "org.apache.kafka.tools.DeleteRecordsCommand"  # kafka-delete-records.sh
LOG_DIRS_TOOL = "org.apache.kafka.tools.LogDirsCommand"  # kafka-log-dirs.sh
DUMP_LOG_TOOL = "org.apache.kafka.tools.DumpLogSegments"  # kafka-dump-log.sh


class ReferenceBroker:
    """An already running broker named by $MALA_IT_REFERENCE_BOOTSTRAP (and its data dir by
    $MALA_IT_REFERENCE_LOG_DIR), e.g. Apache Kafka in KRaft combined mode with node.id=1: running the tests
    against it checks the tests themselves. Tests create uniquely named topics, so use a fresh broker each run."""

    def __init__(self, bootstrap, log_dir):
        self.bootstrap = bootstrap
        self.port = int(bootstrap.rsplit(":", 1)[1])
        self.log_dir = Path(log_dir) if log_dir else None


def shared_node(request, tmp_path_factory, name, **kwargs):
    """Generator body for a module-scoped node fixture: starts one node, yields it, and at teardown requires a clean
    SIGTERM exit (code 0 within the conftest limit), as the per-test `node` fixture does. The node's log is printed
    when it did not stop cleanly or died during the module."""
    if os.environ.get("MALA_IT_REFERENCE_BOOTSTRAP"):
        yield ReferenceBroker(os.environ["MALA_IT_REFERENCE_BOOTSTRAP"], os.environ.get("MALA_IT_REFERENCE_LOG_DIR"))
        return
    node = MalaNode(tmp_path_factory.mktemp(name), name=name, **kwargs)
    node.start()
    yield node
    was_running = node.alive()
    code = node.stop()
    node.close_log()
    if not was_running:
        print(node.log_text())
        pytest.fail(f"{name}: died during the module with exit code {code}\n{node.log_text(50)}")
    if code != 0:
        print(node.log_text())
        pytest.fail(f"{name}: exit code {code} after SIGTERM (expected 0)\n{node.log_text(50)}")


@pytest.fixture(autouse=True)
def node_log_on_failure(request):
    """Import into a test module that shares one node: a test fails at once when the node already died, and after a
    failing test the node's log tail is printed (pytest shows it as the test's "Captured stdout teardown")."""
    node = request.node.funcargs.get("node")
    if hasattr(node, "alive") and not node.alive():
        # Fail at once instead of letting every client run into its timeout against a dead node.
        pytest.fail(f"the module's shared node is not running (exit code {node.proc.returncode})\n"
                    f"{node.log_text(40)}")
    yield
    report = getattr(request.node, "rep_call", None)
    if report is not None and report.failed and hasattr(node, "log_text"):
        print(node.log_text(120))


def json_lines(text: str):
    out = []
    for line in text.splitlines():
        line = line.strip()
        if line.startswith("{") or line.startswith("["):
            out.append(json.loads(line))
    return out


# --- Go (franz-go, sarama) --------------------------------------------------------------------------------------

def go_client(lib: str, *args, timeout=60, check=True):
    """Runs `mala-go-client <lib> <args>`; returns (CompletedProcess, parsed JSON lines)."""
    if not GO_CLIENT.exists():
        pytest.fail(f"{GO_CLIENT} missing (run scripts/install-test-clients.sh)")
    inner = max(5, timeout - 10)
    result = run([str(GO_CLIENT), lib, *map(str, args), "--timeout", f"{inner}s"], timeout=timeout, check=check)
    return result, json_lines(result.stdout)


# --- KafkaJS ----------------------------------------------------------------------------------------------------

def kafkajs(*args, timeout=60, check=True):
    """Runs `node kafkajs-client.js <args>`; returns (CompletedProcess, parsed JSON lines)."""
    if shutil.which("node") is None or not (IT_DIR / "node" / "node_modules" / "kafkajs").is_dir():
        pytest.fail("node or KafkaJS missing (run scripts/install-test-clients.sh)")
    inner = max(5, timeout - 10) * 1000
    result = run(["node", str(KAFKAJS_CLIENT), *map(str, args), "--timeout", str(inner)], timeout=timeout,
                 check=check)
    return result, json_lines(result.stdout)


# --- Java -------------------------------------------------------------------------------------------------------

def java_json(main_class: str, *args, timeout=90, check=True):
    """Runs one of our Java programs and parses its JSON lines."""
    result = java(main_class, *args, timeout=timeout, check=check)
    return result, json_lines(result.stdout)


def java_with_input(main_class: str, *args, input_text: str, timeout=90):
    """Runs a Java main class with `input_text` on its stdin (console producer)."""
    cmd = ["java", "-Xmx256m", "-XX:TieredStopAtLevel=1", "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn",
           "-Dorg.slf4j.simpleLogger.logFile=System.err", "-cp", java_classpath(), main_class, *map(str, args)]
    try:
        result = subprocess.run(cmd, input=input_text, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired as e:
        pytest.fail(f"timed out after {timeout} s: {' '.join(cmd)}\nstdout: {e.stdout}\nstderr: {e.stderr}")
    return result


def tool_batch(*steps, timeout=150):
    """Runs several Apache Kafka tools (each a tuple: main class, args...) in one JVM (mala.it.ToolBatch).

    Returns one dict per step: {"class", "exit", "stdout", "stderr"}. Steps run in order; a failing step does not
    stop the next ones, so every assertion sees every output."""
    args = []
    for i, step in enumerate(steps):
        if i:
            args.append("::")
        args.extend(str(a) for a in step)
    result = java("mala.it.ToolBatch", *args, timeout=timeout, check=False)
    outs = json_lines(result.stdout)
    if len(outs) != len(steps):
        pytest.fail(f"ToolBatch ran {len(outs)} of {len(steps)} steps (exit {result.returncode})\n"
                    f"stdout: {result.stdout}\nstderr: {result.stderr}")
    return outs


def step_ok(out) -> str:
    """A ToolBatch step's stdout, failing the test with its output when the tool's exit code was not 0."""
    if out["exit"] != 0:
        pytest.fail(f"{out['class']} exited with {out['exit']}\nstdout: {out['stdout']}\nstderr: {out['stderr']}")
    return out["stdout"]


# --- librdkafka (confluent-kafka) -------------------------------------------------------------------------------

def rdkafka_produce(bootstrap, topic, records, timeout=60, **conf):
    """Produces [(key, value)] with confluent-kafka; returns [(partition, offset, key, value)] in send order.
    Fails the test on any delivery error."""
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "socket.timeout.ms": 10000,
                         "message.timeout.ms": int(timeout * 1000 * 0.8), **conf})
    results = [None] * len(records)
    errors = []

    def report(i):
        def cb(err, msg):
            if err is not None:
                errors.append((i, err))
            else:
                results[i] = (msg.partition(), msg.offset(),
                              None if msg.key() is None else msg.key().decode(), msg.value().decode())
        return cb

    for i, (key, value) in enumerate(records):
        while True:
            try:
                producer.produce(topic, key=key, value=value, on_delivery=report(i))
                break
            except BufferError:
                producer.poll(0.1)
        producer.poll(0)
    remaining = producer.flush(timeout)
    assert remaining == 0, f"{remaining} records not delivered within {timeout} s (errors: {errors[:5]})"
    assert not errors, f"delivery errors: {errors[:5]}"
    return results


def rdkafka_consume(bootstrap, topic, partition_offsets, count=None, timeout=30, ends=None, **conf):
    """Reads with a confluent-kafka consumer using assign() (no group): partition_offsets = {partition: start}.
    Stops after `count` records, or (count None) once every partition reached `ends` ({partition: offset}),
    by default the high watermark it had at the start. Returns [(partition, offset, key, value)] in arrival
    order. Fails on consumer errors or the deadline."""
    from confluent_kafka import Consumer, KafkaError, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "mala-it-unused", "enable.auto.commit": False,
                         "socket.timeout.ms": 10000, "fetch.wait.max.ms": 200, "enable.partition.eof": True,
                         "auto.offset.reset": "earliest",
                         **conf})
    try:
        ends = dict(ends or {})
        if count is None and not ends:
            for p in partition_offsets:
                low, high = consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)
                ends[p] = high
        consumer.assign([TopicPartition(topic, p, o) for p, o in partition_offsets.items()])
        out = []
        positions = dict(partition_offsets)  # next offset per partition (a start < 0 is a logical offset)
        deadline = time.monotonic() + timeout
        while True:
            if count is not None and len(out) >= count:
                break
            if count is None and all(positions[p] >= ends[p] for p in ends):
                break
            if time.monotonic() > deadline:
                pytest.fail(f"consumed {len(out)} records of {topic} before the {timeout} s deadline "
                            f"(positions {positions}, ends {ends})")
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            if msg.error():
                if msg.error().code() == KafkaError._PARTITION_EOF:
                    positions[msg.partition()] = max(positions[msg.partition()], msg.offset())
                    continue
                pytest.fail(f"consumer error on {topic}: {msg.error()}")
            positions[msg.partition()] = msg.offset() + 1
            out.append((msg.partition(), msg.offset(), None if msg.key() is None else msg.key().decode(),
                        None if msg.value() is None else msg.value().decode()))
        return out
    finally:
        consumer.close()


def wait_until(predicate, timeout, what, interval=0.2):
    """Polls predicate() until it returns something true (returned) or fails the test after timeout seconds."""
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        last = predicate()
        if last:
            return last
        time.sleep(interval)
    pytest.fail(f"timed out after {timeout} s waiting for {what} (last: {last!r})")


def rdkafka_read_to_end(bootstrap, topic, partition=0, timeout=60, isolation="read_committed"):
    """Every record of one partition from offset 0 (or the log start offset) to its end, read with confluent-kafka (assign, no group
    commits; librdkafka's default isolation.level is read_committed): [(offset, key bytes or None, value bytes or
    None)]. Fails the test on a consume error or timeout."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "read-to-end", "enable.auto.commit": False,
                         "enable.partition.eof": True, "socket.timeout.ms": 10000, "isolation.level": isolation,
                         "auto.offset.reset": "earliest"})  # offset 0 below the log start: from the log start
    consumer.assign([TopicPartition(topic, partition, 0)])
    out = []
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            msg = consumer.poll(1.0)
            if msg is None:
                continue
            if msg.error():
                if msg.error().code() == -191:  # _PARTITION_EOF
                    return out
                pytest.fail(f"consume error: {msg.error()}")
            out.append((msg.offset(), msg.key(), msg.value()))
    finally:
        consumer.close()
    pytest.fail(f"{topic}-{partition}: did not reach the end within {timeout} s")


def rdkafka_admin(bootstrap):
    from confluent_kafka.admin import AdminClient

    return AdminClient({"bootstrap.servers": bootstrap, "socket.timeout.ms": 10000})


def create_topic(bootstrap, name, partitions=1, config=None, timeout=30):
    """Creates a topic with librdkafka's AdminClient (CreateTopics) and waits for the answer."""
    from confluent_kafka.admin import NewTopic

    admin = rdkafka_admin(bootstrap)  # kept referenced until the answer: destroying it fails the future
    futures = admin.create_topics(
        [NewTopic(name, num_partitions=partitions, replication_factor=1, config=config or {})],
        request_timeout=timeout, operation_timeout=timeout)
    futures[name].result(timeout=timeout)
    del admin


def murmur2(data: bytes) -> int:
    """Kafka's murmur2 (org.apache.kafka.common.utils.Utils.murmur2), as a signed 32-bit int."""
    m, r, length = 0x5BD1E995, 24, len(data)
    h = (0x9747B28C ^ length) & 0xFFFFFFFF
    for i in range(0, length - length % 4, 4):
        k = int.from_bytes(data[i:i + 4], "little")
        k = (k * m) & 0xFFFFFFFF
        k ^= k >> r
        k = (k * m) & 0xFFFFFFFF
        h = (h * m) & 0xFFFFFFFF
        h ^= k
    tail = length % 4
    base = length - tail
    if tail == 3:
        h ^= data[base + 2] << 16
    if tail >= 2:
        h ^= data[base + 1] << 8
    if tail >= 1:
        h ^= data[base]
        h = (h * m) & 0xFFFFFFFF
    h ^= h >> 13
    h = (h * m) & 0xFFFFFFFF
    h ^= h >> 15
    return h - (1 << 32) if h & 0x80000000 else h


def java_partition(key: str, partitions: int) -> int:
    """The partition the Java producer's default partitioner picks for a key: toPositive(murmur2(key)) % n."""
    return (murmur2(key.encode()) & 0x7FFFFFFF) % partitions
