"""What applications found on a 3-node cluster (issue 18, items 2, 4 and 7), checked with real clients and tools:

- a topic created through one broker is known to every broker when CreateTopics answers (a producer bootstrapped
  only from another broker writes to it at once, on 20 fresh topics), and CreateTopics sent to the broker that
  Metadata names as controller works, for a batch of 100 topics too;
- `kafka-features describe` lists what Mala implements, `kafka-acls` gets Kafka's "No Authorizer is configured"
  (SECURITY_DISABLED), a transactional producer commits and aborts (issue 22), and a request for an API Mala does
  not serve is logged with its client id;
- librdkafka producers get the cluster id on every Metadata path, and CreateTopics sent to a survivor right after
  the active controller died waits for the new controller (brokers retry forwarding, never answer NOT_CONTROLLER).

One cluster serves the whole module (its start is the slow part); every test uses its own topic names."""

import struct
import time

import pytest

import kafka_wire
from cluster import Cluster
from real_clients import step_ok, tool_batch

ACLS_TOOL = "org.apache.kafka.tools.AclCommand"  # kafka-acls.sh
FEATURES_TOOL = "org.apache.kafka.tools.FeatureCommand"  # kafka-features.sh


@pytest.fixture(scope="module")
def shared_cluster(tmp_path_factory):
    c = Cluster(tmp_path_factory.mktemp("admin-visibility"))
    try:
        c.start_all()
        c.wait_until(c.agreed_leader, timeout=20, what="a quorum leader all three nodes agree on")
        yield c
    except BaseException:
        print(c.logs())
        raise
    finally:
        died, codes = c.close()
        assert not died, f"nodes died during the module: {died}"


def topic_on(c, i, name, partitions):
    """Whether node i's Metadata lists `name` with all its partitions led (one Metadata round trip)."""
    md = c.rdkafka_metadata(i, topic=name, timeout=5)
    t = md.topics.get(name)
    return t is not None and t.error is None and len(t.partitions) == partitions and all(
        p.leader >= 0 and p.error is None for p in t.partitions.values())


def test_a_created_topic_is_on_every_broker_when_create_topics_answers(shared_cluster):
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    c = shared_cluster
    admins = {i: AdminClient({"bootstrap.servers": c.nodes[i].bootstrap}) for i in c.ids}
    latencies = []
    for n in range(20):
        via = c.ids[n % 3]
        other = c.ids[(n + 1) % 3]
        name = f"visible-{n}"
        started = time.monotonic()
        admins[via].create_topics([NewTopic(name, 3, 3)], operation_timeout=15)[name].result(timeout=30)
        # Every broker has applied the creation by the time it is answered: no retry, no wait.
        missing = [i for i in c.ids if not topic_on(c, i, name, 3)]
        assert not missing, f"{name} created through node {via} is unknown to nodes {missing} after the answer"
        # A producer that only knows another broker writes to it at once.
        producer = Producer({"bootstrap.servers": c.nodes[other].bootstrap, "message.timeout.ms": 5000,
                             "topic.metadata.refresh.interval.ms": 60000})
        errors = []
        producer.produce(name, value=b"first", on_delivery=lambda err, msg: err and errors.append(err))
        remaining = producer.flush(10)
        latencies.append(time.monotonic() - started)
        assert remaining == 0 and not errors, f"{name}: produce through node {other} failed: {errors}"
        assert latencies[-1] < 5, f"{name}: create + first produce took {latencies[-1]:.2f} s"
    print(f"create through one broker + first produce through another: max {max(latencies):.3f} s, "
          f"mean {sum(latencies) / len(latencies):.3f} s over {len(latencies)} topics")


def test_create_topics_sent_to_the_metadata_controller_succeeds_for_a_batch_of_100(shared_cluster):
    from confluent_kafka.admin import AdminClient, NewTopic

    c = shared_cluster
    controller = c.rdkafka_metadata(1).controller_id
    assert controller in c.ids, f"Metadata names controller {controller}"
    # A client bootstrapped from the controller alone sends CreateTopics there (librdkafka sends admin requests
    # to the controller Metadata names).
    admin = AdminClient({"bootstrap.servers": c.nodes[controller].bootstrap})
    names = [f"batch-{k}" for k in range(100)]
    futures = admin.create_topics([NewTopic(n, 1, 3) for n in names], operation_timeout=30, request_timeout=60)
    failures = {}
    for n, f in futures.items():
        try:
            f.result(timeout=90)
        except Exception as e:  # noqa: BLE001 (the test reports every failure)
            failures[n] = str(e)
    assert not failures, f"{len(failures)} of 100 failed, e.g. {list(failures.items())[:3]}"
    # The answer waits for every broker to apply the topics, but for at most 500 ms per Fetch (a broker still
    # creating 100 logs on a loaded machine may list them a moment later); Kafka promises no more than that
    # the metadata reaches every broker soon.
    for i in c.ids:
        missing = lambda: sorted(set(names) - set(c.rdkafka_metadata(i).topics))  # noqa: E731
        c.wait_until(lambda: not missing(), timeout=15, what=f"node {i} listing all 100 topics")


