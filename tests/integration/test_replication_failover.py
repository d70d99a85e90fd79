"""Replication and failover on a 3-node cluster (issue 7): ISR shrink and expansion through AlterPartition, strict
min ISR (acks=all refused with NOT_ENOUGH_REPLICAS, acks=1 written but invisible until the high watermark moves),
eligible leader replicas (KIP-966), unclean leader election, and no acknowledged record lost when partition leaders
are killed with SIGKILL under load.

Each test runs three real `mala` processes (cluster.py) and drives them with confluent-kafka (librdkafka) and Apache
Kafka's own tools. Timeouts that Kafka sets in tens of seconds are shortened through the nodes' configs where a test
waits for them (replica.lag.time.max.ms, broker.session.timeout.ms); the tests print what they measured."""

import random
import threading
import time
from collections import defaultdict

import pytest

from cluster import Cluster
from real_clients import TOPICS_TOOL, rdkafka_consume, step_ok, tool_batch

GROUPS_TOOL = "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand"  # kafka-consumer-groups.sh

# Short enough that a test waits seconds, not the defaults' 30 s / 9 s.
FAST_FAILOVER = {
    "replica.lag.time.max.ms": 3000,
    "broker.session.timeout.ms": 4000,
    "broker.heartbeat.interval.ms": 500,
    "num.replica.fetchers": 2,  # two fetch loops per leader (Kafka's default is 1)
}


def _fast(request, tmp_path, size=3, broker_only=(), prepare=None):
    """A started cluster with FAST_FAILOVER; `prepare(cluster)` runs before the nodes start (more config)."""
    c = Cluster(tmp_path, size=size, extra_config=FAST_FAILOVER, broker_only=broker_only)
    if prepare:
        prepare(c)
    c.start_all()
    c.wait_until(c.agreed_leader, timeout=20, what="a quorum leader all three nodes agree on")
    yield c
    died, codes = c.close()
    test_failed = any(getattr(getattr(request.node, f"rep_{w}", None), "failed", False) for w in ("setup", "call"))
    failures = [f"node-{i}: died during the test" for i in died]
    failures += [f"node-{i}: exit code {code} after SIGTERM" for i, code in codes.items() if code != 0]
    if failures or test_failed:
        print(c.logs())
    if failures:
        pytest.fail("; ".join(failures))


@pytest.fixture
def fast_cluster(request, tmp_path):
    """Three combined-mode nodes (the Raft voters)."""
    yield from _fast(request, tmp_path)


@pytest.fixture
def five_nodes(request, tmp_path):
    """Voters 1-3 (combined mode) and broker-only nodes 4 and 5: a partition placed on 3, 4 and 5 can lose every
    replica while the metadata quorum keeps its majority (killing two of three combined nodes would stop the
    controller too, in Kafka as here)."""
    yield from _fast(request, tmp_path, size=5, broker_only=(4, 5))


def create_replicated_topic(c, topic, partitions, min_isr=2, extra=None, assignment=None, full_isr=True):
    from confluent_kafka import KafkaError, KafkaException
    from confluent_kafka.admin import AdminClient, NewTopic

    config = {"min.insync.replicas": str(min_isr), **(extra or {})}

    def created():
        admin = AdminClient({"bootstrap.servers": c.bootstrap, "socket.timeout.ms": 5000, "log_level": 2})
        new = (NewTopic(topic, num_partitions=len(assignment), replica_assignment=assignment, config=config) if assignment else
               NewTopic(topic, num_partitions=partitions, replication_factor=3, config=config))
        futures = admin.create_topics([new], request_timeout=5, operation_timeout=5)
        try:
            futures[topic].result(timeout=10)
            return True
        except KafkaException as e:
            if e.args[0].code() == KafkaError.TOPIC_ALREADY_EXISTS:
                return True
            return None
    c.wait_until(created, timeout=30, interval=0.5, what=f"CreateTopics {topic}")

    def every_isr_full():
        t = c.rdkafka_metadata(c.running_ids()[0], topic=topic).topics[topic]
        if t.error is not None or len(t.partitions) != partitions:
            return None
        return all(p.leader >= 0 and len(p.isrs) == len(p.replicas) for p in t.partitions.values()) or None
    if full_isr:
        c.wait_until(every_isr_full, timeout=30, interval=0.25, what=f"{topic}: every partition led with a full ISR")


