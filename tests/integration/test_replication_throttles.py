"""Replication throttles (issue 24): `leader.replication.throttled.rate` / `follower.replication.throttled.rate`
(dynamic broker configs) bound the replication of the replicas a topic's `leader.replication.throttled.replicas` /
`follower.replication.throttled.replicas` name, as in Kafka (KIP-73), and `kafka-reassign-partitions --throttle`
sets them for a move and `--verify` removes them once it completed.

Each case moves a 3 MB partition to a new replica on a 3-node cluster (cluster.py) and times how long the new
replica takes to join the ISR: throttled to 100 kB/s it takes over 8 s (about 20 s expected: a fetch brings up to
replica.fetch.max.bytes = 1 MiB, and the rate is measured over Kafka's window of up to 11 s), unthrottled well
under that. The leader side and the follower side are each tried alone, then both as the tool sets them."""

import json
import time

import pytest

from real_clients import CONFIGS_TOOL, rdkafka_produce, step_ok, tool_batch
from test_replication_failover import _fast, create_replicated_topic, partition_view

REASSIGN_TOOL = "org.apache.kafka.tools.reassign.ReassignPartitionsCommand"
RECORDS = 3000
VALUE = "x" * 1000
RATE = 100_000


@pytest.fixture
def fast_cluster(request, tmp_path):
    yield from _fast(request, tmp_path)


def filled_topic(c, topic, leader):
    create_replicated_topic(c, topic, 1, min_isr=1, assignment=[[leader]])
    rdkafka_produce(c.bootstrap, topic, [(f"k{i}", VALUE) for i in range(RECORDS)], acks="1",
                    **{"linger.ms": 20, "batch.size": 262144})


def plan_file(c, topic, replicas):
    plan = c.work_dir / f"reassign-{topic}.json"
    plan.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": topic, "partition": 0, "replicas": replicas, "log_dirs": ["any"] * len(replicas)}]}))
    return plan


def move_and_time(c, topic, replicas, *tool_args):
    """Starts the reassignment and returns the seconds from the tool's return (the move started; the JVM's own
    start-up not counted) until every new replica is in the ISR."""
    plan = plan_file(c, topic, replicas)
    out = tool_batch((REASSIGN_TOOL, "--bootstrap-server", c.bootstrap, "--reassignment-json-file", str(plan),
                      "--execute", *tool_args))
    began = time.monotonic()
    print(step_ok(out[0]))
    c.wait_until(lambda: sorted(partition_view(c, topic, 0)["isr"]) == sorted(replicas) or None, timeout=90,
                 interval=0.2, what=f"{topic}-0 replicated to {replicas}")
    took = time.monotonic() - began
    print(f"{topic}: replicas {replicas} in sync after {took:.1f} s")
    return took


def alter(c, entity_type, name, add=None, delete=None):
    args = [CONFIGS_TOOL, "--bootstrap-server", c.bootstrap, "--alter", "--entity-type", entity_type,
            "--entity-name", name]
    if add:
        args += ["--add-config", add]
    if delete:
        args += ["--delete-config", delete]
    step_ok(tool_batch(tuple(args))[0])


def describe(c, entity_type, name):
    out = tool_batch((CONFIGS_TOOL, "--bootstrap-server", c.bootstrap, "--describe", "--entity-type", entity_type,
                      "--entity-name", name))
    return step_ok(out[0])


def test_each_side_of_the_throttle_slows_a_new_replica_and_nothing_else(fast_cluster):
    c = fast_cluster
    filled_topic(c, "unthrottled", 1)
    free = move_and_time(c, "unthrottled", [1, 2])

    # Follower side alone: node 3 fetches its throttled replica at no more than the rate.
    filled_topic(c, "follower-side", 1)
    alter(c, "brokers", "3", add=f"follower.replication.throttled.rate={RATE}")
    alter(c, "topics", "follower-side", add="follower.replication.throttled.replicas=[0:3]")
    shown = describe(c, "brokers", "3")
    assert f"follower.replication.throttled.rate={RATE}" in shown, shown
    follower = move_and_time(c, "follower-side", [1, 3])
    alter(c, "brokers", "3", delete="follower.replication.throttled.rate")

    # Leader side alone: node 1 sends its throttled replica at no more than the rate ("*": every partition).
    filled_topic(c, "leader-side", 1)
    alter(c, "brokers", "1", add=f"leader.replication.throttled.rate={RATE}")
    alter(c, "topics", "leader-side", add="leader.replication.throttled.replicas=*")
    leader = move_and_time(c, "leader-side", [1, 2])
    alter(c, "brokers", "1", delete="leader.replication.throttled.rate")

    print(f"3 MB to a new replica: unthrottled {free:.1f} s, follower side at {RATE} B/s {follower:.1f} s, "
          f"leader side {leader:.1f} s")
    assert follower > 8, f"the follower throttle did not slow the new replica ({follower:.1f} s)"
    assert leader > 8, f"the leader throttle did not slow the new replica ({leader:.1f} s)"
    assert free < min(follower, leader) / 3, f"unthrottled {free:.1f} s against {follower:.1f} / {leader:.1f} s"
    # Once unbounded again, a replica moves at full speed.
    assert "follower.replication.throttled.rate" not in describe(c, "brokers", "3")


def test_kafka_reassign_partitions_throttle_is_applied_and_removed_by_verify(fast_cluster):
    c = fast_cluster
    topic = "moved-with-throttle"
    filled_topic(c, topic, 1)
    plan = plan_file(c, topic, [1, 2])
    out = tool_batch((REASSIGN_TOOL, "--bootstrap-server", c.bootstrap, "--reassignment-json-file", str(plan),
                      "--execute", "--throttle", str(RATE)))
    began = time.monotonic()
    text = step_ok(out[0])
    print(text)
    assert f"The inter-broker throttle limit was set to {RATE} B/s" in text
    # What the tool set (Kafka's ReassignPartitionsCommand): both rates on the brokers involved, the sources as
    # leader-throttled replicas and the new replica as follower-throttled.
    for broker in ("1", "2"):
        shown = describe(c, "brokers", broker)
        assert f"leader.replication.throttled.rate={RATE}" in shown, shown
        assert f"follower.replication.throttled.rate={RATE}" in shown, shown
    shown = describe(c, "topics", topic)
    assert "leader.replication.throttled.replicas=0:1" in shown, shown
    assert "follower.replication.throttled.replicas=0:2" in shown, shown
    # Unthrottled, the move is over within a couple of seconds, before these tools ran; throttled it is not.
    assert sorted(partition_view(c, topic, 0)["isr"]) == [1], "the move ended before the throttle could hold it"

    c.wait_until(lambda: sorted(partition_view(c, topic, 0)["isr"]) == [1, 2] or None, timeout=90, interval=0.2,
                 what=f"{topic}-0 replicated")
    took = time.monotonic() - began
    print(f"{topic}: moved in {took:.1f} s under the tool's throttle")
    assert took > 8, f"the tool's throttle did not slow the move ({took:.1f} s)"

    out = tool_batch((REASSIGN_TOOL, "--bootstrap-server", c.bootstrap, "--reassignment-json-file", str(plan),
                      "--verify"))
    text = step_ok(out[0])
    print(text)
    assert f"Reassignment of partition {topic}-0 is completed." in text
    assert "Clearing broker-level throttles on brokers" in text
    assert f"Clearing topic-level throttles on topic {topic}" in text
    for broker in ("1", "2", "3"):
        shown = describe(c, "brokers", broker)
        assert "replication.throttled.rate" not in shown, shown
    shown = describe(c, "topics", topic)
    assert "throttled.replicas" not in shown, shown
