"""Kafka Streams with processing.guarantee=exactly_once_v2 (issue 22): apps/streams/WordCount.java (kafka-streams
4.4.0 and rocksdbjni from Maven Central, scripts/install-test-clients.sh) counts words in a RocksDB state store and
writes every count update to an output topic. With the record cache off, a read_committed reader of the output must
see for each word exactly the values 1, 2, ..., n (n = the word's occurrences in the input): no repeat (a batch
processed twice), no gap, final counts exact.

Against Apache Kafka 4.4 (one node, the oracle): a run straight through, and a run where the application is
SIGKILLed mid-way (open transaction, state store without checkpoint) and restarted. Against a 3-node Mala cluster
a run straight through, and a run where one Mala node is SIGKILLed mid-way and stays down.
"""

import collections
import os
import random
import signal
import subprocess
import time

import pytest

from apache_kafka import ApacheKafkaNode
from clients import IT_DIR
from cluster import own_cluster
from real_clients import rdkafka_produce
from txn_harness import BROKER_CONFIG, create_topics, read_topic

STREAMS_LIBS = IT_DIR / ".deps" / "streams-libs"
STREAMS_CLASSES = IT_DIR / ".deps" / "streams-classes"
PARTITIONS = 3
WORDS = ["exactly", "once", "stream", "table", "store", "kafka", "mala", "broker", "commit", "abort", "marker",
         "offset", "fence", "epoch", "count"]
LINES = 400  # per half


def lines(seed, n):
    rnd = random.Random(seed)
    return [" ".join(rnd.choice(WORDS) for _ in range(rnd.randint(1, 6))) for _ in range(n)]


def word_counts(text_lines):
    counts = collections.Counter()
    for line in text_lines:
        counts.update(line.split())
    return counts


class WordCountApp:
    """One WordCount JVM; its output (state changes) and log in the work dir."""

    def __init__(self, work_dir, bootstrap, replication_factor, guarantee="exactly_once_v2"):
        if not STREAMS_LIBS.is_dir() or not STREAMS_CLASSES.is_dir():
            pytest.fail(f"Kafka Streams jars or WordCount missing under {IT_DIR / '.deps'} "
                        "(run scripts/install-test-clients.sh)")
        self.work_dir = work_dir
        self.cmd = ["java", "-Xmx384m", "-XX:TieredStopAtLevel=1", "-Dorg.slf4j.simpleLogger.defaultLogLevel=info",
                    "-cp", f"{STREAMS_LIBS}/*:{STREAMS_CLASSES}", "mala.it.streams.WordCount",
                    "--bootstrap", bootstrap, "--input", "lines", "--output", "counts",
                    "--application-id", "mala-wordcount", "--state-dir", str(work_dir / "state"),
                    "--replication-factor", str(replication_factor), "--processing-guarantee", guarantee]
        self.log_path = work_dir / "wordcount.log"
        self.proc = None

    def start(self):
        log = open(self.log_path, "ab")
        log.write(b"=== test: start ===\n")
        log.flush()
        self.proc = subprocess.Popen(self.cmd, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                     start_new_session=True)
        log.close()

    def running(self):
        if self.proc.poll() is not None:
            pytest.fail(f"WordCount exited with {self.proc.returncode}\n{self.log_tail()}")
        return True

    def kill(self):
        os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait(timeout=30)

    def stop(self):
        if self.proc is None or self.proc.poll() is not None:
            return
        os.killpg(self.proc.pid, signal.SIGTERM)
        try:
            self.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
            pytest.fail("WordCount did not stop within 60 s of SIGTERM")

    def log_tail(self, n=80):
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-n:])
        except FileNotFoundError:
            return ""


def output_values(bootstrap):
    """{word: [count values in offset order]} as a read_committed reader of the output sees them."""
    records, _ = read_topic(bootstrap, "counts", "read_committed")
    seen = collections.defaultdict(list)
    for r in sorted(records, key=lambda r: (r["partition"], r["offset"])):
        seen[r["key"]].append(int(r["value"]))
    return dict(seen)


