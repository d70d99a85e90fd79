"""A real Apache Kafka 4.x node for tests that compare Mala with it side by side: KRaft combined mode from the
Maven Central jars that scripts/install-test-clients.sh puts in tests/integration/.deps/kafka-libs, formatted
with kafka.tools.StorageTool (what kafka-storage.sh format runs) and started with kafka.Kafka (what
kafka-server-start.sh runs), on ports the OS picks, with a small heap. Kafka's log goes to a file in its work dir.
"""

import socket
import subprocess
import time
import uuid
from pathlib import Path

import pytest

from clients import KAFKA_LIBS

STORAGE_TOOL = "kafka.tools.StorageTool"
KAFKA_MAIN = "kafka.Kafka"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def kafka_cluster_id() -> str:
    """A random cluster id in Kafka's form (a base64url uuid without padding). Never one starting with "-": the
    storage tool's argument parser would take it for a flag ("--cluster-id/-t: expected one argument")."""
    import base64

    while True:
        cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not cluster_id.startswith("-"):
            return cluster_id


class ApacheKafkaNode:
    def __init__(self, work_dir: Path, extra_config=None, node_id=1, port=None, controller_port=None, voters=None,
                 cluster_id=None, log_dirs=1, standalone=False):
        """One combined-mode node; alone by default, or node `node_id` of the quorum `voters`
        ("id@host:port,...") formatted with `cluster_id` (ApacheKafkaCluster). `log_dirs` log dirs: data (which
        also holds the metadata log), then data-2, data-3... `standalone` (KIP-853): no controller.quorum.voters but
        controller.quorum.bootstrap.servers, formatted with `kafka-storage format --standalone` (kraft.version 1,
        the node the only voter of the voter set its bootstrap checkpoint holds)."""
        self.dir = work_dir
        self.dir.mkdir(parents=True, exist_ok=True)
        self.node_id = node_id
        self.port = port or free_port()
        self.controller_port = controller_port or free_port()
        self.cluster_id = cluster_id
        self.config_path = work_dir / "server.properties"
        self.log_path = work_dir / "kafka.log"
        config = {
            "process.roles": "broker,controller",
            "node.id": str(node_id),
            "controller.quorum.voters": voters or f"{node_id}@127.0.0.1:{self.controller_port}",
            "listeners": f"PLAINTEXT://127.0.0.1:{self.port},CONTROLLER://127.0.0.1:{self.controller_port}",
            "advertised.listeners": f"PLAINTEXT://127.0.0.1:{self.port}",
            "controller.listener.names": "CONTROLLER",
            "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
            "log.dirs": ",".join([str(work_dir / "data")] +
                                 [str(work_dir / f"data-{i}") for i in range(2, log_dirs + 1)]),
            "offsets.topic.replication.factor": "1",
            "transaction.state.log.replication.factor": "1",
            "transaction.state.log.min.isr": "1",
            "share.coordinator.state.topic.replication.factor": "1",
            "share.coordinator.state.topic.min.isr": "1",
        }
        self.standalone = standalone
        if standalone:
            del config["controller.quorum.voters"]
            config["controller.quorum.bootstrap.servers"] = f"127.0.0.1:{self.controller_port}"
        config.update(extra_config or {})
        self.log_dirs = config["log.dirs"]
        self.config_path.write_text("".join(f"{k}={v}\n" for k, v in config.items()))
        self.proc = None
        self._log = None

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def _java(self, heap, main, *args):
        if not KAFKA_LIBS.is_dir():
            pytest.fail(f"Kafka jars missing under {KAFKA_LIBS} (run scripts/install-test-clients.sh)")
        return ["java", heap, "-XX:TieredStopAtLevel=1", "-Djava.awt.headless=true",
                "-Dorg.slf4j.simpleLogger.defaultLogLevel=info", "-cp", f"{KAFKA_LIBS}/*", main, *args]

    def format(self):
        """kafka-storage format of the data dir."""
        fmt = subprocess.run(self._java("-Xmx256m", STORAGE_TOOL, "format", "-t", self.cluster_id or kafka_cluster_id(),
                                        "-c", str(self.config_path), *(["--standalone"] if self.standalone else [])),
                             capture_output=True, text=True, timeout=180)
        if fmt.returncode != 0:
            pytest.fail(f"kafka-storage format failed ({fmt.returncode}):\n{fmt.stdout}\n{fmt.stderr}")

    def launch(self):
        """Starts the process without waiting."""
        self._log = open(self.log_path, "ab")
        self.proc = subprocess.Popen(self._java("-Xmx512m", KAFKA_MAIN, str(self.config_path)),
                                     stdin=subprocess.DEVNULL, stdout=self._log, stderr=subprocess.STDOUT,
                                     start_new_session=True)

    def start(self, timeout=120, format_storage=True):
        """Formats the data dir (kafka-storage format, unless `format_storage` is false: a dir another broker
        wrote) and starts the node, waiting until it answers Metadata."""
        if format_storage:
            self.format()
        self.launch()
        self.wait_serving(timeout)
        return self

    def wait_serving(self, timeout=120):
        deadline = time.monotonic() + timeout
        from confluent_kafka.admin import AdminClient

        while True:
            if self.proc.poll() is not None:
                pytest.fail(f"Apache Kafka exited with {self.proc.returncode}:\n{self.log_tail()}")
            try:
                AdminClient({"bootstrap.servers": self.bootstrap, "log_level": 0}).list_topics(timeout=2)
                return self
            except Exception:
                if time.monotonic() > deadline:
                    pytest.fail(f"Apache Kafka not answering on {self.bootstrap} after {timeout} s:\n"
                                f"{self.log_tail()}")
                time.sleep(0.5)

    def tool(self, main, *args, timeout=120) -> subprocess.CompletedProcess:
        """Runs one of Kafka's command-line tools (its main class) from the same jars."""
        return subprocess.run(self._java("-Xmx256m", main, *args), capture_output=True, text=True, timeout=timeout)

    def log_tail(self, lines=40) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except FileNotFoundError:
            return ""

    def kill(self):
        """kill -9: no controlled shutdown, nothing flushed."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=30)
        if self._log:
            self._log.close()

    def stop(self):
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=30)
        if self._log:
            self._log.close()


class ApacheKafkaCluster:
    """`size` combined-mode Kafka nodes (ids 1..size) in one static quorum, formatted with one cluster id."""

    def __init__(self, work_dir: Path, size=3, extra_config=None, log_dirs=1):
        ports = [(free_port(), free_port()) for _ in range(size)]
        voters = ",".join(f"{i + 1}@127.0.0.1:{c}" for i, (_, c) in enumerate(ports))
        cluster_id = kafka_cluster_id()
        self.nodes = [ApacheKafkaNode(work_dir / f"kafka-{i + 1}", extra_config, node_id=i + 1, port=p,
                                      controller_port=c, voters=voters, cluster_id=cluster_id, log_dirs=log_dirs)
                      for i, (p, c) in enumerate(ports)]

    @property
    def bootstrap(self) -> str:
        return ",".join(n.bootstrap for n in self.nodes)

    def start(self, format_storage=True, timeout=180):
        for n in self.nodes:
            if format_storage:
                n.format()
            n.launch()
        for n in self.nodes:
            n.wait_serving(timeout)
        return self

    def stop(self):
        for n in self.nodes:
            n.stop()