def partition_view(c, topic, partition, via=None):
    via = via if via is not None else c.running_ids()[0]
    t = c.rdkafka_metadata(via, topic=topic).topics[topic]
    p = t.partitions[partition]
    return {"leader": p.leader, "replicas": list(p.replicas), "isr": sorted(p.isrs)}


def produce_one(bootstrap, topic, partition, value, acks, timeout=10):
    """One record, no retries: returns (offset, None) or (None, error code name)."""
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "acks": acks, "enable.idempotence": False,
                         "retries": 0, "message.timeout.ms": int(timeout * 1000), "socket.timeout.ms": 5000,
                         "linger.ms": 0})
    out = {}

    def cb(err, msg):
        out["result"] = (None, err.name()) if err is not None else (msg.offset(), None)
    producer.produce(topic, value=value, partition=partition, on_delivery=cb)
    producer.flush(timeout + 5)
    return out.get("result", (None, "NO_REPORT"))


def high_watermark(bootstrap, topic, partition):
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "mala-it-hw", "socket.timeout.ms": 5000})
    try:
        return consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=10)[1]
    finally:
        consumer.close()


def test_isr_shrinks_when_a_follower_dies_and_expands_when_it_returns(fast_cluster):
    """A follower killed with SIGKILL leaves the ISR (AlterPartition from the leader after
    replica.lag.time.max.ms, or the controller fencing it); acks=all keeps working with ISR 2 = min ISR; the
    restarted follower catches up and rejoins the ISR."""
    c = fast_cluster
    topic = "isr-changes"
    create_replicated_topic(c, topic, 1)
    view = partition_view(c, topic, 0)
    leader = view["leader"]
    follower = next(r for r in view["replicas"] if r != leader)
    for i in range(20):
        assert produce_one(c.bootstrap, topic, 0, f"before-{i}", "all")[1] is None

    c.kill(follower)
    killed_at = time.monotonic()
    c.wait_until(lambda: partition_view(c, topic, 0, via=leader)["isr"] == sorted(set(view["isr"]) - {follower}),
                 timeout=15, interval=0.2, what=f"ISR without node {follower}")
    print(f"ISR shrank {time.monotonic() - killed_at:.2f} s after SIGKILL of follower {follower}")
    offset, err = produce_one(c.bootstrap, topic, 0, "with-two", "all")
    assert err is None, f"acks=all with ISR 2 and min ISR 2: {err}"

    c.start(follower)
    restarted_at = time.monotonic()
    c.wait_until(lambda: partition_view(c, topic, 0, via=leader)["isr"] == sorted(view["isr"]),
                 timeout=30, interval=0.2, what=f"node {follower} back in the ISR")
    print(f"ISR expanded {time.monotonic() - restarted_at:.2f} s after the restart of {follower}")
    consumed = rdkafka_consume(c.bootstrap_of(leader), topic, {0: 0}, count=21, timeout=30)
    assert [v for _, _, _, v in consumed] == [f"before-{i}" for i in range(20)] + ["with-two"]

    # The preferred leader (the first replica) is killed: leadership moves; back in the ISR it does not lead
    # again until kafka-leader-election --election-type preferred moves it back.
    preferred = view["replicas"][0]
    c.kill(preferred)
    others = [i for i in c.ids if i != preferred]
    c.wait_until(lambda: partition_view(c, topic, 0, via=others[0])["leader"] in others, timeout=15, interval=0.2,
                 what="a new leader after the preferred one died")
    c.start(preferred)
    c.wait_until(lambda: len(partition_view(c, topic, 0, via=others[0])["isr"]) == 3, timeout=30, interval=0.2,
                 what=f"node {preferred} back in the ISR")
    assert partition_view(c, topic, 0, via=others[0])["leader"] != preferred
    out = tool_batch(("org.apache.kafka.tools.LeaderElectionCommand", "--bootstrap-server", c.bootstrap,
                      "--election-type", "preferred", "--topic", topic, "--partition", "0"),
                     ("org.apache.kafka.tools.LeaderElectionCommand", "--bootstrap-server", c.bootstrap,
                      "--election-type", "preferred", "--all-topic-partitions"))
    print(step_ok(out[0]))
    assert f"Successfully completed leader election (PREFERRED) for partitions {topic}-0" in out[0]["stdout"]
    # Every partition: only those not led by their preferred replica are answered (and moved); ours is.
    print(step_ok(out[1]))
    assert f"{topic}-0" not in out[1]["stdout"]
    c.wait_until(lambda: partition_view(c, topic, 0, via=preferred)["leader"] == preferred, timeout=10,
                 interval=0.2, what="the preferred replica leading again")


