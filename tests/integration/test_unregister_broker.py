"""UnregisterBroker (issue 24, kafka-cluster.sh unregister): an operator removes a broker taken out of the cluster for
good. Apache Kafka 4.4's ClusterTool unregisters a stopped node of a 3-node cluster; the controllers forget it (their
KafkaController gauges on the metrics endpoint count one registered broker less, none fenced), it leaves every ISR,
and a second unregister of the same id, or of an id never registered, fails with Kafka's
BrokerIdNotRegisteredException. The node started again registers anew and rejoins the ISR: nothing acknowledged is
lost on the way.
"""

import re
import time

from cluster import own_cluster
from real_clients import TOPICS_TOOL, rdkafka_admin, rdkafka_produce, step_ok, tool_batch, wait_until
from test_metrics import http_get, with_metrics_ports

CLUSTER_TOOL = "org.apache.kafka.tools.ClusterTool"  # kafka-cluster.sh
TOPIC = "unregistered"


def gauge(port, name):
    status, body = http_get(port, "/metrics")
    assert status == 200, body
    m = re.search(rf"^{name} (\S+)$", body, re.M)
    return float(m.group(1)) if m else None


def isr_of(bootstrap):
    """{partition: [isr ids]} of TOPIC from kafka-topics --describe."""
    out = step_ok(tool_batch((TOPICS_TOOL, "--bootstrap-server", bootstrap, "--describe", "--topic", TOPIC))[0])
    isr = {}
    for line in out.splitlines():
        m = re.search(r"Partition: (\d+)\s.*Isr: ([\d,]*)", line)
        if m:
            isr[int(m.group(1))] = sorted(int(x) for x in m.group(2).split(",") if x)
    return isr


def test_kafka_cluster_unregister_removes_a_stopped_broker(tmp_path):
    with own_cluster(tmp_path) as cluster:
        ports = with_metrics_ports(cluster)
        cluster.start_all()
        cluster.wait_until(cluster.agreed_leader, timeout=20, what="a quorum leader all three nodes agree on")
        from confluent_kafka.admin import NewTopic

        admin = rdkafka_admin(cluster.bootstrap)
        admin.create_topics([NewTopic(TOPIC, num_partitions=3, replication_factor=3)])[TOPIC].result(timeout=30)
        del admin
        acked = rdkafka_produce(cluster.bootstrap, TOPIC, [(f"k{i}", f"v{i}") for i in range(300)], acks="all")
        wait_until(lambda: all(len(v) == 3 for v in isr_of(cluster.bootstrap).values()), 30, "a full ISR")

        # Node 3 stops (controlled shutdown: it leaves every ISR) and is fenced.
        assert cluster.stop(3) == 0
        survivors = cluster.bootstrap_of(1, 2)
        wait_until(lambda: gauge(ports[1], "kafka_controller_kafkacontroller_fencedbrokercount") == 1, 30,
                   "node 3 fenced")
        assert gauge(ports[1], "kafka_controller_kafkacontroller_activebrokercount") == 2

        unregister, again, unknown = tool_batch(
            (CLUSTER_TOOL, "unregister", "--bootstrap-server", survivors, "--id", "3"),
            (CLUSTER_TOOL, "unregister", "--bootstrap-server", survivors, "--id", "3"),
            (CLUSTER_TOOL, "unregister", "--bootstrap-server", survivors, "--id", "42"))
        assert "Broker 3 is no longer registered" in step_ok(unregister)
        for refused in (again, unknown):
            assert refused["exit"] != 0, refused
            assert "BrokerIdNotRegisteredException" in refused["stdout"] + refused["stderr"], refused
        # Every controller forgot it: no broker fenced, two registered; its ISR memberships are gone.
        for i in (1, 2):
            wait_until(lambda i=i: gauge(ports[i], "kafka_controller_kafkacontroller_fencedbrokercount") == 0, 20,
                       f"node {i}'s controller to forget node 3")
            assert gauge(ports[i], "kafka_controller_kafkacontroller_activebrokercount") == 2
        assert all(3 not in v for v in isr_of(survivors).values())
        assert "unregistered broker 3" in cluster.logs(400)

        # Started again, node 3 registers anew, catches up and rejoins every ISR; nothing acknowledged is lost.
        cluster.start(3)
        wait_until(lambda: gauge(ports[1], "kafka_controller_kafkacontroller_activebrokercount") == 3, 40,
                   "node 3 registered again")
        wait_until(lambda: all(len(v) == 3 for v in isr_of(cluster.bootstrap).values()), 60, "node 3 back in the ISR")
        from real_clients import rdkafka_consume

        time.sleep(0.5)
        records = rdkafka_consume(cluster.bootstrap, TOPIC, {p: 0 for p in range(3)})
        assert sorted(r[3] for r in records) == sorted(r[3] for r in acked)
