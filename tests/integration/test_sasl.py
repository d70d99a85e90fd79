"""SASL authentication on a SASL_PLAINTEXT listener (issue 23): PLAIN users from the listener's JAAS configuration,
SCRAM-SHA-256 and SCRAM-SHA-512 users created with kafka-configs (AlterUserScramCredentials through the controller,
credentials in the metadata log), and real clients authenticating with each: confluent-kafka (librdkafka),
kafka-python, Apache Kafka's Java console tools (--command-config), franz-go and KafkaJS. Then what Kafka's
SaslServerAuthenticator refuses, on the wire: a wrong password, an unknown mechanism, a request before the
handshake, SaslAuthenticate before SaslHandshake, an oversized token, and SaslHandshake on a PLAINTEXT listener.
Every refusal closes only its own connection: the node keeps serving.

One node for the module (PLAINTEXT, SASL_PLAINTEXT and CONTROLLER listeners; PLAINTEXT between brokers)."""

import struct
import time

import pytest

from clients import java
from conftest import MalaNode, free_port
from kafka_wire import Connection, api_versions, frame, request_header_v1
from real_clients import (CONFIGS_TOOL, CONSOLE_CONSUMER, CONSOLE_PRODUCER, create_topic, go_client, java_with_input,
                          kafkajs, node_log_on_failure, rdkafka_consume, rdkafka_produce, step_ok,  # noqa: F401
                          tool_batch)

PLAIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"
SCRAM_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule"
# Passwords with a quote and a backslash: the JAAS parser must take the quoted value whole.
USERS = {"admin": "admin-secret", "carol": 'c"a\\rol'}
SASL_HANDSHAKE, SASL_AUTHENTICATE, METADATA = 17, 36, 3


