"""Several log dirs per node (JBOD) and KIP-858 directory assignment (issue 24): three Mala nodes with two
log.dirs each. A topic's replicas spread over both dirs of every node (fewest partitions first, as Kafka's
LogManager places them), and each broker tells the active controller which dir holds each of its replicas
(AssignReplicasToDirs): the partitions' Directories in the metadata log, as Apache Kafka's own kafka-dump-log
decodes them, name the dir id (meta.properties directory.id) of the dir each replica's files are in. A node
restarted keeps them. (test_kafka_mala_rolling_migration.py runs Kafka and Mala nodes with two dirs each in one
cluster: each kind's controller records the other's assignments.) A dir that fails (a tmpfs that fills up) is
reported in the node's heartbeats (OfflineLogDirs): the controller moves the leaderships of the replicas in it
while the node keeps leading from its other dir, and no acknowledged record is lost. kafka-reassign-partitions
with log dirs moves a replica between a node's dirs under load (AlterReplicaLogDirs, KIP-113)."""

import json
import os
import subprocess
from collections import defaultdict
from pathlib import Path

import pytest

from real_clients import DUMP_LOG_TOOL, LOG_DIRS_TOOL, rdkafka_consume, rdkafka_produce, step_ok, tool_batch
from test_replication_failover import KeyedLoad, _fast, create_replicated_topic, read_back_exactly_once_in_key_order

TOPIC = "spread"
PARTITIONS = 8


def two_log_dirs(cluster):
    for n in cluster.nodes.values():
        n.config["log.dirs"] = f"{n.log_dir / 'disk-a'},{n.log_dir / 'disk-b'}"


@pytest.fixture
def jbod_cluster(request, tmp_path):
    yield from _fast(request, tmp_path, prepare=two_log_dirs)


def dir_ids(log_dirs):
    """dir path -> its directory.id, for a node's log dirs (its log.dirs value)."""
    out = {}
    for d in log_dirs.split(","):
        props = dict(line.split("=", 1) for line in (Path(d) / "meta.properties").read_text().splitlines()
                     if "=" in line and not line.startswith("#"))
        out[d] = props["directory.id"]
    return out


def actual_dirs(log_dirs_by_node, topic):
    """(partition, node id) -> the directory.id of the dir holding that replica's files; `log_dirs_by_node`:
    node id -> its log.dirs value."""
    out = {}
    for node_id, log_dirs in log_dirs_by_node.items():
        for path, dir_id in dir_ids(log_dirs).items():
            for part in Path(path).glob(f"{topic}-*"):
                suffix = part.name[len(topic) + 1:]
                if suffix.isdigit():
                    out[(int(suffix), node_id)] = dir_id
    return out


def recorded_dirs(metadata_dir, topic):
    """(partition, replica) -> the Directories entry the metadata log in `metadata_dir` (a node's
    __cluster_metadata-0) holds, decoded by kafka-dump-log (TopicRecord, PartitionRecord, PartitionChangeRecord
    in order)."""
    segments = sorted(str(s) for s in metadata_dir.glob("*.log"))
    dump = step_ok(tool_batch((DUMP_LOG_TOOL, "--cluster-metadata-decoder", "--files", ",".join(segments)))[0])
    names, state = {}, {}
    for line in dump.splitlines():
        at = line.find("payload: {")
        if at < 0:
            continue
        record = json.loads(line[at + len("payload: "):])
        kind, data = record["type"], record["data"]
        if kind == "TOPIC_RECORD":
            names[data["topicId"]] = data["name"]
        elif kind == "PARTITION_RECORD":
            state[(data["topicId"], data["partitionId"])] = (data["replicas"], data.get("directories", []))
        elif kind == "PARTITION_CHANGE_RECORD":
            key = (data["topicId"], data["partitionId"])
            replicas, dirs = state[key]
            if data.get("directories"):
                dirs = data["directories"]
            if data.get("replicas") is not None:
                old = dict(zip(replicas, dirs))
                replicas = data["replicas"]
                if not data.get("directories"):
                    dirs = [old.get(r, "AAAAAAAAAAAAAAAAAAAAAQ") for r in replicas]  # new replicas: unassigned
            state[key] = (replicas, dirs)
    out = {}
    for (topic_id, partition), (replicas, dirs) in state.items():
        if names.get(topic_id) == topic:
            out.update({(partition, r): d for r, d in zip(replicas, dirs)})
    return out


