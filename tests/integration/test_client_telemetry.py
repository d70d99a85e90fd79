"""Client telemetry (issue 24, KIP-714): `kafka-client-metrics.sh` (Apache Kafka 4.4's ClientMetricsCommand) adds,
lists, describes and deletes subscriptions, stored in the metadata log as CLIENT_METRICS configs; Kafka's Java
producer and librdkafka (confluent-kafka), left at their defaults (enable.metrics.push=true), ask the node for their
subscription and push their metrics, which the node's metrics endpoint shows under the OpenTelemetry Collector's
Prometheus names with the client's id and software as labels, and only the metrics the subscription asked for. Once
the subscription is deleted, a client started afterwards pushes nothing. A node without metrics.listeners does not
advertise the two telemetry APIs, as a Kafka broker without a telemetry receiver does not.
"""

import re
import time
import urllib.request

from confluent_kafka import Producer

from conftest import MalaNode, free_port
from real_clients import create_topic, java_json, step_ok, tool_batch, wait_until

CLIENT_METRICS_TOOL = "org.apache.kafka.tools.ClientMetricsCommand"  # kafka-client-metrics.sh
TOPIC = "telemetry"


def scrape(port):
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
        return r.read().decode()


def series(text, name, **labels):
    """The values of the samples of `name` whose labels include `labels`."""
    values = []
    for line in text.splitlines():
        if not line.startswith(name + "{"):
            continue
        head, value = line.rsplit(" ", 1)
        if all(f'{k}="{v}"' in head for k, v in labels.items()):
            values.append(float(value))
    return values


