"""Finalized features with Apache Kafka's kafka-features.sh (KIP-584 / KIP-778 / KIP-890 transaction.version), on a
1-node and a 3-node cluster:

- `describe` lists transaction.version supported 0-2 and finalized at Mala's bootstrap level 2 (Kafka 4.x's);
- `downgrade --feature transaction.version=1 --dry-run` is validated and changes nothing;
- `downgrade --feature transaction.version=0` removes it (no longer finalized anywhere), a transactional Java producer
  still commits and aborts (the coordinator follows the finalized level), and `upgrade` brings it back;
- what Mala cannot honour is refused with Kafka's INVALID_UPDATE_VERSION message: group.version /
  eligible.leader.replicas.version off, a metadata.version downgrade, a level beyond the supported range, `upgrade`
  to a lower level;
- every node's ApiVersions (FinalizedFeatures and FinalizedFeaturesEpoch) agrees after each change, and the level
  survives a restart of every node.
"""

import time

import pytest

import kafka_wire
from cluster import Cluster
from real_clients import step_ok, tool_batch
from txn_harness import check_producer, create_topics, txn_produce

FEATURES_TOOL = "org.apache.kafka.tools.FeatureCommand"  # kafka-features.sh


def features_tool(bootstrap, *args):
    return tool_batch((FEATURES_TOOL, "--bootstrap-server", bootstrap, *args))[0]


def described(bootstrap):
    """`kafka-features describe` as {feature: {column: value}}."""
    out = step_ok(features_tool(bootstrap, "describe"))
    rows = {}
    for line in out.splitlines():
        if not line.startswith("Feature:"):
            continue
        cols = line.split()
        rows[cols[1]] = {cols[i].rstrip(":"): cols[i + 1] for i in range(2, len(cols) - 1, 2)}
    assert "transaction.version" in rows, out
    return rows


def finalized_everywhere(c):
    """Every running node's ApiVersions: {node: (epoch, {feature: level})}."""
    out = {}
    for i in c.running_ids():
        epoch, finalized, supported = kafka_wire.api_versions_features(c.nodes[i].port)
        assert supported.get("transaction.version") == (0, 2), supported
        out[i] = (epoch, finalized)
    return out


def wait_all_nodes_at(c, level):
    """Waits until every node's ApiVersions finalizes transaction.version at `level` (absent for 0) and
    metadata.version at 33, with the same FinalizedFeaturesEpoch; returns that epoch."""
    def agreed():
        seen = finalized_everywhere(c)
        epochs = {e for e, _ in seen.values()}
        ok = len(epochs) == 1 and all(f.get("transaction.version", 0) == level and f.get("metadata.version") == 33
                                      for _, f in seen.values())
        return seen if ok else None

    seen = c.wait_until(agreed, timeout=15, what=f"every node's ApiVersions finalizing transaction.version {level}")
    return next(iter(seen.values()))[0]


def cluster_config(size):
    if size == 3:
        return {}
    return {"default.replication.factor": 1, "min.insync.replicas": 1, "offsets.topic.replication.factor": 1,
            "transaction.state.log.replication.factor": 1, "transaction.state.log.min.isr": 1}


@pytest.mark.parametrize("size", [1, 3], ids=["1-node", "3-node"])
def test_kafka_features_describe_upgrade_downgrade(tmp_path, size):
    c = Cluster(tmp_path, size=size, extra_config=cluster_config(size))
    try:
        c.start_all()
        b = c.bootstrap
        rows = described(b)
        tv = rows["transaction.version"]
        assert (tv["SupportedMinVersion"], tv["SupportedMaxVersion"], tv["FinalizedVersionLevel"]) == ("0", "2", "2")
        assert rows["metadata.version"]["FinalizedVersionLevel"] == "4.4-IV2", rows
        # Settled: each broker's first heartbeat after it caught up records its cordoned log dirs (KIP-1066, as
        # Kafka 4.4 does), which moves the epoch once.
        epoch_at_start = wait_all_nodes_at(c, 2)
        for _ in range(20):
            time.sleep(2.5)  # more than broker.heartbeat.interval.ms
            settled = wait_all_nodes_at(c, 2)
            if settled == epoch_at_start:
                break
            epoch_at_start = settled

        # --dry-run: validated (the answer names the change), nothing written.
        dry = step_ok(features_tool(b, "downgrade", "--feature", "transaction.version=1", "--dry-run"))
        assert "transaction.version can be downgraded to 1." in dry, dry
        assert described(b)["transaction.version"]["FinalizedVersionLevel"] == "2"
        assert wait_all_nodes_at(c, 2) == epoch_at_start
        # A dry run is refused like the real thing.
        refused = features_tool(b, "upgrade", "--feature", "transaction.version=3", "--dry-run")
        assert refused["exit"] != 0 and "Local controller" in refused["stdout"] + refused["stderr"], refused

        # Refusals: Kafka's INVALID_UPDATE_VERSION messages, nothing written.
        for args, expected in [
            (("downgrade", "--feature", "group.version=0"), "Mala always has this feature on at level 1"),
            (("downgrade", "--feature", "eligible.leader.replicas.version=0"), "Mala always has this feature on"),
            (("downgrade", "--feature", "metadata.version=29"), "Refusing to perform the requested downgrade"),
            (("upgrade", "--feature", "transaction.version=5"), "only supports versions 0-2"),
        ]:
            out = features_tool(b, *args)
            text = out["stdout"] + out["stderr"]
            assert out["exit"] != 0 and expected in text, f"{args}: exit {out['exit']}\n{text}"
        assert wait_all_nodes_at(c, 2) == epoch_at_start

        # Downgrade to 0: transaction.version is no longer finalized; transactions still work (the v1 flow).
        down = step_ok(features_tool(b, "downgrade", "--feature", "transaction.version=0"))
        assert "transaction.version was downgraded to 0." in down, down
        epoch_at_0 = wait_all_nodes_at(c, 0)
        assert epoch_at_0 > epoch_at_start
        assert described(b)["transaction.version"]["FinalizedVersionLevel"] in ("0", "-")
        create_topics(b, "at-tv0", partitions=2, replication_factor=size)
        s = txn_produce(b, "at-tv0", "tv0-app", 4, 3, abort_every=2)
        assert s["committed"] == [0, 2] and s["aborted"] == [1, 3], s
        check_producer(b, "at-tv0", s, 2)

        # Upgrade back, then to 2; the level survives a restart of every node.
        step_ok(features_tool(b, "upgrade", "--feature", "transaction.version=1"))
        wait_all_nodes_at(c, 1)
        step_ok(features_tool(b, "upgrade", "--feature", "transaction.version=2"))
        epoch_at_2 = wait_all_nodes_at(c, 2)
        assert described(b)["transaction.version"]["FinalizedVersionLevel"] == "2"
        codes = c.stop_all()
        assert all(code == 0 for code in codes.values()), codes
        c.start_all()
        assert wait_all_nodes_at(c, 2) >= epoch_at_2
        assert described(b)["transaction.version"]["FinalizedVersionLevel"] == "2"
        # And a downgrade needs its type: `upgrade` to a lower level is refused.
        out = features_tool(b, "upgrade", "--feature", "transaction.version=1")
        assert out["exit"] != 0 and "Can't downgrade" in out["stdout"] + out["stderr"], out
    except BaseException:
        print(c.logs())
        raise
    finally:
        c.close()