def test_kafka_features_describe_lists_what_mala_implements(shared_cluster):
    c = shared_cluster
    out = step_ok(tool_batch((FEATURES_TOOL, "--bootstrap-server", c.bootstrap, "describe"))[0])
    lines = {l.split()[1]: l for l in out.splitlines() if l.startswith("Feature:")}
    assert "metadata.version" in lines, out
    assert "FinalizedVersionLevel: 4.4-IV2" in lines["metadata.version"], out  # level 33, what Mala bootstraps
    for feature in ("eligible.leader.replicas.version", "group.version"):
        assert feature in lines, f"{feature} missing:\n{out}"
        assert "SupportedMaxVersion: 1" in lines[feature] and "FinalizedVersionLevel: 1" in lines[feature], out
    # transaction.version: supported up to 2, finalized in the metadata log at Mala's bootstrap level 2 (as Kafka 4.x).
    assert "transaction.version" in lines, out
    assert "SupportedMaxVersion: 2" in lines["transaction.version"], out
    assert "FinalizedVersionLevel: 2" in lines["transaction.version"], out


def test_kafka_acls_is_told_no_authorizer_is_configured(shared_cluster):
    c = shared_cluster
    listed, added = tool_batch(
        (ACLS_TOOL, "--bootstrap-server", c.bootstrap, "--list"),
        (ACLS_TOOL, "--bootstrap-server", c.bootstrap, "--add", "--allow-principal", "User:alice", "--operation",
         "Read", "--topic", "acl-topic"))
    for out in (listed, added):
        text = out["stdout"] + out["stderr"]
        assert "No Authorizer is configured" in text, f"exit {out['exit']}\n{text}"
        assert "UnsupportedVersion" not in text, text


def test_a_transactional_producer_commits_and_aborts_on_the_cluster(shared_cluster):
    """The transaction coordinator on a 3-node cluster: __transaction_state is created on the first
    FindCoordinator, and a Java transactional producer's commits are read whole by read_committed while its aborts
    stay invisible."""
    from txn_harness import check_producer, create_topics, txn_produce

    c = shared_cluster
    create_topics(c.bootstrap, "txn-topic", partitions=3, replication_factor=3)
    summary = txn_produce(c.bootstrap, "txn-topic", "txn-app", 4, 6, abort_every=2)
    assert summary["committed"] == [0, 2] and summary["aborted"] == [1, 3], summary
    check_producer(c.bootstrap, "txn-topic", summary, 3)


def test_a_request_for_an_api_mala_does_not_serve_is_logged_with_the_client_id(shared_cluster):
    c = shared_cluster
    # CreateDelegationToken (key 38) v1, which Mala does not serve: the connection is closed, as Kafka does.
    with kafka_wire.Connection(c.nodes[1].port, timeout=5) as conn:
        header = struct.pack(">hhi", 38, 1, 7) + struct.pack(">h", len(b"refusal-probe")) + b"refusal-probe"
        assert conn.send(kafka_wire.frame(header + b"\x00" * 8)), "connection closed before the request"
        assert conn.recv_frame() is None, "an unserved API was answered"
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and "refusal-probe" not in c.node(1).log_text(400):
        time.sleep(0.1)
    line = next((l for l in c.node(1).log_text(400).splitlines() if "refusal-probe" in l), None)
    assert line is not None, "the refused request is not logged"
    assert "38" in line and "refused" in line, line