def test_both_followers_down_refuses_acks_all_and_hides_acks_1_until_one_returns(five_nodes):
    """Strict min ISR: with both followers gone, acks=all gets NOT_ENOUGH_REPLICAS, an acks=1 write is appended
    but stays above the high watermark (no consumer sees it) while kafka-topics --under-min-isr-partitions lists the
    partition; once one follower is back in the ISR the high watermark moves and the record is readable."""
    c = five_nodes
    topic = "strict-min-isr"
    create_replicated_topic(c, topic, 1, assignment=[[3, 4, 5]])
    view = partition_view(c, topic, 0)
    leader = view["leader"]
    followers = [r for r in view["replicas"] if r != leader]
    assert produce_one(c.bootstrap, topic, 0, "committed", "all")[1] is None
    # A group that has read and committed everything so far (committed before the followers go, so that the
    # commit does not depend on __consumer_offsets replicas on the dying nodes).
    from confluent_kafka import Consumer, TopicPartition
    group = "lag-watch"
    consumer = Consumer({"bootstrap.servers": c.bootstrap, "group.id": group, "enable.auto.commit": False})
    c.wait_until(lambda: consumer.commit(offsets=[TopicPartition(topic, 0, 1)], asynchronous=False) or True,
                 timeout=30, interval=0.5, what="the group's commit")
    consumer.close()
    for f in followers:
        c.kill(f)
    c.wait_until(lambda: partition_view(c, topic, 0, via=leader)["isr"] == [leader], timeout=20, interval=0.2,
                 what="ISR down to the leader")
    hw_before = high_watermark(c.bootstrap_of(leader), topic, 0)
    assert hw_before == 1

    offset, err = produce_one(c.bootstrap_of(leader), topic, 0, "refused", "all")
    assert err == "NOT_ENOUGH_REPLICAS", f"acks=all with ISR 1 < min ISR 2: offset {offset}, error {err}"
    offset, err = produce_one(c.bootstrap_of(leader), topic, 0, "invisible", "1")
    assert err is None and offset == 1, f"acks=1: offset {offset}, error {err}"
    time.sleep(1)
    assert high_watermark(c.bootstrap_of(leader), topic, 0) == 1, "the high watermark moved with ISR < min ISR"
    seen = rdkafka_consume(c.bootstrap_of(leader), topic, {0: 0}, timeout=15)
    assert [v for _, _, _, v in seen] == ["committed"]

    out = tool_batch((TOPICS_TOOL, "--bootstrap-server", c.bootstrap_of(leader), "--describe",
                      "--under-min-isr-partitions"),
                     (TOPICS_TOOL, "--bootstrap-server", c.bootstrap_of(leader), "--describe", "--topic", topic),
                     (GROUPS_TOOL, "--bootstrap-server", c.bootstrap_of(leader), "--describe", "--group", group),
                     (TOPICS_TOOL, "--bootstrap-server", c.bootstrap_of(leader), "--describe",
                      "--under-replicated-partitions"))
    under = step_ok(out[0])
    assert f"Topic: {topic}\tPartition: 0" in step_ok(out[3]), "not listed as under-replicated"
    print(under)
    print(step_ok(out[1]))
    assert f"Topic: {topic}\tPartition: 0" in under
    # The group's lag stays 0: LOG-END-OFFSET is the high watermark, which the acks=1 record did not move.
    groups = step_ok(out[2])
    print(groups)
    row = next(line.split() for line in groups.splitlines() if line.split()[:3] == [group, topic, "0"])
    assert row[3:6] == ["1", "1", "0"], f"CURRENT-OFFSET, LOG-END-OFFSET, LAG: {row[3:6]}"

    c.start(followers[0])
    c.wait_until(lambda: high_watermark(c.bootstrap_of(leader), topic, 0) == 2, timeout=30, interval=0.3,
                 what="the high watermark past the acks=1 record once a follower is back")
    seen = rdkafka_consume(c.bootstrap_of(leader), topic, {0: 0}, count=2, timeout=15)
    assert [v for _, _, _, v in seen] == ["committed", "invisible"]
    c.start(followers[1])


