"""Shared pieces of the transaction tests (issue 22): the broker fixture that runs the same test body against Apache
Kafka 4.4 (apache_kafka.py, the oracle) and against Mala, the Java test programs' command lines, the checkers of what
a consumer saw, and parsers of kafka-transactions.sh / kafka-consumer-groups.sh output.

Records written by every transactional test program (Java TxnProduce, confluent-kafka, franz-go, kafkajs) have one
shape, so one checker serves them all: record i of transaction t of a producer tagged TAG has key "TAG-t", value
"TAG:t:i:M" (M records per transaction) and goes to partition i % P.
"""

import collections
import subprocess
import time

import pytest

from apache_kafka import ApacheKafkaNode
from clients import java_classpath
from real_clients import json_lines, shared_node, tool_batch

MALA_PARAM = pytest.param("mala", id="mala")
BROKERS = [pytest.param("kafka", id="kafka"), MALA_PARAM]

# Both brokers: no initial rebalance delay (Kafka's shipped server.properties) and the timed-out-transaction scan every
# second instead of every 10 s, so transaction.timeout.ms expiry is seen within a few seconds.
BROKER_CONFIG = {
    "group.initial.rebalance.delay.ms": 0,
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": 1000,
}

TRANSACTIONS_TOOL = "org.apache.kafka.tools.TransactionsCommand"  # kafka-transactions.sh
GROUPS_TOOL = "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand"  # kafka-consumer-groups.sh


class Broker:
    """What a test needs of either broker: its bootstrap, its node id (find-hanging --broker-id) and its log."""

    def __init__(self, kind, bootstrap, broker_id, log_text, log_dir=None):
        self.kind = kind
        self.log_dir = log_dir  # its data directory (log.dirs)
        self.bootstrap = bootstrap
        self.broker_id = broker_id
        self.log_text = log_text


@pytest.fixture(scope="module", params=BROKERS)
def broker(request, tmp_path_factory):
    """The broker of a transaction test module: Apache Kafka, then Mala (import it into the module)."""
    yield from start_broker(request, tmp_path_factory, request.module.__name__.removeprefix("test_"))


@pytest.fixture(autouse=True)
def broker_log_on_failure(request):
    """Import into a module using `broker`: the broker's log tail after a failing test."""
    yield
    report = getattr(request.node, "rep_call", None)
    b = request.node.funcargs.get("broker")
    if report is not None and report.failed and b is not None:
        print(b.log_text(120))


def start_broker(request, tmp_path_factory, name):
    """Generator body of a module-scoped fixture parametrised with BROKERS: one single-node broker of the kind
    request.param names, configured with BROKER_CONFIG."""
    if request.param == "kafka":
        kafka = ApacheKafkaNode(tmp_path_factory.mktemp(f"{name}-kafka"), extra_config=BROKER_CONFIG).start()
        try:
            yield Broker("kafka", kafka.bootstrap, 1, kafka.log_tail, kafka.dir / "data")
        finally:
            kafka.stop()
        return
    for node in shared_node(request, tmp_path_factory, f"{name}-mala", extra_config=BROKER_CONFIG):
        yield Broker("mala", node.bootstrap, getattr(node, "node_id", 1),
                     getattr(node, "log_text", lambda *a: ""), getattr(node, "log_dir", None))


def create_topics(bootstrap, *names, partitions=3, replication_factor=1):
    """Creates topics with kafka-topics.sh (one JVM); fails the test when any creation failed."""
    steps = [("org.apache.kafka.tools.TopicCommand", "--bootstrap-server", bootstrap, "--create", "--topic", n,
              "--partitions", partitions, "--replication-factor", replication_factor) for n in names]
    for out in tool_batch(*steps):
        assert out["exit"] == 0, f"topic creation failed: {out}"


# --- Java test programs ----------------------------------------------------------------------------------------

def java_cmd(main_class, *args):
    return ["java", "-Xmx256m", "-XX:TieredStopAtLevel=1", "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn",
            "-Dorg.slf4j.simpleLogger.logFile=System.err", "-cp", java_classpath(), main_class, *map(str, args)]