def wait_for_counts(bootstrap, app, expected, timeout):
    """Polls the output until every word's last value is its expected count (or fails after timeout)."""
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        app.running()
        last = output_values(bootstrap)
        if {w: v[-1] for w, v in last.items()} == dict(expected):
            return last
        if any(v[-1] > expected.get(w, 0) for w, v in last.items()):
            check_exactly_once(last, expected)  # a count past its final value never comes back: fail now
        time.sleep(1)
    pytest.fail(f"output counts not final after {timeout} s: {({w: v[-1] for w, v in (last or {}).items()})} "
                f"expected {dict(expected)}\n{app.log_tail()}")


def check_exactly_once(values, expected):
    for word, n in expected.items():
        assert values.get(word) == list(range(1, n + 1)), (
            f"{word}: output values {values.get(word)} (expected 1..{n}: a repeat means a batch was applied twice)")
    assert set(values) == set(expected)


def run_word_count(work_dir, bootstrap, replication_factor, disrupt=None, guarantee="exactly_once_v2"):
    """Creates the topics, produces the first half of the lines, runs WordCount until counts come out, then produces
    the second half in small chunks while the application works on them and calls disrupt(app) (a crash of
    something) half-way through, and waits for the exact final counts."""
    create_topics(bootstrap, "lines", "counts", partitions=PARTITIONS, replication_factor=replication_factor)
    first, second = lines(1, LINES), lines(2, LINES)
    # The input is written by an idempotent producer: a plain one may write a line twice when it retries across
    # the disruption (at least once), and the expected counts assume every line once.
    rdkafka_produce(bootstrap, "lines", [(None, line) for line in first], **{"enable.idempotence": True})
    app = WordCountApp(work_dir, bootstrap, replication_factor, guarantee)
    app.start()
    try:
        deadline = time.monotonic() + 120
        while app.running() and sum(len(v) for v in output_values(bootstrap).values()) < 50:
            assert time.monotonic() < deadline, f"no WordCount output after 120 s\n{app.log_tail()}"
            time.sleep(1)
        chunks = [second[i:i + 20] for i in range(0, len(second), 20)]
        for n, chunk in enumerate(chunks):
            if n == len(chunks) // 2 and disrupt is not None:
                disrupt(app)  # the application is processing: a transaction is open
            rdkafka_produce(bootstrap, "lines", [(None, line) for line in chunk], **{"enable.idempotence": True})
            time.sleep(0.2)
        expected = word_counts(first + second)
        values = wait_for_counts(bootstrap, app, expected, timeout=180)
        check_exactly_once(values, expected)
    except BaseException:
        print(app.log_tail(200))
        raise
    finally:
        app.stop()


def restart_app(app):
    """SIGKILL the application mid-run (its open transaction and unflushed store are lost) and start it again."""
    app.kill()
    app.start()


# --- Apache Kafka (one node) ------------------------------------------------------------------------------------

@pytest.fixture
def kafka(tmp_path):
    (tmp_path / "kafka").mkdir()
    k = ApacheKafkaNode(tmp_path / "kafka", extra_config=BROKER_CONFIG).start()
    yield k
    k.stop()


def test_word_count_exactly_once_kafka(kafka, tmp_path):
    run_word_count(tmp_path, kafka.bootstrap, 1)


def test_word_count_exactly_once_app_crash_kafka(kafka, tmp_path):
    run_word_count(tmp_path, kafka.bootstrap, 1, disrupt=restart_app)


# --- Mala (3 nodes) ---------------------------------------------------------------------------------------------

@pytest.fixture
def mala_cluster(tmp_path):
    (tmp_path / "mala").mkdir()
    with own_cluster(tmp_path / "mala", extra_config=BROKER_CONFIG) as c:
        c.start_all()
        c.wait_until(c.agreed_leader, timeout=20, what="a quorum leader all three nodes agree on")
        yield c


def test_word_count_exactly_once_mala_3_nodes(mala_cluster, tmp_path):
    run_word_count(tmp_path, mala_cluster.bootstrap, 3)


def test_word_count_exactly_once_mala_node_killed(mala_cluster, tmp_path):
    def kill_a_node(app):
        mala_cluster.kill(2)  # stays down: RF 3, min.insync.replicas 2 keeps every topic writable

    run_word_count(tmp_path, mala_cluster.bootstrap, 3, disrupt=kill_a_node)
