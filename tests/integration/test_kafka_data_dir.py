"""Kafka <-> Mala in place on one node (issue 24): Apache Kafka 4.4 (the Maven Central jars, apache_kafka.py)
formats a data dir with `kafka-storage format` and serves topics, records, an idempotent producer, committed
offsets, topic configs, ACLs (one with a KIP-1276 CIDR host, metadata.version 4.4-IV1) and SCRAM credentials;
then Mala starts on that dir with the same server.properties and serves all of it, takes new writes, a new
topic and new commits; then Kafka starts on the dir again and serves everything both wrote. Kafka's metadata
log holds what Mala once refused: KIP-868 metadata transactions (the bootstrap records), RegisterControllerRecord,
RegisterBrokerRecord v4 and BrokerRegistrationChangeRecord v3, metadata.version 33; Kafka reads what Mala's
Raft leader writes (the LeaderChangeMessage of each epoch).

The same on three nodes: a 3-node Kafka cluster's dirs (replication factor 3, min ISR 2) move to three Mala
nodes, which replicate, and back.

Also: a data dir Kafka formatted with its defaults finalizes share.version 2 and streams.version 1, which Mala
does not implement: Mala's broker does not register and its log names both features and the kafka-features.sh
downgrade that lets it; and a data dir Mala formatted itself opens under Kafka.
"""

import re
import time

from confluent_kafka.admin import (AclBinding, AclBindingFilter, AclOperation, AclPermissionType, ConfigResource,
                                   NewTopic, ResourcePatternType, ResourceType, ScramCredentialInfo, ScramMechanism,
                                   UserScramCredentialUpsertion)

from apache_kafka import ApacheKafkaCluster, ApacheKafkaNode
from conftest import port_accepts
from in_place import (FEATURE_TOOL, THREE_NODES, MalaOnDir, admin_call, commit, committed, contents, digest,
                      in_sync_everywhere, produce)

DUMP_TOOL = "org.apache.kafka.tools.DumpLogSegments"  # kafka-dump-log.sh
QUORUM_TOOL = "org.apache.kafka.tools.MetadataQuorumCommand"  # kafka-metadata-quorum.sh
AUTHORIZER = {
    "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
    "allow.everyone.if.no.acl.found": "true",
    "super.users": "User:ANONYMOUS",
    "group.initial.rebalance.delay.ms": "0",
}


def acls(bootstrap):
    [found] = admin_call(bootstrap, "describe_acls", AclBindingFilter(
        ResourceType.ANY, None, ResourcePatternType.ANY, None, None, AclOperation.ANY, AclPermissionType.ANY))
    return sorted((a.name, a.principal, a.host, a.operation.name, a.permission_type.name) for a in found)


def topic_configs(bootstrap, topic):
    [cfg] = admin_call(bootstrap, "describe_configs", [ConfigResource(ConfigResource.Type.TOPIC, topic)])
    return {k: cfg[k].value for k in ("cleanup.policy", "retention.ms")}


def scram_users(bootstrap):
    [described] = admin_call(bootstrap, "describe_user_scram_credentials")
    return {user: sorted((i.mechanism.name, i.iterations) for i in d.scram_credential_infos)
            for user, d in described.items()}


