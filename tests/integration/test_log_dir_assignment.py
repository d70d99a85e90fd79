"""Several log dirs per node (JBOD) and KIP-858 directory assignment (issue 24): three Mala nodes with two
log.dirs each. A topic's replicas spread over both dirs of every node (fewest partitions first, as Kafka's
LogManager places them), and each broker tells the active controller which dir holds each of its replicas
(AssignReplicasToDirs): the partitions' Directories in the metadata log, as Apache Kafka's own kafka-dump-log
decodes them, name the dir id (meta.properties directory.id) of the dir each replica's files are in. A node
restarted keeps them. (test_kafka_mala_rolling_migration.py runs Kafka and Mala nodes with two dirs each in one
cluster: each kind's controller records the other's assignments.)"""

import json
from pathlib import Path

import pytest

from real_clients import DUMP_LOG_TOOL, step_ok, tool_batch
from test_replication_failover import _fast, create_replicated_topic

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
