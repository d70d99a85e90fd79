"""SASL between nodes (issue 23): a 3-node cluster whose inter-broker listener (replica fetchers, transaction
markers) and controller listener (Raft, broker registration and heartbeats, forwarding) are SASL listeners, the
node presenting the `username`/`password` of the listener's login module (Kafka's inter-broker client reads the
same JAAS entry), with sasl.mechanism.inter.broker.protocol / sasl.mechanism.controller.protocol.

- SASL_SSL everywhere: clients with PLAIN, SCRAM-SHA-512 between brokers (the broker user's credential created
  with AlterUserScramCredentials once the quorum runs, as an operator does), PLAIN on the controller listener, and
  4 s sessions (connections.max.reauth.ms): the nodes replace their connections before the server would close
  them. A leader SIGKILLed under idempotent acks=all load (min ISR 2) loses nothing; a committed transaction
  (markers over the inter-broker listener) reads back with read_committed.
- SASL_PLAINTEXT with PLAIN between brokers: a node whose inter-broker password is wrong stays out of the ISR,
  says why in a rate-limited warning without the password, and joins once restarted with the right one.
- A wrong controller password keeps the node from registering, and it says why; SCRAM on the controller listener
  is refused at start-up with the reason.

confluent-kafka is the client (Apache Kafka's Java client over SASL_SSL is covered by test_sasl.py/test_tls.py)."""

import subprocess
import time
import uuid

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import (AdminClient, NewTopic, ScramCredentialInfo, ScramMechanism,
                                   UserScramCredentialUpsertion)

from cluster import own_cluster
from conftest import MALA_BIN, free_port
from test_tls import pki  # noqa: F401 (fixture: a CA, and a server certificate naming 127.0.0.1)

PLAIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"
SCRAM_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule"
SECRETS = ["admin-secret", "broker-secret", "controller-secret", "wrong-secret"]


def sasl_cluster(cluster, client_protocol, internal_protocol, controller_protocol, internal_mechanism,
                 extra=None, per_node=None):
    """Every node with CLIENT / INTERNAL / CONTROLLER listeners of the given protocols; CLIENT serves PLAIN user
    admin; INTERNAL enables `internal_mechanism`, the node presenting user broker; CONTROLLER enables PLAIN, the
    node presenting user controller. `per_node`: {node id: {key: value}} applied last."""
    for n in cluster.nodes.values():
        internal = free_port()
        while internal in (n.port, n.controller_port):
            internal = free_port()
        n.internal_port = internal
        internal_module = PLAIN_MODULE if internal_mechanism == "PLAIN" else SCRAM_MODULE
        internal_users = ' user_broker="broker-secret"' if internal_mechanism == "PLAIN" else ""
        n.config.update({
            "listeners": [f"CLIENT://127.0.0.1:{n.port}", f"INTERNAL://127.0.0.1:{internal}",
                          f"CONTROLLER://127.0.0.1:{n.controller_port}"],
            "advertised.listeners": f"CLIENT://127.0.0.1:{n.port},INTERNAL://127.0.0.1:{internal}",
            "inter.broker.listener.name": "INTERNAL",
            "listener.security.protocol.map":
                f"CLIENT:{client_protocol},INTERNAL:{internal_protocol},CONTROLLER:{controller_protocol}",
            "listener.name.client.sasl.enabled.mechanisms": "PLAIN",
            "listener.name.client.plain.sasl.jaas.config": f'{PLAIN_MODULE} required user_admin="admin-secret";',
            "listener.name.internal.sasl.enabled.mechanisms": internal_mechanism,
            f"listener.name.internal.{internal_mechanism.lower()}.sasl.jaas.config":
                f'{internal_module} required username="broker" password="broker-secret"{internal_users};',
            "sasl.mechanism.inter.broker.protocol": internal_mechanism,
            "listener.name.controller.sasl.enabled.mechanisms": "PLAIN",
            "listener.name.controller.plain.sasl.jaas.config":
                f'{PLAIN_MODULE} required username="controller" password="controller-secret" '
                'user_controller="controller-secret";',
            "sasl.mechanism.controller.protocol": "PLAIN",
            "log.level": "info",
            **(extra or {}),
        })
    for i, overrides in (per_node or {}).items():
        cluster.node(i).config.update(overrides)


