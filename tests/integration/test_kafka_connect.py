"""Kafka Connect in distributed mode against a 3-node Mala cluster (issue 21): a real application that keeps its
whole state in compacted topics. The worker (connect-runtime from Maven Central, scripts/install-test-clients.sh)
creates connect-configs / connect-offsets / connect-status itself and refuses to start unless the broker reports them
compacted; a FileStreamSource connector created over the worker's REST API copies a file's lines into a topic; the
worker stops, more lines are appended, and a new worker resumes from the offsets it stored in connect-offsets: every
line arrives exactly once, in order. The worker creates connect-offsets with a short segment.ms (its
offset.storage.* topic settings) and the lines arrive in chunks, so the file position is committed many times and
the nodes' cleaners compact connect-offsets before the restart: the worker resumes from a cleaned log.
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
from real_clients import create_topic, rdkafka_admin, rdkafka_read_to_end, wait_until

CONNECT_LIBS = IT_DIR / ".deps" / "connect-libs"
WORKER_MAIN = "org.apache.kafka.connect.cli.ConnectDistributed"
INTERNAL_TOPICS = ("connect-configs", "connect-offsets", "connect-status")
TIMEOUT = 90


class ConnectWorker:
    """One distributed-mode worker process; its REST listener on a free port; its log in the work dir."""

    def __init__(self, work_dir, bootstrap, extra_config=None):
        if not CONNECT_LIBS.is_dir():
            pytest.fail(f"Kafka Connect jars missing under {CONNECT_LIBS} (run scripts/install-test-clients.sh)")
        self.rest_port = free_port()
        self.config_path = work_dir / "connect-distributed.properties"
        self.log_path = work_dir / "connect.log"
        config = {
            "bootstrap.servers": bootstrap,
            "group.id": "mala-connect",
            "key.converter": "org.apache.kafka.connect.storage.StringConverter",
            "value.converter": "org.apache.kafka.connect.storage.StringConverter",
            "config.storage.topic": "connect-configs",
            "offset.storage.topic": "connect-offsets",
            "status.storage.topic": "connect-status",
            "config.storage.replication.factor": "3",
            "offset.storage.replication.factor": "3",
            "status.storage.replication.factor": "3",
            "offset.storage.partitions": "5",
            "offset.flush.interval.ms": "500",
            "listeners": f"http://127.0.0.1:{self.rest_port}",
            "rest.advertised.host.name": "127.0.0.1",
            "rest.advertised.port": str(self.rest_port),
        }
        config.update(extra_config or {})
        self.config_path.write_text("".join(f"{k}={v}\n" for k, v in config.items()))
        self.proc = None
        self._log = None

    @property
    def url(self):
        return f"http://127.0.0.1:{self.rest_port}"

    def start(self):
        self._log = open(self.log_path, "ab")
        self._log.write(b"=== test: worker start ===\n")
        self._log.flush()
        self.proc = subprocess.Popen(
            ["java", "-Xmx384m", "-XX:TieredStopAtLevel=1", "-Dorg.slf4j.simpleLogger.defaultLogLevel=info",
             "-cp", f"{CONNECT_LIBS}/*", WORKER_MAIN, str(self.config_path)],
            stdin=subprocess.DEVNULL, stdout=self._log, stderr=subprocess.STDOUT, start_new_session=True)
        wait_until(lambda: self._alive_or_fail() and self.rest("GET", "/connectors") is not None, TIMEOUT,
                   "the Connect worker's REST API")

    def _alive_or_fail(self):
        if self.proc.poll() is not None:
            pytest.fail(f"Connect worker exited with code {self.proc.returncode}:\n{self.log_tail()}")
        return True

    def rest(self, method, path, body=None):
        """The decoded JSON answer, or None while the worker is not answering (yet) or answers an error."""
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(self.url + path, data=data, method=method,
                                         headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=10) as answer:
                text = answer.read()
                return json.loads(text) if text else {}
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            return None

    def stop(self):
        """SIGTERM, as kafka-server-stop / a container stop: the worker commits its tasks' offsets and leaves."""
        if self.proc is None or self.proc.poll() is not None:
            return
        os.killpg(self.proc.pid, signal.SIGTERM)
        try:
            code = self.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
            pytest.fail("Connect worker did not stop within 60 s of SIGTERM")
        finally:
            self._log.close()
        assert code in (0, 128 + signal.SIGTERM, -signal.SIGTERM), f"worker exit code {code}"

    def log_tail(self, lines=80):
        return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])