def test_an_elr_member_leads_after_the_last_isr_member_dies_and_unclean_election_needs_the_config(five_nodes):
    """KIP-966: min ISR 2; a follower is killed, the ISR shrinks to 2; the second follower is killed, the ISR drops
    to the leader and the follower goes to the ELR. Killing the leader leaves the partition offline (no live ISR
    member); restarting the ELR member (a clean shutdown first, so it stays eligible) brings it back as leader with
    every committed record. With every ISR and ELR member gone and only a stale replica alive the partition stays
    offline until unclean.leader.election.enable is set on the topic; then the stale replica leads, losing what it
    never had (logged)."""
    c = five_nodes
    topic = "elr"
    create_replicated_topic(c, topic, 1, assignment=[[3, 4, 5]])
    view = partition_view(c, topic, 0)
    leader = view["leader"]
    a, b = [r for r in view["replicas"] if r != leader]
    for i in range(10):
        assert produce_one(c.bootstrap, topic, 0, f"v{i}", "all")[1] is None

    # b stops cleanly (SIGTERM: a controlled shutdown, clean-shutdown markers) and is the stale replica later.
    assert c.stop(b) == 0
    c.wait_until(lambda: partition_view(c, topic, 0, via=leader)["isr"] == sorted([leader, a]), timeout=20,
                 interval=0.2, what=f"ISR without {b}")
    for i in range(10, 15):
        assert produce_one(c.bootstrap, topic, 0, f"v{i}", "all")[1] is None  # b never has v10..v14

    # a stops cleanly too: the ISR falls to the leader, a joins the ELR.
    assert c.stop(a) == 0
    describe = lambda via: step_ok(tool_batch((TOPICS_TOOL, "--bootstrap-server", c.bootstrap_of(via), "--describe",
                                               "--topic", topic))[0])
    c.wait_until(lambda: partition_view(c, topic, 0, via=leader)["isr"] == [leader], timeout=20, interval=0.2,
                 what="ISR down to the leader")
    text = describe(leader)
    print(text)
    assert f"Elr: {a}" in text

    # The leader dies: nobody in the ISR is alive.
    c.kill(leader)
    c.start(a)
    c.wait_until(lambda: partition_view(c, topic, 0, via=a)["leader"] == a, timeout=30, interval=0.3,
                 what=f"ELR member {a} elected")
    print(describe(a))
    # Strict min ISR: with the ISR at 1 < 2 the high watermark stays where `a` last knew it, so whatever `a` had
    # not yet learned was committed waits, in its log, until another replica is back in the ISR.
    c.start(leader)
    c.wait_until(lambda: partition_view(c, topic, 0, via=a)["isr"] == sorted([a, leader]), timeout=30,
                 interval=0.3, what=f"the old leader {leader} back in the ISR")
    seen = rdkafka_consume(c.bootstrap_of(a), topic, {0: 0}, count=15, timeout=30)
    assert [v for _, _, _, v in seen] == [f"v{i}" for i in range(15)], "a committed record was lost"

    # Every ISR and ELR member goes (cleanly); only b, which stopped before v10, comes back.
    assert c.stop(a) == 0
    assert c.stop(leader) == 0
    c.start(b)
    time.sleep(6)
    view_b = partition_view(c, topic, 0, via=b)
    assert view_b["leader"] == -1, f"a stale replica was elected without unclean election: {view_b}"
    print(describe(b))
    unavailable = step_ok(tool_batch((TOPICS_TOOL, "--bootstrap-server", c.bootstrap_of(b), "--describe",
                                      "--unavailable-partitions"))[0])
    print(unavailable)
    assert f"Topic: {topic}\tPartition: 0" in unavailable
    step_ok(tool_batch(("org.apache.kafka.tools.ConfigCommand", "--bootstrap-server", c.bootstrap_of(b), "--alter",
                        "--entity-type", "topics", "--entity-name", topic,
                        "--add-config", "unclean.leader.election.enable=true"))[0])
    c.wait_until(lambda: partition_view(c, topic, 0, via=b)["leader"] == b, timeout=20, interval=0.3,
                 what=f"stale replica {b} elected uncleanly")
    print(describe(b))
    assert any("unclean leader election" in c.node(i).log_text(2000) for i in c.running_ids()), \
        "the unclean election was not logged"
    # b's log is what is left: v0..v9 (v10..v14 are lost, as an unclean election loses them). With ISR 1 < min
    # ISR 2 they become visible once a second replica is in the ISR.
    c.start(a)
    c.wait_until(lambda: len(partition_view(c, topic, 0, via=b)["isr"]) >= 2, timeout=30, interval=0.3,
                 what="a second replica in the ISR after the unclean election")
    seen = rdkafka_consume(c.bootstrap_of(b), topic, {0: 0}, timeout=20)
    assert [v for _, _, _, v in seen] == [f"v{i}" for i in range(10)]
    c.start(leader)


