"""KIP-1066 log dir cordoning (issue 24): `kafka-configs --entity-type brokers --entity-name 3 --alter --add-config
cordoned.log.dirs=*` cordons every log dir of node 3 of a 3-node cluster. Its heartbeats carry the dirs' ids, the
controller records them, and then, as in Apache Kafka 4.4: kafka-topics cannot create a topic of replication factor 3
(INVALID_REPLICATION_FACTOR, with Kafka's message), topics of factor 2 are placed on nodes 1 and 2 only, a manual
assignment or a reassignment naming node 3 is refused (INVALID_REPLICA_ASSIGNMENT), the partitions node 3 already
hosts are untouched, DescribeLogDirs v5 says the dir is cordoned, and node 3's metrics endpoint counts it
(kafka_log_logmanager_cordonedlogdirectorycount). The key is per broker only (refused at the
cluster default), and a broker refuses a dir that is not one of its log dirs. Deleting it makes node 3 usable
again.
"""

import json

import pytest

from real_clients import CONFIGS_TOOL, TOPICS_TOOL, java_json, rdkafka_produce, step_ok, tool_batch
from test_metrics import http_get, with_metrics_ports
from test_replication_failover import _fast, create_replicated_topic, partition_view
from test_replication_throttles import REASSIGN_TOOL


@pytest.fixture
def metered_cluster(request, tmp_path):
    """3 nodes with fast heartbeats and a metrics endpoint each; {node id: metrics port} on `metrics_ports`."""
    def with_ports(c):
        c.metrics_ports = with_metrics_ports(c)
    yield from _fast(request, tmp_path, prepare=with_ports)


def cordoned_gauge(c, node):
    """kafka_log_logmanager_cordonedlogdirectorycount on `node`'s metrics endpoint."""
    status, text = http_get(c.metrics_ports[node], "/metrics")
    assert status == 200
    for line in text.splitlines():
        if line.startswith("kafka_log_logmanager_cordonedlogdirectorycount "):
            return float(line.split()[1])
    return None


def create(c, topic, *args):
    return tool_batch((TOPICS_TOOL, "--bootstrap-server", c.bootstrap, "--create", "--topic", topic, *args))[0]


def replicas_of(c, topic, partitions):
    return [partition_view(c, topic, p)["replicas"] for p in range(partitions)]


def test_a_cordoned_broker_gets_no_new_replicas(metered_cluster):
    c = metered_cluster
    # A topic on all three nodes before the cordon: it stays as it is.
    create_replicated_topic(c, "before", 2, min_isr=1)
    rdkafka_produce(c.bootstrap, "before", [(f"k{i}", f"v{i}") for i in range(50)], acks="all")

    outs = tool_batch(
        (CONFIGS_TOOL, "--bootstrap-server", c.bootstrap, "--alter", "--entity-type", "brokers", "--entity-default",
         "--add-config", "cordoned.log.dirs=*"),
        (CONFIGS_TOOL, "--bootstrap-server", c.bootstrap, "--alter", "--entity-type", "brokers", "--entity-name", "3",
         "--add-config", "cordoned.log.dirs=/not-a-log-dir"),
        (CONFIGS_TOOL, "--bootstrap-server", c.bootstrap, "--alter", "--entity-type", "brokers", "--entity-name", "3",
         "--add-config", "cordoned.log.dirs=*"),
        (CONFIGS_TOOL, "--bootstrap-server", c.bootstrap, "--describe", "--entity-type", "brokers", "--entity-name",
         "3"),
    )
    assert outs[0]["exit"] != 0
    assert ("Cannot update these configs at default cluster level, broker id must be specified: "
            "Set(cordoned.log.dirs)") in outs[0]["stdout"] + outs[0]["stderr"], outs[0]
    # The broker checks its own log dirs (kafka-configs sends a broker's resource to that broker).
    assert outs[1]["exit"] != 0
    assert ("Invalid entry in cordoned.log.dirs: /not-a-log-dir. All cordoned log dirs must be entries of log.dirs "
            "or log.dir.") in outs[1]["stdout"] + outs[1]["stderr"], outs[1]
    step_ok(outs[2])
    assert "cordoned.log.dirs=*" in step_ok(outs[3])
    # Kafka's LogManager gauge, once node 3 applied the config.
    c.wait_until(lambda: cordoned_gauge(c, 3) == 1, timeout=15, what="node 3's cordoned log dir gauge at 1")
    assert cordoned_gauge(c, 1) == 0

    # Node 3's next heartbeat (every 2 s at most) carries its cordoned dir; until then placement may still use it
    # (each try names a new topic, so that one created before the cordon took effect does not fail the next).
    attempts = iter(range(100))

    def refused_factor_3():
        out = create(c, f"rf3-{next(attempts)}", "--partitions", "1", "--replication-factor", "3")
        return out if out["exit"] != 0 else None
    out = c.wait_until(refused_factor_3, timeout=30, interval=1, what="a factor-3 topic refused")
    text = out["stdout"] + out["stderr"]
    assert "InvalidReplicationFactorException" in text, text
    assert ("The target replication factor of 3 cannot be reached because only 2 broker(s) are registered or some "
            "brokers have all their log directories cordoned.") in text, text

    step_ok(create(c, "rf2", "--partitions", "6", "--replication-factor", "2"))
    placed = replicas_of(c, "rf2", 6)
    assert all(sorted(r) == [1, 2] for r in placed), placed

    manual = create(c, "manual", "--replica-assignment", "1:3")
    text = manual["stdout"] + manual["stderr"]
    assert manual["exit"] != 0 and "InvalidReplicaAssignmentException" in text, text
    assert "The manual partition assignment includes broker 3, but all its log directories are cordoned." in text

    plan = c.work_dir / "to-3.json"
    plan.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": "rf2", "partition": 0, "replicas": [1, 3], "log_dirs": ["any", "any"]}]}))
    out = tool_batch((REASSIGN_TOOL, "--bootstrap-server", c.bootstrap, "--reassignment-json-file", str(plan),
                      "--execute"))[0]
    assert "all its log directories are cordoned" in out["stdout"] + out["stderr"], out
    assert replicas_of(c, "rf2", 1)[0] in ([1, 2], [2, 1])

    # What node 3 hosts already is untouched and still served.
    assert all(3 in r for r in replicas_of(c, "before", 2))
    assert sorted(partition_view(c, "before", 0)["isr"]) == [1, 2, 3]

    # DescribeLogDirs v5 (Kafka's Admin.describeLogDirs): node 3's dir is cordoned, the others' are not.
    result, dirs = java_json("mala.it.DescribeLogDirs", "--bootstrap", c.bootstrap, "--brokers", "1,2,3")
    assert result.returncode == 0, result.stderr
    cordoned = {d["broker"]: d["cordoned"] for d in dirs}
    assert cordoned == {1: False, 2: False, 3: True}, dirs

    # Uncordoned: factor 3 fits again.
    step_ok(tool_batch((CONFIGS_TOOL, "--bootstrap-server", c.bootstrap, "--alter", "--entity-type", "brokers",
                        "--entity-name", "3", "--delete-config", "cordoned.log.dirs"))[0])
    c.wait_until(lambda: create(c, "rf3-again", "--partitions", "1", "--replication-factor", "3")["exit"] == 0,
                 timeout=30, interval=1, what="a factor-3 topic created once node 3 is uncordoned")