def client_config(protocol, pki_dir=None):
    conf = {"security.protocol": protocol.lower(), "sasl.mechanism": "PLAIN", "sasl.username": "admin",
            "sasl.password": "admin-secret"}
    if pki_dir is not None:
        conf["ssl.ca.location"] = str(pki_dir / "ca.pem")
    return conf


def create_topic(cluster, admin, topic, assignment=None, **kwargs):
    def created():
        new = (NewTopic(topic, num_partitions=len(assignment), replication_factor=-1, replica_assignment=assignment,
                        config={"min.insync.replicas": "2"}) if assignment
               else NewTopic(topic, num_partitions=1, replication_factor=3, config={"min.insync.replicas": "2"}))
        futures = admin.create_topics([new], request_timeout=5, operation_timeout=5)
        try:
            futures[topic].result(timeout=10)
            return True
        except Exception as e:  # noqa: BLE001 (retried until every broker registered)
            return True if "already exists" in str(e) else None
    cluster.wait_until(created, timeout=40, interval=0.5, what=f"topic {topic} created with replication factor 3")


def isr_of(admin, topic):
    p = admin.list_topics(topic, timeout=5).topics[topic].partitions.get(0)
    return (p.leader, sorted(p.isrs)) if p is not None else (None, [])


def assert_no_secret_logged(cluster):
    for i in cluster.ids:
        text = cluster.node(i).log_path.read_text(errors="replace")
        for secret in SECRETS:
            assert secret not in text, f"{secret} appears in node {i}'s log"


def load_kill_leader_and_read_back(cluster, topic, txn_topic, leader, conf):
    """Idempotent acks=all load on `topic` partition 0, its leader SIGKILLed while records are in flight (after 300
    acknowledgements and 9 s, so the nodes' own connections run past several short sessions); then every acknowledged
    record and the 10 committed records of `txn_topic` must read back (read_committed) from the survivors."""
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all", "enable.idempotence": True,
                         "linger.ms": 5, "message.timeout.ms": 60000, **conf})
    acked, failed = set(), []

    def report(err, msg):
        (failed.append(str(err)) if err is not None else acked.add(msg.value().decode()))

    sent, killed_at = 0, None
    started = time.monotonic()
    deadline = started + 60
    while time.monotonic() < deadline:
        producer.produce(topic, value=str(sent).encode(), partition=0, on_delivery=report)
        sent += 1
        producer.poll(0.002)
        if killed_at is None and len(acked) >= 300 and time.monotonic() - started > 9:
            cluster.kill(leader)
            killed_at = sent
        if killed_at is not None and len(acked) >= killed_at + 300:
            break
    assert producer.flush(60) == 0
    assert killed_at is not None, f"only {len(acked)} records acknowledged before the deadline: {failed[:3]}"
    assert not failed, failed[:5]
    assert len(acked) == sent

    survivors = [i for i in cluster.ids if i != leader]
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap_of(*survivors), "group.id": "unused",
                         "enable.auto.commit": False, "isolation.level": "read_committed", **conf})
    consumer.assign([TopicPartition(topic, 0, 0), TopicPartition(txn_topic, 0, 0)])
    read, txn_read = set(), []
    read_deadline = time.monotonic() + 30
    while (not acked <= read or len(txn_read) < 10) and time.monotonic() < read_deadline:
        msg = consumer.poll(0.5)
        if msg is not None and msg.error() is None:
            (read.add(msg.value().decode()) if msg.topic() == topic else txn_read.append(msg.value().decode()))
    consumer.close()
    lost = acked - read
    assert not lost, f"{len(lost)} acknowledged records lost, e.g. {sorted(lost, key=int)[:10]}"
    assert txn_read == [f"t{i}" for i in range(10)]


