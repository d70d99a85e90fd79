"""A mixed Kafka/Mala cluster and a rolling migration both ways (issue 24): a 3-node Apache Kafka 4.4 cluster (the
Maven Central jars, apache_kafka.py; combined mode, one static quorum, replication factor 3, min ISR 2) becomes a
Mala cluster one node at a time, each node stopped with SIGTERM and Mala started on its data dir with its own
server.properties, and then goes back to Kafka the same way. Every step leaves a mixed cluster: Kafka and Mala
nodes in one Raft quorum (either may lead it and be the active controller) and in one ISR (either may lead a
partition, the other following it). Each way the middle node is killed with kill -9 instead, so its partitions
fail over to a Kafka and a Mala node. Throughout, an idempotent acks=all producer writes numbered records and a
consumer group reads and commits them: no record is lost or written twice, no delivery fails, and the clients
see no error but transient ones (closed connections, a coordinator that moved). At each mixed step, topics,
configs and transactions go through one kind of node and are checked through the other: a topic created and
configured, two transactions committed and one aborted across its partitions, read back read_committed. Every
node has two log dirs: the new topic's replicas are assigned to their dirs (AssignReplicasToDirs, KIP-858) by
each kind of broker through the other kind's controller."""

import re
import threading
import time

from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource, NewTopic

from apache_kafka import ApacheKafkaCluster
from in_place import FEATURE_TOOL, THREE_NODES, MalaOnDir, admin, admin_call, contents, in_sync_everywhere
from test_log_dir_assignment import assigned

QUORUM_TOOL = "org.apache.kafka.tools.MetadataQuorumCommand"  # kafka-metadata-quorum.sh
TOPIC = "orders"
PARTITIONS = 6
# What a client may see while one node of three restarts: a closed connection, a leader that moved. Nothing fatal.
TRANSIENT = {KafkaError._TRANSPORT, KafkaError._ALL_BROKERS_DOWN, KafkaError._RESOLVE, KafkaError._TIMED_OUT}


class SteadyProducer(threading.Thread):
    """An idempotent acks=all producer writing numbered records (value = the number) at about `rate` a second until
    stopped; keeps each acknowledged number, each failed delivery and each error the client reports."""

    def __init__(self, bootstrap, rate=300):
        super().__init__(daemon=True)
        self.rate = rate
        self.acked, self.failed, self.client_errors = set(), [], []
        self.sent = 0
        self._halt = threading.Event()
        self._producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "acks": "all",
                                   "linger.ms": 5, "log_level": 0, "error_cb": self.client_errors.append})

    def _delivered(self, err, msg):
        if err:
            self.failed.append(err)
        else:
            self.acked.add(int(msg.value()))

    def run(self):
        while not self._halt.is_set():
            for _ in range(self.rate // 10):
                self._producer.produce(TOPIC, key=f"k{self.sent % 997}".encode(), value=str(self.sent).encode(),
                                       on_delivery=self._delivered)
                self.sent += 1
            self._producer.poll(0.1)

    def finish(self):
        self._halt.set()
        self.join(30)
        remaining = self._producer.flush(120)
        assert remaining == 0, f"{remaining} records never acknowledged"


class CommittingReader(threading.Thread):
    """A consumer in group `audit` that reads the topic and commits what it read after every batch."""

    def __init__(self, bootstrap):
        super().__init__(daemon=True)
        self.read, self.client_errors = 0, []
        self._halt = threading.Event()
        self._consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "audit", "auto.offset.reset": "earliest",
                                   "enable.auto.commit": False, "log_level": 0, "error_cb": self.client_errors.append})

    def run(self):
        self._consumer.subscribe([TOPIC])
        while not self._halt.is_set():
            msgs = self._consumer.consume(200, timeout=0.5)
            good = [m for m in msgs if not m.error()]
            self.client_errors.extend(m.error() for m in msgs if m.error())
            self.read += len(good)
            if good:
                try:
                    self._consumer.commit(asynchronous=False)
                except Exception as e:  # a coordinator that moves answers NOT_COORDINATOR; the next batch commits
                    self.client_errors.append(e.args[0])
        self._consumer.close()

    def finish(self):
        self._halt.set()
        self.join(60)


def fully_replicated(bootstrap):
    in_sync_everywhere(bootstrap, TOPIC, 3)
    in_sync_everywhere(bootstrap, "__consumer_offsets", 3)


