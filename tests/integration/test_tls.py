"""TLS on SSL listeners (issue 23): real clients (librdkafka, kafka-python, Apache Kafka's Java client and console
consumer) produce and consume over TLS, with and without client certificates (ssl.client.auth=required on one
listener); the client certificate's subject becomes the connection's principal through ssl.principal.mapping.rules.
Bad input closes only the offending connection, with one log line, and the node keeps serving: plaintext bytes to a
TLS listener, a TLS handshake to a plaintext listener, no client certificate where one is required, a certificate
from an untrusted CA, an expired certificate. A SASL_SSL listener serves SASL/PLAIN over TLS.

Certificates are made at test time with the openssl CLI (the expired one with python's cryptography, as openssl's
x509 command cannot back-date): a CA, a server certificate for localhost/127.0.0.1, client certificates. One node
serves the whole module.
"""

import datetime
import socket
import ssl
import struct
import time
import uuid

import pytest

from clients import run
from conftest import MalaNode, free_port
from kafka_wire import api_versions, api_versions_request, parse_api_versions
from real_clients import (CONFIGS_TOOL, CONSOLE_CONSUMER, create_topic, go_client, java_json, kafkajs,  # noqa: F401
                          node_log_on_failure, rdkafka_consume, rdkafka_produce, step_ok, tool_batch, wait_until)

CLIENT_SUBJECT = "/O=acme/OU=eng/CN=client"  # RFC 2253, as Java prints it: CN=client,OU=eng,O=acme
MAPPING_RULES = "RULE:^CN=([^,]+),OU=eng,O=acme$/$1@eng/U,DEFAULT"


def openssl(pki, *args):
    run(["openssl", *map(str, args)], timeout=60)


def make_key_and_csr(pki, name, subject):
    openssl(pki, "req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
            "-keyout", pki / f"{name}.key", "-out", pki / f"{name}.csr", "-subj", subject)


def sign(pki, name, ca, extfile=None):
    args = ["x509", "-req", "-in", pki / f"{name}.csr", "-CA", pki / f"{ca}.pem", "-CAkey", pki / f"{ca}.key",
            "-CAcreateserial", "-out", pki / f"{name}.crt", "-days", "2", "-sha256"]
    if extfile:
        args += ["-extfile", extfile]
    openssl(pki, *args)


def make_ca(pki, name, subject):
    openssl(pki, "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
            "-keyout", pki / f"{name}.key", "-out", pki / f"{name}.pem", "-days", "2", "-subj", subject)


