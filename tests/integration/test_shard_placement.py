"""Partitions placed over a node's shards by count (issue 20): each node places the replicas it hosts on the shard
with the fewest, when the metadata first gives it them and when it loads their logs at start-up, and says so in its
log ("<topic>-<p>: replica on shard N"). A two-node cluster with two shards each hosts a topic of 16 single-replica
partitions: the controller stripes them over the nodes (each node holds about every other partition), which a
placement by partition number would have put on one shard of each node.
"""

import re

from cluster import own_cluster
from real_clients import create_topic, rdkafka_consume, rdkafka_produce

TOPIC = "spread-over-shards"
PARTITIONS = 16


def replicas_per_shard(log_text):
    """{partition: shard} from the node's "replica on shard" lines (the last line of each partition wins)."""
    placed = {}
    for m in re.finditer(rf"{TOPIC}-(\d+): replica on shard (\d+)", log_text):
        placed[int(m.group(1))] = int(m.group(2))
    return placed


def test_each_node_spreads_the_partitions_it_hosts_over_its_shards_and_again_after_a_restart(tmp_path):
    config = {"mala.shards": 2, "default.replication.factor": 1, "min.insync.replicas": 1,
              "offsets.topic.replication.factor": 1, "transaction.state.log.replication.factor": 1,
              "transaction.state.log.min.isr": 1}
    with own_cluster(tmp_path, size=2, extra_config=config) as c:
        c.start_all()
        c.wait_until(c.agreed_leader, timeout=20, what="a quorum leader both nodes agree on")
        create_topic(c.bootstrap, TOPIC, partitions=PARTITIONS)

        def balanced_on_every_node(label):
            hosted = {}
            for i in c.ids:
                placed = replicas_per_shard(c.node(i).log_text(tail_lines=5000))
                counts = [sum(1 for s in placed.values() if s == shard) for shard in (0, 1)]
                assert abs(counts[0] - counts[1]) <= 1, f"{label}: node {i} placed {placed}"
                hosted[i] = placed
            assert sorted(p for placed in hosted.values() for p in placed) == list(range(PARTITIONS)), hosted
            return hosted

        c.wait_until(lambda: sum(len(replicas_per_shard(c.node(i).log_text(tail_lines=5000))) for i in c.ids)
                     == PARTITIONS, timeout=30, what="every partition hosted")
        balanced_on_every_node("created")

        records = [(f"k{i}".encode(), f"v{i}".encode()) for i in range(800)]
        acked = rdkafka_produce(c.bootstrap, TOPIC, records, acks="all")
        ends = {}
        for partition, offset, _, _ in acked:
            ends[partition] = max(ends.get(partition, 0), offset + 1)
        assert len(ends) == PARTITIONS  # the keys reach every partition
        read = rdkafka_consume(c.bootstrap, TOPIC, {p: 0 for p in range(PARTITIONS)}, ends=ends)
        assert sorted((p, o, v) for p, o, _, v in read) == sorted((p, o, v) for p, o, _, v in acked)

        # A restart loads the logs and places them again, balanced, before the metadata hosts them.
        c.stop_all()
        c.start_all()
        c.wait_until(c.agreed_leader, timeout=20, what="a quorum leader both nodes agree on")
        for i in c.ids:
            m = re.search(r"(\d+) log\(s\) loaded, placed over the shards \(internal topics on shard 0\): (\d+), (\d+)",
                          c.node(i).log_text(tail_lines=5000))
            assert m, f"node {i} logged no placement of its loaded logs"
            assert abs(int(m.group(2)) - int(m.group(3))) <= 1, m.group(0)
        read = rdkafka_consume(c.bootstrap, TOPIC, {p: 0 for p in range(PARTITIONS)}, ends=ends, timeout=60)
        assert sorted((p, o, v) for p, o, _, v in read) == sorted((p, o, v) for p, o, _, v in acked)
