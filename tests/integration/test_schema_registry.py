"""A real schema registry against a 3-node Mala cluster (issue: "a schema registry that stores its schemas in a
compacted topic: register, restart, read back"). Apicurio Registry 3.0.9 (its runnable Quarkus bundle from Maven
Central, scripts/install-test-clients.sh) with KafkaSQL storage keeps everything it is told in one journal topic,
kafkasql-journal, and rebuilds its state from that topic at every start. It creates the topic itself with the
topic configs it is given (apicurio.kafkasql.topic.*): here cleanup.policy=compact, a short segment.ms and a short
delete.retention.ms, so the nodes' cleaners compact the journal while the test runs.

Avro schemas are registered for several subjects over the registry's Confluent-compatible API (ccompat v7), one
subject gets a second version and a compatibility level, another is deleted (soft, then permanently). The journal's
keys are unique per message (a random id each), so compaction keeps every record but the tombstones: each
registry process starts by writing one (its "bootstrap" marker: a key, a null value) and waits until it reads it
back. The test waits until every node's
cleaner has cleaned its replica of the journal past the deletions and removed the first registry's tombstone (past
delete.retention.ms), stops the registry, kills the journal's leader (kill -9), checks that the new leader serves
every record but that tombstone, and starts a new registry process: it must serve every schema by id and by
subject/version exactly as before, not serve the deleted subject, and give a new schema an id of its own.
"""

import json
import os
import re
import signal
import subprocess
import time
import urllib.error
import urllib.request

import pytest

from clients import IT_DIR
from cluster import compacting_cluster  # noqa: F401  (a fixture)
from conftest import free_port
from real_clients import rdkafka_admin, rdkafka_read_to_end, wait_until

APICURIO_VERSION = "3.0.9"
APICURIO_DIR = IT_DIR / ".deps" / "apicurio-registry"
APICURIO_JAR = APICURIO_DIR / f"apicurio-registry-app-{APICURIO_VERSION}-runner.jar"
JOURNAL = "kafkasql-journal"
CCOMPAT = "/apis/ccompat/v7"
START_TIMEOUT = 240  # a Quarkus JVM on two busy cores, then the journal replay
TIMEOUT = 90
SEGMENT_MS = 500

# The topic configs the registry gives the topics it creates (its apicurio.kafkasql.topic.* properties).
TOPIC_CONFIG = {"cleanup.policy": "compact", "segment.ms": str(SEGMENT_MS), "min.cleanable.dirty.ratio": "0.01",
                "delete.retention.ms": "100"}


def record(name, fields):
    return {"type": "record", "name": name, "namespace": "dev.mala.it", "fields": fields}


ORDER_V1 = record("Order", [{"name": "id", "type": "long"}, {"name": "amount", "type": "double"}])
ORDER_V2 = record("Order", ORDER_V1["fields"] + [{"name": "currency", "type": "string", "default": "EUR"}])
CUSTOMER = record("Customer", [{"name": "name", "type": "string"},
                               {"name": "email", "type": ["null", "string"], "default": None}])
PAYMENT_KEY = {"type": "string"}
SHIPMENT_STATUS = {"type": "enum", "name": "ShipmentStatus", "namespace": "dev.mala.it",
                   "symbols": ["NEW", "SENT", "DELIVERED"]}
SCRATCH = record("Scratch", [{"name": "x", "type": "int"}])
LATE = record("Late", [{"name": "when", "type": "long"}])

# subject -> its versions, in order
KEPT = {
    "orders-value": [ORDER_V1, ORDER_V2],
    "customers-value": [CUSTOMER],
    "payments-key": [PAYMENT_KEY],
    "shipments-value": [SHIPMENT_STATUS],
}
DELETED_SUBJECT = "scratch-value"