def make_expired(pki):
    """A client certificate signed by the trusted CA whose validity ended yesterday."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    ca_key = serialization.load_pem_private_key((pki / "ca.key").read_bytes(), password=None)
    ca_cert = x509.load_pem_x509_certificate((pki / "ca.pem").read_bytes())
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "expired")]))
            .issuer_name(ca_cert.subject).public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(days=3)).not_valid_after(now - datetime.timedelta(days=1))
            .sign(ca_key, hashes.SHA256()))
    (pki / "expired.key").write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                                        serialization.NoEncryption()))
    (pki / "expired.crt").write_bytes(cert.public_bytes(serialization.Encoding.PEM))


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    pki = tmp_path_factory.mktemp("pki")
    make_ca(pki, "ca", "/CN=mala-test-ca")
    make_key_and_csr(pki, "server", "/CN=localhost")
    ext = pki / "server.ext"
    ext.write_text("subjectAltName=DNS:localhost,IP:127.0.0.1\n")
    sign(pki, "server", "ca", ext)
    (pki / "server.pem").write_text((pki / "server.key").read_text() + (pki / "server.crt").read_text())
    make_key_and_csr(pki, "client", CLIENT_SUBJECT)
    sign(pki, "client", "ca")
    # Java's PEM key store: the PKCS#8 key and the certificate in one file.
    (pki / "client.pem").write_text((pki / "client.key").read_text() + (pki / "client.crt").read_text())
    make_ca(pki, "rogue-ca", "/CN=rogue-ca")
    make_key_and_csr(pki, "rogue", "/CN=rogue")
    sign(pki, "rogue", "rogue-ca")
    make_expired(pki)
    # The renewed server certificate a dynamic key store update switches to.
    make_key_and_csr(pki, "server2", "/CN=localhost")
    sign(pki, "server2", "ca", ext)
    (pki / "server2.pem").write_text((pki / "server2.key").read_text() + (pki / "server2.crt").read_text())
    # Updates that Kafka refuses without ssl.allow.dn.changes / ssl.allow.san.changes: another subject, and the
    # same subject with a subjectAltName less.
    make_key_and_csr(pki, "renamed", "/CN=other-host")
    sign(pki, "renamed", "ca", ext)
    (pki / "renamed.pem").write_text((pki / "renamed.key").read_text() + (pki / "renamed.crt").read_text())
    narrow_ext = pki / "narrow.ext"
    narrow_ext.write_text("subjectAltName=DNS:localhost\n")
    make_key_and_csr(pki, "narrow", "/CN=localhost")
    sign(pki, "narrow", "ca", narrow_ext)
    (pki / "narrow.pem").write_text((pki / "narrow.key").read_text() + (pki / "narrow.crt").read_text())
    return pki


@pytest.fixture(scope="module")
def ports():
    chosen = set()
    while len(chosen) < 3:
        chosen.add(free_port())
    return dict(zip(("ssl", "mtls", "sasl_ssl"), chosen))


@pytest.fixture(scope="module")
def node(tmp_path_factory, pki, ports):
    config = {
        "ssl.keystore.location": str(pki / "server.pem"),
        "ssl.truststore.location": str(pki / "ca.pem"),
        # One-way TLS on SSL; client certificates required on MTLS (the listener's override wins).
        "listener.name.mtls.ssl.client.auth": "required",
        "ssl.principal.mapping.rules": MAPPING_RULES,
        # The principal of each TLS connection is logged at debug.
        "log.level": "debug",
        # SASL_SSL: TLS with the listener's PLAIN users on top.
        "sasl.enabled.mechanisms": "PLAIN",
        "listener.name.sasl_ssl.plain.sasl.jaas.config":
            'org.apache.kafka.common.security.plain.PlainLoginModule required user_alice="alice-secret";',
    }
    node = MalaNode(tmp_path_factory.mktemp("tls"), name="tls", extra_config=config)
    tls_listeners = (f",SSL://127.0.0.1:{ports['ssl']},MTLS://127.0.0.1:{ports['mtls']},"
                     f"SASL_SSL://127.0.0.1:{ports['sasl_ssl']}")
    node.config["listeners"] += tls_listeners
    node.config["advertised.listeners"] += tls_listeners
    node.config["listener.security.protocol.map"] = "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT,SSL:SSL,MTLS:SSL,SASL_SSL:SASL_SSL"
    node.start()
    yield node
    was_running = node.alive()
    code = node.stop()
    node.close_log()
    if not was_running or code != 0:
        print(node.log_text())
        pytest.fail(f"tls node: {'died during the module' if not was_running else 'unclean stop'}, exit code {code}")


def ssl_bootstrap(ports):
    return f"127.0.0.1:{ports['ssl']}"


def mtls_bootstrap(ports):
    return f"127.0.0.1:{ports['mtls']}"


def rdkafka_tls(pki, client_cert=False):
    conf = {"security.protocol": "ssl", "ssl.ca.location": str(pki / "ca.pem")}
    if client_cert:
        conf.update({"ssl.certificate.location": str(pki / "client.crt"),
                     "ssl.key.location": str(pki / "client.key")})
    return conf


def new_topic(node, prefix):
    name = f"{prefix}-{uuid.uuid4().hex[:8]}"
    create_topic(node.bootstrap, name, partitions=2)
    return name


def tls_exchange(port, pki, cert=None, key=None, timeout=10):
    """One ApiVersions round trip over TLS on a fresh connection. Returns (local port, parsed response or the
    exception / None when the server closed the connection instead of answering)."""
    ctx = ssl.create_default_context(cafile=str(pki / "ca.pem"))
    if cert:
        ctx.load_cert_chain(str(cert), str(key))
    raw = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    local_port = raw.getsockname()[1]
    try:
        with ctx.wrap_socket(raw, server_hostname="localhost") as s:
            s.sendall(api_versions_request(3, 7))
            data = b""
            while len(data) < 4 or len(data) < 4 + struct.unpack_from(">i", data)[0]:
                chunk = s.recv(65536)
                if not chunk:
                    return local_port, None
                data += chunk
            (corr,) = struct.unpack_from(">i", data, 4)
            assert corr == 7
            return local_port, parse_api_versions(data[8:], 3)
    except (ssl.SSLError, ConnectionResetError, BrokenPipeError) as e:
        return local_port, e
    finally:
        raw.close()


def wait_for_log(node, *needles, timeout=10):
    """The first log line containing every needle."""
    def find():
        for line in node.full_log().splitlines():
            if all(n in line for n in needles):
                return line
        return None
    return wait_until(find, timeout, f"a log line with {needles}")


def still_serves(node, pki, ports):
    """Every listener still answers: PLAINTEXT, and TLS with and without a client certificate."""
    assert api_versions(node.port)[0] == 0
    _, answer = tls_exchange(ports["ssl"], pki)
    assert isinstance(answer, tuple) and answer[0] == 0, answer
    _, answer = tls_exchange(ports["mtls"], pki, pki / "client.crt", pki / "client.key")
    assert isinstance(answer, tuple) and answer[0] == 0, answer


def test_rdkafka_produces_and_consumes_over_tls(node, pki, ports):
    topic = new_topic(node, "tls-rdkafka")
    records = [(f"k{i}", f"v{i}") for i in range(50)]
    produced = rdkafka_produce(ssl_bootstrap(ports), topic, records, **rdkafka_tls(pki))
    consumed = rdkafka_consume(ssl_bootstrap(ports), topic, {0: 0, 1: 0}, count=50, **rdkafka_tls(pki))
    assert sorted(consumed) == sorted(produced)
    # With a client certificate on the listener that requires one; read back over plaintext too.
    more = rdkafka_produce(mtls_bootstrap(ports), topic, [("m", "mtls")], **rdkafka_tls(pki, client_cert=True))
    consumed = rdkafka_consume(node.bootstrap, topic, {0: 0, 1: 0}, count=51)
    assert sorted(consumed) == sorted(produced + more)
    # The certificate's subject (Java's RFC 2253 form) mapped by ssl.principal.mapping.rules.
    line = wait_for_log(node, "listener MTLS", "principal User:CLIENT@ENG", "subject CN=client,OU=eng,O=acme")
    assert "TLSv1.3" in line, line
    # Without a client certificate the principal stays anonymous.
    wait_for_log(node, "listener SSL", "principal User:ANONYMOUS")


def test_franz_go_and_kafkajs_produce_and_consume_over_tls(node, pki, ports):
    """franz-go (Go's crypto/tls) and KafkaJS (Node's tls) over the SSL listener, and with a client certificate over
    the one that requires it; what one wrote the other reads back (uncompressed: KafkaJS has no snappy, franz-go's
    default)."""
    topic = new_topic(node, "tls-go-js")
    ca = ["--tls-ca", pki / "ca.pem"]
    client = [*ca, "--tls-cert", pki / "client.crt", "--tls-key", pki / "client.key"]
    _, by_franz = go_client("franz", "produce", "--bootstrap", ssl_bootstrap(ports), "--topic", topic, "--count", 40,
                            "--key-prefix", "franz-", "--partition", 0, "--compression", "none", *ca)
    _, by_kafkajs = kafkajs("produce", "--bootstrap", mtls_bootstrap(ports), "--topic", topic, "--count", 30,
                            "--key-prefix", "js-", "--partition", 1, *client)
    assert len(by_franz) == 40 and len(by_kafkajs) == 30
    _, read_by_kafkajs = kafkajs("consume", "--bootstrap", ssl_bootstrap(ports), "--topic", topic, "--partition", 0,
                                 "--offset", 0, "--count", 40, *ca)
    assert [(r["offset"], r["key"]) for r in read_by_kafkajs] == [(r["offset"], r["key"]) for r in by_franz]
    _, read_by_franz = go_client("franz", "consume", "--bootstrap", mtls_bootstrap(ports), "--topic", topic,
                                 "--partition", 1, "--offset", 0, "--count", 30, *client)
    assert [(r["offset"], r["key"]) for r in read_by_franz] == [(r["offset"], r["key"]) for r in by_kafkajs]
    # Without the CA, neither client gets anywhere: the listener's certificate is not trusted.
    failed, _ = go_client("franz", "produce", "--bootstrap", ssl_bootstrap(ports), "--topic", topic, "--count", 1,
                          "--tls-ca", pki / "rogue-ca.pem", timeout=25, check=False)
    assert failed.returncode != 0


def test_sasl_ssl_listener(node, pki, ports):
    """SASL_SSL: the TLS handshake first, then SASL/PLAIN inside it; the principal is the SASL user."""
    topic = new_topic(node, "tls-sasl-ssl")
    conf = dict(rdkafka_tls(pki), **{"security.protocol": "sasl_ssl", "sasl.mechanism": "PLAIN",
                                      "sasl.username": "alice", "sasl.password": "alice-secret"})
    bootstrap = f"127.0.0.1:{ports['sasl_ssl']}"
    produced = rdkafka_produce(bootstrap, topic, [(f"k{i}", f"v{i}") for i in range(20)], **conf)
    consumed = rdkafka_consume(bootstrap, topic, {0: 0, 1: 0}, count=20, **conf)
    assert sorted(consumed) == sorted(produced)
    wait_for_log(node, "authenticated as User:alice with SASL/PLAIN")
    # Before authentication only ApiVersions and the SASL requests are served (over TLS here).
    _, answer = tls_exchange(ports["sasl_ssl"], pki)
    assert isinstance(answer, tuple) and answer[0] == 0, answer
    still_serves(node, pki, ports)


def test_kafka_python_over_tls_and_mtls(node, pki, ports):
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition

    topic = new_topic(node, "tls-kafka-python")
    for bootstrap, cert in ((ssl_bootstrap(ports), False), (mtls_bootstrap(ports), True)):
        tls = {"security_protocol": "SSL", "ssl_cafile": str(pki / "ca.pem")}
        if cert:
            tls.update({"ssl_certfile": str(pki / "client.crt"), "ssl_keyfile": str(pki / "client.key")})
        producer = KafkaProducer(bootstrap_servers=bootstrap, request_timeout_ms=15000, **tls)
        futures = [producer.send(topic, key=b"k", value=f"{bootstrap}-{i}".encode()) for i in range(20)]
        producer.flush(30)
        offsets = [f.get(timeout=30).offset for f in futures]
        producer.close()
        assert offsets == sorted(offsets)
        consumer = KafkaConsumer(bootstrap_servers=bootstrap, consumer_timeout_ms=15000, **tls)
        partitions = [TopicPartition(topic, p) for p in (0, 1)]
        consumer.assign(partitions)
        consumer.seek_to_beginning(*partitions)
        values = set()
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and not {f"{bootstrap}-{i}" for i in range(20)} <= values:
            for records in consumer.poll(timeout_ms=500).values():
                values.update(r.value.decode() for r in records)
        consumer.close()
        assert {f"{bootstrap}-{i}" for i in range(20)} <= values


def test_java_client_and_console_consumer_over_tls(node, pki, ports, tmp_path):
    topic = new_topic(node, "tls-java")
    # The Java producer with a PEM key store on the mTLS listener (host name verification on: the server
    # certificate names 127.0.0.1).
    _, produced = java_json(
        "mala.it.Produce", "--bootstrap", mtls_bootstrap(ports), "--topic", topic, "--count", "10",
        "--key-prefix", "k", "--prop", "security.protocol=SSL", "--prop", "ssl.truststore.type=PEM",
        "--prop", f"ssl.truststore.location={pki / 'ca.pem'}", "--prop", "ssl.keystore.type=PEM",
        "--prop", f"ssl.keystore.location={pki / 'client.pem'}")
    assert len(produced) == 10
    # kafka-console-consumer on the one-way TLS listener.
    config = tmp_path / "consumer.properties"
    config.write_text(f"security.protocol=SSL\nssl.truststore.type=PEM\nssl.truststore.location={pki / 'ca.pem'}\n")
    (out,) = tool_batch((CONSOLE_CONSUMER, "--bootstrap-server", ssl_bootstrap(ports), "--topic", topic,
                         "--from-beginning", "--max-messages", "10", "--timeout-ms", "30000",
                         "--command-config", config))
    lines = step_ok(out).split()
    assert sorted(lines) == sorted(p["value"] for p in produced)
    wait_for_log(node, "listener MTLS", "principal User:CLIENT@ENG")


def test_mtls_refuses_missing_untrusted_and_expired_certificates(node, pki, ports):
    cases = [
        (None, None, "certificate"),  # no certificate: OpenSSL's "peer did not return a certificate"
        (pki / "rogue.crt", pki / "rogue.key", "certificate verify failed"),
        (pki / "expired.crt", pki / "expired.key", "certificate has expired"),
    ]
    for cert, key, reason in cases:
        local_port, answer = tls_exchange(ports["mtls"], pki, cert, key)
        assert not isinstance(answer, tuple), f"{cert}: answered without a valid client certificate: {answer}"
        line = wait_for_log(node, f"127.0.0.1:{local_port}", "TLS handshake failed")
        assert "listener MTLS" in line and reason in line, line
        still_serves(node, pki, ports)
    # The one-way listener does not ask for a certificate: an untrusted one is not even sent.
    _, answer = tls_exchange(ports["ssl"], pki, pki / "rogue.crt", pki / "rogue.key")
    assert isinstance(answer, tuple) and answer[0] == 0, answer


def test_plaintext_to_tls_listener_and_tls_to_plaintext_listener(node, pki, ports):
    # A Kafka request in plaintext on the TLS listener: not a TLS record, the handshake fails.
    with socket.create_connection(("127.0.0.1", ports["ssl"]), timeout=10) as s:
        local_port = s.getsockname()[1]
        s.sendall(api_versions_request(3, 7))
        s.settimeout(10)
        try:
            data = s.recv(65536)
        except ConnectionResetError:
            data = b""
        # Nothing a Kafka client could read as a response (at most a TLS alert record).
        assert data == b"" or data[0] == 0x15, data
    line = wait_for_log(node, f"127.0.0.1:{local_port}", "TLS handshake failed")
    assert "listener SSL" in line, line

    # A TLS ClientHello on the plaintext listener: an impossible frame size, logged and closed.
    ctx = ssl.create_default_context(cafile=str(pki / "ca.pem"))
    raw = socket.create_connection(("127.0.0.1", node.port), timeout=10)
    local_port = raw.getsockname()[1]
    with pytest.raises((ssl.SSLError, ConnectionResetError, OSError)):
        ctx.wrap_socket(raw, server_hostname="localhost")
    raw.close()
    line = wait_for_log(node, f"127.0.0.1:{local_port}", "speaks TLS to a plaintext listener")
    assert "listener PLAINTEXT" in line, line
    still_serves(node, pki, ports)


def server_certificate(port, pki, cert=None, key=None):
    """The DER certificate a TLS listener presents to a new connection."""
    ctx = ssl.create_default_context(cafile=str(pki / "ca.pem"))
    if cert:
        ctx.load_cert_chain(str(cert), str(key))
    with socket.create_connection(("127.0.0.1", port), timeout=10) as raw:
        with ctx.wrap_socket(raw, server_hostname="localhost") as s:
            return s.getpeercert(binary_form=True)


def der(path):
    return ssl.PEM_cert_to_DER_cert(path.read_text())


def test_key_store_update_without_restart(node, pki, ports):
    """kafka-configs --alter of a broker's listener.name.ssl.ssl.keystore.location: new connections to that listener
    get the new certificate, other listeners keep theirs; the cluster-wide default is refused (per broker only)."""
    client = (pki / "client.crt", pki / "client.key")
    assert server_certificate(ports["ssl"], pki) == der(pki / "server.crt")
    outs = tool_batch(
        (CONFIGS_TOOL, "--bootstrap-server", node.bootstrap, "--entity-type", "brokers", "--entity-name", "1",
         "--alter", "--add-config", f"listener.name.ssl.ssl.keystore.location={pki / 'server2.pem'}"),
        (CONFIGS_TOOL, "--bootstrap-server", node.bootstrap, "--entity-type", "brokers", "--entity-default",
         "--alter", "--add-config", f"listener.name.ssl.ssl.keystore.location={pki / 'server2.pem'}"))
    step_ok(outs[0])
    assert outs[1]["exit"] != 0 and "broker id must be specified" in outs[1]["stdout"] + outs[1]["stderr"], outs[1]
    wait_until(lambda: server_certificate(ports["ssl"], pki) == der(pki / "server2.crt"), 15,
               "the SSL listener presenting the new certificate")
    wait_for_log(node, "listener SSL: TLS key and trust stores reloaded")
    assert server_certificate(ports["mtls"], pki, *client) == der(pki / "server.crt")
    still_serves(node, pki, ports)


def test_key_store_update_that_changes_the_dn_or_drops_a_san_is_not_applied(node, pki, ports):
    """As Kafka (SslFactory's CertificateEntries.ensureCompatible): a key store update whose certificate has another
    subject, or lacks one of the current subjectAltNames, is not applied without ssl.allow.dn.changes /
    ssl.allow.san.changes; the listener keeps its certificate and the node logs why."""
    before = server_certificate(ports["ssl"], pki)
    for store, needle in (("renamed.pem", "Keystore DistinguishedName does not match"),
                          ("narrow.pem", "Keystore SubjectAltNames do not match")):
        step_ok(tool_batch(
            (CONFIGS_TOOL, "--bootstrap-server", node.bootstrap, "--entity-type", "brokers", "--entity-name", "1",
             "--alter", "--add-config", f"listener.name.ssl.ssl.keystore.location={pki / store}"))[0])
        wait_for_log(node, "listener SSL: dynamic TLS configuration not applied", needle, timeout=15)
        assert server_certificate(ports["ssl"], pki) == before
    still_serves(node, pki, ports)


def test_cluster_over_tls_everywhere_survives_leader_kill(pki, tmp_path):
    """Three combined-mode nodes whose every listener is SSL with ssl.client.auth=required: clients (CLIENT),
    replication and transaction markers (INTERNAL, inter.broker.listener.name) and the Raft quorum, broker
    registration and forwarding (CONTROLLER) all run over mutual TLS, each node connecting with its own key store
    and trust store of that listener and verifying the server's name (ssl.endpoint.identification.algorithm=https
    by default; the certificates name 127.0.0.1). The INTERNAL key store of every node is renewed at run time
    (kafka-configs' per-broker update, here through librdkafka's admin), servers and the nodes' own clients alike.
    Records acknowledged with acks=all (min.insync.replicas=2) while the partition's leader is SIGKILLed are all
    read back over TLS."""
    from confluent_kafka import Consumer, Producer, TopicPartition
    from confluent_kafka.admin import AdminClient, NewTopic

    from cluster import own_cluster

    with own_cluster(tmp_path) as cluster:
        for n in cluster.nodes.values():
            internal = free_port()
            while internal in (n.port, n.controller_port):
                internal = free_port()
            n.config.update({
                "listeners": [f"CLIENT://127.0.0.1:{n.port}", f"INTERNAL://127.0.0.1:{internal}",
                              f"CONTROLLER://127.0.0.1:{n.controller_port}"],
                "advertised.listeners": f"CLIENT://127.0.0.1:{n.port},INTERNAL://127.0.0.1:{internal}",
                "inter.broker.listener.name": "INTERNAL",
                "listener.security.protocol.map": "CLIENT:SSL,INTERNAL:SSL,CONTROLLER:SSL",
                "ssl.keystore.location": str(pki / "server.pem"),
                "ssl.truststore.location": str(pki / "ca.pem"),
                "ssl.client.auth": "required",
                "log.level": "info",
            })
        cluster.start_all()
        tls = rdkafka_tls(pki, client_cert=True)
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap, **tls})
        topic = f"tls-cluster-{uuid.uuid4().hex[:8]}"

        def created():
            # Three registered brokers are needed for replication factor 3: retried until the quorum formed
            # (over TLS) and every broker registered (over TLS).
            futures = admin.create_topics([NewTopic(topic, num_partitions=1, replication_factor=3,
                                                    config={"min.insync.replicas": "2"})],
                                          request_timeout=5, operation_timeout=5)
            try:
                futures[topic].result(timeout=10)
                return True
            except Exception as e:  # noqa: BLE001 (any failure: retried until the deadline)
                if "already exists" in str(e):
                    return True
                return None
        cluster.wait_until(created, timeout=30, interval=0.5, what="topic created with replication factor 3")

        def leader_with_full_isr():
            p = admin.list_topics(topic, timeout=5).topics[topic].partitions.get(0)
            return p.leader if p is not None and p.leader >= 0 and len(p.isrs) == 3 else None
        leader = cluster.wait_until(leader_with_full_isr, timeout=20, interval=0.2, what="partition 0 with ISR of 3")

        # Every node's INTERNAL key store renewed at run time (same subject and names, another key): the node's own
        # connections through INTERNAL (replica fetchers, transaction markers) take it from their next connection,
        # which the leader kill below makes the followers open.
        from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType
        for i in cluster.ids:  # one broker resource per call (librdkafka's rule)
            renewed = ConfigResource(ResourceType.BROKER, str(i), incremental_configs=[ConfigEntry(
                "listener.name.internal.ssl.keystore.location", str(pki / "server2.pem"),
                incremental_operation=AlterConfigOpType.SET)])
            for future in admin.incremental_alter_configs([renewed]).values():
                future.result(timeout=15)
        for i in cluster.ids:
            cluster.wait_until(lambda i=i: "listener INTERNAL: the node's own connections through it use the new TLS "
                               "stores" in cluster.node(i).log_text(5000), timeout=15,
                               what=f"node {i}'s INTERNAL client stores renewed")

        producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all", "enable.idempotence": False,
                             "linger.ms": 5, "message.timeout.ms": 30000, "socket.timeout.ms": 10000, **tls})
        acked, failed = set(), []

        def report(err, msg):
            if err is None:
                acked.add(msg.value().decode())
            else:
                failed.append(str(err))

        sent, killed_at = 0, None
        deadline = time.monotonic() + 40
        while time.monotonic() < deadline:
            producer.produce(topic, value=str(sent).encode(), partition=0, on_delivery=report)
            sent += 1
            producer.poll(0.002)
            if killed_at is None and len(acked) >= 200:
                cluster.kill(leader)  # SIGKILL while records are in flight
                killed_at = sent
            if killed_at is not None and len(acked) >= killed_at + 200:
                break
        assert producer.flush(35) == 0
        assert killed_at is not None, f"only {len(acked)} records acknowledged before the deadline"
        assert len(acked) >= killed_at + 200, f"{len(acked)} acknowledged of {sent}, killed at {killed_at}: {failed}"

        survivors = [i for i in cluster.ids if i != leader]
        consumer = Consumer({"bootstrap.servers": cluster.bootstrap_of(*survivors), "group.id": "mala-it-unused",
                             "enable.auto.commit": False, "enable.partition.eof": True, **tls})
        consumer.assign([TopicPartition(topic, 0, 0)])
        read = set()
        read_deadline = time.monotonic() + 20
        while not acked <= read and time.monotonic() < read_deadline:
            msg = consumer.poll(0.5)
            if msg is not None and msg.error() is None:
                read.add(msg.value().decode())
        consumer.close()
        lost = acked - read
        assert not lost, f"{len(lost)} acknowledged records lost, e.g. {sorted(lost, key=int)[:10]}"
        del admin