def assigned(log_dirs_by_node, metadata_dir, topic):
    """Whether the metadata names, for every replica of the topic, the dir its files are in."""
    actual = actual_dirs(log_dirs_by_node, topic)
    recorded = recorded_dirs(metadata_dir, topic)
    return bool(actual) and all(recorded.get(k) == v for k, v in actual.items())


def mala_log_dirs(cluster):
    return {n.node_id: n.config["log.dirs"] for n in cluster.nodes.values()}


def wait_assigned(cluster, topic):
    metadata_dir = Path(cluster.node(1).config["log.dirs"].split(",")[0]) / "__cluster_metadata-0"
    cluster.wait_until(lambda: assigned(mala_log_dirs(cluster), metadata_dir, topic) or None, timeout=60,
                       interval=2, what=f"the metadata naming each {topic} replica's dir")


def test_each_replica_is_recorded_in_the_dir_holding_it(jbod_cluster):
    c = jbod_cluster
    create_replicated_topic(c, TOPIC, PARTITIONS)
    actual = actual_dirs(mala_log_dirs(c), TOPIC)
    assert len(actual) == PARTITIONS * 3
    for n in c.nodes.values():  # both dirs of every node hold replicas
        assert set(dir_ids(n.config["log.dirs"]).values()) == {d for (_, node), d in actual.items()
                                                                if node == n.node_id}
    wait_assigned(c, TOPIC)
    assert "assigned to their log dirs (AssignReplicasToDirs)" in c.logs(tail_lines=100000)

    # A restart changes nothing: the replicas stay where they are, and so does the record.
    c.stop(2)
    c.start(2)
    create_replicated_topic(c, TOPIC, PARTITIONS)  # waits for full ISRs again
    assert actual_dirs(mala_log_dirs(c), TOPIC) == actual
    wait_assigned(c, TOPIC)


@pytest.fixture
def jbod_cluster_with_a_tmpfs_dir(request, tmp_path):
    """jbod_cluster, node 2's second dir a 48 MiB tmpfs (skips where mounting is not allowed)."""
    mounted = []

    def prepare(c):
        two_log_dirs(c)
        mount_point = c.node(2).log_dir / "disk-b"
        mount_point.mkdir(parents=True, exist_ok=True)
        result = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=48m", "tmpfs", str(mount_point)],
                                capture_output=True, text=True, timeout=30)
        if result.returncode != 0:
            pytest.skip(f"cannot mount a tmpfs here: {result.stderr.strip()}")
        mounted.append(mount_point)

    try:
        yield from _fast(request, tmp_path, prepare=prepare)
    finally:
        for m in mounted:
            subprocess.run(["umount", "-l", str(m)], capture_output=True, timeout=30)