class SchemaRegistry:
    """One Apicurio Registry process (KafkaSQL storage) on a free HTTP port; its output in the work dir."""

    def __init__(self, work_dir, bootstrap, name):
        if not APICURIO_JAR.is_file():
            pytest.fail(f"Apicurio Registry missing: {APICURIO_JAR} (run scripts/install-test-clients.sh)")
        self.work_dir = work_dir
        self.bootstrap = bootstrap
        self.port = free_port()
        self.log_path = work_dir / f"{name}.log"
        self.proc = None
        self._log = None

    @property
    def url(self):
        return f"http://127.0.0.1:{self.port}"

    def start(self):
        props = {
            "quarkus.http.host": "127.0.0.1",
            "quarkus.http.port": self.port,
            "apicurio.storage.kind": "kafkasql",
            "apicurio.kafkasql.bootstrap.servers": self.bootstrap,
            "apicurio.storage.snapshot.location": self.work_dir,
            "apicurio.import.work-dir": self.work_dir,
        }
        props.update({f"apicurio.kafkasql.topic.{k}": v for k, v in TOPIC_CONFIG.items()})
        self._log = open(self.log_path, "ab")
        self.proc = subprocess.Popen(
            ["java", "-Xmx384m", "-XX:TieredStopAtLevel=1", *[f"-D{k}={v}" for k, v in props.items()],
             "-jar", str(APICURIO_JAR)],
            cwd=self.work_dir, stdin=subprocess.DEVNULL, stdout=self._log, stderr=subprocess.STDOUT,
            start_new_session=True)
        wait_until(lambda: self._alive_or_fail() and self.get("/health/ready", ok=(200,)) is not None
                   and self.get(f"{CCOMPAT}/subjects") is not None, START_TIMEOUT, "the registry ready", interval=1)
        return self

    def _alive_or_fail(self):
        if self.proc.poll() is not None:
            pytest.fail(f"the registry exited with code {self.proc.returncode}:\n{self.log_tail()}")
        return True

    def call(self, method, path, body=None):
        """(HTTP status, decoded JSON answer); (None, error) when the registry does not answer."""
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(self.url + path, data=data, method=method,
                                         headers={"Content-Type": "application/vnd.schemaregistry.v1+json",
                                                  "Accept": "application/vnd.schemaregistry.v1+json"})
        try:
            with urllib.request.urlopen(request, timeout=30) as answer:
                text = answer.read()
                return answer.status, json.loads(text) if text else None
        except urllib.error.HTTPError as e:
            text = e.read()
            try:
                return e.code, json.loads(text)
            except ValueError:
                return e.code, text.decode(errors="replace")
        except (urllib.error.URLError, ConnectionError, TimeoutError) as e:
            return None, repr(e)

    def get(self, path, ok=(200,)):
        status, answer = self.call("GET", path)
        return answer if status in ok else None

    def must(self, method, path, body=None):
        status, answer = self.call(method, path, body)
        assert status == 200, f"{method} {path}: {status} {answer}\n{self.log_tail(30)}"
        return answer

    def stop(self):
        """SIGTERM; SIGKILL if the registry has not exited 60 s later (its exit is not what is tested)."""
        if self.proc is None or self.proc.poll() is not None:
            return
        os.killpg(self.proc.pid, signal.SIGTERM)
        try:
            self.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            print(f"the registry did not exit within 60 s of SIGTERM: killed\n{self.log_tail(30)}")
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=30)
        finally:
            self._log.close()

    def log_tail(self, lines=80):
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except FileNotFoundError:
            return ""

    # --- the ccompat API ----------------------------------------------------------------------------------------

    def register(self, subject, schema):
        return self.must("POST", f"{CCOMPAT}/subjects/{subject}/versions", {"schema": json.dumps(schema)})["id"]

    def state(self):
        """Everything the registry serves about its subjects: {subject: {version: answer}}, {id: answer} for every
        id the versions name, and the orders-value compatibility level."""
        subjects = {}
        ids = {}
        for subject in sorted(self.must("GET", f"{CCOMPAT}/subjects")):
            subjects[subject] = {}
            for version in self.must("GET", f"{CCOMPAT}/subjects/{subject}/versions"):
                answer = self.must("GET", f"{CCOMPAT}/subjects/{subject}/versions/{version}")
                subjects[subject][version] = answer
                ids[answer["id"]] = self.must("GET", f"{CCOMPAT}/schemas/ids/{answer['id']}")
        return {"subjects": subjects, "ids": ids, "config": self.must("GET", f"{CCOMPAT}/config/orders-value")}


def topic_configs(bootstrap, topic):
    from confluent_kafka.admin import ConfigResource

    resource = ConfigResource(ConfigResource.Type.TOPIC, topic)
    admin = rdkafka_admin(bootstrap)  # kept alive until the answer is in
    configs = admin.describe_configs([resource])[resource].result(timeout=30)
    return {name: entry.value for name, entry in configs.items()}


def journal_end_offset(bootstrap):
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "journal-offsets", "socket.timeout.ms": 10000})
    try:
        return consumer.get_watermark_offsets(TopicPartition(JOURNAL, 0), timeout=30)[1]
    finally:
        consumer.close()


def journal_rounds(node):
    """The node's cleaning rounds of kafkasql-journal-0 so far: [(last offset cleaned, records removed)]."""
    return [(int(end), int(removed)) for end, removed in re.findall(
        rf"{JOURNAL}-0: cleaned offsets \d+\.\.(-?\d+) in .* (\d+) records removed",
        node.log_path.read_text(errors="replace"))]


def cleaned_past(node, offset):
    """The node's cleaner has cleaned the journal up to `offset` or further, and removed a record from it."""
    rounds = journal_rounds(node)
    return max((end for end, _ in rounds), default=-1) >= offset and sum(removed for _, removed in rounds) >= 1


def cleaner_lines(cluster):
    return [f"node-{i}: {m}" for i, n in cluster.nodes.items()
            for m in re.findall(rf"{JOURNAL}-0: cleaned offsets .*", n.log_path.read_text(errors="replace"))]


def journal_leader(cluster, asked):
    md = cluster.rdkafka_metadata(asked, JOURNAL)
    partition = md.topics[JOURNAL].partitions[0]
    return partition.leader if partition.error is None else -1