def commit_ten_records(cluster, txn_topic, conf):
    """A committed transaction of 10 records on `txn_topic` partition 0 (its markers go to the partition's leader
    over the inter-broker listener)."""
    tx = Producer({"bootstrap.servers": cluster.bootstrap, "transactional.id": f"sasl-ib-{uuid.uuid4().hex[:6]}",
                   **conf})
    tx.init_transactions(30)
    tx.begin_transaction()
    for i in range(10):
        tx.produce(txn_topic, value=f"t{i}".encode(), partition=0)
    tx.commit_transaction(30)


def test_sasl_ssl_between_brokers_and_controllers_survives_leader_kill(pki, tmp_path):  # noqa: F811
    with own_cluster(tmp_path) as cluster:
        sasl_cluster(cluster, "SASL_SSL", "SASL_SSL", "SASL_SSL", "SCRAM-SHA-512", extra={
            "ssl.keystore.location": str(pki / "server.pem"),
            "ssl.truststore.location": str(pki / "ca.pem"),
            "connections.max.reauth.ms": 4000,
        })
        cluster.start_all()
        conf = client_config("SASL_SSL", pki)
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap, **conf})

        # The broker user's SCRAM credential, as an operator creates it once the quorum (over SASL PLAIN) runs.
        def upserted():
            futures = admin.alter_user_scram_credentials([UserScramCredentialUpsertion(
                "broker", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096), b"broker-secret")])
            try:
                for f in futures.values():
                    f.result(timeout=10)
                return True
            except Exception:  # noqa: BLE001 (no active controller yet: retried)
                return None
        cluster.wait_until(upserted, timeout=40, interval=0.5, what="the broker user's SCRAM-SHA-512 credential")

        topic = f"sasl-ib-{uuid.uuid4().hex[:8]}"
        create_topic(cluster, admin, topic)
        leader = cluster.wait_until(
            lambda: isr_of(admin, topic)[0] if len(isr_of(admin, topic)[1]) == 3 else None,
            timeout=30, interval=0.2, what="partition 0 with an ISR of 3 (followers fetching over SASL_SSL/SCRAM)")

        # A transaction: its markers go to the partition's leader over the inter-broker listener.
        txn_topic = f"sasl-txn-{uuid.uuid4().hex[:8]}"
        create_topic(cluster, admin, txn_topic)
        commit_ten_records(cluster, txn_topic, conf)

        # Idempotent acks=all load; the leader is SIGKILLed while records are in flight. The load runs past
        # several 4 s sessions of the nodes' own connections.
        load_kill_leader_and_read_back(cluster, topic, txn_topic, leader, conf)

        # The nodes renewed their connections before their sessions ended: no server saw one of them expire,
        # and no node was refused.
        for i in cluster.ids:
            text = cluster.node(i).log_path.read_text(errors="replace")
            for user in ("broker", "controller"):
                assert f"the SASL session of {user} expired" not in text, f"node {i}: a {user} session expired"
            assert "the server refused" not in text, cluster.node(i).log_text(50)
        assert_no_secret_logged(cluster)
        del admin