def census(kafka, bootstrap, mala_ids, through):
    """Who leads in the cluster now: ("mala" or "kafka" for the Raft quorum's leader, and the set of
    (partition leader's kind, in-sync follower's kind) pairs over the topic and __consumer_offsets). The quorum
    is described through node `through` alone, which forwards DescribeQuorum to the active controller (a Kafka
    broker in an Envelope)."""
    kind = lambda node_id: "mala" if node_id in mala_ids else "kafka"  # noqa: E731
    status = kafka.nodes[0].tool(QUORUM_TOOL, "--bootstrap-server", through, "describe", "--status")
    assert status.returncode == 0, status.stdout + status.stderr
    raft_leader = int(re.search(r"LeaderId:\s+(\d+)", status.stdout).group(1))
    pairs = set()
    md = admin(bootstrap).list_topics(timeout=10)
    for topic in (TOPIC, "__consumer_offsets"):
        for p in md.topics[topic].partitions.values():
            pairs |= {(kind(p.leader), kind(r)) for r in p.isrs if r != p.leader}
    return kind(raft_leader), pairs


def admin_and_transactions_across(writer, reader, name):
    """Through node `writer` (one kind): creates topic `name` (3 partitions, 3 replicas) and sets a config, then
    commits two transactions and aborts one between them across its partitions. Through node `reader` (the other
    kind): the topic is in sync with the config, and a read_committed consumer reads the committed records only."""
    admin_call(writer, "create_topics", [NewTopic(name, 3, 3)])
    in_sync_everywhere(reader, name, 3)
    resource = ConfigResource(ConfigResource.Type.TOPIC, name, incremental_configs=[
        ConfigEntry("retention.ms", "3600000", incremental_operation=AlterConfigOpType.SET)])
    admin_call(writer, "incremental_alter_configs", [resource])
    # The reader answers from its own metadata, which follows the controller's log a moment later (a Kafka
    # broker too): the change must show there within seconds.
    deadline = time.monotonic() + 15
    while True:
        [described] = admin_call(reader, "describe_configs", [ConfigResource(ConfigResource.Type.TOPIC, name)])
        if described["retention.ms"].value == "3600000" or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert described["retention.ms"].value == "3600000"

    producer = Producer({"bootstrap.servers": writer, "transactional.id": f"{name}-writer", "log_level": 0})
    producer.init_transactions(60)
    for outcome in ("commit", "abort", "commit"):
        producer.begin_transaction()
        for i in range(30):
            producer.produce(name, partition=i % 3, value=f"{outcome}-{i}".encode())
        getattr(producer, f"{outcome}_transaction")(60)
    consumer = Consumer({"bootstrap.servers": reader, "group.id": f"{name}-reader", "isolation.level": "read_committed",
                         "enable.auto.commit": False, "log_level": 0})
    consumer.assign([TopicPartition(name, p, 0) for p in range(3)])
    values, idle = [], 0
    while idle < 4:
        msgs = consumer.consume(100, timeout=1)
        idle = 0 if msgs else idle + 1
        values += [m.value().decode() for m in msgs if not m.error()]
    consumer.close()
    assert sorted(values) == sorted([f"commit-{i}" for i in range(30)] * 2), values[:10]


def wait_assigned(kafka, topic):
    """Waits until the metadata log names, for every replica of the topic, the log dir its files are in: the
    brokers' AssignReplicasToDirs (KIP-858) went through whichever kind of controller is active."""
    log_dirs = {n.node_id: n.log_dirs for n in kafka.nodes}
    metadata_dir = kafka.nodes[0].dir / "data" / "__cluster_metadata-0"
    deadline = time.monotonic() + 60
    while not assigned(log_dirs, metadata_dir, topic):
        assert time.monotonic() < deadline, f"{topic}: replicas not assigned to their log dirs"
        time.sleep(2)


def print_log_tails(kafka, malas):
    for m in malas.values():
        print(f"--- mala {m.config_path.parent.name}\n{m.log_tail(60)}")
    for n in kafka.nodes:
        print(f"--- {n.dir.name}\n{n.log_tail(30)}")


def under_load(seconds, producer):
    start = producer.sent
    time.sleep(seconds)
    assert producer.sent > start, "the producer stopped"