def jaas_quote(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


@pytest.fixture(scope="module")
def node(tmp_path_factory):
    work = tmp_path_factory.mktemp("sasl")
    n = MalaNode(work, name="sasl")
    n.sasl_port = free_port()
    while n.sasl_port in (n.port, n.controller_port):
        n.sasl_port = free_port()
    users = " ".join(f"user_{name}={jaas_quote(pw)}" for name, pw in USERS.items())
    n.config.update({
        "listeners": f"PLAINTEXT://127.0.0.1:{n.port},SASL_PLAINTEXT://127.0.0.1:{n.sasl_port},"
                     f"CONTROLLER://127.0.0.1:{n.controller_port}",
        "advertised.listeners": f"PLAINTEXT://127.0.0.1:{n.port},SASL_PLAINTEXT://127.0.0.1:{n.sasl_port}",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT,CONTROLLER:PLAINTEXT",
        "inter.broker.listener.name": "PLAINTEXT",
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": f"{PLAIN_MODULE} required {users};",
    })
    n.sasl_bootstrap = f"127.0.0.1:{n.sasl_port}"
    n.start()
    yield n
    alive = n.alive()
    code = n.stop()
    n.close_log()
    log = n.log_text()
    if not alive or code != 0:
        pytest.fail(f"node died or did not stop cleanly (exit {code})\n{n.log_text(60)}")
    # No secret ever reaches the log.
    for secret in ["admin-secret", "alice-secret", "bob-secret", "wrong-password"]:
        assert secret not in log, f"{secret} appears in the node's log"


def client_properties(tmp_path, name, mechanism, user, password):
    module = PLAIN_MODULE if mechanism == "PLAIN" else SCRAM_MODULE
    path = tmp_path / f"{name}.properties"
    path.write_text("security.protocol=SASL_PLAINTEXT\n"
                    f"sasl.mechanism={mechanism}\n"
                    f"sasl.jaas.config={module} required username={jaas_quote(user)} "
                    f"password={jaas_quote(password)};\n")
    return path


@pytest.fixture(scope="module")
def scram_users(node, tmp_path_factory):
    """alice (SCRAM-SHA-256, 8192 iterations) through the PLAINTEXT listener, bob (SCRAM-SHA-512) through the SASL
    listener as the PLAIN user admin, a user given both mechanisms and one deleted again, and the refusals."""
    tmp = tmp_path_factory.mktemp("scram-tool")
    admin = client_properties(tmp, "admin", "PLAIN", "admin", "admin-secret")
    users = ("--entity-type", "users")
    # kafka-configs --describe of users asks DescribeClientQuotas first (ConfigCommand), which the quotas work
    # serves: describe with it only when the node advertises it.
    _, keys = api_versions(node.port)
    describes = [(CONFIGS_TOOL, "--bootstrap-server", node.bootstrap, "--describe", *users),
                 (CONFIGS_TOOL, "--bootstrap-server", node.bootstrap, "--describe", *users, "--entity-name", "alice")]
    outs = tool_batch(
        (CONFIGS_TOOL, "--bootstrap-server", node.bootstrap, "--alter", "--add-config",
         "SCRAM-SHA-256=[iterations=8192,password=alice-secret]", *users, "--entity-name", "alice"),
        (CONFIGS_TOOL, "--bootstrap-server", node.sasl_bootstrap, "--command-config", admin, "--alter",
         "--add-config", "SCRAM-SHA-512=[password=bob-secret]", *users, "--entity-name", "bob"),
        (CONFIGS_TOOL, "--bootstrap-server", node.bootstrap, "--alter", "--add-config",
         "SCRAM-SHA-256=[password=temp-secret]", *users, "--entity-name", "temp"),
        (CONFIGS_TOOL, "--bootstrap-server", node.bootstrap, "--alter", "--add-config",
         "SCRAM-SHA-512=[password=temp-secret]", *users, "--entity-name", "temp"),
        (CONFIGS_TOOL, "--bootstrap-server", node.bootstrap, "--alter", "--delete-config", "SCRAM-SHA-512", *users,
         "--entity-name", "temp"),
        # Refusals: a credential that does not exist, too many iterations, one user twice in a request.
        (CONFIGS_TOOL, "--bootstrap-server", node.bootstrap, "--alter", "--delete-config", "SCRAM-SHA-512", *users,
         "--entity-name", "nobody"),
        (CONFIGS_TOOL, "--bootstrap-server", node.bootstrap, "--alter", "--add-config",
         "SCRAM-SHA-256=[iterations=20000,password=x]", *users, "--entity-name", "strong"),
        (CONFIGS_TOOL, "--bootstrap-server", node.bootstrap, "--alter", "--add-config",
         "SCRAM-SHA-256=[password=x],SCRAM-SHA-512=[password=x]", *users, "--entity-name", "twice"),
        *(describes if 48 in keys else []),
    )
    for out in outs[:5]:
        step_ok(out)
    return outs


def describe_scram(bootstrap, users=None):
    """DescribeUserScramCredentials through librdkafka's AdminClient: {user: {mechanism name: iterations}}, or
    {user: exception} for a user it could not describe."""
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap})
    result = admin.describe_user_scram_credentials(users)
    if users is None:
        descriptions = result.result(timeout=30)
    else:
        descriptions = {}
        for user, future in result.items():
            try:
                descriptions[user] = future.result(timeout=30)
            except Exception as e:  # noqa: BLE001 - the test looks at which error
                descriptions[user] = e
    out = {}
    for user, d in descriptions.items():
        if isinstance(d, Exception):
            out[user] = d
        else:
            out[user] = {info.mechanism.name.replace("_", "-"): info.iterations for info in d.scram_credential_infos}
    del admin
    return out


def test_kafka_configs_manages_scram_credentials(node, scram_users):
    described = describe_scram(node.bootstrap)
    assert described == {"alice": {"SCRAM-SHA-256": 8192}, "bob": {"SCRAM-SHA-512": 4096},
                         "temp": {"SCRAM-SHA-256": 4096}}, described
    named = describe_scram(node.bootstrap, ["alice", "nobody"])
    assert named["alice"] == {"SCRAM-SHA-256": 8192}
    assert "does not exist" in str(named["nobody"]), named
    missing, strong, twice = (o["stdout"] + o["stderr"] for o in scram_users[5:8])
    assert scram_users[5]["exit"] != 0 and "Attempt to delete a user credential that does not exist" in missing, missing
    assert scram_users[6]["exit"] != 0 and "Too many iterations" in strong, strong
    assert scram_users[7]["exit"] != 0 and "cannot be altered twice" in twice, twice
    if len(scram_users) > 8:  # kafka-configs --describe (with DescribeClientQuotas served)
        describe_all, describe_alice = (step_ok(o) for o in scram_users[8:])
        assert "SCRAM credential configs for user-principal 'alice' are SCRAM-SHA-256=iterations=8192" in describe_all
        assert "SCRAM credential configs for user-principal 'bob' are SCRAM-SHA-512=iterations=4096" in describe_all
        assert "SCRAM-SHA-256=iterations=8192" in describe_alice and "'bob'" not in describe_alice
    for out in scram_users:
        for secret in ("alice-secret", "bob-secret", "temp-secret"):
            assert secret not in out["stdout"]