def test_kafka_to_mala_and_back_on_one_node(tmp_path):
    kafka = ApacheKafkaNode(tmp_path, extra_config=AUTHORIZER)
    kafka.start()
    try:
        bs = kafka.bootstrap
        admin_call(bs, "create_topics", [
            NewTopic("orders", 3, 1, config={"cleanup.policy": "compact", "retention.ms": "123456"}),
            NewTopic("events", 1, 1)])
        produce(bs, "orders", 3000, 0)
        produce(bs, "events", 1500, 0)
        commit(bs, "billing", "events", 1000)
        admin_call(bs, "create_acls", [
            AclBinding(ResourceType.TOPIC, "orders", ResourcePatternType.LITERAL, "User:alice", "*",
                       AclOperation.READ, AclPermissionType.ALLOW),
            AclBinding(ResourceType.TOPIC, "orders", ResourcePatternType.LITERAL, "User:alice", "10.20.0.0/16",
                       AclOperation.WRITE, AclPermissionType.DENY)])
        admin_call(bs, "alter_user_scram_credentials", [UserScramCredentialUpsertion(
            "alice", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 8192), b"alice-secret")])
        # Kafka 4.4 formats with share.version 2 and streams.version 1; Mala implements neither: lowered first.
        down = kafka.tool(FEATURE_TOOL, "--bootstrap-server", bs, "downgrade", "--feature", "share.version=0",
                          "--feature", "streams.version=0")
        assert down.returncode == 0, down.stdout + down.stderr
        kafka_orders = contents(bs, "orders", 3)
        kafka_events = contents(bs, "events", 1)
        assert len(kafka_orders) == 3000 and len(kafka_events) == 1500
        expected_acls = acls(bs)
        assert ("orders", "User:alice", "10.20.0.0/16", "WRITE", "DENY") in expected_acls
    finally:
        kafka.stop()

    # Mala on Kafka's data dir, with Kafka's own server.properties.
    mala = MalaOnDir(kafka.config_path, kafka.port).start()
    try:
        assert digest(contents(bs, "orders", 3)) == digest(kafka_orders)
        assert digest(contents(bs, "events", 1)) == digest(kafka_events)
        assert committed(bs, "billing", "events") == 1000
        assert topic_configs(bs, "orders") == {"cleanup.policy": "compact", "retention.ms": "123456"}
        assert acls(bs) == expected_acls
        assert scram_users(bs) == {"alice": [("SCRAM_SHA_256", 8192)]}
        features = kafka.tool(FEATURE_TOOL, "--bootstrap-server", bs, "describe")
        assert features.returncode == 0, features.stderr
        assert re.search(r"Feature: metadata.version\s+SupportedMinVersion: 3.3-IV3\s+SupportedMaxVersion: 4.4-IV2"
                         r"\s+FinalizedVersionLevel: 4.4-IV2\s", features.stdout), features.stdout
        # New writes continue the same idempotent sequence space, a new topic and a new commit.
        produce(bs, "events", 200, 1500)
        admin_call(bs, "create_topics", [NewTopic("made-by-mala", 2, 1)])
        produce(bs, "made-by-mala", 300, 0)
        commit(bs, "billing", "events", 1600)
        mala_events = contents(bs, "events", 1)
        mala_new = contents(bs, "made-by-mala", 2)
        assert len(mala_events) == 1700 and mala_events[:1500] == kafka_events
        assert len(mala_new) == 300
    except BaseException:
        print(mala.log_tail(80))
        raise
    finally:
        mala.stop()

    # And Kafka again, on what Mala wrote.
    kafka.start(format_storage=False)
    try:
        assert digest(contents(bs, "orders", 3)) == digest(kafka_orders)
        assert contents(bs, "events", 1) == mala_events
        assert contents(bs, "made-by-mala", 2) == mala_new
        assert committed(bs, "billing", "events") == 1600
        assert topic_configs(bs, "orders") == {"cleanup.policy": "compact", "retention.ms": "123456"}
        assert acls(bs) == expected_acls
        assert scram_users(bs) == {"alice": [("SCRAM_SHA_256", 8192)]}
        produce(bs, "made-by-mala", 100, 300)
        assert len(contents(bs, "made-by-mala", 2)) == 400
    except BaseException:
        print(kafka.log_tail(80))
        raise
    finally:
        kafka.stop()