def test_create_topics_during_a_controller_failover_waits_for_the_new_controller(tmp_path):
    """Kafka's brokers retry a forwarded request until a controller answers it or it times out; NOT_CONTROLLER
    never reaches the client. Right after the active controller dies, the survivors still name it (or no one) as
    leader: CreateTopics sent to a survivor must wait for the election and succeed."""
    c = Cluster(tmp_path)
    try:
        c.start_all()
        leader, _, _ = c.wait_until(c.agreed_leader, timeout=20, what="a quorum leader all three nodes agree on")
        survivors = [i for i in c.ids if i != leader]
        c.kill(leader)
        for n, via in enumerate(survivors):
            started = time.monotonic()
            error, message = c.create_topics_raw(via, f"failover-{n}", 3, 2, timeout_ms=20000)
            assert error == 0, f"CreateTopics through node {via} after {time.monotonic() - started:.1f}s: " \
                               f"error {error} {message}"
    except BaseException:
        print(c.logs())
        raise
    finally:
        died, _ = c.close()
        assert not died, f"nodes died: {died}"


def test_librdkafka_producers_get_the_cluster_id_on_every_metadata_path(shared_cluster):
    """librdkafka keeps the ClusterId of Metadata v2+ (its rd_kafka_clusterid(), what confluent-kafka's list_topics
    reports); every broker names the same id, the one DescribeCluster gives. With ApiVersions turned off and a
    0.9.0 fallback it sends Metadata v0, which has no cluster id and no controller: empty, as on Kafka."""
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient

    c = shared_cluster
    admin = AdminClient({"bootstrap.servers": c.bootstrap})
    expected = admin.describe_cluster(request_timeout=10).result(timeout=15).cluster_id
    assert expected, "DescribeCluster gave no cluster id"
    paths = ({}, {"api.version.request": "false", "broker.version.fallback": "0.10.0"},
             {"api.version.request": "false", "broker.version.fallback": "2.0.0"})
    for i in c.ids:
        for extra in paths:
            p = Producer({"bootstrap.servers": c.nodes[i].bootstrap, "log_level": 2, **extra})
            md = p.list_topics(timeout=5)
            assert md.cluster_id == expected, f"node {i} {extra}: {md.cluster_id!r} != {expected!r}"
            assert md.controller_id in c.ids, f"node {i} {extra}: controller {md.controller_id}"
    legacy = Producer({"bootstrap.servers": c.bootstrap, "log_level": 2, "api.version.request": "false",
                       "broker.version.fallback": "0.9.0"})
    md = legacy.list_topics(timeout=5)
    assert md.cluster_id is None and md.controller_id == -1, (md.cluster_id, md.controller_id)


@pytest.mark.parametrize("group_protocol", ["classic", "consumer"])
def test_a_regex_subscription_picks_up_a_topic_created_through_another_broker(shared_cluster, group_protocol):
    """librdkafka's classic protocol matches the regex against its metadata refreshes; the consumer protocol
    (KIP-848) has the coordinator match it against the metadata image at each heartbeat. Either way a topic
    created through one broker and written through another is consumed within seconds."""
    from confluent_kafka import Consumer, Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    c = shared_cluster
    a, b, other = c.ids
    prefix = f"re-{group_protocol}-"
    admin = AdminClient({"bootstrap.servers": c.nodes[a].bootstrap})
    admin.create_topics([NewTopic(prefix + "first", 1, 3)], operation_timeout=15)[prefix + "first"].result(timeout=30)
    consumer = Consumer({"bootstrap.servers": c.nodes[other].bootstrap, "group.id": prefix + "group",
                         "group.protocol": group_protocol, "auto.offset.reset": "earliest",
                         "topic.metadata.refresh.interval.ms": 1000, "log_level": 2})
    try:
        consumer.subscribe([f"^{prefix}.*"])
        producer = Producer({"bootstrap.servers": c.nodes[b].bootstrap, "log_level": 2})
        producer.produce(prefix + "first", b"before")
        producer.flush(15)
        seen = set()
        deadline = time.monotonic() + 30
        while "before" not in seen and time.monotonic() < deadline:
            m = consumer.poll(0.5)
            if m is not None and m.error() is None:
                seen.add(m.value().decode())
        assert "before" in seen, f"the existing topic was not consumed ({group_protocol})"

        new = prefix + "second"
        admin.create_topics([NewTopic(new, 2, 3)], operation_timeout=15)[new].result(timeout=30)
        created = time.monotonic()
        for p in (0, 1):
            producer.produce(new, f"after-{p}".encode(), partition=p)
        assert producer.flush(15) == 0
        while len(seen) < 3 and time.monotonic() < created + 30:
            m = consumer.poll(0.5)
            if m is not None and m.error() is None:
                seen.add(m.value().decode())
        assert {"after-0", "after-1"} <= seen, f"{group_protocol}: got {seen} in 30 s"
        print(f"{group_protocol}: the new topic was consumed {time.monotonic() - created:.1f}s after creation")
    finally:
        consumer.close()