# --- Real clients over SASL_PLAINTEXT ------------------------------------------------------------------------------

def rdkafka_sasl(mechanism, user, password):
    return {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": mechanism, "sasl.username": user,
            "sasl.password": password}


@pytest.mark.parametrize("mechanism,user,password", [
    ("PLAIN", "carol", USERS["carol"]),
    ("SCRAM-SHA-256", "alice", "alice-secret"),
    ("SCRAM-SHA-512", "bob", "bob-secret"),
], ids=["plain", "scram-sha-256", "scram-sha-512"])
def test_confluent_kafka(node, scram_users, mechanism, user, password):
    topic = f"sasl-rdkafka-{mechanism.lower()}"
    create_topic(node.bootstrap, topic)
    conf = rdkafka_sasl(mechanism, user, password)
    produced = rdkafka_produce(node.sasl_bootstrap, topic, [(None, f"v{i}") for i in range(20)], timeout=30, **conf)
    assert [r[1] for r in produced] == list(range(20))
    consumed = rdkafka_consume(node.sasl_bootstrap, topic, {0: 0}, count=20, **conf)
    assert [r[3] for r in consumed] == [f"v{i}" for i in range(20)]


def test_confluent_kafka_wrong_password_is_an_authentication_error(node, scram_users):
    from confluent_kafka import KafkaError
    from confluent_kafka.admin import AdminClient

    for mechanism, user in [("PLAIN", "admin"), ("SCRAM-SHA-256", "alice")]:
        errors = []
        admin = AdminClient({"bootstrap.servers": node.sasl_bootstrap, "error_cb": errors.append,
                             **rdkafka_sasl(mechanism, user, "wrong-password")})
        with pytest.raises(Exception):
            admin.list_topics(timeout=5)
        # error_cb is served by poll().
        deadline = time.monotonic() + 10
        while not errors and time.monotonic() < deadline:
            admin.poll(0.2)
        assert any(e.code() == KafkaError._AUTHENTICATION for e in errors), errors
        del admin


@pytest.mark.parametrize("mechanism,user,password", [
    ("PLAIN", "admin", "admin-secret"),
    ("SCRAM-SHA-256", "alice", "alice-secret"),
], ids=["plain", "scram-sha-256"])
def test_kafka_python(node, scram_users, mechanism, user, password):
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition

    topic = f"sasl-kafka-python-{mechanism.lower()}"
    create_topic(node.bootstrap, topic)
    conf = {"bootstrap_servers": node.sasl_bootstrap, "security_protocol": "SASL_PLAINTEXT",
            "sasl_mechanism": mechanism, "sasl_plain_username": user, "sasl_plain_password": password}
    producer = KafkaProducer(**conf)
    for i in range(10):
        producer.send(topic, value=f"kp{i}".encode()).get(timeout=20)
    producer.close(timeout=10)
    consumer = KafkaConsumer(**conf, enable_auto_commit=False, consumer_timeout_ms=10000)
    consumer.assign([TopicPartition(topic, 0)])
    consumer.seek(TopicPartition(topic, 0), 0)
    values = []
    for message in consumer:
        values.append(message.value.decode())
        if len(values) == 10:
            break
    consumer.close()
    assert values == [f"kp{i}" for i in range(10)]


def test_java_console_tools_with_command_config(node, scram_users, tmp_path):
    topic = "sasl-java-console"
    create_topic(node.bootstrap, topic)
    config = client_properties(tmp_path, "bob", "SCRAM-SHA-512", "bob", "bob-secret")
    produced = java_with_input(CONSOLE_PRODUCER, "--bootstrap-server", node.sasl_bootstrap, "--topic", topic,
                               "--command-config", config, input_text="one\ntwo\nthree\n")
    assert produced.returncode == 0, produced.stderr
    consumed = java(CONSOLE_CONSUMER, "--bootstrap-server", node.sasl_bootstrap, "--topic", topic,
                    "--from-beginning", "--max-messages", 3, "--timeout-ms", 20000, "--command-config", config)
    assert consumed.stdout.split() == ["one", "two", "three"], consumed.stderr