def test_a_failed_dir_moves_its_leaderships_while_the_node_keeps_serving_its_other_dir(
        jbod_cluster_with_a_tmpfs_dir):
    """KIP-858: node 2 leads every partition; half of them sit in its tmpfs dir. Under an idempotent acks=all
    load the tmpfs fills up: node 2 takes that dir offline, tells the controller in its next heartbeat
    (OfflineLogDirs), and the controller moves those partitions' leaderships to nodes 1 and 3 and takes node 2
    out of their ISRs, leaving the dir out of node 2's registration. Node 2 stays unfenced and keeps leading the
    partitions of its healthy dir; kafka-log-dirs shows the failed dir with KAFKA_STORAGE_ERROR; every
    acknowledged record is read back exactly once."""
    c = jbod_cluster_with_a_tmpfs_dir
    topic = "failing-dir"
    partitions = 8
    create_replicated_topic(c, topic, partitions, assignment=[[2, 1, 3]] * partitions)
    wait_assigned(c, topic)
    tmpfs = c.node(2).log_dir / "disk-b"
    tmpfs_id = dir_ids(c.node(2).config["log.dirs"])[str(tmpfs)]
    actual = actual_dirs(mala_log_dirs(c), topic)
    in_tmpfs = sorted(p for p in range(partitions) if actual[(p, 2)] == tmpfs_id)
    healthy = sorted(set(range(partitions)) - set(in_tmpfs))
    assert in_tmpfs and healthy, actual

    load = KeyedLoad(c.bootstrap, topic)
    load.start()
    try:
        c.wait_until(lambda: len(load.acked) > 300, timeout=30, what="acknowledgements before the dir fails")
        # Fill the tmpfs: node 2's next write there fails with ENOSPC.
        subprocess.run(["dd", "if=/dev/zero", f"of={tmpfs / 'filler'}", "bs=1M"], capture_output=True, timeout=60)

        def moved():
            t = c.rdkafka_metadata(1, topic=topic).topics[topic]
            failed_moved = all(t.partitions[p].leader in (1, 3) and 2 not in t.partitions[p].isrs
                               for p in in_tmpfs)
            return failed_moved or None
        c.wait_until(moved, timeout=40, interval=0.5, what="the failed dir's leaderships moved off node 2")
        before = len(load.acked)
        c.wait_until(lambda: len(load.acked) > before + 300, timeout=40, what="acknowledgements after the move")
    finally:
        remaining = load.stop()
    assert remaining == 0 and not load.errors, f"{remaining} unacknowledged, errors {load.errors[:5]}"

    t = c.rdkafka_metadata(1, topic=topic).topics[topic]
    for p in healthy:  # node 2 still leads from its healthy dir, with a full ISR
        assert t.partitions[p].leader == 2 and len(t.partitions[p].isrs) == 3, (p, t.partitions[p])
    logs = c.logs(tail_lines=100000)
    assert "marked offline, remaining directories" in logs
    assert f"log dir {tmpfs_id}" in logs or "telling the controller" in logs
    described = step_ok(tool_batch((LOG_DIRS_TOOL, "--bootstrap-server", c.bootstrap, "--describe",
                                    "--broker-list", "2"))[0])
    report = json.loads(next(line for line in described.splitlines() if line.startswith("{")))
    by_dir = {d["logDir"]: d for b in report["brokers"] for d in b["logDirs"]}
    assert by_dir[str(tmpfs)]["error"] == "org.apache.kafka.common.errors.KafkaStorageException", by_dir[str(tmpfs)]
    assert by_dir[str(c.node(2).log_dir / "disk-a")]["error"] is None

    read_back_exactly_once_in_key_order(c, topic, partitions, load.acked)


REASSIGN_TOOL = "org.apache.kafka.tools.reassign.ReassignPartitionsCommand"  # kafka-reassign-partitions.sh