def test_kafka_default_features_that_mala_lacks_are_named(tmp_path):
    kafka = ApacheKafkaNode(tmp_path)
    kafka.start()
    kafka.stop()
    mala = MalaOnDir(kafka.config_path, kafka.port).start(wait_serving=False)
    try:
        deadline = time.monotonic() + 30
        wanted = ("broker registration refused: the cluster finalized share.version 2 (this broker supports 0-0); "
                  "streams.version 1 (this broker supports 0-0). Mala does not implement those levels; lower them "
                  "before moving the cluster to Mala: kafka-features.sh --bootstrap-server <broker> downgrade "
                  "--feature share.version=0 --feature streams.version=0")
        while wanted not in mala.log_text():
            assert mala.proc.poll() is None, mala.log_tail()
            assert time.monotonic() < deadline, mala.log_tail()
            time.sleep(0.2)
        # Said once, not at every retry; the broker never opens its listener.
        time.sleep(5)
        assert mala.log_text().count(wanted) == 1
        assert not port_accepts(kafka.port)
    finally:
        mala.stop()


def test_a_data_dir_mala_formatted_opens_under_kafka(tmp_path):
    # Kafka's config, but Mala formats the empty dir (cluster id, directory ids, its own bootstrap records).
    kafka = ApacheKafkaNode(tmp_path)
    mala = MalaOnDir(kafka.config_path, kafka.port).start()
    bs = kafka.bootstrap
    try:
        admin_call(bs, "create_topics", [NewTopic("from-mala", 2, 1)])
        produce(bs, "from-mala", 500, 0)
        commit(bs, "g", "from-mala", 42)
        written = contents(bs, "from-mala", 2)
        assert len(written) == 500
    finally:
        mala.stop()
    # Kafka's kafka-dump-log decodes every record of Mala's metadata log, Mala's controller registration
    # (KIP-919) among them.
    segment = next((tmp_path / "data" / "__cluster_metadata-0").glob("*.log"))
    dump = kafka.tool(DUMP_TOOL, "--cluster-metadata-decoder", "--files", str(segment))
    assert dump.returncode == 0 and "Exception" not in dump.stdout + dump.stderr, dump.stdout[-2000:] + dump.stderr
    assert '"type":"REGISTER_CONTROLLER_RECORD","version":0,"data":{"controllerId":1,' in dump.stdout, dump.stdout
    kafka.start(format_storage=False)
    try:
        assert contents(bs, "from-mala", 2) == written
        assert committed(bs, "g", "from-mala") == 42
        produce(bs, "from-mala", 50, 500)
    except BaseException:
        print(kafka.log_tail(80))
        raise
    finally:
        kafka.stop()


def test_three_kafka_nodes_to_three_mala_nodes_and_back(tmp_path):
    kafka = ApacheKafkaCluster(tmp_path, 3, extra_config=THREE_NODES).start()
    bs = kafka.bootstrap
    try:
        admin_call(bs, "create_topics", [NewTopic("orders", 6, 3)])
        produce(bs, "orders", 6000, 0)
        commit(bs, "billing", "orders", 777)
        down = kafka.nodes[0].tool(FEATURE_TOOL, "--bootstrap-server", bs, "downgrade", "--feature",
                                   "share.version=0", "--feature", "streams.version=0")
        assert down.returncode == 0, down.stdout + down.stderr
        kafka_orders = contents(bs, "orders", 6)
        assert len(kafka_orders) == 6000
    finally:
        kafka.stop()

    malas = [MalaOnDir(n.config_path, n.port) for n in kafka.nodes]
    try:
        for m in malas:
            m.start(wait_serving=False)
        for m in malas:
            m.start_wait()
        in_sync_everywhere(bs, "orders", 3)
        assert digest(contents(bs, "orders", 6)) == digest(kafka_orders)
        assert committed(bs, "billing", "orders") == 777
        produce(bs, "orders", 600, 6000)
        commit(bs, "billing", "orders", 888)
        mala_orders = contents(bs, "orders", 6)
        assert len(mala_orders) == 6600
        in_sync_everywhere(bs, "orders", 3)
    except BaseException:
        for m in malas:
            print(m.log_tail(40))
        raise
    finally:
        for m in malas:
            m.stop()

    kafka.start(format_storage=False)
    try:
        in_sync_everywhere(bs, "orders", 3)
        assert contents(bs, "orders", 6) == mala_orders
        assert committed(bs, "billing", "orders") == 888
    except BaseException:
        for n in kafka.nodes:
            print(n.log_tail(40))
        raise
    finally:
        kafka.stop()


