"""A 3-node Mala cluster for the integration tests: real `mala` processes in KRaft combined mode (broker +
controller), one Raft metadata quorum whose voters are all three nodes.

Each node gets two fresh ports (client listener PLAINTEXT and the CONTROLLER listener, picked as conftest.py picks
them), its own log dir and a YAML config shaped like config/cluster/node-1.yaml, with controller.quorum.voters naming
all three nodes and one shared cluster.id. A node's stdout and stderr go to <tmp>/node-<id>.log (appended across
restarts, each start marked by a "=== harness:" line); the `cluster` fixture prints every node's log when the test
failed. Nodes are addressed by node id (1, 2, 3).

    start(i) / start_all()   launch, then wait (bounded) until the client port accepts connections
    kill(i)                  SIGKILL (a crash: no clean-shutdown marker)
    stop(i) / stop_all()     SIGTERM, wait (bounded), return the exit code
    pause(i) / resume(i)     SIGSTOP / SIGCONT (the process freezes: no heartbeats, no Raft fetches)
    bootstrap                "127.0.0.1:p1,127.0.0.1:p2,127.0.0.1:p3"; bootstrap_of(i) for one node
    wait_until(pred, timeout) polls pred until it returns something truthy, or fails the test with the last value

Observation helpers (every call has a timeout):
    describe_quorum(i)    one DescribeQuorum round trip (API 55) to node i's client port, hand-encoded as
                          kafka_wire.py encodes its requests: a cheap probe for polling at 50 ms intervals, which
                          a JVM tool cannot do. The tests confirm what it sees with kafka-metadata-quorum.
    rdkafka_metadata(i)   Metadata as librdkafka (confluent-kafka) sees it through node i alone.
At teardown every process still running gets SIGTERM, and SIGKILL if it has not exited after STOP_TIMEOUT_S.
"""

import atexit
import contextlib
import os
import signal
import struct
import subprocess
import time
from pathlib import Path

import pytest

import kafka_wire
from conftest import MALA_BIN, TEST_SHARDS, free_port, port_accepts, yaml_scalar

CLUSTER_SIZE = 3
# One cluster id for every node's log dirs (Kafka: `kafka-storage format --cluster-id` with the same id everywhere).
CLUSTER_ID = "OxJAA5tSSVucu77mfjtwZw"
START_TIMEOUT_S = 20  # launch until the client port accepts connections
STOP_TIMEOUT_S = 20  # SIGTERM until exit (longer than conftest's 10 s: a cluster node may wait for its controller)
PROBE_TIMEOUT_S = 1.0  # one DescribeQuorum / Metadata probe

METADATA_TOPIC = "__cluster_metadata"
DESCRIBE_QUORUM = 55
CREATE_TOPICS = 19

_live_procs = set()  # safety net: processes still running when the interpreter exits are SIGKILLed


@atexit.register
def _kill_leftovers():
    for proc in list(_live_procs):
        if proc.poll() is None:
            try:
                proc.send_signal(signal.SIGCONT)
                proc.kill()
            except OSError:
                pass


def _free_ports(n):
    ports = []
    while len(ports) < n:
        p = free_port()
        if p not in ports:
            ports.append(p)
    return ports


def render_yaml(config: dict) -> str:
    """YAML in the shape of config/cluster/node-1.yaml: lists as sequences (process.roles inline, listeners as a
    block), controller.quorum.voters and log.dirs as nested maps, everything else as flat Kafka keys."""
    nested = {"controller.quorum.voters": ("controller", "quorum", "voters"), "log.dirs": ("log", "dirs")}
    lines = ["# Written by tests/integration/cluster.py"]
    for key, value in config.items():
        if value is None:
            continue
        if key in nested:
            path = nested[key]
            for depth, part in enumerate(path[:-1]):
                lines.append("  " * depth + f"{part}:")
            lines.append("  " * (len(path) - 1) + f"{path[-1]}: {yaml_scalar(value)}")
        elif isinstance(value, (list, tuple)):
            if key == "process.roles":
                lines.append(f"{key}: [{', '.join(str(v) for v in value)}]")
            else:
                lines.append(f"{key}:")
                lines += [f"  - {yaml_scalar(v)}" for v in value]
        else:
            lines.append(f"{key}: {yaml_scalar(value)}")
    return "\n".join(lines) + "\n"