def test_kafka_reassign_partitions_moves_a_replica_to_another_log_dir_under_load(jbod_cluster):
    """KIP-113: kafka-reassign-partitions --execute with log_dirs and --replica-alter-log-dirs-throttle moves
    the leader's replica of a partition holding about 24 MB to its node's other dir (AlterReplicaLogDirs) while
    an idempotent acks=all producer keeps writing to it: the node copies the log to a future log at the
    throttled rate, kafka-log-dirs shows the future replica with its lag, the node restarted in the middle goes
    on with the copy, and the future log is swapped in; --verify reports the replica move complete; the files
    are in the new dir only, the metadata names it (AssignReplicasToDirs), and every record, old and new, is
    read back exactly once."""
    c = jbod_cluster
    topic = "moving-dirs"
    create_replicated_topic(c, topic, 1, assignment=[[1, 2, 3]])
    value = "x" * 1000
    rdkafka_produce(c.bootstrap, topic, [(f"k{i}", f"{i}:{value}") for i in range(24000)], acks="all",
                    **{"linger.ms": 20, "batch.size": 262144})
    wait_assigned(c, topic)
    node1_dirs = c.node(1).config["log.dirs"].split(",")
    ids = dir_ids(c.node(1).config["log.dirs"])
    before = actual_dirs(mala_log_dirs(c), topic)[(0, 1)]
    source = next(d for d in node1_dirs if ids[d] == before)
    target = next(d for d in node1_dirs if ids[d] != before)

    load = KeyedLoad(c.bootstrap, topic)
    load.start()
    try:
        c.wait_until(lambda: len(load.acked) > 200, timeout=30, what="acknowledgements before the move")
        plan = c.work_dir / "log-dirs.json"
        plan.write_text(json.dumps({"version": 1, "partitions": [
            {"topic": topic, "partition": 0, "replicas": [1, 2, 3], "log_dirs": [target, "any", "any"]}]}))
        out = step_ok(tool_batch((REASSIGN_TOOL, "--bootstrap-server", c.bootstrap, "--reassignment-json-file",
                                  str(plan), "--execute", "--replica-alter-log-dirs-throttle", "2000000"))[0])
        print(out)
        assert f"Successfully started moving log directory to {target} for replica {topic}-0 with broker 1" in out

        def future_replica():
            text = step_ok(tool_batch((LOG_DIRS_TOOL, "--bootstrap-server", c.bootstrap, "--describe",
                                       "--broker-list", "1", "--topic-list", topic))[0])
            report = json.loads(next(line for line in text.splitlines() if line.startswith("{")))
            for d in report["brokers"][0]["logDirs"]:
                for p in d["partitions"]:
                    if p["isFuture"] and d["logDir"] == target and p["offsetLag"] > 0:
                        return p
            return None
        print("future replica:", c.wait_until(future_replica, timeout=30, interval=0.5,
                                              what="the future replica in kafka-log-dirs"))
        # The node restarts in the middle of the throttled copy: the move goes on from its future log.
        c.stop(1)
        c.start(1)
        c.wait_until(lambda: "an interrupted move goes on" in c.node(1).log_text(400) or None, timeout=10,
                     what="the future log loaded again")

        def verified():
            text = tool_batch((REASSIGN_TOOL, "--bootstrap-server", c.bootstrap, "--reassignment-json-file",
                               str(plan), "--verify"))[0]["stdout"]
            return text if f"Reassignment of replica {topic}-0-1 completed successfully." in text else None
        print(c.wait_until(verified, timeout=90, interval=2, what="the replica move reported complete"))
        before_more = len(load.acked)
        c.wait_until(lambda: len(load.acked) > before_more + 200, timeout=30, what="acknowledgements after the move")
    finally:
        remaining = load.stop()
    assert remaining == 0 and not load.errors, f"{remaining} unacknowledged, errors {load.errors[:5]}"

    assert not (Path(source) / f"{topic}-0").exists()
    assert (Path(target) / f"{topic}-0").is_dir()
    assert actual_dirs(mala_log_dirs(c), topic)[(0, 1)] == ids[target]
    wait_assigned(c, topic)
    logs = c.logs(tail_lines=100000)
    assert "log moved to" in logs and "resuming the move to another log dir" in logs

    read_back_once(c, topic, [f"{i}:{value}" for i in range(24000)], load.acked)


def read_back_once(c, topic, written, acked):
    """Partition 0 of `topic` read from offset 0: each of the values `written` before and of the `acked`
    (partition, offset, key, value) records is there exactly once, and nothing is read twice. Returns what was
    read."""
    consumed = rdkafka_consume(c.bootstrap, topic, {0: 0}, timeout=120)
    count = defaultdict(int)
    for _, _, _, v in consumed:
        count[v] += 1
    assert all(count[v] == 1 for v in written), "records written before the move lost or doubled"
    missing = [a for a in acked if count[a[3]] == 0]
    assert not missing, f"{len(missing)} acknowledged records lost, e.g. {missing[:5]}"
    assert not [v for v, n in count.items() if n > 1], "records read twice"
    return consumed


@pytest.fixture
def jbod_node(request, tmp_path):
    yield from _fast(request, tmp_path, size=1, prepare=two_log_dirs)