def test_wrong_inter_broker_password_keeps_the_node_out_of_the_isr_until_fixed(tmp_path):
    with own_cluster(tmp_path) as cluster:
        wrong = f'{PLAIN_MODULE} required username="broker" password="wrong-secret" user_broker="broker-secret";'
        # Node 3 leaves the ISR after replica.lag.time.max.ms without a fetch: 5 s here, not the default 30 s.
        sasl_cluster(cluster, "SASL_PLAINTEXT", "SASL_PLAINTEXT", "PLAINTEXT", "PLAIN",
                     extra={"replica.lag.time.max.ms": 5000},
                     per_node={3: {"listener.name.internal.plain.sasl.jaas.config": wrong}})
        cluster.start_all()
        conf = client_config("SASL_PLAINTEXT")
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap, **conf})
        topic = f"sasl-wrong-{uuid.uuid4().hex[:8]}"
        create_topic(cluster, admin, topic, assignment=[[1, 2, 3]])
        cluster.wait_until(lambda: isr_of(admin, topic) == (1, [1, 2]) or None, timeout=30, interval=0.2,
                           what="node 1 leading with ISR [1, 2]")
        producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all", **conf})
        for i in range(100):
            producer.produce(topic, value=str(i).encode(), partition=0)
        assert producer.flush(30) == 0
        cluster.wait_until(lambda: "SASL PLAIN to listener INTERNAL" in cluster.node(3).log_text(400) or None,
                           timeout=15, what="node 3's warning that node 1 refused it")
        line = next(ln for ln in cluster.node(3).log_text(400).splitlines() if "SASL PLAIN to listener INTERNAL" in ln)
        assert "refused" in line and "wrong-secret" not in line, line
        time.sleep(3)
        assert isr_of(admin, topic) == (1, [1, 2]), "node 3 joined the ISR with a wrong password"

        # Fixed and restarted: node 3 catches up and joins.
        cluster.stop(3)
        cluster.node(3).config["listener.name.internal.plain.sasl.jaas.config"] = \
            f'{PLAIN_MODULE} required username="broker" password="broker-secret" user_broker="broker-secret";'
        cluster.start(3)
        cluster.wait_until(lambda: isr_of(admin, topic) == (1, [1, 2, 3]) or None, timeout=30, interval=0.2,
                           what="node 3 in the ISR once its password is right")
        assert_no_secret_logged(cluster)
        del admin


def test_wrong_controller_password_keeps_the_node_from_registering(tmp_path):
    with own_cluster(tmp_path, broker_only=(3,)) as cluster:
        wrong = f'{PLAIN_MODULE} required username="controller" password="wrong-secret";'
        sasl_cluster(cluster, "SASL_PLAINTEXT", "SASL_PLAINTEXT", "SASL_PLAINTEXT", "PLAIN",
                     per_node={3: {"listener.name.controller.plain.sasl.jaas.config": wrong}})
        # The broker-only node has no CONTROLLER listener of its own.
        cluster.node(3).config["listeners"] = [f"CLIENT://127.0.0.1:{cluster.node(3).port}",
                                               f"INTERNAL://127.0.0.1:{cluster.node(3).internal_port}"]
        # Node 3 opens its client listener only once registered: never, here.
        for i in cluster.ids:
            cluster.launch(i)
        cluster.wait_serving(1)
        cluster.wait_serving(2)
        conf = client_config("SASL_PLAINTEXT")
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap_of(1, 2), **conf})

        def brokers():
            try:
                return sorted(admin.list_topics(timeout=5).brokers)
            except KafkaException:
                return None
        cluster.wait_until(lambda: brokers() == [1, 2] or None, timeout=30, what="brokers 1 and 2 registered")
        cluster.wait_until(lambda: "SASL PLAIN to listener CONTROLLER" in cluster.node(3).log_text(400) or None,
                           timeout=15, what="node 3's warning that the controller refused it")
        time.sleep(3)
        assert brokers() == [1, 2], "broker 3 registered with a wrong controller password"
        assert cluster.node(3).alive()
        assert_no_secret_logged(cluster)
        del admin


def test_scram_on_the_controller_listener_is_refused_at_start_up(tmp_path):
    with own_cluster(tmp_path, size=1) as cluster:
        sasl_cluster(cluster, "SASL_PLAINTEXT", "SASL_PLAINTEXT", "SASL_PLAINTEXT", "PLAIN", extra={
            "listener.name.controller.sasl.enabled.mechanisms": "SCRAM-SHA-256",
            "sasl.mechanism.controller.protocol": "SCRAM-SHA-256",
        })
        n = cluster.node(1)
        from cluster import render_yaml
        n.config_path.write_text(render_yaml(n.config))
        out = subprocess.run([str(MALA_BIN), "--config", str(n.config_path)], capture_output=True, text=True, timeout=30)
        assert out.returncode != 0
        text = out.stdout + out.stderr
        assert "sasl.mechanism.controller.protocol" in text and "SCRAM-SHA-256" in text, text