def test_rolling_migration_kafka_to_mala_and_back_under_load(tmp_path):
    kafka = ApacheKafkaCluster(tmp_path, 3, extra_config=THREE_NODES, log_dirs=2).start()
    bs = kafka.bootstrap
    malas = {}
    producer = reader = None
    try:
        admin_call(bs, "create_topics", [NewTopic(TOPIC, PARTITIONS, 3)])
        # Kafka 4.4 finalizes two features Mala does not implement; an operator turns them off first.
        down = kafka.nodes[0].tool(FEATURE_TOOL, "--bootstrap-server", bs, "downgrade", "--feature",
                                   "share.version=0", "--feature", "streams.version=0")
        assert down.returncode == 0, down.stdout + down.stderr
        producer, reader = SteadyProducer(bs), CommittingReader(bs)
        producer.start()
        reader.start()
        under_load(5, producer)
        fully_replicated(bs)

        # Each way, the middle node does not stop cleanly: kill -9, then the other broker on its dir. Its
        # partitions fail over to the two others, one Kafka and one Mala.
        mixed = []
        for node in reversed(kafka.nodes):  # Kafka -> Mala, node 3 first
            node.kill() if node.node_id == 2 else node.stop()
            malas[node.node_id] = MalaOnDir(node.config_path, node.port).start()
            fully_replicated(bs)
            under_load(5, producer)
            if len(malas) < 3:
                mixed.append(census(kafka, bs, set(malas), malas[node.node_id].bootstrap))
                kafka_node = next(n for n in kafka.nodes if n.node_id not in malas)
                # Through a Mala node while Kafka leads the quorum: Mala forwards to Kafka's controller.
                admin_and_transactions_across(malas[node.node_id].bootstrap, kafka_node.bootstrap,
                                              f"to-mala-{len(malas)}")
                wait_assigned(kafka, f"to-mala-{len(malas)}")
        for node in kafka.nodes:  # Mala -> Kafka, node 1 first
            mala = malas.pop(node.node_id)
            mala.kill() if node.node_id == 2 else mala.stop()
            node.launch()
            node.wait_serving()
            fully_replicated(bs)
            under_load(5, producer)
            if malas:
                mixed.append(census(kafka, bs, set(malas), node.bootstrap))
                mala = next(iter(malas.values()))
                # Through the Kafka node (Mala leads the quorum after the first step back).
                admin_and_transactions_across(node.bootstrap, mala.bootstrap, f"to-kafka-{len(malas)}")
                wait_assigned(kafka, f"to-kafka-{len(malas)}")
        print("mixed cluster census:", mixed)
        # Both kinds led the Raft quorum with the other following, and both led partitions with the other in
        # the ISR (the steps make each all but certain: a Kafka leader when the first Mala joins, a Mala leader
        # when the first Kafka comes back, and node 2's partitions failing over to node 1 and node 3).
        assert {raft_leader for raft_leader, _ in mixed} == {"kafka", "mala"}, mixed
        assert {("kafka", "mala"), ("mala", "kafka")} <= set().union(*(pairs for _, pairs in mixed)), mixed

        reader.finish()
        producer.finish()
        assert not producer.failed, producer.failed[:5]
        unexpected = [e for e in producer.client_errors + reader.client_errors
                      if e.fatal() or e.code() not in TRANSIENT | {KafkaError.NOT_COORDINATOR,
                                                                  KafkaError.COORDINATOR_LOAD_IN_PROGRESS,
                                                                  KafkaError.REBALANCE_IN_PROGRESS}]
        assert not unexpected, unexpected[:5]
        in_sync_everywhere(bs, "__transaction_state", 3)
        records = contents(bs, TOPIC, PARTITIONS)
        numbers = [int(value) for _, _, _, value in records]
        assert len(numbers) == len(set(numbers)), "a record was written twice"
        assert producer.acked <= set(numbers), f"{len(producer.acked - set(numbers))} acknowledged records lost"
        assert len(producer.acked) == producer.sent
        assert reader.read >= len(numbers) // 2
    except BaseException:
        print_log_tails(kafka, malas)
        raise
    finally:
        for th in (reader, producer):
            if th and th.is_alive():
                th._halt.set()
        for m in malas.values():
            m.stop()
        kafka.stop()