def test_subscriptions_and_pushed_metrics_of_java_and_librdkafka_clients(tmp_path):
    metrics_port = free_port()
    node = MalaNode(tmp_path, name="telemetry",
                    extra_config={"metrics.listeners": f"http://127.0.0.1:{metrics_port}"})
    node.start()
    try:
        bootstrap = node.bootstrap
        create_topic(bootstrap, TOPIC, partitions=2)
        outs = tool_batch(
            (CLIENT_METRICS_TOOL, "--bootstrap-server", bootstrap, "--alter", "--name", "producers",
             "--metrics", "org.apache.kafka.producer.", "--interval", "1000"),
            (CLIENT_METRICS_TOOL, "--bootstrap-server", bootstrap, "--alter", "--name", "only-other",
             "--metrics", "*", "--interval", "1000", "--match", "client_id=someone-else"),
            (CLIENT_METRICS_TOOL, "--bootstrap-server", bootstrap, "--alter", "--name", "bad",
             "--metrics", "x", "--interval", "50"),
            (CLIENT_METRICS_TOOL, "--bootstrap-server", bootstrap, "--alter", "--name", "bad",
             "--match", "rack=a"),
            (CLIENT_METRICS_TOOL, "--bootstrap-server", bootstrap, "--list"),
            (CLIENT_METRICS_TOOL, "--bootstrap-server", bootstrap, "--describe", "--name", "producers"),
        )
        assert "Altered client metrics config for producers." in step_ok(outs[0])
        assert "Altered client metrics config for only-other." in step_ok(outs[1])
        assert outs[2]["exit"] != 0
        assert "interval must be between 100 and 3600000" in outs[2]["stdout"] + outs[2]["stderr"], outs[2]
        assert outs[3]["exit"] != 0
        assert "Illegal client matching pattern: rack=a" in outs[3]["stdout"] + outs[3]["stderr"], outs[3]
        assert sorted(step_ok(outs[4]).split()) == ["only-other", "producers"]
        described = step_ok(outs[5])
        assert "Client metrics configs for producers are:" in described, described
        assert "metrics=org.apache.kafka.producer." in described and "interval.ms=1000" in described, described

        # Kafka's Java producer: 40 records over ~10 s, pushing every second (jittered).
        result, acks = java_json("mala.it.Produce", "--bootstrap", bootstrap, "--topic", TOPIC, "--count", 40,
                                 "--interval-ms", 250, "--prop", "client.id=telemetry-java", timeout=120)
        assert result.returncode == 0, result.stderr
        assert len(acks) == 40
        java_sends = []

        def java_pushed():
            text = scrape(metrics_port)
            java_sends[:] = series(text, "org_apache_kafka_producer_record_send_total",
                                   client_id="telemetry-java", client_software_name="apache-kafka-java")
            return sum(java_sends) > 0

        wait_until(java_pushed, 30, "the Java producer's record-send-total on the metrics endpoint")
        text = scrape(metrics_port)
        assert "# TYPE org_apache_kafka_producer_record_send_total counter" in text
        # Cumulative: what the last push before the producer stopped counted (it pushes about every second).
        wait_until(lambda: java_pushed() and sum(java_sends) >= 20, 30, "pushes of the Java producer's later sends")
        assert sum(java_sends) <= 40, java_sends
        # Only what the subscription names (the client filters, and the node keeps nothing else): no consumer or
        # admin metric, and one TYPE line per name.
        pushed_names = set(re.findall(r"^(org_apache_kafka_\w+)\{", text, re.M))
        assert pushed_names and all(n.startswith("org_apache_kafka_producer_") for n in pushed_names), pushed_names
        type_lines = re.findall(r"^# TYPE (\S+) ", text, re.M)
        assert len(type_lines) == len(set(type_lines))

        # librdkafka, producing for ~8 s.
        producer = Producer({"bootstrap.servers": bootstrap, "client.id": "telemetry-rdkafka"})
        deadline = time.time() + 8
        i = 0
        seen = []
        while time.time() < deadline:
            producer.produce(TOPIC, value=f"r{i}".encode())
            i += 1
            producer.poll(0.1)
        assert producer.flush(30) == 0

        def rdkafka_pushed():
            text = scrape(metrics_port)
            seen[:] = [line for line in text.splitlines()
                       if line.startswith("org_apache_kafka_producer_") and 'client_id="telemetry-rdkafka"' in line]
            return bool(seen)

        wait_until(rdkafka_pushed, 30, "librdkafka's pushed producer metrics on the metrics endpoint")
        assert any(line.startswith("org_apache_kafka_producer_node_request_latency_avg{") for line in seen), seen

        # --delete removes the subscription: a client started after it gets no metrics to push.
        outs = tool_batch(
            (CLIENT_METRICS_TOOL, "--bootstrap-server", bootstrap, "--delete", "--name", "producers"),
            (CLIENT_METRICS_TOOL, "--bootstrap-server", bootstrap, "--list"),
        )
        assert "Deleted client metrics config for producers." in step_ok(outs[0])
        assert step_ok(outs[1]).split() == ["only-other"]
        result, acks = java_json("mala.it.Produce", "--bootstrap", bootstrap, "--topic", TOPIC, "--count", 12,
                                 "--interval-ms", 250, "--prop", "client.id=telemetry-java-late", timeout=120)
        assert result.returncode == 0, result.stderr
        time.sleep(2)
        assert series(scrape(metrics_port), "org_apache_kafka_producer_record_send_total",
                      client_id="telemetry-java-late") == []
        assert node.alive()
    finally:
        node.stop()


def test_telemetry_apis_are_advertised_only_with_a_metrics_listener(tmp_path):
    with_port = free_port()
    plain = MalaNode(tmp_path / "plain", name="plain")
    metered = MalaNode(tmp_path / "metered", name="metered",
                       extra_config={"metrics.listeners": f"http://127.0.0.1:{with_port}"})
    for n in (plain, metered):
        (tmp_path / n.name).mkdir(exist_ok=True)
    plain.start()
    metered.start()
    try:
        # kafka-broker-api-versions.sh prints every advertised API.
        outs = tool_batch(
            ("org.apache.kafka.tools.BrokerApiVersionsCommand", "--bootstrap-server", plain.bootstrap),
            ("org.apache.kafka.tools.BrokerApiVersionsCommand", "--bootstrap-server", metered.bootstrap),
        )
        plain_apis, metered_apis = step_ok(outs[0]), step_ok(outs[1])
        assert "GetTelemetrySubscriptions(71): UNSUPPORTED" in plain_apis, plain_apis
        assert "PushTelemetry(72): UNSUPPORTED" in plain_apis, plain_apis
        assert "GetTelemetrySubscriptions(71): 0 [usable: 0]" in metered_apis, metered_apis
        assert "PushTelemetry(72): 0 [usable: 0]" in metered_apis, metered_apis
        assert "ListConfigResources(74): 0 to 1 [usable: 1]" in plain_apis, plain_apis
    finally:
        plain.stop()
        metered.stop()
