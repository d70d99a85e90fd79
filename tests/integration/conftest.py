"""Fixtures that run the real `mala` binary for the integration tests.

Each test gets its own node (ports picked fresh, config and log dir in the test's tmp dir). The node's stderr goes to
a file that is printed when the test fails. At teardown the node gets SIGTERM and must exit with code 0 within 10 s:
a clean shutdown is part of every test. Binary: $MALA_BIN, default build/src/app/mala.
"""

import json
import os
import signal
import socket
import subprocess
import time
from pathlib import Path

import pytest

import file_scheduling

REPO_ROOT = Path(__file__).resolve().parents[2]
MALA_BIN = Path(os.environ.get("MALA_BIN", REPO_ROOT / "build" / "src" / "app" / "mala"))
# mala.shards of every node the tests start (MALA_TEST_SHARDS; unset: the nodes' default, one per CPU).
# scripts/test.sh runs the suite with 4 shards: more shards than this machine's cores, every partition
# spread over them.
TEST_SHARDS = os.environ.get("MALA_TEST_SHARDS")
STARTUP_TIMEOUT_S = 20
SHUTDOWN_TIMEOUT_S = 10


def free_port() -> int:
    """A port that was free a moment ago (bind to port 0, read it, release it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def yaml_scalar(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    return json.dumps(str(value))  # a JSON string is a valid YAML double-quoted scalar


def port_accepts(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return True
    except OSError:
        return False


class MalaNode:
    """One `mala` process with its own config file, log dir and stderr log."""

    def __init__(self, work_dir: Path, name="node", node_id=1, extra_config=None, log_dir=None):
        self.work_dir = work_dir
        self.name = name
        self.node_id = node_id
        self.port = free_port()
        self.controller_port = free_port()
        while self.controller_port == self.port:
            self.controller_port = free_port()
        self.log_dir = Path(log_dir) if log_dir else work_dir / f"{name}-data"
        self.config_path = work_dir / f"{name}.yaml"
        self.stderr_path = work_dir / f"{name}.stderr.log"
        self.config = {
            "node.id": node_id,
            "process.roles": "broker,controller",
            "listeners": f"PLAINTEXT://127.0.0.1:{self.port},CONTROLLER://127.0.0.1:{self.controller_port}",
            "advertised.listeners": f"PLAINTEXT://127.0.0.1:{self.port}",
            "controller.listener.names": "CONTROLLER",
            "controller.quorum.voters": f"{node_id}@127.0.0.1:{self.controller_port}",
            "log.dirs": str(self.log_dir),
        }
        if TEST_SHARDS:
            self.config["mala.shards"] = int(TEST_SHARDS)
        self.config.update(extra_config or {})
        self.proc = None
        self._stderr_file = None
        self.exit_checked = False
        # SIGTERM until exit: a clean shutdown flushes every log, which takes longer with thousands of them.
        self.stop_timeout = SHUTDOWN_TIMEOUT_S

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def write_config(self):
        lines = ["# Written by tests/integration/conftest.py"]
        lines += [f"{k}: {yaml_scalar(v)}" for k, v in self.config.items()]
        self.config_path.write_text("\n".join(lines) + "\n")

    def launch(self, extra_args=()):
        """Starts the process without waiting for it to serve."""
        if not MALA_BIN.exists():
            pytest.fail(f"mala binary not found at {MALA_BIN} (build it, or set MALA_BIN)")
        self.write_config()
        self._stderr_file = open(self.stderr_path, "ab")
        self.proc = subprocess.Popen(
            [str(MALA_BIN), "--config", str(self.config_path), *extra_args],
            stdin=subprocess.DEVNULL,
            stdout=self._stderr_file,
            stderr=self._stderr_file,
            cwd=self.work_dir,
        )
        self.exit_checked = False
        return self

    def start(self, extra_args=(), timeout=STARTUP_TIMEOUT_S):
        """Starts the process and waits until its PLAINTEXT port accepts connections."""
        self.launch(extra_args)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                self.exit_checked = True
                pytest.fail(f"{self.name} exited with code {self.proc.returncode} during start-up\n{self.log_text()}")
            if port_accepts(self.port):
                return self
            time.sleep(0.05)
        pytest.fail(f"{self.name} did not accept connections on {self.port} within {timeout} s\n"
                    f"{self.log_text()}")

    def wait_exit(self, timeout: float) -> int:
        """Waits for the process to exit on its own (used when it is expected to refuse to start)."""
        try:
            code = self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            pytest.fail(f"{self.name} still running after {timeout} s\n{self.log_text()}")
        self.exit_checked = True
        return code

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def stop(self) -> int:
        """SIGTERM, then wait up to stop_timeout; returns the exit code (SIGKILL and -9 if it hangs)."""
        if self.proc is None:
            return 0
        self.exit_checked = True
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=self.stop_timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)
                return -9
        return self.proc.returncode

    def full_log(self) -> str:
        """Everything the node wrote to stdout/stderr so far (for searching; log_text() is for showing)."""
        if self._stderr_file:
            self._stderr_file.flush()
        try:
            return self.stderr_path.read_text(errors="replace")
        except FileNotFoundError:
            return ""

    def log_text(self, tail_lines=200) -> str:
        if self._stderr_file:
            self._stderr_file.flush()
        try:
            lines = self.stderr_path.read_text(errors="replace").splitlines()
        except FileNotFoundError:
            return f"--- {self.name}: no log ---"
        shown = lines[-tail_lines:]
        return f"--- {self.name} stderr ({self.stderr_path}, last {len(shown)} of {len(lines)} lines) ---\n" + \
            "\n".join(shown)

    def close_log(self):
        if self._stderr_file:
            self._stderr_file.close()
            self._stderr_file = None


# The longest files first, over the xdist workers too (file_scheduling.py).
def pytest_collection_modifyitems(config, items):
    file_scheduling.sort_longest_files_first(items)


@pytest.hookimpl(optionalhook=True)  # a hook of pytest-xdist
def pytest_xdist_make_scheduler(config, log):
    if config.getoption("dist", None) != "loadfile":
        return None
    return file_scheduling.make_scheduler(config, log)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    setattr(item, f"rep_{report.when}", report)


@pytest.fixture
def mala_factory(request, tmp_path):
    """Makes nodes on demand; every node still running at teardown is SIGTERMed and must exit 0 within 10 s."""
    nodes = []

    def make(**kwargs):
        node = MalaNode(tmp_path, name=kwargs.pop("name", f"node{len(nodes) + 1}"), **kwargs)
        nodes.append(node)
        return node

    yield make

    failures = []
    for node in nodes:
        if node.proc is None:
            continue
        was_running = node.proc.poll() is None
        code = node.stop()
        node.close_log()
        if was_running and code != 0:
            failures.append(f"{node.name}: exit code {code} after SIGTERM (expected 0 within {SHUTDOWN_TIMEOUT_S} s)")
        elif not was_running and not node.exit_checked:
            failures.append(f"{node.name}: died during the test with exit code {code}")
    test_failed = any(getattr(getattr(request.node, f"rep_{w}", None), "failed", False) for w in ("setup", "call"))
    if failures or test_failed:
        for node in nodes:
            print(node.log_text())
    if failures:
        pytest.fail("; ".join(failures) + "\n" + "\n".join(n.log_text(50) for n in nodes))


@pytest.fixture
def node(mala_factory):
    """A running single node (broker+controller) with default settings."""
    return mala_factory().start()