class KeyedLoad:
    """A confluent-kafka producer (idempotence on, acks=all) sending keyed events in a thread until stopped;
    remembers every acknowledged (partition, offset, key, value)."""

    def __init__(self, bootstrap, topic, keys=24):
        from confluent_kafka import Producer

        self.producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "acks": "all",
                                  "linger.ms": 5, "message.timeout.ms": 120000, "socket.timeout.ms": 5000,
                                  "log_level": 3})
        self.topic = topic
        self.keys = [f"bus-{k}" for k in range(keys)]
        self.acked = []
        self.errors = []
        self.sent = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._seq = defaultdict(int)

    def _cb(self, err, msg):
        if err is not None:
            self.errors.append(err.name())
        else:
            self.acked.append((msg.partition(), msg.offset(), msg.key().decode(), msg.value().decode()))

    def _run(self):
        i = 0
        while not self._stop.is_set():
            key = self.keys[i % len(self.keys)]
            value = f"{key}:{self._seq[key]}"
            try:
                self.producer.produce(self.topic, key=key, value=value, on_delivery=self._cb)
                self._seq[key] += 1
                self.sent += 1
                i += 1
            except BufferError:
                pass
            self.producer.poll(0.002)

    def start(self):
        self._thread.start()

    def stop(self, timeout=120):
        self._stop.set()
        self._thread.join()
        remaining = self.producer.flush(timeout)
        return remaining