class ClusterNode:
    """One node of the cluster: ports, config, log dir and log file stay the same across restarts."""

    def __init__(self, work_dir: Path, node_id: int, port: int, controller_port: int):
        self.node_id = node_id
        self.name = f"node-{node_id}"
        self.port = port
        self.controller_port = controller_port
        self.log_dir = work_dir / f"{self.name}-data"
        self.config_path = work_dir / f"{self.name}.yaml"
        self.log_path = work_dir / f"{self.name}.log"
        self.config = {}
        self.extra_args = []  # after --config FILE (e.g. --initial-controllers)
        self.proc = None
        self.paused = False
        self.expected_exit = True  # False while the node runs; True once the test stopped or killed it
        self._log_file = None
        self.starts = 0

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def log_text(self, tail_lines=200) -> str:
        if self._log_file:
            self._log_file.flush()
        try:
            lines = self.log_path.read_text(errors="replace").splitlines()
        except FileNotFoundError:
            return f"--- {self.name}: no log ---"
        shown = lines[-tail_lines:]
        return (f"--- {self.name} stdout+stderr ({self.log_path}, last {len(shown)} of {len(lines)} lines) ---\n"
                + "\n".join(shown))

    def close_log(self):
        if self._log_file:
            self._log_file.close()
            self._log_file = None