def test_a_kafka_standalone_dynamic_quorum_dir_to_mala_and_back(tmp_path):
    """KIP-853 in place: Kafka formatted with `kafka-storage format --standalone` (kraft.version 1, its voter set in
    the bootstrap checkpoint, controller.quorum.bootstrap.servers in its config). Mala starts on that dir, reads
    Kafka's checkpoint (SnapshotHeader, KRaftVersion and Voters records as Kafka writes them) and leads the quorum
    as its one voter, with Kafka's directory id, at kraft.version 1; Kafka's dump of the metadata log decodes every
    record (Mala's LeaderChange among them), and Kafka starts again on the dir, the same voter at kraft.version 1."""
    kafka = ApacheKafkaNode(tmp_path, standalone=True)
    kafka.start()
    bs = kafka.bootstrap
    try:
        admin_call(bs, "create_topics", [NewTopic("orders", 3, 1)])
        produce(bs, "orders", 1000, 0)
        down = kafka.tool(FEATURE_TOOL, "--bootstrap-server", bs, "downgrade", "--feature", "share.version=0",
                          "--feature", "streams.version=0")
        assert down.returncode == 0, down.stdout + down.stderr
        kafka_orders = contents(bs, "orders", 3)
    finally:
        kafka.stop()
    directory_id = re.search(r"^directory\.id=(\S+)$", (tmp_path / "data" / "meta.properties").read_text(), re.M)[1]

    def kraft_version_1_and_the_one_voter():
        features = kafka.tool(FEATURE_TOOL, "--bootstrap-server", bs, "describe")
        assert re.search(r"Feature: kraft.version\s.*FinalizedVersionLevel: 1\s", features.stdout), features.stdout
        replication = kafka.tool(QUORUM_TOOL, "--bootstrap-server", bs, "describe", "--replication")
        rows = [line.split() for line in replication.stdout.splitlines()[1:] if line.strip()]
        assert [(r[0], r[1], r[-1]) for r in rows] == [("1", directory_id, "Leader")], replication.stdout

    mala = MalaOnDir(kafka.config_path, kafka.port).start()
    try:
        assert digest(contents(bs, "orders", 3)) == digest(kafka_orders)
        kraft_version_1_and_the_one_voter()
        produce(bs, "orders", 200, 1000)
        admin_call(bs, "create_topics", [NewTopic("made-by-mala", 1, 1)])
        produce(bs, "made-by-mala", 100, 0)
        mala_orders = contents(bs, "orders", 3)
        assert len(mala_orders) == 1200
    except BaseException:
        print(mala.log_tail(80))
        raise
    finally:
        mala.stop()
    segment = max((tmp_path / "data" / "__cluster_metadata-0").glob("*.log"))
    dump = kafka.tool(DUMP_TOOL, "--cluster-metadata-decoder", "--files", str(segment))
    assert dump.returncode == 0 and "Exception" not in dump.stdout + dump.stderr, dump.stdout[-2000:] + dump.stderr
    assert 'KRaftVersion {"version":0,"kRaftVersion":1}' in dump.stdout, dump.stdout[-3000:]
    assert dump.stdout.count('LeaderChange: {"version":0,"leaderId":1,') >= 2, dump.stdout[-3000:]  # Mala's too

    kafka.start(format_storage=False)
    try:
        assert contents(bs, "orders", 3) == mala_orders
        assert len(contents(bs, "made-by-mala", 1)) == 100
        kraft_version_1_and_the_one_voter()
    except BaseException:
        print(kafka.log_tail(80))
        raise
    finally:
        kafka.stop()
