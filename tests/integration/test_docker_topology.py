"""docker/compose.yaml's topology, run without a Docker engine (netns_topology.py): three nodes in three network
namespaces started through docker/entrypoint.sh with docker/config/node-N.yaml. Clients on the "Compose network"
(the client namespace, bootstrapping from mala-1:9092 by service name) and on the host (localhost:19092, the
published ports) both produce and consume; then a network partition (the leader's interface down, the process
alive) under an idempotent acks=all load loses no acknowledged record."""

import time
from collections import defaultdict

import pytest

from netns_topology import ComposeTopology
from test_replication_failover import KeyedLoad, high_watermark, partition_view  # noqa: F401
from real_clients import rdkafka_consume

FAST = ["broker.session.timeout.ms=4000", "broker.heartbeat.interval.ms=500", "replica.lag.time.max.ms=3000"]


@pytest.fixture
def compose(request, tmp_path):
    t = ComposeTopology(tmp_path, overrides=FAST)
    failed = True
    try:
        t.start_all()
        yield t
        failed = any(getattr(getattr(request.node, f"rep_{w}", None), "failed", False) for w in ("setup", "call"))
    finally:
        codes = t.close()
        if failed:
            for n in (1, 2, 3):
                print(f"--- node-{n} ---\n{t.log_text(n, 60)}")
    assert all(code in (0, None) for code in codes.values()), f"exit codes after SIGTERM: {codes}"


def metadata(bootstrap, topic=None, timeout=5):
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap, "socket.timeout.ms": 3000, "log_level": 2})
    return admin.list_topics(topic=topic, timeout=timeout)


def wait_for(predicate, timeout, what):
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        try:
            last = predicate()
            if last:
                return last
        except Exception as e:  # noqa: BLE001 - not yet
            last = e
        time.sleep(0.3)
    pytest.fail(f"timed out waiting for {what}: {last!r}")


def create_topic(bootstrap, topic, partitions):
    from confluent_kafka.admin import AdminClient, NewTopic

    def created():
        admin = AdminClient({"bootstrap.servers": bootstrap, "socket.timeout.ms": 5000, "log_level": 2})
        f = admin.create_topics([NewTopic(topic, num_partitions=partitions, replication_factor=3,
                                          config={"min.insync.replicas": "2"})], request_timeout=5)
        try:
            f[topic].result(timeout=10)
        except Exception as e:  # noqa: BLE001
            if "already exists" not in str(e):
                raise
        md = metadata(bootstrap, topic)
        t = md.topics[topic]
        return t.error is None and len(t.partitions) == partitions and \
            all(len(p.isrs) == 3 for p in t.partitions.values())
    wait_for(created, 40, f"topic {topic} with full ISRs")


def test_clients_inside_and_outside_compose_both_work(compose):
    t = compose
    wait_for(lambda: len(metadata(t.external_bootstrap).brokers) == 3, 30, "three brokers seen from the host")
    # From the host: the EXTERNAL listener's advertised localhost:N9092 addresses.
    md = metadata(t.external_bootstrap)
    assert sorted(f"{b.host}:{b.port}" for b in md.brokers.values()) == \
        ["localhost:19092", "localhost:29092", "localhost:39092"]
    create_topic(t.external_bootstrap, "compose-events", 3)
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": t.external_bootstrap, "acks": "all"})
    for i in range(30):
        p.produce("compose-events", key=f"k{i % 5}", value=f"host-{i}")
    assert p.flush(30) == 0

    # Inside the Compose network: service names, the INTERNAL listener.
    out = t.in_client(f"""
from confluent_kafka import Producer, Consumer, TopicPartition
from confluent_kafka.admin import AdminClient
md = AdminClient({{"bootstrap.servers": "{t.internal_bootstrap}"}}).list_topics(timeout=10)
print("BROKERS", sorted(f"{{b.host}}:{{b.port}}" for b in md.brokers.values()))
p = Producer({{"bootstrap.servers": "{t.internal_bootstrap}", "acks": "all"}})
for i in range(30):
    p.produce("compose-events", key=f"k{{i % 5}}", value=f"container-{{i}}")
assert p.flush(30) == 0
c = Consumer({{"bootstrap.servers": "{t.internal_bootstrap}", "group.id": "inside", "auto.offset.reset": "earliest"}})
c.subscribe(["compose-events"])
seen = set()
import time
deadline = time.time() + 60
while len(seen) < 60 and time.time() < deadline:
    m = c.poll(0.5)
    if m is not None and not m.error():
        seen.add(m.value().decode())
c.close()
print("SEEN", len(seen))
""")
    print(out)
    assert "BROKERS ['mala-1:9092', 'mala-2:9092', 'mala-3:9092']" in out
    assert "SEEN 60" in out
    # And the host reads what the container wrote.
    consumed = rdkafka_consume(t.external_bootstrap, "compose-events", {0: 0, 1: 0, 2: 0}, count=60, timeout=30)
    values = {v for _, _, _, v in consumed}
    assert {f"host-{i}" for i in range(30)} | {f"container-{i}" for i in range(30)} == values