class Cluster:
    def __init__(self, work_dir: Path, size=CLUSTER_SIZE, extra_config=None, broker_only=(),
                 initial_controllers=None):
        """`broker_only`: ids of nodes with process.roles [broker] only (Raft observers); the others are
        combined-mode voters. `initial_controllers` (KIP-853): no controller.quorum.voters; every node gets
        controller.quorum.bootstrap.servers (the voters' CONTROLLER listeners) and each voter is launched with
        `--initial-controllers <the value>` (a format string over the controller ports: {1}, {2}, ... for node
        ids), as `kafka-storage format --initial-controllers` would format it."""
        self.work_dir = Path(work_dir)
        ports = _free_ports(2 * size)
        self.nodes = {i: ClusterNode(self.work_dir, i, ports[2 * (i - 1)], ports[2 * (i - 1) + 1])
                      for i in range(1, size + 1)}
        voter_nodes = [n for n in self.nodes.values() if n.node_id not in broker_only]
        voters = ",".join(f"{n.node_id}@127.0.0.1:{n.controller_port}" for n in voter_nodes)
        self.initial_controllers = None
        if initial_controllers is not None:
            self.initial_controllers = initial_controllers.format(
                None, *[n.controller_port for n in self.nodes.values()])
        for n in self.nodes.values():
            n.config = {
                "node.id": n.node_id,
                "process.roles": ["broker", "controller"],
                "listeners": [f"PLAINTEXT://127.0.0.1:{n.port}", f"CONTROLLER://127.0.0.1:{n.controller_port}"],
                "advertised.listeners": f"PLAINTEXT://127.0.0.1:{n.port}",
                "controller.listener.names": "CONTROLLER",
                "inter.broker.listener.name": "PLAINTEXT",
                "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
                "controller.quorum.voters": voters,
                "log.dirs": str(n.log_dir),
                "cluster.id": CLUSTER_ID,
                "num.partitions": 1,
                "default.replication.factor": 3,
                "min.insync.replicas": 2,
                "offsets.topic.replication.factor": 3,
                "transaction.state.log.replication.factor": 3,
                "transaction.state.log.min.isr": 2,
                "group.initial.rebalance.delay.ms": 0,
                "mala.shards": int(TEST_SHARDS) if TEST_SHARDS else 0,
                "log.level": "info",
            }
            if n.node_id in broker_only:
                n.config["process.roles"] = ["broker"]
                n.config["listeners"] = [f"PLAINTEXT://127.0.0.1:{n.port}"]
            if self.initial_controllers is not None:
                n.config["controller.quorum.voters"] = None
                n.config["controller.quorum.bootstrap.servers"] = ",".join(
                    f"127.0.0.1:{v.controller_port}" for v in voter_nodes)
                if n.node_id not in broker_only:
                    n.extra_args = ["--initial-controllers", self.initial_controllers]
            n.config.update(extra_config or {})
        self.stop_timeout = STOP_TIMEOUT_S  # close(): SIGTERM until exit (a node with many logs flushes them all)
        self._api_versions = {}  # node id -> {api key: (min, max)}, reset at each start
        self.last_probe = {}  # node id -> last DescribeQuorum answer or error (shown when a wait times out)

    # --- addressing ---------------------------------------------------------------------------------------------

    @property
    def ids(self):
        return sorted(self.nodes)

    def node(self, i) -> ClusterNode:
        return self.nodes[i]

    @property
    def bootstrap(self) -> str:
        return ",".join(n.bootstrap for n in self.nodes.values())

    def bootstrap_of(self, *ids) -> str:
        return ",".join(self.nodes[i].bootstrap for i in ids)

    def running_ids(self):
        return [i for i in self.ids if self.nodes[i].alive() and not self.nodes[i].paused]

    # --- processes ----------------------------------------------------------------------------------------------

    def launch(self, i):
        """Starts node i without waiting for it to serve."""
        n = self.nodes[i]
        if not MALA_BIN.exists():
            pytest.fail(f"mala binary not found at {MALA_BIN} (build it, or set MALA_BIN)")
        assert not n.alive(), f"{n.name} is already running"
        n.config_path.write_text(render_yaml(n.config))
        n.close_log()
        n._log_file = open(n.log_path, "ab")
        n.starts += 1
        n._log_file.write(f"=== harness: start #{n.starts} of {n.name} at {time.strftime('%H:%M:%S')} "
                          f"(client port {n.port}, controller port {n.controller_port}) ===\n".encode())
        n._log_file.flush()
        n.proc = subprocess.Popen([str(MALA_BIN), "--config", str(n.config_path), *n.extra_args],
                                  stdin=subprocess.DEVNULL,
                                  stdout=n._log_file, stderr=n._log_file, cwd=self.work_dir)
        _live_procs.add(n.proc)
        n.paused = False
        n.expected_exit = False
        self._api_versions.pop(i, None)

    def wait_serving(self, i, timeout=START_TIMEOUT_S):
        n = self.nodes[i]
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if n.proc.poll() is not None:
                n.expected_exit = True
                pytest.fail(f"{n.name} exited with code {n.proc.returncode} during start-up\n{n.log_text()}")
            if port_accepts(n.port):
                return
            time.sleep(0.05)
        pytest.fail(f"{n.name} did not accept connections on {n.port} within {timeout} s\n{n.log_text()}")

    def start(self, i, wait=True):
        self.launch(i)
        if wait:
            self.wait_serving(i)
        return self

    def start_all(self, wait=True) -> float:
        """Launches every node back to back (no waiting in between, so they start together), then waits until all
        accept connections. Returns time.monotonic() right after the last launch."""
        for i in self.ids:
            self.launch(i)
        launched = time.monotonic()
        if wait:
            for i in self.ids:
                self.wait_serving(i)
        return launched

    def kill(self, i):
        """SIGKILL and reap."""
        n = self.nodes[i]
        assert n.alive(), f"{n.name} is not running (exit code {n.proc and n.proc.returncode})"
        n.expected_exit = True
        n.proc.kill()
        n.proc.wait(timeout=10)
        n.paused = False
        _live_procs.discard(n.proc)

    def _signal_term(self, i):
        n = self.nodes[i]
        n.expected_exit = True
        if n.proc.poll() is None:
            n.proc.send_signal(signal.SIGTERM)
            if n.paused:
                n.proc.send_signal(signal.SIGCONT)
                n.paused = False

    def _reap(self, i, deadline):
        """Waits for node i until the deadline; SIGKILL after it. Returns the exit code (-9 when it hung)."""
        n = self.nodes[i]
        try:
            code = n.proc.wait(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            n.proc.kill()
            n.proc.wait(timeout=10)
            code = -9
        _live_procs.discard(n.proc)
        return code

    def stop(self, i, timeout=STOP_TIMEOUT_S) -> int:
        """SIGTERM, then wait up to `timeout`; returns the exit code (SIGKILL and -9 if it hangs)."""
        n = self.nodes[i]
        if n.proc is None:
            return 0
        self._signal_term(i)
        return self._reap(i, time.monotonic() + timeout)

    def stop_all(self, timeout=STOP_TIMEOUT_S) -> dict:
        """SIGTERM to every running node at once, then waits for all. Returns {node id: exit code}."""
        started = [i for i in self.ids if self.nodes[i].proc is not None]
        was_running = [i for i in started if self.nodes[i].alive()]
        for i in was_running:
            self._signal_term(i)
        deadline = time.monotonic() + timeout
        return {i: self._reap(i, deadline) for i in started}

    def pause(self, i):
        n = self.nodes[i]
        assert n.alive(), f"{n.name} is not running"
        n.proc.send_signal(signal.SIGSTOP)
        n.paused = True

    def resume(self, i):
        n = self.nodes[i]
        n.proc.send_signal(signal.SIGCONT)
        n.paused = False

    def close(self):
        """Teardown: SIGCONT+SIGTERM every running node, SIGKILL what is left after self.stop_timeout.
        Returns (nodes that died during the test, {node id: exit code} of the nodes that were running)."""
        died = [i for i in self.ids
                if self.nodes[i].proc is not None and not self.nodes[i].alive() and not self.nodes[i].expected_exit]
        running = [i for i in self.ids if self.nodes[i].alive()]
        for i in running:
            self._signal_term(i)
        deadline = time.monotonic() + self.stop_timeout
        codes = {i: self._reap(i, deadline) for i in running}
        for n in self.nodes.values():
            n.close_log()
        return died, codes

    # --- waiting and logs ---------------------------------------------------------------------------------------

    def logs(self, tail_lines=200) -> str:
        return "\n".join(n.log_text(tail_lines) for n in self.nodes.values())

    def wait_until(self, predicate, timeout, interval=0.1, what=None):
        """Calls predicate() until it returns a truthy value (returned) or `timeout` seconds pass (the test fails
        with the last value or exception, and the tail of every node's log). Exceptions from the predicate,
        including pytest.fail inside a client helper, count as "not yet"."""
        deadline = time.monotonic() + timeout
        last, last_exc = None, None
        self.last_probe = {}
        while True:
            try:
                last = predicate()
                last_exc = None
                if last:
                    return last
            except (Exception, pytest.fail.Exception) as e:  # noqa: B902 - Failed is not an Exception
                last_exc = e
            if time.monotonic() >= deadline:
                break
            time.sleep(interval)
        detail = f"last exception: {last_exc!r}" if last_exc is not None else f"last value: {last!r}"
        if self.last_probe:
            detail += f"; last DescribeQuorum probes: {self.last_probe}"
        pytest.fail(f"timed out after {timeout} s waiting for {what or getattr(predicate, '__name__', 'condition')}"
                    f" ({detail})\n{self.logs(60)}")

    # --- observation --------------------------------------------------------------------------------------------

    def api_versions(self, i):
        if i not in self._api_versions:
            err, keys = kafka_wire.api_versions(self.nodes[i].port, timeout=PROBE_TIMEOUT_S)
            assert err == 0, f"ApiVersions error {err}"
            self._api_versions[i] = keys
        return self._api_versions[i]

    def describe_quorum(self, i, timeout=PROBE_TIMEOUT_S):
        """DescribeQuorum for __cluster_metadata-0 sent to node i's client listener. Returns a dict:
        {"error", "leader_id", "leader_epoch", "high_watermark", "voters": {id: state}, "observers": {id: state},
        "nodes": {id: [(listener, host, port)]}} with state {"log_end_offset", "last_fetch", "last_caught_up"}.
        Raises (OSError, TimeoutError, AssertionError) when the node does not answer."""
        keys = self.api_versions(i)
        assert DESCRIBE_QUORUM in keys, f"node {i} does not advertise DescribeQuorum (ApiVersions: {sorted(keys)})"
        lo, hi = keys[DESCRIBE_QUORUM]
        version = min(hi, 2)
        assert version >= lo, f"DescribeQuorum versions {lo}-{hi}"
        body = (kafka_wire.uvarint(2) + kafka_wire.compact_string(METADATA_TOPIC)
                + kafka_wire.uvarint(2) + struct.pack(">i", 0) + kafka_wire.uvarint(0)  # partition 0
                + kafka_wire.uvarint(0)  # topic tags
                + kafka_wire.uvarint(0))  # request tags (every version is flexible: flexibleVersions 0+)
        with kafka_wire.Connection(self.nodes[i].port, timeout=timeout) as conn:
            header = kafka_wire.request_header_v2(DESCRIBE_QUORUM, version, 55, client_id="mala-it-cluster")
            assert conn.send(kafka_wire.frame(header + body)), "connection closed"
            payload = conn.recv_frame()
        assert payload is not None, "connection closed without a DescribeQuorum response"
        return parse_describe_quorum(payload, version)

    def quorum_leader(self, ids=None, min_epoch=0, exclude=()):
        """The first answer among nodes `ids` (default: running ones) that names a leader (error 0, leader_id >= 0,
        leader_epoch >= min_epoch, leader not in exclude), as (node asked, answer); None when no node does."""
        for i in (ids or self.running_ids()):
            try:
                q = self.last_probe[i] = self.describe_quorum(i)
            except (OSError, TimeoutError, AssertionError) as e:
                self.last_probe[i] = repr(e)
                continue
            if q["error"] == 0 and q["leader_id"] >= 0 and q["leader_epoch"] >= min_epoch \
                    and q["leader_id"] not in exclude:
                return i, q
        return None

    def agreed_leader(self, ids=None):
        """(leader id, epoch, {node: answer}) when every node in `ids` (default: running) answers DescribeQuorum with
        the same leader and epoch; None otherwise."""
        ids = ids or self.running_ids()
        answers = {}
        for i in ids:
            try:
                q = self.last_probe[i] = self.describe_quorum(i)
            except (OSError, TimeoutError, AssertionError) as e:
                self.last_probe[i] = repr(e)
                return None
            if q["error"] != 0 or q["leader_id"] < 0:
                return None
            answers[i] = q
        views = {(q["leader_id"], q["leader_epoch"]) for q in answers.values()}
        if len(views) != 1:
            return None
        leader, epoch = views.pop()
        return leader, epoch, answers

    def rdkafka_metadata(self, i, topic=None, timeout=PROBE_TIMEOUT_S * 5):
        """Metadata through node i only (a fresh confluent-kafka AdminClient bootstrapped from that node)."""
        from confluent_kafka.admin import AdminClient

        admin = AdminClient({"bootstrap.servers": self.nodes[i].bootstrap, "socket.timeout.ms": 5000,
                             "log_level": 2})
        return admin.list_topics(topic=topic, timeout=timeout)

    def create_topics_raw(self, i, name, partitions, replication_factor, timeout_ms=10000):
        """CreateTopics v5 sent to node i's client port itself (not to the controller a client would pick), to check
        that a node forwards it to the active controller. Returns (error code, error message)."""
        keys = self.api_versions(i)
        lo, hi = keys[CREATE_TOPICS]
        assert lo <= 5 <= hi, f"CreateTopics versions {lo}-{hi}"
        body = (kafka_wire.uvarint(2) + kafka_wire.compact_string(name) + struct.pack(">ih", partitions,
                                                                                       replication_factor)
                + kafka_wire.uvarint(1)  # no manual assignments
                + kafka_wire.uvarint(1)  # no configs
                + kafka_wire.uvarint(0)  # topic tags
                + struct.pack(">i", timeout_ms) + b"\x00"  # validate_only = false
                + kafka_wire.uvarint(0))
        with kafka_wire.Connection(self.nodes[i].port, timeout=timeout_ms / 1000 + 5) as conn:
            header = kafka_wire.request_header_v2(CREATE_TOPICS, 5, 19, client_id="mala-it-cluster")
            assert conn.send(kafka_wire.frame(header + body)), "connection closed"
            payload = conn.recv_frame()
        assert payload is not None, "connection closed without a CreateTopics response"
        r = _Reader(payload)
        assert r.int32() == 19, "correlation id"
        r.tags()
        r.int32()  # throttle
        n = r.uvarint() - 1
        assert n == 1, f"{n} topics in the CreateTopics response"
        got_name = r.compact_string()
        assert got_name == name, got_name
        error = r.int16()
        message = r.compact_string()
        return error, message


class _Reader:
    def __init__(self, buf: bytes):
        self.buf = buf
        self.pos = 0

    def _unpack(self, fmt):
        (v,) = struct.unpack_from(fmt, self.buf, self.pos)
        self.pos += struct.calcsize(fmt)
        return v

    def int16(self):
        return self._unpack(">h")

    def uint16(self):
        return self._unpack(">H")

    def int32(self):
        return self._unpack(">i")

    def int64(self):
        return self._unpack(">q")

    def uvarint(self):
        v, self.pos = kafka_wire.read_uvarint(self.buf, self.pos)
        return v

    def compact_string(self):
        n = self.uvarint()
        if n == 0:
            return None
        s = self.buf[self.pos:self.pos + n - 1].decode()
        self.pos += n - 1
        return s

    def uuid(self):
        v = self.buf[self.pos:self.pos + 16]
        self.pos += 16
        return v

    def tags(self):
        for _ in range(self.uvarint()):
            self.uvarint()
            size = self.uvarint()
            self.pos += size


def parse_describe_quorum(payload: bytes, version: int) -> dict:
    """A DescribeQuorum response (flexible at every version: response header v1) for one partition."""
    r = _Reader(payload)
    assert r.int32() == 55, "correlation id"
    r.tags()
    out = {"error": r.int16(), "leader_id": -1, "leader_epoch": -1, "high_watermark": -1, "voters": {},
           "observers": {}, "nodes": {}}
    if version >= 2:
        out["error_message"] = r.compact_string()
    topics = r.uvarint() - 1
    for _ in range(max(topics, 0)):
        r.compact_string()
        parts = r.uvarint() - 1
        for _ in range(max(parts, 0)):
            r.int32()  # partition index
            p_error = r.int16()
            if version >= 2:
                r.compact_string()
            leader, epoch, hw = r.int32(), r.int32(), r.int64()
            replicas = []
            for _ in range(2):
                states = {}
                for _ in range(max(r.uvarint() - 1, 0)):
                    rid = r.int32()
                    if version >= 2:
                        r.uuid()
                    state = {"log_end_offset": r.int64(), "last_fetch": -1, "last_caught_up": -1}
                    if version >= 1:
                        state["last_fetch"] = r.int64()
                        state["last_caught_up"] = r.int64()
                    r.tags()
                    states[rid] = state
                replicas.append(states)
            r.tags()
            if out["error"] == 0 and p_error != 0:
                out["error"] = p_error
            out.update(leader_id=leader, leader_epoch=epoch, high_watermark=hw, voters=replicas[0],
                       observers=replicas[1])
        r.tags()
    if version >= 2:
        for _ in range(max(r.uvarint() - 1, 0)):
            node_id = r.int32()
            listeners = []
            for _ in range(max(r.uvarint() - 1, 0)):
                listeners.append((r.compact_string(), r.compact_string(), r.uint16()))
                r.tags()
            r.tags()
            out["nodes"][node_id] = listeners
    return out


@pytest.fixture
def cluster(request, tmp_path):
    """A Cluster of 3 nodes, NOT started (tests that time start-up launch it themselves: cluster.start_all()).
    At teardown: every node still running gets SIGTERM (SIGKILL after STOP_TIMEOUT_S); the test fails when a node
    died without the test stopping or killing it, or did not exit with code 0 after the SIGTERM; node logs are
    printed when anything failed."""
    c = Cluster(tmp_path)
    yield c
    died, codes = c.close()
    failures = [f"node-{i}: died during the test with exit code {c.nodes[i].proc.returncode}" for i in died]
    failures += [f"node-{i}: exit code {code} after SIGTERM (expected 0 within {STOP_TIMEOUT_S} s)"
                 for i, code in codes.items() if code != 0]
    test_failed = any(getattr(getattr(request.node, f"rep_{w}", None), "failed", False) for w in ("setup", "call"))
    if failures or test_failed:
        print(c.logs())
    if failures:
        pytest.fail("; ".join(failures) + "\n" + c.logs(50))


@contextlib.contextmanager
def own_cluster(work_dir, **kwargs):
    """A Cluster(work_dir, **kwargs) a test builds itself (another size or configuration than the fixtures'), NOT
    started; closed at the end, with every node's log printed when the test fails inside the block."""
    c = Cluster(work_dir, **kwargs)
    try:
        yield c
    except BaseException:
        print(c.logs())
        raise
    finally:
        c.close()


@pytest.fixture
def running_cluster(cluster):
    """The 3-node cluster started, with a leader every node agrees on (bounded wait)."""
    cluster.start_all()
    cluster.wait_until(cluster.agreed_leader, timeout=20, what="a quorum leader all three nodes agree on")
    return cluster


@pytest.fixture
def compacting_cluster(tmp_path):
    """A 3-node cluster whose cleaners look for work every 200 ms (the compacted-topic application tests)."""
    (tmp_path / "mala").mkdir()
    with own_cluster(tmp_path / "mala", extra_config={"log.cleaner.backoff.ms": 200}) as c:
        c.start_all()
        c.wait_until(c.agreed_leader, timeout=20, what="a quorum leader all three nodes agree on")
        yield c