def test_kill_9_at_random_points_of_log_dir_moves_loses_no_acknowledged_record(jbod_node):
    """KIP-113 under faults: one node with two dirs holds the only replica of a partition of about 12 MB, an
    idempotent acks=all producer keeps writing to it, and kafka-reassign-partitions moves it from dir to dir
    (a move takes 50-100 ms here) while the node is SIGKILLed at a random moment of each move (0-120 ms after
    the node logged its start) and restarted, 12 times: in the copy, while the file worker moves the future log in beside the log, at
    the swap's commit, or after. Whatever state a kill leaves (a future log, two <topic>-<partition> dirs, a
    marked log alone) the node loads one log holding every acknowledged record; a last move completes; every
    record, old and acknowledged, is read back exactly once and in order per key."""
    import random
    import threading
    import time

    c = jbod_node
    topic = "moved-while-killed"
    create_replicated_topic(c, topic, 1, min_isr=1, assignment=[[1]])
    value = "x" * 1000
    rdkafka_produce(c.bootstrap, topic, [(f"k{i}", f"{i}:{value}") for i in range(12000)], acks="all",
                    **{"linger.ms": 20, "batch.size": 262144})
    dirs = c.node(1).config["log.dirs"].split(",")
    plan = c.work_dir / "log-dirs.json"

    def move_to(target, *extra):
        plan.write_text(json.dumps({"version": 1, "partitions": [
            {"topic": topic, "partition": 0, "replicas": [1], "log_dirs": [target]}]}))
        return tool_batch((REASSIGN_TOOL, "--bootstrap-server", c.bootstrap, "--reassignment-json-file",
                           str(plan), *extra))[0]["stdout"]

    seed = int(os.environ.get("MALA_TEST_SEED", random.randrange(1 << 30)))
    print("seed (MALA_TEST_SEED):", seed)
    rng = random.Random(seed)
    load = KeyedLoad(c.bootstrap, topic)
    load.start()
    try:
        c.wait_until(lambda: len(load.acked) > 200, timeout=30, what="acknowledgements before the moves")
        def moves_started():
            return c.node(1).log_path.read_text(errors="replace").count("moving the log to another log dir")

        def settled_dir():
            """The dir holding the log when no move is under way (no future log, no marked copy)."""
            held = [p for d in dirs for p in Path(d).glob(f"{topic}-0*") if not p.name.endswith("-delete")]
            if len(held) == 1 and held[0].name == f"{topic}-0" and not (held[0] / "mala-swap-ready").exists():
                return str(held[0].parent)
            return None

        for round in range(12):
            source = c.wait_until(settled_dir, timeout=60, interval=0.1, what="no move under way")
            target = next(d for d in dirs if d != source)
            # The kill comes a random time after the node started the move (the tool may still be running).
            started = moves_started()
            tool = threading.Thread(target=move_to, args=(target, "--execute"))
            tool.start()
            c.wait_until(lambda: moves_started() > started or None, timeout=60, interval=0.005,
                         what=f"move {round + 1} started")
            time.sleep(rng.uniform(0.0, 0.12))
            c.kill(1)
            tool.join()
            c.start(1)
            acked = len(load.acked)
            c.wait_until(lambda: len(load.acked) > acked + 100, timeout=60,
                         what=f"acknowledgements after kill {round + 1}")
        # A last move, not interrupted, to the dir that does not hold the log now.
        source = c.wait_until(settled_dir, timeout=60, interval=0.1, what="no move under way")
        target = next(d for d in dirs if d != source)
        move_to(target, "--execute")
        c.wait_until(lambda: "completed successfully" in move_to(target, "--verify") or None, timeout=60,
                     interval=2, what="the last move reported complete")
        acked = len(load.acked)
        c.wait_until(lambda: len(load.acked) > acked + 100, timeout=30, what="acknowledgements after the moves")
    finally:
        remaining = load.stop()
    assert remaining == 0 and not load.errors, f"{remaining} unacknowledged, errors {load.errors[:5]}"
    assert (Path(target) / f"{topic}-0").is_dir()
    assert not [p for d in dirs for p in Path(d).glob(f"{topic}-0*") if p.name != f"{topic}-0"
                and not p.name.endswith("-delete")], "a future log left behind"
    logs = c.logs(tail_lines=100000)
    print("moves committed:", logs.count("log moved to"), "interrupted moves resumed:",
          logs.count("an interrupted move goes on"), "copies restored after a move-in:",
          logs.count("is the copy of a move a stop interrupted"), "logs kept after a commit:",
          logs.count("a stop came right after its swap"))

    consumed = read_back_once(c, topic, [f"{i}:{value}" for i in range(12000)], load.acked)
    last = {}
    for _, o, k, v in sorted((r for r in consumed if r[2].startswith("bus-")), key=lambda r: r[1]):
        seq = int(v.split(":")[1])
        assert seq > last.get(k, -1), f"key {k} out of order at offset {o}"
        last[k] = seq