def connector_running(worker, name):
    status = worker.rest("GET", f"/connectors/{name}/status")
    return (status is not None and status.get("connector", {}).get("state") == "RUNNING"
            and [t.get("state") for t in status.get("tasks", [])] == ["RUNNING"])


def topic_values(bootstrap, topic):
    return [v.decode() for _, _, v in rdkafka_read_to_end(bootstrap, topic)]


def topic_config(bootstrap, topic, name):
    """A topic config as DescribeConfigs gives it. The worker created the topic through one broker; the broker
    asked here may learn of it a moment later (metadata reaches each broker on its own, as in Kafka)."""
    from confluent_kafka import KafkaError, KafkaException
    from confluent_kafka.admin import ConfigResource

    resource = ConfigResource(ConfigResource.Type.TOPIC, topic)
    admin = rdkafka_admin(bootstrap)  # kept alive until the answer is in
    deadline = time.monotonic() + 15
    while True:
        try:
            configs = admin.describe_configs([resource])[resource].result(timeout=30)
            return configs[name].value
        except KafkaException as e:
            if e.args[0].code() != KafkaError.UNKNOWN_TOPIC_OR_PART or time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def cleaned_rounds(cluster, topic):
    return sum(len(re.findall(rf"{topic}-\d+: cleaned offsets", n.log_path.read_text(errors="replace")))
               for n in cluster.nodes.values())


@pytest.fixture
def worker(compacting_cluster, tmp_path):
    w = ConnectWorker(tmp_path, compacting_cluster.bootstrap, extra_config={
        # Topic configs the worker gives connect-offsets when it creates it (Kafka Connect's offset.storage.*).
        "offset.storage.segment.ms": "300", "offset.storage.min.cleanable.dirty.ratio": "0.01"})
    yield w
    try:
        w.stop()
    finally:
        if w.log_path.exists():
            print(w.log_tail(200))


def append_lines(path, lines):
    with open(path, "a") as f:
        f.write("".join(f"{line}\n" for line in lines))


def test_file_source_resumes_from_stored_offsets_without_duplicates(compacting_cluster, worker, tmp_path):
    cluster = compacting_cluster
    bootstrap = cluster.bootstrap
    source = tmp_path / "input.txt"
    source.write_text("")
    first = [f"line-{i}" for i in range(300)]
    create_topic(bootstrap, "connect-lines", config={"min.insync.replicas": "2"})

    worker.start()
    for topic in INTERNAL_TOPICS:
        # The worker verifies this itself at start (it refuses non-compacted internal topics); read it back too.
        assert topic_config(bootstrap, topic, "cleanup.policy") == "compact", topic
    created = worker.rest("POST", "/connectors", {
        "name": "file-source",
        "config": {"connector.class": "org.apache.kafka.connect.file.FileStreamSourceConnector",
                   "tasks.max": "1", "file": str(source), "topic": "connect-lines"}})
    assert created is not None and created.get("name") == "file-source", created
    wait_until(lambda: connector_running(worker, "file-source"), TIMEOUT, "the connector and its task RUNNING")
    for chunk in range(0, len(first), 30):
        # A chunk per offset flush (offset.flush.interval.ms 500): a new file position committed each time.
        append_lines(source, first[chunk:chunk + 30])
        time.sleep(0.7)
    wait_until(lambda: len(topic_values(bootstrap, "connect-lines")) >= len(first), TIMEOUT,
               "the file's first lines in connect-lines")
    assert topic_config(bootstrap, "connect-offsets", "segment.ms") == "300"
    wait_until(lambda: cleaned_rounds(cluster, "connect-offsets") >= 1, TIMEOUT, "a cleaning round of connect-offsets")

    worker.stop()
    second = [f"line-{i}" for i in range(len(first), len(first) + 200)]
    append_lines(source, second)

    # A new worker process: the connector comes back from connect-configs, its position from connect-offsets.
    worker.start()
    wait_until(lambda: connector_running(worker, "file-source"), TIMEOUT, "the connector RUNNING after the restart")
    wait_until(lambda: len(topic_values(bootstrap, "connect-lines")) >= len(first) + len(second), TIMEOUT,
               "the appended lines in connect-lines")
    time.sleep(2)  # a duplicate, if any, would be written right after the resumed ones
    assert topic_values(bootstrap, "connect-lines") == first + second
    assert worker.rest("GET", "/connectors") == ["file-source"]