def test_a_network_partition_of_the_leader_loses_no_acknowledged_record(compose):
    """The leader of bus-events-3 loses its network (the process keeps running and still thinks it leads): the
    other two fence it, elect a new leader and take the producer's retries; the isolated leader cannot commit
    anything (its followers cannot reach it), and when the network comes back it truncates what it alone had and
    follows. Every acknowledged record is read back exactly once, in order per key."""
    t = compose
    topic = "bus-events"
    create_topic(t.external_bootstrap, topic, 6)
    load = KeyedLoad(t.external_bootstrap, topic)
    load.start()
    recoveries = []
    try:
        for r in range(3):
            time.sleep(1.0)
            md = metadata(t.external_bootstrap, topic)
            victim = md.topics[topic].partitions[3].leader
            before = len(load.acked)
            t.partition(victim)
            cut = time.monotonic()
            others = [n for n in (1, 2, 3) if n != victim]
            bootstrap = ",".join(f"localhost:{n * 10000 + 9092}" for n in others)

            def moved():
                p = metadata(bootstrap, topic).topics[topic].partitions[3]
                return p.leader if p.leader not in (-1, victim) else None
            leader = wait_for(moved, 30, "a new leader on the majority side")
            recoveries.append(time.monotonic() - cut)
            wait_for(lambda: len(load.acked) > before + 50, 40, "acknowledgements after the partition")
            print(f"round {r}: node {victim} cut off, new leader {leader} after {recoveries[-1]:.2f} s, "
                  f"{len(load.acked)} acknowledged")
            t.heal(victim)
            wait_for(lambda: len(metadata(t.external_bootstrap, topic).topics[topic].partitions[3].isrs) == 3, 60,
                     f"node {victim} back in the ISR after the heal")
    finally:
        remaining = load.stop()
    assert remaining == 0 and not load.errors, f"{remaining} unacknowledged, errors {load.errors[:5]}"
    print(f"{len(load.acked)} acknowledged across {len(recoveries)} network partitions; recovery "
          f"{', '.join(f'{x:.2f}' for x in recoveries)} s")
    # Each partition is read up to its high watermark once that covers every record acknowledged there. (A
    # leader elected moments ago may answer a high watermark behind what was committed until its followers
    # fetch, as Kafka's: a read-back that stopped at a total count taken then would stop short.)
    acked_end = defaultdict(int)
    for p, o, _, _ in load.acked:
        acked_end[p] = max(acked_end[p], o + 1)

    def settled_ends():
        hws = {p: high_watermark(t.external_bootstrap, topic, p) for p in range(6)}
        short = {p: (hws[p], acked_end[p]) for p in range(6) if hws[p] < acked_end[p]}
        return None if short else hws
    ends = wait_for(settled_ends, 60, "every partition's high watermark past its acknowledged records")
    consumed = rdkafka_consume(t.external_bootstrap, topic, {p: 0 for p in range(6)}, ends=ends, timeout=90)
    count = defaultdict(int)
    for _, _, _, v in consumed:
        count[v] += 1
    missing = [a for a in load.acked if count[a[3]] == 0]
    assert not missing, f"{len(missing)} acknowledged records lost, e.g. {missing[:5]}"
    assert not [v for v, n in count.items() if n > 1], "records read twice"
    last = {}
    for p, o, k, v in sorted(consumed, key=lambda x: (x[0], x[1])):
        seq = int(v.split(":")[1])
        assert seq > last.get(k, -1), f"key {k} out of order at {p}@{o}"
        last[k] = seq
