"""The metrics and health endpoint (issue 24, Metrics and Health): a real Prometheus server (Debian's `prometheus`
package) scrapes the `metrics.listeners` of a 3-node cluster every second, and its query API returns the series
Kafka dashboards query, under the names the Prometheus JMX exporter gives Kafka's MBeans: records and bytes in per
topic summed over the cluster equal what the test produced, exactly one active controller, no under-replicated
partition, Produce requests counted and their latency histogram usable with histogram_quantile, consumer group lag
(kafka_exporter's kafka_consumergroup_lag) equal to what the group has not committed. After kill -9 of a node,
Prometheus sees its target down, the survivors' under-replicated partitions and the controller's fenced broker.

/health/live answers 200 as soon as the process serves; /health/ready answers 503 until the broker has caught up
with the metadata log (a node started without its quorum never does) and 200 from then on. Malformed HTTP gets 400
and closes the connection; the node goes on serving.
"""

import json
import os
import shutil
import socket
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

import pytest
from confluent_kafka import Consumer

from cluster import _free_ports, own_cluster
from conftest import free_port
from real_clients import rdkafka_admin, rdkafka_produce, wait_until

PROMETHEUS = shutil.which("prometheus") or "/usr/bin/prometheus"
REPO_ROOT = Path(__file__).resolve().parents[2]
TOPIC = "metered"
GROUP = "metered-readers"


def http_get(port, path, timeout=5):
    """(status, body) of GET http://127.0.0.1:port/path."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=timeout) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def with_metrics_ports(cluster):
    """Gives every node of `cluster` a metrics listener on a free port; returns {node id: port}."""
    ports = dict(zip(cluster.ids, _free_ports(len(cluster.ids))))
    for i, port in ports.items():
        cluster.node(i).config["metrics.listeners"] = f"http://127.0.0.1:{port}"
    return ports


class Prometheus:
    """A real Prometheus server scraping `targets` (host:port) every second, with its HTTP API on a free port."""

    def __init__(self, work_dir, targets):
        if not os.path.exists(PROMETHEUS):
            pytest.fail("prometheus not installed (scripts/install-test-clients.sh installs the Debian package)")
        self.port = free_port()
        config = work_dir / "prometheus.yml"
        config.write_text(
            "global:\n  scrape_interval: 1s\n  scrape_timeout: 900ms\n  evaluation_interval: 1s\n"
            "scrape_configs:\n  - job_name: mala\n    static_configs:\n      - targets: ["
            + ", ".join(f"'{t}'" for t in targets) + "]\n")
        self.log_path = work_dir / "prometheus.log"
        self._log = open(self.log_path, "wb")
        self.proc = subprocess.Popen(
            [PROMETHEUS, f"--config.file={config}", f"--storage.tsdb.path={work_dir / 'prometheus-data'}",
             f"--web.listen-address=127.0.0.1:{self.port}"],
            stdout=self._log, stderr=self._log, stdin=subprocess.DEVNULL)
        wait_until(lambda: self.ready(), 30, "Prometheus to serve its API")

    def ready(self):
        if self.proc.poll() is not None:
            pytest.fail(f"prometheus exited with {self.proc.returncode}:\n{self.log_path.read_text()[-3000:]}")
        try:
            return http_get(self.port, "/-/ready")[0] == 200
        except OSError:
            return False

    def query(self, promql):
        """The instant vector of `promql`: [(labels, float value)]."""
        status, body = http_get(self.port, "/api/v1/query?" + urllib.parse.urlencode({"query": promql}))
        assert status == 200, body
        answer = json.loads(body)
        assert answer["status"] == "success", answer
        return [(r["metric"], float(r["value"][1])) for r in answer["data"]["result"]]

    def scalar(self, promql):
        """The single value of `promql`, or None when it has no sample."""
        result = self.query(promql)
        assert len(result) <= 1, result
        return result[0][1] if result else None

    def close(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
        self._log.close()


@pytest.fixture
def prometheus_cluster(tmp_path):
    with own_cluster(tmp_path) as c:
        ports = with_metrics_ports(c)
        c.start_all()
        c.wait_until(c.agreed_leader, timeout=20, what="a quorum leader all three nodes agree on")
        prom = Prometheus(tmp_path, [f"127.0.0.1:{p}" for p in ports.values()])
        try:
            yield c, ports, prom
        except BaseException:
            print(prom.log_path.read_text()[-3000:])
            raise
        finally:
            prom.close()


def eventually(prom, promql, expected, timeout=30):
    """Waits until `promql`'s single value is `expected` (a value, or a predicate on it); returns it."""
    check = expected if callable(expected) else (lambda v: v == expected)
    last = []

    def ok():
        last[:] = [prom.query(promql)]
        values = [v for _, v in last[0]]
        return len(values) == 1 and check(values[0])

    wait_until(ok, timeout, f"Prometheus: {promql} to be {expected} (last: {last})")
    return last[0][0][1]