def start_java_keyed_producer(bootstrap, topic, count, key_prefix, interval_ms, delivery_timeout_ms):
    """Apache Kafka's Java producer (mala.it.Produce, its defaults: acks=all, idempotence) sending `count` records
    with 12 keys and values "java-N", `interval_ms` apart, in a process of its own; its stdout lists every
    acknowledged record once it is done."""
    import subprocess

    from clients import java_classpath

    return subprocess.Popen(
        ["java", "-Xmx256m", "-XX:TieredStopAtLevel=1", "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn",
         "-cp", java_classpath(), "mala.it.Produce", "--bootstrap", bootstrap, "--topic", topic,
         "--count", str(count), "--key-prefix", key_prefix, "--key-count", "12", "--value-prefix", "java-",
         "--interval-ms", str(interval_ms), "--prop", f"delivery.timeout.ms={delivery_timeout_ms}",
         "--prop", "request.timeout.ms=10000", "--prop", "max.block.ms=60000"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def every_send_acknowledged(load, remaining, java_proc, java_out, java_err, java_count):
    """After a KeyedLoad stopped (`remaining` unflushed) and the Java producer ended: no send failed in either
    client. Returns every acknowledged (partition, offset, key, value)."""
    import json

    assert remaining == 0, f"{remaining} librdkafka records never acknowledged"
    assert not load.errors, f"librdkafka delivery errors: {load.errors[:5]}"
    assert java_proc.returncode == 0, f"Java producer failed: {java_err[-3000:]}"
    java_acked = [json.loads(line) for line in java_out.splitlines() if line.strip()]
    assert len(java_acked) == java_count
    return load.acked + [(j["partition"], j["offset"], j["key"], j["value"]) for j in java_acked]


def read_back_exactly_once_in_key_order(c, topic, partitions, acked):
    """Reads the whole topic back: every acknowledged (partition, offset, key, value) is there exactly once, and the
    sequence numbers a key's values carry ("java-N" from mala.it.Produce, "key:N" from KeyedLoad) only grow along
    its partition. Returns the high watermarks read up to, by partition."""
    ends = {p: high_watermark(c.bootstrap, topic, p) for p in range(partitions)}
    consumed = rdkafka_consume(c.bootstrap, topic, {p: 0 for p in range(partitions)}, count=sum(ends.values()),
                               timeout=120)
    by_value = defaultdict(int)
    for _, _, _, v in consumed:
        by_value[v] += 1
    missing = [a for a in acked if by_value[a[3]] == 0]
    duplicated = [v for v, n in by_value.items() if n > 1]
    assert not missing, f"{len(missing)} acknowledged records lost, e.g. {missing[:5]}"
    assert not duplicated, f"{len(duplicated)} records read more than once, e.g. {duplicated[:5]}"
    last = {}
    for p, o, k, v in sorted(consumed, key=lambda r: (r[0], r[1])):
        seq = int(v.split("-")[1]) if v.startswith("java-") else int(v.split(":")[1])
        assert seq > last.get(k, -1), f"key {k} out of order at {p}@{o}: {seq} after {last.get(k)}"
        last[k] = seq
    return ends


def test_leaders_killed_under_load_lose_no_acknowledged_record(fast_cluster):
    """The seed scenario: bus-events (6 partitions, RF 3, min ISR 2); Apache Kafka's Java producer (its defaults:
    acks=all, idempotence on) and an idempotent acks=all librdkafka producer send keyed events while the leader of
    partition 3 is killed with SIGKILL and restarted, 20 times in one run, every fifth time frozen with SIGSTOP
    instead. Every acknowledged record is then read back exactly once by a fresh consumer, in order per key, and a
    new leader serves within 10 s of each failure."""
    c = fast_cluster
    topic = "bus-events"
    create_replicated_topic(c, topic, 6)
    java_count = 3000
    java_proc = start_java_keyed_producer(c.bootstrap, topic, java_count, "java-bus-", interval_ms=25,
                                          delivery_timeout_ms=170000)
    load = KeyedLoad(c.bootstrap, topic)
    load.start()
    rng = random.Random(7)
    rounds = 20
    recoveries = []
    try:
        for r in range(rounds):
            time.sleep(rng.uniform(0.3, 1.2))
            victim = partition_view(c, topic, 3)["leader"]
            if victim < 0:
                continue
            before = len(load.acked)
            freeze = r % 5 == 4
            if freeze:
                c.pause(victim)
            else:
                c.kill(victim)
            hit = time.monotonic()
            others = [i for i in c.running_ids() if i != victim]

            def new_leader():
                v = partition_view(c, topic, 3, via=others[0])
                return v["leader"] if v["leader"] not in (-1, victim) else None
            leader = c.wait_until(new_leader, timeout=20, interval=0.1, what="a new leader for bus-events-3")
            recoveries.append(time.monotonic() - hit)
            c.wait_until(lambda: len(load.acked) > before + 50, timeout=30, interval=0.2,
                         what="acknowledgements after the failover")
            print(f"round {r}: {'SIGSTOP' if freeze else 'SIGKILL'} of leader {victim}, new leader {leader} "
                  f"after {recoveries[-1]:.2f} s, {len(load.acked)} acknowledged")
            if freeze:
                c.resume(victim)
            else:
                c.start(victim)
            c.wait_until(lambda: len(partition_view(c, topic, 3, via=others[0])["isr"]) == 3, timeout=40,
                         interval=0.3, what="the restarted node back in the ISR of bus-events-3")
    finally:
        remaining = load.stop()
        java_out, java_err = java_proc.communicate(timeout=240)
    acked = every_send_acknowledged(load, remaining, java_proc, java_out, java_err, java_count)
    print(f"{len(load.acked)} librdkafka + {java_count} Java records acknowledged over {len(recoveries)} "
          f"failovers; leader recovery {', '.join(f'{t:.2f}' for t in recoveries)} s")
    assert len(recoveries) >= rounds - 2
    assert max(recoveries) < 10

    read_back_exactly_once_in_key_order(c, topic, 6, acked)


def test_a_whole_cluster_killed_and_restarted_keeps_every_acknowledged_record_and_committed_offset(fast_cluster):
    """kill -9 of all three nodes at once (no clean shutdown anywhere: every replica registers again as uncleanly
    shut down and leaves its ISRs and ELRs; the last known leader brings each partition back), then a restart of
    all three: every record acknowledged with acks=all and min ISR 2 is read back, and the group's committed
    offsets are still there."""
    from confluent_kafka import Consumer, TopicPartition

    c = fast_cluster
    topic = "crash-all"
    create_replicated_topic(c, topic, 3)
    load = KeyedLoad(c.bootstrap, topic)
    load.start()
    c.wait_until(lambda: len(load.acked) > 2000, timeout=60, interval=0.2, what="2000 acknowledged records")
    assert load.stop() == 0 and not load.errors
    group = "crash-all-readers"
    consumer = Consumer({"bootstrap.servers": c.bootstrap, "group.id": group, "enable.auto.commit": False,
                         "auto.offset.reset": "earliest", "socket.timeout.ms": 10000})
    commits = [TopicPartition(topic, p, 10 + p) for p in range(3)]
    deadline = time.monotonic() + 60
    while True:
        try:
            consumer.commit(offsets=commits, asynchronous=False)
            break
        except Exception as e:  # noqa: BLE001 - the coordinator may still be loading
            if time.monotonic() > deadline:
                raise
            print(f"commit: {e}")
            time.sleep(0.5)
    consumer.close()

    for i in c.ids:
        c.kill(i)
    restart_started = time.monotonic()
    c.start_all()
    c.wait_until(c.agreed_leader, timeout=30, what="a quorum leader after the restart")

    def all_led():
        t = c.rdkafka_metadata(c.ids[0], topic=topic).topics[topic]
        return t.error is None and all(p.leader >= 0 for p in t.partitions.values()) or None
    c.wait_until(all_led, timeout=60, interval=0.3, what=f"every partition of {topic} led again")
    print(f"partitions led again {time.monotonic() - restart_started:.2f} s after the restart")
    # Strict min ISR: the high watermark moves once a second replica is back in each ISR.
    c.wait_until(lambda: all(len(partition_view(c, topic, p)["isr"]) >= 2 for p in range(3)), timeout=60,
                 interval=0.3, what="ISRs of at least 2 again")
    expected = {a[3] for a in load.acked}

    def everything_visible():
        ends = {p: high_watermark(c.bootstrap, topic, p) for p in range(3)}
        return ends if sum(ends.values()) >= len(expected) else None
    ends = c.wait_until(everything_visible, timeout=60, interval=0.5, what="every acknowledged record visible")
    consumed = rdkafka_consume(c.bootstrap, topic, {p: 0 for p in range(3)}, count=sum(ends.values()), timeout=90)
    got = {v for _, _, _, v in consumed}
    missing = expected - got
    assert not missing, f"{len(missing)} acknowledged records lost, e.g. {sorted(missing)[:5]}"

    consumer = Consumer({"bootstrap.servers": c.bootstrap, "group.id": group, "socket.timeout.ms": 10000})
    try:
        def offsets():
            got = consumer.committed([TopicPartition(topic, p) for p in range(3)], timeout=10)
            return got if all(tp.offset >= 0 for tp in got) else None
        committed = c.wait_until(offsets, timeout=60, interval=1, what="committed offsets after the restart")
    finally:
        consumer.close()
    assert sorted((tp.partition, tp.offset) for tp in committed) == [(p, 10 + p) for p in range(3)]


def test_kafka_reassign_partitions_moves_a_replica_with_its_data(fast_cluster):
    """kafka-reassign-partitions.sh --execute moves a partition from nodes [a, b] to [b, c] (its leader a leaves):
    c fetches the whole log from the leader, joins the ISR, the reassignment completes (b or c leads), a drops
    its copy; --verify reports it complete; every record is still there."""
    import json as jsonlib

    c = fast_cluster
    topic = "moving"
    a, b, third = 1, 2, 3
    create_replicated_topic(c, topic, 1, min_isr=1, assignment=[[a, b]])
    from real_clients import rdkafka_produce
    rdkafka_produce(c.bootstrap, topic, [(f"k{i}", f"r{i}") for i in range(500)], acks="all")
    plan = c.work_dir / "reassign.json"
    plan.write_text(jsonlib.dumps({"version": 1, "partitions": [
        {"topic": topic, "partition": 0, "replicas": [b, third], "log_dirs": ["any", "any"]}]}))
    tool = "org.apache.kafka.tools.reassign.ReassignPartitionsCommand"
    out = tool_batch((tool, "--bootstrap-server", c.bootstrap, "--reassignment-json-file", str(plan), "--execute"))
    print(step_ok(out[0]))
    assert f"Successfully started partition reassignment for {topic}-0" in out[0]["stdout"]

    def moved():
        v = partition_view(c, topic, 0)
        return v if sorted(v["replicas"]) == [b, third] and sorted(v["isr"]) == [b, third] and v["leader"] in (b, third) \
            else None
    view = c.wait_until(moved, timeout=30, interval=0.3, what="the reassignment complete")
    print(f"after the move: {view}")
    out = tool_batch((tool, "--bootstrap-server", c.bootstrap, "--reassignment-json-file", str(plan), "--verify"))
    print(out[0]["stdout"], out[0]["stderr"])
    assert f"Reassignment of partition {topic}-0 is completed." in out[0]["stdout"]
    c.wait_until(lambda: not (c.node(a).log_dir / f"{topic}-0").exists(), timeout=20, interval=0.3,
                 what=f"node {a} dropping its copy")
    assert (c.node(third).log_dir / f"{topic}-0").is_dir()
    consumed = rdkafka_consume(c.bootstrap, topic, {0: 0}, timeout=30)
    assert sorted(v for _, _, _, v in consumed) == sorted(f"r{i}" for i in range(500))


def test_restarted_broker_serves_clients_only_once_caught_up(fast_cluster):
    """Kafka's BrokerServer opens its broker listeners only after the broker has caught up with the metadata log.
    Node 3 is restarted alone (nodes 1 and 2 dead: no quorum): its controller listener opens at once (Raft needs
    it), its client listener refuses connections for as long as it cannot catch up, and the first Metadata
    answer it gives once open already knows the topic created while it was down. (Served
    earlier, from an empty or stale image, it answered UNKNOWN_TOPIC_OR_PARTITION and old leaders, and an
    idempotent producer's first batch answered so could be overtaken by its second.)"""
    from conftest import port_accepts

    c = fast_cluster
    c.wait_until(lambda: len(c.rdkafka_metadata(1).brokers) == 3 or None, timeout=20, interval=0.2,
                 what="three registered brokers")
    c.kill(3)
    # Placed by hand: node 3 stays registered (fenced) while it is down.
    create_replicated_topic(c, "born-while-3-was-down", 2, min_isr=1, assignment=[[1, 2, 3], [2, 3, 1]],
                            full_isr=False)
    c.kill(1)
    c.kill(2)
    c.launch(3)
    n3 = c.node(3)
    c.wait_until(lambda: port_accepts(n3.controller_port), timeout=20, interval=0.1,
                 what="node 3's controller listener")
    refused_until = time.monotonic() + 4
    while time.monotonic() < refused_until:
        assert not port_accepts(n3.port), "node 3 took client connections before it caught up with the metadata"
        time.sleep(0.2)
    c.launch(1)  # nodes 1 and 3: a majority again
    c.wait_serving(3, timeout=40)
    view = partition_view(c, "born-while-3-was-down", 0, via=3)
    print(f"node 3's first answer: {view}")
    assert sorted(view["replicas"]) == [1, 2, 3]
    c.start(2)
    c.wait_serving(1, timeout=40)
