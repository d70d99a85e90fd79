"""Authorization with Kafka's StandardAuthorizer semantics (issue 23): `kafka-acls --add/--list/--remove` against
one node with `authorizer.class.name` set, and the effect of the ACLs on real clients (confluent-kafka producers,
consumers in a group, the admin client's topic creation).

PLAINTEXT clients are User:ANONYMOUS. The node first runs with super.users=User:ANONYMOUS to seed ACLs for
User:ANONYMOUS (and the topics the test needs), then restarts without super users: from then on the ACLs decide,
and they were read back from the metadata log (a snapshot with a small snapshot interval). ACLs:
  cluster: ALLOW Describe, Alter (kafka-acls itself), IdempotentWrite
  topic prefix "app-": ALLOW Read, Write, Create;   topic "app-secret": DENY Read (deny over allow)
  group "app-group": ALLOW Read;                    topic "hosted": ALLOW Read from host 10.9.9.9 only
A last restart with allow.everyone.if.no.acl.found=true opens the topics no ACL names, and only those.
"""

import time

import pytest

from conftest import MalaNode
from real_clients import step_ok, tool_batch, wait_until

ACLS_TOOL = "org.apache.kafka.tools.AclCommand"  # kafka-acls.sh
AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
ANON = "User:ANONYMOUS"


def acls(bootstrap, *args):
    return (ACLS_TOOL, "--bootstrap-server", bootstrap, *args)


def produce(bootstrap, topic, values, timeout=20):
    """Produces with confluent-kafka; returns (delivered count, [error names])."""
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, "message.timeout.ms": int(timeout * 1000 * 0.7),
                  "socket.timeout.ms": 5000, "topic.metadata.refresh.interval.ms": 500})
    delivered, errors = [], []

    def cb(err, msg):
        (errors.append(err.name()) if err is not None else delivered.append(msg.offset()))

    for v in values:
        p.produce(topic, value=v, on_delivery=cb)
    p.flush(timeout)
    return len(delivered), errors


def consume_group(bootstrap, topic, group, want, timeout=20):
    """Subscribes in `group`; returns (values read, [error names]) once `want` records or an error arrived."""
    from confluent_kafka import Consumer

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest",
                  "enable.auto.commit": False, "socket.timeout.ms": 5000, "session.timeout.ms": 6000})
    values, errors = [], []
    try:
        c.subscribe([topic])
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and len(values) < want and not errors:
            msg = c.poll(0.5)
            if msg is None:
                continue
            if msg.error():
                errors.append(msg.error().name())
                continue
            values.append(msg.value().decode())
        if values and not errors:
            c.commit(asynchronous=False)
    finally:
        c.close()
    return values, errors


def topic_error(bootstrap, topic):
    """The error of `topic` in a Metadata answer naming it (None when described)."""
    from confluent_kafka.admin import AdminClient

    md = AdminClient({"bootstrap.servers": bootstrap}).list_topics(topic=topic, timeout=10)
    t = md.topics.get(topic)
    return t.error.name() if t is not None and t.error is not None else None


def consume_assigned(bootstrap, topic, timeout=10):
    """Reads partition 0 without a group; returns (values, [error names]) at the end of the partition or the
    first error."""
    from confluent_kafka import Consumer, KafkaError, TopicPartition

    # librdkafka looks up the group's coordinator even for assigned partitions: a group the principal may use
    # (FindCoordinator needs DESCRIBE on it), so that what shows is the topic's own answer.
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "app-group", "enable.partition.eof": True,
                  "enable.auto.commit": False, "socket.timeout.ms": 5000})
    values, errors = [], []
    try:
        c.assign([TopicPartition(topic, 0, 0)])
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            msg = c.poll(0.5)
            if msg is None:
                continue
            if msg.error():
                if msg.error().code() == KafkaError._PARTITION_EOF:
                    break
                errors.append(msg.error().name())
                break
            values.append(msg.value().decode())
    finally:
        c.close()
    return values, errors


def create_topics(bootstrap, names):
    """Creates topics with the admin client; returns {name: None or error name}."""
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap, "socket.timeout.ms": 5000})
    futures = admin.create_topics([NewTopic(n, num_partitions=1, replication_factor=1) for n in names],
                                  request_timeout=15)
    out = {}
    for n, f in futures.items():
        try:
            f.result(timeout=20)
            out[n] = None
        except KafkaException as e:
            out[n] = e.args[0].name()
    return out