@pytest.mark.parametrize("mechanism,user,password", [
    ("PLAIN", "admin", "admin-secret"),
    ("SCRAM-SHA-256", "alice", "alice-secret"),
], ids=["plain", "scram-sha-256"])
def test_franz_go(node, scram_users, mechanism, user, password):
    topic = f"sasl-franz-{mechanism.lower()}"
    create_topic(node.bootstrap, topic)
    sasl = ["--sasl-mechanism", mechanism, "--sasl-user", user, "--sasl-password", password]
    _, produced = go_client("franz", "produce", "--bootstrap", node.sasl_bootstrap, "--topic", topic, "--count", 10,
                            "--partition", 0, *sasl)
    assert len(produced) == 10
    _, consumed = go_client("franz", "consume", "--bootstrap", node.sasl_bootstrap, "--topic", topic, "--partition", 0,
                            "--offset", 0, "--count", 10, *sasl)
    assert [r["value"] for r in consumed] == [r["value"] for r in produced]
    wrong, _ = go_client("franz", "produce", "--bootstrap", node.sasl_bootstrap, "--topic", topic, "--count", 1,
                         "--sasl-mechanism", mechanism, "--sasl-user", user, "--sasl-password", "wrong-password",
                         timeout=20, check=False)
    assert wrong.returncode != 0


@pytest.mark.parametrize("mechanism,user,password", [
    ("plain", "admin", "admin-secret"),
    ("scram-sha-512", "bob", "bob-secret"),
], ids=["plain", "scram-sha-512"])
def test_kafkajs(node, scram_users, mechanism, user, password):
    topic = f"sasl-kafkajs-{mechanism}"
    create_topic(node.bootstrap, topic)
    sasl = ["--sasl-mechanism", mechanism, "--sasl-user", user, "--sasl-password", password]
    _, produced = kafkajs("produce", "--bootstrap", node.sasl_bootstrap, "--topic", topic, "--count", 10,
                          "--partition", 0, *sasl)
    assert len(produced) == 10
    _, consumed = kafkajs("consume", "--bootstrap", node.sasl_bootstrap, "--topic", topic, "--partition", 0,
                          "--offset", 0, "--count", 10, *sasl)
    assert [r["value"] for r in consumed] == [r["value"] for r in produced]


# --- What Kafka's SaslServerAuthenticator refuses, on the wire ----------------------------------------------------

def handshake_request(mechanism, correlation_id=1, version=1):
    data = mechanism.encode()
    return frame(request_header_v1(SASL_HANDSHAKE, version, correlation_id) + struct.pack(">h", len(data)) + data)


def parse_handshake_response(payload):
    correlation_id, error = struct.unpack_from(">ih", payload, 0)
    (count,) = struct.unpack_from(">i", payload, 6)
    pos, mechanisms = 10, []
    for _ in range(count):
        (n,) = struct.unpack_from(">h", payload, pos)
        mechanisms.append(payload[pos + 2:pos + 2 + n].decode())
        pos += 2 + n
    return correlation_id, error, mechanisms


def authenticate_request(token: bytes, correlation_id=2):
    return frame(request_header_v1(SASL_AUTHENTICATE, 1, correlation_id) + struct.pack(">i", len(token)) + token)


def parse_authenticate_response(payload):
    correlation_id, error, message_length = struct.unpack_from(">ihh", payload, 0)
    pos = 8
    message = None
    if message_length >= 0:
        message = payload[pos:pos + message_length].decode()
        pos += message_length
    (n,) = struct.unpack_from(">i", payload, pos)
    auth_bytes = payload[pos + 4:pos + 4 + n]
    (lifetime,) = struct.unpack_from(">q", payload, pos + 4 + n)
    return correlation_id, error, message, auth_bytes, lifetime


def metadata_request_v1(correlation_id=3):
    return frame(request_header_v1(METADATA, 1, correlation_id) + struct.pack(">i", -1))