def run_java(main_class, *args, timeout=120, check=True):
    """Runs a mala.it program; returns (exit code, JSON lines, stderr)."""
    cmd = java_cmd(main_class, *args)
    try:
        r = subprocess.run(cmd, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired as e:
        pytest.fail(f"timed out after {timeout} s: {' '.join(cmd)}\nstdout: {e.stdout}\nstderr: {e.stderr}")
    if check and r.returncode != 0:
        pytest.fail(f"{main_class} exited with {r.returncode}\nstdout: {r.stdout[-4000:]}\nstderr: {r.stderr[-4000:]}")
    return r.returncode, json_lines(r.stdout), r.stderr


def run_java_parallel(*invocations, timeout=120):
    """Runs several mala.it programs at once (each a tuple: main class, args...); returns their JSON lines in order.
    Fails the test when any exits non-zero."""
    procs = [subprocess.Popen(java_cmd(*inv), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for inv in invocations]
    outs = []
    deadline = time.monotonic() + timeout
    for inv, p in zip(invocations, procs):
        try:
            stdout, stderr = p.communicate(timeout=max(1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            for q in procs:
                q.kill()
            pytest.fail(f"{inv[0]} still running after {timeout} s")
        if p.returncode != 0:
            pytest.fail(f"{inv[0]} exited with {p.returncode}\nstdout: {stdout[-4000:]}\nstderr: {stderr[-4000:]}")
        outs.append(json_lines(stdout))
    return outs


def txn_produce(bootstrap, topic, txn_id, transactions, records, abort_every=0, tag=None, leave_open=False,
                props=()):
    """TxnProduce; returns its summary."""
    args = ["--bootstrap", bootstrap, "--topic", topic, "--transactional-id", txn_id, "--transactions", transactions,
            "--records", records, "--abort-every", abort_every, "--tag", tag or txn_id]
    if leave_open:
        args += ["--leave-open", "true"]
    for p in props:
        args += ["--prop", p]
    _, lines, _ = run_java("mala.it.TxnProduce", *args)
    return lines[-1]


def read_topic(bootstrap, topic, isolation, timeout_ms=30000):
    """TxnConsume at an isolation level: (records [{partition, offset, key, value}], summary)."""
    _, lines, _ = run_java("mala.it.TxnConsume", "--bootstrap", bootstrap, "--topic", topic, "--isolation", isolation,
                           "--timeout-ms", timeout_ms, timeout=timeout_ms / 1000 + 60)
    summary = lines[-1]
    assert summary.get("isolation") == isolation, f"no summary line: {lines[-3:]}"
    return lines[:-1], summary


# --- checkers ----------------------------------------------------------------------------------------------------

def transactions_seen(records, tag):
    """{transaction number: [(partition, offset, i, M)]} for the records of one producer tag (value TAG:t:i:M)."""
    seen = collections.defaultdict(list)
    for r in records:
        parts = (r["value"] or "").split(":")
        if len(parts) != 4 or parts[0] != tag:
            continue
        t, i, m = int(parts[1]), int(parts[2]), int(parts[3])
        assert r["key"] == f"{tag}-{t}", f"record with a foreign key: {r}"
        seen[t].append((r["partition"], r["offset"], i, m))
    return dict(seen)


def check_whole(records, tag, expected, per_txn, partitions, what):
    """Exactly the transactions `expected` of producer `tag` are in `records`, each whole: its records 0..M-1 once
    each, record i on partition i % P, in order within each partition."""
    seen = transactions_seen(records, tag)
    assert sorted(seen) == sorted(expected), (
        f"{what}: transactions of {tag} seen {sorted(seen)}, expected {sorted(expected)}")
    for t, recs in seen.items():
        indexes = sorted(i for _, _, i, _ in recs)
        assert indexes == list(range(per_txn)), f"{what}: {tag} transaction {t} not whole or duplicated: {indexes}"
        assert all(m == per_txn for _, _, _, m in recs), f"{what}: {tag} transaction {t}: {recs}"
        assert all(p == i % partitions for p, _, i, _ in recs), f"{what}: {tag} transaction {t} partitions: {recs}"
        by_partition = collections.defaultdict(list)
        for p, off, i, _ in recs:
            by_partition[p].append((off, i))
        for p, pairs in by_partition.items():
            assert [i for _, i in sorted(pairs)] == sorted(i for _, i in pairs), (
                f"{what}: {tag} transaction {t} out of order on partition {p}: {sorted(pairs)}")


def check_offsets_unique(records, what):
    keys = [(r["partition"], r["offset"]) for r in records]
    assert len(keys) == len(set(keys)), f"{what}: a (partition, offset) returned twice"


def check_producer(bootstrap, topic, summary, partitions):
    """read_committed sees every committed transaction of a producer summary exactly once and whole and none of its
    aborted ones; read_uncommitted sees both, whole. Returns (committed view, uncommitted view)."""
    tag, m = summary["tag"], summary["records_per_txn"]
    committed, c_sum = read_topic(bootstrap, topic, "read_committed")
    uncommitted, u_sum = read_topic(bootstrap, topic, "read_uncommitted")
    check_offsets_unique(committed, "read_committed")
    check_offsets_unique(uncommitted, "read_uncommitted")
    check_whole(committed, tag, summary["committed"], m, partitions, "read_committed")
    check_whole(uncommitted, tag, summary["committed"] + summary["aborted"], m, partitions, "read_uncommitted")
    return (committed, c_sum), (uncommitted, u_sum)


def copy_expectations(bootstrap, topic):
    """The input's committed records per partition (what an exactly-once copy must output) and the group offsets a
    finished copy commits: one past the last committed record of each partition."""
    committed, _ = read_topic(bootstrap, topic, "read_committed")
    per_partition = collections.defaultdict(list)
    for r in sorted(committed, key=lambda r: (r["partition"], r["offset"])):
        per_partition[r["partition"]].append((r["key"], r["value"]))
    offsets = {p: max(r["offset"] for r in committed if r["partition"] == p) + 1 for p in per_partition}
    return per_partition, offsets


def check_copy(bootstrap, output, expected):
    """The output, read_committed, is exactly one copy of each committed input record, in input order per partition."""
    out, _ = read_topic(bootstrap, output, "read_committed")
    check_offsets_unique(out, "copy output")
    got = collections.defaultdict(list)
    for r in sorted(out, key=lambda r: (r["partition"], r["offset"])):
        got[r["partition"]].append((r["key"], r["value"]))
    want = {p: [(k, "copy:" + v) for k, v in recs] for p, recs in expected.items()}
    assert dict(got) == want


def check_group(bootstrap, group, topic, offsets):
    lag = group_lag(bootstrap, group)
    _, u_sum = read_topic(bootstrap, topic, "read_uncommitted")
    for p, committed_offset in offsets.items():
        current, end, lag_value = lag[(topic, p)]
        assert current == committed_offset, (p, lag)
        assert end == u_sum["end_offsets"][str(p)], (p, lag, u_sum)
        assert lag_value == end - current, (p, lag)


# --- tool output -------------------------------------------------------------------------------------------------

def tool_table(text):
    """A kafka-transactions.sh table (tab-separated, header first) as a list of {column: value}."""
    rows = [[c.strip() for c in line.split("\t")] for line in text.splitlines() if line.strip()]
    if not rows:
        return []
    header = [h for h in rows[0] if h]
    out = []
    for row in rows[1:]:
        assert len(row) >= len(header), f"row {row} shorter than header {header}"
        out.append(dict(zip(header, row)))
    return out


def transactions_tool(bootstrap, *commands):
    """Runs kafka-transactions.sh commands (each a tuple of its arguments after --bootstrap-server) in one JVM;
    returns their outputs, each parsed as a table; fails the test on a non-zero exit."""
    outs = tool_batch(*[(TRANSACTIONS_TOOL, "--bootstrap-server", bootstrap, *c) for c in commands])
    tables = []
    for c, out in zip(commands, outs):
        if out["exit"] != 0:
            pytest.fail(f"kafka-transactions.sh {' '.join(map(str, c))} exited with {out['exit']}\n"
                        f"stdout: {out['stdout']}\nstderr: {out['stderr'][-3000:]}")
        tables.append(tool_table(out["stdout"]))
    return tables


def group_lag(bootstrap, group):
    """kafka-consumer-groups.sh --describe --group G: {(topic, partition): (current, log end, lag)} (a "-" as None)."""
    out = tool_batch((GROUPS_TOOL, "--bootstrap-server", bootstrap, "--describe", "--group", group))[0]
    assert out["exit"] == 0, f"kafka-consumer-groups --describe failed: {out}"
    rows = {}
    header = None
    for line in out["stdout"].splitlines():
        cols = line.split()
        if not cols:
            continue
        if cols[0] == "GROUP":
            header = cols
            continue
        if header is None or len(cols) < len(header) - 3:
            continue
        row = dict(zip(header, cols))

        def num(v):
            return None if v == "-" else int(v)
        rows[(row["TOPIC"], int(row["PARTITION"]))] = (num(row["CURRENT-OFFSET"]), num(row["LOG-END-OFFSET"]),
                                                       num(row["LAG"]))
    assert rows, f"no partitions in kafka-consumer-groups output:\n{out['stdout']}"
    return rows