def listed_topics(bootstrap):
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap, "socket.timeout.ms": 5000})
    return set(admin.list_topics(timeout=10).topics)


@pytest.fixture(scope="module")
def secured(tmp_path_factory):
    """One node for the module: seeded as a super user, then restarted with the ACLs alone in charge."""
    node = MalaNode(tmp_path_factory.mktemp("acls"), name="acls", extra_config={
        "authorizer.class.name": AUTHORIZER,
        "super.users": ANON,
        # Snapshots every few hundred bytes of records, segments rolled fast: the ACLs come back from a snapshot.
        "metadata.log.max.record.bytes.between.snapshots": 500,
        "metadata.log.segment.ms": 200,
    })
    node.start()
    try:
        yield node
    finally:
        code = node.stop()
        node.close_log()
        assert code == 0, node.log_text(80)


def restart(node, **config):
    node.stop()
    node.config.update(config)
    for key in [k for k, v in node.config.items() if v is None]:
        del node.config[key]
    node.start()
    wait_until(lambda: _metadata_ok(node.bootstrap), timeout=20, what="the node serving after its restart")


def _metadata_ok(bootstrap):
    try:
        listed_topics(bootstrap)
        return True
    except Exception:
        return False


def test_acls_seeded_listed_enforced_and_removed(secured):
    node = secured
    b = node.bootstrap
    # --- Seeding as a super user.
    assert create_topics(b, ["app-secret", "forbidden", "hosted", "free"]) == \
        {"app-secret": None, "forbidden": None, "hosted": None, "free": None}
    assert produce(b, "app-secret", [b"s1"]) == (1, [])
    assert produce(b, "hosted", [b"h1"]) == (1, [])
    assert produce(b, "free", [b"f1"]) == (1, [])
    part = node.log_dir / "__cluster_metadata-0"
    snapshots_before = set(part.glob("*.checkpoint"))
    outs = tool_batch(
        acls(b, "--add", "--allow-principal", ANON, "--operation", "Describe", "--operation", "Alter",
             "--operation", "IdempotentWrite", "--cluster"),
        acls(b, "--add", "--allow-principal", ANON, "--operation", "Read", "--operation", "Write",
             "--operation", "Create", "--topic", "app-", "--resource-pattern-type", "prefixed"),
        acls(b, "--add", "--deny-principal", ANON, "--operation", "Read", "--topic", "app-secret"),
        acls(b, "--add", "--allow-principal", ANON, "--operation", "Read", "--group", "app-group"),
        acls(b, "--add", "--allow-principal", ANON, "--allow-host", "10.9.9.9", "--operation", "Read",
             "--topic", "hosted"),
        acls(b, "--add", "--allow-principal", "User:alice", "--operation", "Write", "--transactional-id",
             "tx-", "--resource-pattern-type", "prefixed"),
        acls(b, "--list"),
        # MATCH: every ACL that applies to the name.
        acls(b, "--list", "--topic", "app-secret", "--resource-pattern-type", "match"),
    )
    for out in outs[:6]:
        step_ok(out)
    listing = step_ok(outs[6])
    for expected in ("resourceType=CLUSTER, name=kafka-cluster, patternType=LITERAL",
                     "resourceType=TOPIC, name=app-, patternType=PREFIXED",
                     "resourceType=TOPIC, name=app-secret, patternType=LITERAL",
                     "resourceType=GROUP, name=app-group, patternType=LITERAL",
                     "resourceType=TRANSACTIONAL_ID, name=tx-, patternType=PREFIXED",
                     f"principal={ANON}, host=10.9.9.9, operation=READ, permissionType=ALLOW",
                     f"principal={ANON}, host=*, operation=READ, permissionType=DENY",
                     f"principal={ANON}, host=*, operation=IDEMPOTENT_WRITE, permissionType=ALLOW"):
        assert expected in listing, listing
    matched = step_ok(outs[7])  # MATCH: the literal ACL and the prefix covering the name
    assert "name=app-secret, patternType=LITERAL" in matched and "name=app-, patternType=PREFIXED" in matched
    assert "app-group" not in matched, matched
    # A snapshot taken after the ACLs covers them before the restart (the interval is a few hundred bytes of
    # records: a few more topics pass it).
    assert create_topics(b, ["pad-1", "pad-2", "pad-3"]) == {"pad-1": None, "pad-2": None, "pad-3": None}
    wait_until(lambda: set(part.glob("*.checkpoint")) - snapshots_before, timeout=20,
               what="a metadata snapshot after the ACLs")

    # --- The ACLs alone decide from now on, read back from the metadata log.
    restart(node, **{"super.users": None})
    assert "metadata loaded from snapshot" in node.full_log()

    # Topic creation: CREATE on the app- prefix, nothing else.
    created = create_topics(b, ["app-orders", "other-orders"])
    assert created == {"app-orders": None, "other-orders": "TOPIC_AUTHORIZATION_FAILED"}, created
    # Produce: WRITE on app-*, nothing on "forbidden" (no ACL names it: closed without allow.everyone).
    assert produce(b, "app-orders", [b"o1", b"o2", b"o3"]) == (3, [])
    delivered, errors = produce(b, "forbidden", [b"x"], timeout=10)
    assert delivered == 0 and errors and set(errors) == {"TOPIC_AUTHORIZATION_FAILED"}, errors
    # Metadata for all topics lists only what ANONYMOUS may describe.
    topics = listed_topics(b)
    assert {"app-orders", "app-secret"} <= topics and not topics & {"forbidden", "free", "hosted"}, topics

    # Consumers: a group with READ gets the records; another group is refused.
    values, errors = consume_group(b, "app-orders", "app-group", 3)
    assert (sorted(values), errors) == (["o1", "o2", "o3"], []), (values, errors)
    values, errors = consume_group(b, "app-orders", "other-group", 1, timeout=10)
    assert values == [] and errors == ["GROUP_AUTHORIZATION_FAILED"], errors
    # Deny over allow: app-secret matches the app- prefix ALLOW, but its literal DENY wins.
    values, errors = consume_assigned(b, "app-secret")
    assert values == [] and errors == ["TOPIC_AUTHORIZATION_FAILED"], (values, errors)
    # Host matching: READ (so DESCRIBE) on "hosted" only from 10.9.9.9, this client is 127.0.0.1: Metadata
    # naming it answers TOPIC_AUTHORIZATION_FAILED (librdkafka then waits on an assigned partition silently).
    assert topic_error(b, "hosted") == "TOPIC_AUTHORIZATION_FAILED"

    # kafka-acls works with ALTER / DESCRIBE on the cluster: remove the DENY, app-secret opens at once.
    removed, listed = tool_batch(
        acls(b, "--remove", "--force", "--deny-principal", ANON, "--operation", "Read", "--topic", "app-secret"),
        acls(b, "--list", "--topic", "app-secret"),
    )
    step_ok(removed)
    assert "DENY" not in step_ok(listed)
    values, errors = wait_until(lambda: (lambda r: r if r[0] else None)(consume_assigned(b, "app-secret")),
                                timeout=15, what="app-secret readable once the DENY is gone")
    assert values == ["s1"] and errors == [], (values, errors)

    # --- allow.everyone.if.no.acl.found: topics no ACL names open up, the others keep their ACLs.
    restart(node, **{"allow.everyone.if.no.acl.found": True})
    assert produce(b, "forbidden", [b"y"]) == (1, [])
    assert consume_assigned(b, "free") == (["f1"], [])
    assert topic_error(b, "hosted") == "TOPIC_AUTHORIZATION_FAILED"


def test_without_an_authorizer_the_acl_apis_are_disabled(tmp_path):
    """No authorizer.class.name: every request is allowed and kafka-acls hears Kafka's SECURITY_DISABLED answer;
    an authorizer class Mala does not have is refused at start-up."""
    node = MalaNode(tmp_path, name="plain")
    node.start()
    try:
        (listed,) = tool_batch(acls(node.bootstrap, "--list"))
        assert "No Authorizer is configured" in listed["stdout"] + listed["stderr"]
    finally:
        assert node.stop() == 0
        node.close_log()
    bad = MalaNode(tmp_path, name="bad", extra_config={"authorizer.class.name": "kafka.security.authorizer.AclAuthorizer"})
    bad.launch()
    assert bad.wait_exit(20) != 0
    assert "authorizer.class.name" in bad.full_log()
    bad.close_log()