def assert_node_serves(node):
    assert node.alive()
    error, keys = api_versions(node.port)
    assert error == 0 and SASL_HANDSHAKE in keys and SASL_AUTHENTICATE in keys
    error, _ = api_versions(node.sasl_port)  # ApiVersions first is allowed on a SASL listener
    assert error == 0


def test_plain_on_the_wire_and_wrong_password(node):
    with Connection(node.sasl_port) as conn:
        conn.send(handshake_request("PLAIN"))
        _, error, mechanisms = parse_handshake_response(conn.recv_frame())
        assert (error, mechanisms) == (0, ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"])
        conn.send(authenticate_request(b"\0admin\0admin-secret"))
        _, error, message, _, lifetime = parse_authenticate_response(conn.recv_frame())
        assert (error, message, lifetime) == (0, None, 0)
        conn.send(metadata_request_v1())
        assert conn.recv_frame() is not None  # authenticated: served
    with Connection(node.sasl_port) as conn:
        conn.send(handshake_request("PLAIN"))
        conn.recv_frame()
        conn.send(authenticate_request(b"\0admin\0wrong-password"))
        _, error, message, _, _ = parse_authenticate_response(conn.recv_frame())
        assert error == 58  # SASL_AUTHENTICATION_FAILED
        assert message == "Authentication failed: Invalid username or password"
        assert conn.wait_closed(), "the connection stays open after a failed authentication"
    assert_node_serves(node)


def test_unknown_mechanism(node):
    with Connection(node.sasl_port) as conn:
        conn.send(handshake_request("GSSAPI"))
        _, error, mechanisms = parse_handshake_response(conn.recv_frame())
        assert error == 33  # UNSUPPORTED_SASL_MECHANISM
        assert mechanisms == ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"]
        assert conn.wait_closed()
    assert_node_serves(node)


def test_requests_before_authentication_close_the_connection(node):
    # A Metadata request before the handshake.
    with Connection(node.sasl_port) as conn:
        conn.send(metadata_request_v1())
        data, closed = conn.read_until_closed()
        assert closed and data == b""
    # SaslAuthenticate before SaslHandshake.
    with Connection(node.sasl_port) as conn:
        conn.send(authenticate_request(b"\0admin\0admin-secret"))
        data, closed = conn.read_until_closed()
        assert closed and data == b""
    # A Metadata request between the handshake and the authentication.
    with Connection(node.sasl_port) as conn:
        conn.send(handshake_request("PLAIN"))
        assert parse_handshake_response(conn.recv_frame())[1] == 0
        conn.send(metadata_request_v1())
        data, closed = conn.read_until_closed()
        assert closed and data == b""
    assert "Unexpected Kafka request of type 3 during SASL handshake" in node.log_text(400)
    assert_node_serves(node)


def test_oversized_token_is_refused_unread(node):
    """A 10 MiB SaslAuthenticate is refused on its size alone (sasl.server.max.receive.size = 512 KiB): the
    connection closes before the node reads, let alone allocates, the token."""
    with Connection(node.sasl_port) as conn:
        conn.send(handshake_request("PLAIN"))
        assert parse_handshake_response(conn.recv_frame())[1] == 0
        size = 10 * 1024 * 1024
        conn.send(struct.pack(">i", size) + request_header_v1(SASL_AUTHENTICATE, 1, 2) + struct.pack(">i", size - 30))
        data, closed = conn.read_until_closed()
        assert closed and data == b""
    # Before the handshake too.
    with Connection(node.sasl_port) as conn:
        conn.send(struct.pack(">i", 600 * 1024))
        data, closed = conn.read_until_closed()
        assert closed and data == b""
    assert "sasl.server.max.receive.size" in node.log_text(400)
    assert_node_serves(node)


def test_handshake_on_plaintext_listener_is_illegal_sasl_state(node):
    with Connection(node.port) as conn:
        conn.send(handshake_request("PLAIN", correlation_id=9))
        correlation_id, error, mechanisms = parse_handshake_response(conn.recv_frame())
        assert (correlation_id, error, mechanisms) == (9, 34, [])
        conn.send(metadata_request_v1())
        assert conn.recv_frame() is not None  # the connection goes on
    assert_node_serves(node)