def consume_and_commit(bootstrap, count):
    """A group member reads `count` records of TOPIC from the start and commits them."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": GROUP, "auto.offset.reset": "earliest",
                         "enable.auto.commit": False, "session.timeout.ms": 10000})
    consumer.subscribe([TOPIC])
    read = 0
    deadline = time.monotonic() + 60
    while read < count and time.monotonic() < deadline:
        msg = consumer.poll(0.5)
        if msg is None:
            continue
        assert msg.error() is None, msg.error()
        read += 1
    assert read == count, f"read {read} of {count}"
    consumer.commit(asynchronous=False)
    consumer.close()


def test_prometheus_scrapes_kafka_named_series_from_a_three_node_cluster(prometheus_cluster):
    cluster, ports, prom = prometheus_cluster
    from confluent_kafka.admin import NewTopic

    admin = rdkafka_admin(cluster.bootstrap)
    admin.create_topics([NewTopic(TOPIC, num_partitions=3, replication_factor=3)])[TOPIC].result(timeout=30)
    del admin
    first = [(f"k{i}", f"value-{i}") for i in range(3000)]
    rdkafka_produce(cluster.bootstrap, TOPIC, first, acks="all")
    consume_and_commit(cluster.bootstrap, len(first))
    rdkafka_produce(cluster.bootstrap, TOPIC, [(f"k{i}", f"late-{i}") for i in range(500)], acks="all")

    assert eventually(prom, 'count(up{job="mala"} == 1)', 3) == 3
    # Records and bytes in: counted once, by each partition's leader.
    eventually(prom, f'sum(kafka_server_brokertopicmetrics_messagesin_total{{topic="{TOPIC}"}})', 3500)
    bytes_in = eventually(prom, f'sum(kafka_server_brokertopicmetrics_bytesin_total{{topic="{TOPIC}"}})',
                          lambda v: v > 3500 * 7)
    # The broker-wide series (no topic label) includes the topic's.
    assert prom.scalar('sum(kafka_server_brokertopicmetrics_bytesin_total{topic=""})') >= bytes_in
    eventually(prom, f'sum(kafka_server_brokertopicmetrics_bytesout_total{{topic="{TOPIC}"}})', lambda v: v > 0)
    eventually(prom, 'sum(kafka_server_brokertopicmetrics_replicationbytesout_total)', lambda v: v >= bytes_in)
    eventually(prom, f'sum(kafka_server_brokertopicmetrics_totalproducerequests_total{{topic="{TOPIC}"}})',
               lambda v: v >= 2)
    # Cluster state.
    eventually(prom, "sum(kafka_controller_kafkacontroller_activecontrollercount)", 1)
    eventually(prom, 'count(kafka_server_raftmetrics_current_state{current_state="leader"})', 1)
    eventually(prom, "sum(kafka_server_replicamanager_underreplicatedpartitions)", 0)
    eventually(prom, "max(kafka_controller_kafkacontroller_globalpartitioncount)", lambda v: v >= 3)
    eventually(prom, "max(kafka_controller_kafkacontroller_activebrokercount)", 3)
    # 3 partitions x 3 replicas of the topic, each led once.
    eventually(prom, f'sum(kafka_cluster_partition_replicascount{{topic="{TOPIC}"}})', 9)
    eventually(prom, f'count(kafka_log_log_size{{topic="{TOPIC}"}} > 0)', 9)
    eventually(prom, "count(kafka_server_kafkaserver_brokerstate == 3)", 3)
    # Requests per API and version, and the latency histogram.
    eventually(prom, 'sum(kafka_network_requestmetrics_requests_total{request="Produce"})', lambda v: v >= 2)
    eventually(prom, 'sum(kafka_network_requestmetrics_requests_total{request="FetchFollower"})', lambda v: v > 0)
    eventually(prom, 'sum(kafka_network_requestmetrics_totaltimems_count{request="FetchConsumer"})', lambda v: v > 0)
    p99 = eventually(prom, 'histogram_quantile(0.99, sum by (le) '
                           '(kafka_network_requestmetrics_totaltimems_bucket{request="Produce"}))',
                     lambda v: 0 < v <= 30000)
    assert p99 > 0
    eventually(prom, "count(kafka_network_socketserver_networkprocessoravgidlepercent <= 1)", 3)
    eventually(prom, "count(process_resident_memory_bytes > 0)", 3)
    # Consumer group lag: committed 3000 of 3500.
    eventually(prom, f'sum(kafka_consumergroup_lag{{consumergroup="{GROUP}",topic="{TOPIC}"}})', 500)
    eventually(prom, f'sum(kafka_consumergroup_lag_sum{{consumergroup="{GROUP}"}})', 500)
    eventually(prom, f'sum(kafka_consumergroup_current_offset{{consumergroup="{GROUP}"}})', 3000)
    eventually(prom, f'count(kafka_consumergroup_lag{{consumergroup="{GROUP}"}})', 3)

    # Every panel of the Grafana dashboard in docs/ is a query Prometheus answers, with data for all but the
    # flush time (no topic here sets flush.messages or flush.ms, so no log flush ran).
    dashboard = json.loads((REPO_ROOT / "docs" / "grafana-dashboard.json").read_text())
    for panel in dashboard["panels"]:
        for target in panel["targets"]:
            expr = target["expr"].replace("$job", ".*").replace("$topic", ".*")
            if "logflushstats" in expr:
                prom.query(expr)
            else:
                wait_until(lambda expr=expr: prom.query(expr), 20,
                           f"dashboard panel {panel['title']!r} to have data: {expr}")

    # A node dies: Prometheus sees its target down, the survivors the partitions it left under-replicated, the
    # controller its fenced broker (broker.session.timeout.ms, 9 s).
    victim = 3
    cluster.kill(victim)
    eventually(prom, f'up{{instance="127.0.0.1:{ports[victim]}"}}', 0)
    eventually(prom, "sum(kafka_server_replicamanager_underreplicatedpartitions)", lambda v: v > 0, timeout=60)
    eventually(prom, "max(kafka_controller_kafkacontroller_fencedbrokercount)", 1, timeout=60)
    eventually(prom, "sum(kafka_controller_kafkacontroller_activecontrollercount)", 1, timeout=60)
    cluster.start(victim)
    eventually(prom, "sum(kafka_server_replicamanager_underreplicatedpartitions)", 0, timeout=60)


def test_readiness_follows_the_metadata_log_and_bad_http_is_refused(tmp_path):
    with own_cluster(tmp_path) as cluster:
        ports = with_metrics_ports(cluster)
        # Node 1 alone has no quorum: it serves its endpoint (live) but never catches up (not ready).
        cluster.launch(1)
        wait_until(lambda: _answers(ports[1], "/health/live") == 200, 20, "node 1 to be live")
        time.sleep(2)
        assert _answers(ports[1], "/health/ready") == 503
        status, body = http_get(ports[1], "/metrics")
        assert status == 200 and "kafka_server_kafkaserver_brokerstate 1\n" in body, body[:2000]
        assert http_get(ports[1], "/nothing-here")[0] == 404
        # With its quorum it catches up, opens its listeners and becomes ready.
        cluster.launch(2)
        cluster.launch(3)
        for i in cluster.ids:
            wait_until(lambda i=i: _answers(ports[i], "/health/ready") == 200, 40, f"node {i} to be ready")
        assert "kafka_server_kafkaserver_brokerstate 3\n" in http_get(ports[1], "/metrics")[1]

        # Bad HTTP: a malformed request line gets 400 and a closed connection; a method other than GET/HEAD 405;
        # an endless header is cut at its bound. The node serves on.
        assert _raw(ports[1], b"BREW /coffee HTCPCP/1.0\r\n\r\n").startswith(b"HTTP/1.1 400 ")
        assert _raw(ports[1], b"DELETE /metrics HTTP/1.1\r\n\r\n").startswith(b"HTTP/1.1 405 ")
        assert _raw(ports[1], b"GET /metrics HTTP/1.1\r\nX: " + b"a" * 20000).startswith(b"HTTP/1.1 431 ")
        assert _raw(ports[1], b"\x00\x01\xff garbage\r\n\r\n").startswith(b"HTTP/1.1 400 ")
        assert _answers(ports[1], "/health/ready") == 200
        assert cluster.node(1).alive()
        assert "metrics listener" in cluster.node(1).log_text(400)


def _answers(port, path):
    try:
        return http_get(port, path, timeout=2)[0]
    except OSError:
        return None


def _raw(port, data):
    """What the endpoint answers to `data` sent as is, until it closes the connection."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        try:
            s.sendall(data)
        except OSError:
            pass  # closed before all was read
        out = b""
        while True:
            try:
                chunk = s.recv(65536)
            except OSError:
                break
            if not chunk:
                break
            out += chunk
        return out