@pytest.fixture
def registries(compacting_cluster, tmp_path):
    started = []

    def make(name):
        registry = SchemaRegistry(tmp_path, compacting_cluster.bootstrap, name)
        started.append(registry)
        return registry

    yield make
    for registry in started:
        try:
            registry.stop()
        finally:
            print(f"--- {registry.log_path.name} ---\n{registry.log_tail(150)}")


def test_schemas_survive_a_registry_restart_on_a_compacted_journal(compacting_cluster, registries):
    cluster = compacting_cluster
    bootstrap = cluster.bootstrap
    first = registries("registry-1").start()

    configs = topic_configs(bootstrap, JOURNAL)
    for name, value in TOPIC_CONFIG.items():
        assert configs[name] == value, (name, configs[name])

    # One write at a time, more than segment.ms apart: the journal rolls a segment between them, and every
    # segment but the active one is cleanable.
    ids = {}
    for subject, versions in KEPT.items():
        for version, schema in enumerate(versions, 1):
            ids[(subject, version)] = first.register(subject, schema)
            time.sleep(SEGMENT_MS * 1.2 / 1000)
    assert first.register("orders-value", ORDER_V1) == ids[("orders-value", 1)], "the same schema, the same id"
    scratch_id = first.register(DELETED_SUBJECT, SCRATCH)
    assert scratch_id not in ids.values()
    time.sleep(SEGMENT_MS * 1.2 / 1000)
    assert first.must("DELETE", f"{CCOMPAT}/subjects/{DELETED_SUBJECT}/versions/1") == 1
    assert first.must("DELETE", f"{CCOMPAT}/subjects/{DELETED_SUBJECT}/versions/1?permanent=true") == 1
    gone = {path: first.call("GET", path)[0] for path in
            (f"{CCOMPAT}/subjects/{DELETED_SUBJECT}/versions", f"{CCOMPAT}/schemas/ids/{scratch_id}")}
    assert gone[f"{CCOMPAT}/subjects/{DELETED_SUBJECT}/versions"] == 404, gone
    deletes_end = journal_end_offset(bootstrap)
    time.sleep(SEGMENT_MS * 1.2 / 1000)
    # The last write: the deletions are in a segment the journal rolled past, so a cleaner round takes them in.
    # (Apicurio answers {"compatibilityLevel": ...} where Confluent's registry answers {"compatibility": ...})
    assert "FULL" in first.must("PUT", f"{CCOMPAT}/config/orders-value", {"compatibility": "FULL"}).values()

    before = first.state()
    assert sorted(before["subjects"]) == sorted(KEPT)
    for subject, versions in KEPT.items():
        assert sorted(before["subjects"][subject]) == list(range(1, len(versions) + 1)), subject
        for version, schema in enumerate(versions, 1):
            answer = before["subjects"][subject][version]
            assert answer["subject"] == subject and answer["version"] == version, answer
            assert json.loads(answer["schema"]) == schema, answer
            assert json.loads(before["ids"][answer["id"]]["schema"]) == schema
    assert len(before["ids"]) == sum(len(v) for v in KEPT.values()), "one id per distinct schema"
    assert "FULL" in before["config"].values(), before["config"]

    # Every node's cleaner has cleaned its replica of the journal past the deletions, and removed the tombstone the
    # registry wrote at its start (its "bootstrap" marker: a null value) once delete.retention.ms had passed.
    wait_until(lambda: all(cleaned_past(n, deletes_end - 1) for n in cluster.nodes.values()), TIMEOUT,
               f"every node's cleaner past journal offset {deletes_end - 1} with a record removed", interval=0.5)
    print("\n".join(cleaner_lines(cluster)))

    first.stop()
    leader = journal_leader(cluster, 1)
    assert leader in cluster.nodes, f"journal leader {leader}"
    cluster.kill(leader)
    alive = [i for i in cluster.ids if i != leader]
    cluster.wait_until(lambda: journal_leader(cluster, alive[0]) in alive, timeout=TIMEOUT,
                       what=f"a new journal leader after node-{leader} was killed")
    # What the new leader serves: every record but the first one, the tombstone its cleaner removed.
    offsets = [offset for offset, _, _ in rdkafka_read_to_end(cluster.bootstrap_of(*alive), JOURNAL)]
    assert offsets[0] == 1 and offsets == list(range(1, offsets[-1] + 1)) and offsets[-1] >= deletes_end, offsets

    # A new process: its state comes only from the (cleaned) journal, served now by another replica.
    second = registries("registry-2").start()
    after = second.state()
    assert after == before
    assert {path: second.call("GET", path)[0] for path in gone} == gone
    # The registry's id counter came back from the journal too: a new schema gets an id no other schema has.
    late_id = second.register("late-value", LATE)
    assert late_id not in before["ids"] and late_id != scratch_id, late_id
    assert json.loads(second.must("GET", f"{CCOMPAT}/schemas/ids/{late_id}")["schema"]) == LATE
    assert second.register("orders-value", ORDER_V2) == ids[("orders-value", 2)]