def test_kafka_features_upgrades_the_kraft_version_of_a_mixed_static_quorum(tmp_path):
    """KIP-853's upgrade of a static quorum (Kafka 4.1+) with Kafka and Mala voters: a 3-node Kafka 4.4 cluster on
    controller.quorum.voters, two of its nodes then running Mala on their dirs. `kafka-features upgrade --feature
    kraft.version=1` succeeds once every voter, of either kind, has reported its directory id to the leader through
    UpdateRaftVoter; a Mala leader writes the KRaftVersionRecord and VotersRecord and the Kafka voter reads them
    (Kafka writing them for Mala to read is covered by Mala's unit test of the bytes Kafka 4.4 wrote): every node
    finalizes kraft.version 1 and `kafka-metadata-quorum describe --replication` shows each voter's
    directory id (its meta.properties'). The quorum goes on after its leader restarts."""
    kafka = ApacheKafkaCluster(tmp_path, 3, extra_config=THREE_NODES).start()
    bs = kafka.bootstrap
    malas = {}
    try:
        down = kafka.nodes[0].tool(FEATURE_TOOL, "--bootstrap-server", bs, "downgrade", "--feature",
                                   "share.version=0", "--feature", "streams.version=0")
        assert down.returncode == 0, down.stdout + down.stderr
        for node in kafka.nodes[1:]:
            node.stop()
            malas[node.node_id] = MalaOnDir(node.config_path, node.port).start()
        bootstraps = [kafka.nodes[0].bootstrap] + [m.bootstrap for m in malas.values()]
        # A Mala node leads the upgrade (the Kafka node restarted while the quorum elects one): Kafka reads the
        # records Mala writes. The leader restarted afterwards, either kind may lead with the voters of the log.
        kafka.nodes[0].stop()
        kafka.nodes[0].launch()
        kafka.nodes[0].wait_serving()
        status = kafka.nodes[0].tool(QUORUM_TOOL, "--bootstrap-server", bs, "describe", "--status")
        leader = int(re.search(r"LeaderId:\s+(\d+)", status.stdout).group(1))
        print("quorum leader before the upgrade:", "mala" if leader in malas else "kafka", leader)
        assert leader in malas, status.stdout

        deadline, attempts = time.monotonic() + 90, []
        while True:
            out = kafka.nodes[0].tool(FEATURE_TOOL, "--bootstrap-server", bs, "upgrade", "--feature",
                                      "kraft.version=1")
            attempts.append(out.stdout.strip())
            if out.returncode == 0:
                break
            assert time.monotonic() < deadline, attempts
            time.sleep(2)
        print("kafka-features upgrade attempts:", attempts)
        assert "kraft.version was upgraded to 1." in out.stdout, out.stdout + out.stderr

        def finalized_everywhere():
            for b in bootstraps:
                described = kafka.nodes[0].tool(FEATURE_TOOL, "--bootstrap-server", b, "describe")
                if not re.search(r"Feature: kraft.version\s.*FinalizedVersionLevel: 1\s", described.stdout):
                    return False
            return True
        deadline = time.monotonic() + 30
        while not finalized_everywhere():
            assert time.monotonic() < deadline, "kraft.version 1 not finalized on every node"
            time.sleep(1)

        directory_ids = {n.node_id: re.search(r"^directory\.id=(\S+)$", (n.dir / "data" / "meta.properties")
                                              .read_text(), re.M)[1] for n in kafka.nodes}
        for b in bootstraps:
            replication = kafka.nodes[0].tool(QUORUM_TOOL, "--bootstrap-server", b, "describe", "--replication")
            assert replication.returncode == 0, replication.stdout + replication.stderr
            rows = {int(cells[0]): cells[1] for cells in (line.split() for line in replication.stdout.splitlines()[1:])
                    if cells}
            assert rows == directory_ids, (b, replication.stdout)

        # The leader restarts: the quorum elects another and commits a new topic; kraft.version stays 1.
        status = kafka.nodes[0].tool(QUORUM_TOOL, "--bootstrap-server", bs, "describe", "--status")
        leader = int(re.search(r"LeaderId:\s+(\d+)", status.stdout).group(1))
        print("quorum leader after the upgrade:", "mala" if leader in malas else "kafka", leader)
        if leader in malas:
            malas[leader].stop()
            malas[leader].start()
        else:
            kafka.nodes[0].stop()
            kafka.nodes[0].launch()
            kafka.nodes[0].wait_serving()
        admin_call(bootstraps[1], "create_topics", [NewTopic("after-the-upgrade", 3, 3)])
        in_sync_everywhere(bootstraps[2], "after-the-upgrade", 3)
        assert finalized_everywhere()
    except BaseException:
        print_log_tails(kafka, malas)
        raise
    finally:
        for m in malas.values():
            m.stop()
        kafka.stop()
