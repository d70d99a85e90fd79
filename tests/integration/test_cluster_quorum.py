"""The 3-node Raft metadata quorum (every node broker + controller), seen through real Kafka clients and tools:
Apache Kafka 4.4's kafka-metadata-quorum and kafka-topics (their main classes, several in one JVM through
mala.it.ToolBatch) and librdkafka (confluent-kafka). Timings that only a fast poll can measure (an election within
2 s) are measured with cluster.describe_quorum(), a hand-encoded DescribeQuorum probe polled every 50 ms, and what it
saw is then checked with kafka-metadata-quorum.

Timing limits (the issue's numbers) and the slack each assertion allows are stated below; every measured time is
printed (pytest -s, or in the report of a failing test).
"""

import re
import time

import pytest

from cluster import CLUSTER_ID, cluster, running_cluster  # noqa: F401  (fixtures)
from real_clients import TOPICS_TOOL, create_topic, java_json, rdkafka_consume, rdkafka_produce, step_ok, tool_batch

QUORUM_TOOL = "org.apache.kafka.tools.MetadataQuorumCommand"  # kafka-metadata-quorum.sh

ELECTION_LIMIT_S = 2.0  # a leader within 2 s of all three starting
FAILOVER_LIMIT_S = 3.0  # a new leader within 3 s of SIGKILL to the active controller
POLL_SLACK_S = 1.0  # allowed on top of each limit: probe interval, process start-up, a loaded 2-core machine
SESSION_TIMEOUT_S = 9.0  # broker.session.timeout.ms default
HEARTBEAT_INTERVAL_S = 2.0  # broker.heartbeat.interval.ms default
# A paused broker's last heartbeat was at most one interval before the pause, so it must not be fenced earlier
# than SESSION_TIMEOUT_S - HEARTBEAT_INTERVAL_S after it (minus slack), and must be fenced once its session expired
# plus one heartbeat interval for the controller to notice and the new metadata to reach the brokers (plus slack).
FENCE_MIN_S = SESSION_TIMEOUT_S - HEARTBEAT_INTERVAL_S - POLL_SLACK_S
FENCE_MAX_S = SESSION_TIMEOUT_S + HEARTBEAT_INTERVAL_S + POLL_SLACK_S
UNFENCE_LIMIT_S = 10.0  # a resumed broker is a live broker again within ~10 s


# --- parsing what the tools print ---------------------------------------------------------------------------------

STATUS_KEYS = ["ClusterId", "LeaderId", "LeaderEpoch", "HighWatermark", "MaxFollowerLag", "MaxFollowerLagTimeMs",
               "CurrentVoters", "CurrentObservers"]
REPLICATION_HEADER = ["NodeId", "DirectoryId", "LogEndOffset", "Lag", "LastFetchTimestamp", "LastCaughtUpTimestamp",
                      "Status"]


def parse_quorum_status(text: str) -> dict:
    """`kafka-metadata-quorum describe --status`: "Key:   value" lines. CurrentVoters/CurrentObservers print as
    [{"id": 1, "directoryId": "...", "endpoints": ["CONTROLLER://host:port"]}, ...]."""
    fields = {}
    for line in text.splitlines():
        m = re.match(r"^(\w+):\s+(.*)$", line)
        if m:
            fields[m[1]] = m[2].strip()
    missing = [k for k in STATUS_KEYS if k not in fields]
    assert not missing, f"describe --status printed no {missing}:\n{text}"
    out = {k: fields[k] for k in STATUS_KEYS}
    for k in ("LeaderId", "LeaderEpoch", "HighWatermark", "MaxFollowerLag", "MaxFollowerLagTimeMs"):
        out[k] = int(fields[k])
    for k in ("CurrentVoters", "CurrentObservers"):
        entries = re.findall(r"\{(.*?)\}", fields[k])
        out[k] = {}
        for e in entries:
            m = re.search(r'"id": (-?\d+)', e)
            assert m, f"{k} entry without an id: {e!r}"
            out[k][int(m[1])] = re.findall(r'"(\w+://[^"]+)"', e)
        if not entries:
            assert fields[k] == "[]", f"{k}: {fields[k]!r}"
    return out


def parse_quorum_replication(text: str) -> list:
    """`kafka-metadata-quorum describe --replication`: a whitespace-aligned table, header first."""
    lines = [l for l in text.splitlines() if l.strip()]
    assert lines and lines[0].split() == REPLICATION_HEADER, f"unexpected header:\n{text}"
    rows = []
    for line in lines[1:]:
        cells = line.split()
        assert len(cells) == len(REPLICATION_HEADER), f"row with {len(cells)} cells: {line!r}"
        row = dict(zip(REPLICATION_HEADER, cells))
        for k in ("NodeId", "LogEndOffset", "Lag", "LastFetchTimestamp", "LastCaughtUpTimestamp"):
            row[k] = int(row[k])
        rows.append(row)
    return rows


def parse_topics_describe(text: str) -> dict:
    """`kafka-topics --describe`: {topic: {"id", "partition_count", "rf", "partitions": {p: {"leader" (None when
    "none"), "replicas", "isr"}}}} (internal __ topics left out)."""
    topics = {}
    for line in text.splitlines():
        m = re.match(r"^Topic: (\S+)\s+TopicId: (\S+)\s+PartitionCount: (\d+)\s+ReplicationFactor: (\d+)", line)
        if m:
            topics[m[1]] = {"id": m[2], "partition_count": int(m[3]), "rf": int(m[4]), "partitions": {}}
            continue
        m = re.match(r"^\s+Topic: (\S+)\s+Partition: (\d+)\s+Leader: (\S+)\s+Replicas: ([\d,]*)\s+Isr: ([\d,]*)", line)
        if m:
            ids = lambda s: tuple(int(x) for x in s.split(",") if x)  # noqa: E731
            topics.setdefault(m[1], {"id": None, "partition_count": None, "rf": None, "partitions": {}})
            topics[m[1]]["partitions"][int(m[2])] = {
                "leader": None if m[3] == "none" else int(m[3]), "replicas": ids(m[4]), "isr": ids(m[5])}
    return {t: v for t, v in topics.items() if not t.startswith("__")}


def quorum_tool(cluster, steps):
    """Runs kafka-metadata-quorum steps [(node id, "--status" | "--replication")] in one JVM; returns the outputs."""
    outs = tool_batch(*[(QUORUM_TOOL, "--bootstrap-server", cluster.bootstrap_of(i), "describe", what)
                        for i, what in steps])
    return [step_ok(o) for o in outs]


def describe_topics(cluster, ids, topic=None):
    """kafka-topics --describe through each node in `ids` (one JVM); returns {node id: parsed}."""
    extra = ["--topic", topic] if topic else []
    outs = tool_batch(*[(TOPICS_TOOL, "--bootstrap-server", cluster.bootstrap_of(i), "--describe", *extra)
                        for i in ids])
    return {i: parse_topics_describe(step_ok(o)) for i, o in zip(ids, outs)}


def complete(view: dict, topic: str, partitions: int) -> bool:
    """The topic is in the view with all its partitions, each with a leader."""
    t = view.get(topic)
    return bool(t) and sorted(t["partitions"]) == list(range(partitions)) and \
        all(p["leader"] is not None for p in t["partitions"].values())


def wait_brokers(cluster, ids, expected, timeout=20):
    """Waits until Metadata through every node in `ids` lists exactly the brokers `expected`."""
    def check():
        views = {i: sorted(cluster.rdkafka_metadata(i).brokers) for i in ids}
        return views if all(v == sorted(expected) for v in views.values()) else None
    return cluster.wait_until(check, timeout, interval=0.25, what=f"brokers {sorted(expected)} on nodes {ids}")


def create_topic_retrying(bootstrap, name, partitions, replication_factor, timeout=15):
    """CreateTopics with confluent-kafka's AdminClient, retried until it succeeds (a retry that finds the topic
    already there counts: the previous attempt created it). Returns the number of attempts."""
    from confluent_kafka import KafkaError, KafkaException
    from confluent_kafka.admin import AdminClient, NewTopic

    deadline = time.monotonic() + timeout
    attempts, last = 0, None
    while time.monotonic() < deadline:
        attempts += 1
        admin = AdminClient({"bootstrap.servers": bootstrap, "socket.timeout.ms": 5000, "log_level": 2})
        futures = admin.create_topics([NewTopic(name, num_partitions=partitions,
                                                replication_factor=replication_factor)],
                                      request_timeout=5, operation_timeout=5)
        try:
            futures[name].result(timeout=10)
            return attempts
        except KafkaException as e:
            last = e.args[0]
            if attempts > 1 and last.code() == KafkaError.TOPIC_ALREADY_EXISTS:
                return attempts
            if not last.retriable() and last.code() not in (KafkaError.NOT_CONTROLLER, KafkaError._TIMED_OUT,
                                                             KafkaError.REQUEST_TIMED_OUT):
                pytest.fail(f"CreateTopics {name} failed: {last}")
        time.sleep(0.25)
    pytest.fail(f"CreateTopics {name} did not succeed within {timeout} s ({attempts} attempts, last: {last})")


# --- tests --------------------------------------------------------------------------------------------------------

def test_leader_elected_within_2s_and_described_by_every_node(cluster):
    launched = cluster.start_all(wait=False)
    asked, first = cluster.wait_until(lambda: cluster.quorum_leader(ids=cluster.ids), timeout=20, interval=0.05,
                                      what="any node to report a quorum leader")
    elapsed = time.monotonic() - launched
    print(f"leader {first['leader_id']} (epoch {first['leader_epoch']}) reported by node {asked} "
          f"{elapsed:.2f} s after the three nodes were launched")
    assert elapsed <= ELECTION_LIMIT_S + POLL_SLACK_S, \
        f"leader elected after {elapsed:.2f} s (limit {ELECTION_LIMIT_S} s + {POLL_SLACK_S} s slack)"
    assert first["leader_id"] in cluster.ids and first["leader_epoch"] >= 1, first
    assert sorted(first["voters"]) == [1, 2, 3], first

    for i in cluster.ids:
        cluster.wait_serving(i)
    leader, epoch, answers = cluster.wait_until(cluster.agreed_leader, timeout=10,
                                                what="all three nodes to agree on the leader")
    assert (leader, epoch) == (first["leader_id"], first["leader_epoch"]), \
        f"leadership changed after the first election (pre-vote should prevent that): {answers}"

    outs = quorum_tool(cluster, [(i, "--status") for i in cluster.ids])
    for i, out in zip(cluster.ids, outs):
        status = parse_quorum_status(out)
        assert status["ClusterId"] == CLUSTER_ID, out
        assert status["LeaderId"] == leader, f"through node {i}:\n{out}"
        assert status["LeaderEpoch"] == epoch, f"through node {i}:\n{out}"
        assert status["HighWatermark"] > 0, f"the leader commits records of its epoch (node {i}):\n{out}"
        assert sorted(status["CurrentVoters"]) == [1, 2, 3], out
        assert status["CurrentObservers"] == {}, f"combined-mode nodes are all voters, no observers:\n{out}"
        for vid, endpoints in status["CurrentVoters"].items():
            if endpoints:  # printed when DescribeQuorum v2 returns the voters' Nodes
                assert endpoints == [f"CONTROLLER://127.0.0.1:{cluster.node(vid).controller_port}"], out

    def metadata_agrees():
        mds = {i: cluster.rdkafka_metadata(i) for i in cluster.ids}
        ok = all(sorted(md.brokers) == [1, 2, 3] and md.controller_id == leader for md in mds.values())
        return mds if ok else None
    mds = cluster.wait_until(metadata_agrees, timeout=15, interval=0.25,
                             what=f"Metadata on every node: brokers 1,2,3 and controller id {leader}")
    for i, md in mds.items():
        assert md.cluster_id == CLUSTER_ID, (i, md.cluster_id)
        b = md.brokers[i]
        assert (b.host, b.port) == ("127.0.0.1", cluster.node(i).port), (i, b)


def test_describe_replication_lists_the_three_voters(running_cluster):
    c = running_cluster
    leader, epoch, _ = c.agreed_leader()
    followers = [i for i in c.ids if i != leader]

    def replicated():
        q = c.describe_quorum(leader)
        voters = q["voters"]
        ok = sorted(voters) == [1, 2, 3] and all(v["log_end_offset"] > 0 for v in voters.values()) and \
            all(voters[f]["last_fetch"] > 0 for f in followers)
        return q if ok else None
    c.wait_until(replicated, timeout=15, what="every voter to have fetched the metadata log")

    status_out, repl_out = quorum_tool(c, [(followers[0], "--status"), (followers[0], "--replication")])
    status = parse_quorum_status(status_out)
    rows = parse_quorum_replication(repl_out)
    print(repl_out)
    assert sorted(r["NodeId"] for r in rows) == [1, 2, 3], repl_out
    by_id = {r["NodeId"]: r for r in rows}
    assert by_id[leader]["Status"] == "Leader", repl_out
    assert [by_id[f]["Status"] for f in followers] == ["Follower", "Follower"], repl_out
    assert not [r for r in rows if r["Status"] == "Observer"], repl_out
    now_ms = time.time() * 1000
    for r in rows:
        assert r["LogEndOffset"] > 0, repl_out
        assert r["Lag"] >= 0, f"a follower ahead of its leader:\n{repl_out}"
    assert by_id[leader]["LogEndOffset"] >= status["HighWatermark"] > 0, (status_out, repl_out)
    for f in followers:
        assert abs(now_ms - by_id[f]["LastFetchTimestamp"]) < 60_000, f"follower {f} fetch time:\n{repl_out}"


def test_topic_created_through_one_node_is_the_same_on_every_node(running_cluster):
    c = running_cluster
    leader, _, _ = c.agreed_leader()
    via = next(i for i in c.ids if i != leader)
    wait_brokers(c, c.ids, c.ids)
    out = step_ok(tool_batch((TOPICS_TOOL, "--bootstrap-server", c.bootstrap_of(via), "--create",
                              "--topic", "quorum-topic", "--partitions", "3", "--replication-factor", "3"))[0])
    assert "Created topic quorum-topic." in out, out

    views = c.wait_until(
        lambda: (lambda v: v if all(complete(x, "quorum-topic", 3) for x in v.values()) else None)(
            describe_topics(c, c.ids, "quorum-topic")),
        timeout=60, interval=0.5, what="quorum-topic with 3 led partitions on every node")
    print({i: v["quorum-topic"] for i, v in views.items()})
    reference = views[via]["quorum-topic"]
    assert reference["partition_count"] == 3 and reference["rf"] == 3, reference
    assert re.fullmatch(r"[A-Za-z0-9_-]{22}", reference["id"]) and reference["id"] != "AAAAAAAAAAAAAAAAAAAAAA", \
        reference
    for p, part in reference["partitions"].items():
        assert sorted(part["replicas"]) == [1, 2, 3], (p, part)
        assert sorted(part["isr"]) == [1, 2, 3], (p, part)
        assert part["leader"] in part["isr"], (p, part)
    leaders = sorted(part["leader"] for part in reference["partitions"].values())
    assert leaders == [1, 2, 3], f"Kafka spreads a new topic's leaders over the brokers: {reference}"
    for i, view in views.items():
        assert view["quorum-topic"] == reference, f"node {i} describes\n{view}\nnode {via} describes\n{reference}"


def test_create_topics_sent_to_a_follower_is_forwarded(running_cluster):
    """Real clients send CreateTopics to the Metadata controller id; here it goes to a follower's own listener."""
    c = running_cluster
    leader, _, _ = c.agreed_leader()
    follower = next(i for i in c.ids if i != leader)
    wait_brokers(c, c.ids, c.ids)
    error, message = c.create_topics_raw(follower, "forwarded-topic", partitions=2, replication_factor=3)
    assert error == 0, f"CreateTopics to follower {follower}: error {error} ({message}); 41 = NOT_CONTROLLER"

    def everywhere():
        mds = {i: c.rdkafka_metadata(i, topic="forwarded-topic") for i in c.ids}
        ok = all(md.topics["forwarded-topic"].error is None and len(md.topics["forwarded-topic"].partitions) == 2
                 for md in mds.values())
        return ok
    c.wait_until(everywhere, timeout=15, interval=0.25, what="forwarded-topic with 2 partitions on every node")


def test_controller_sigkill_failover_and_rejoin(running_cluster):
    c = running_cluster
    old, old_epoch, _ = c.agreed_leader()
    survivors = [i for i in c.ids if i != old]
    wait_brokers(c, c.ids, c.ids)

    t0 = time.monotonic()
    c.kill(old)
    asked, q = c.wait_until(lambda: c.quorum_leader(ids=survivors, min_epoch=old_epoch + 1, exclude={old}),
                            timeout=20, interval=0.05, what=f"a new leader among {survivors}")
    elapsed = time.monotonic() - t0
    print(f"SIGKILL to leader {old} (epoch {old_epoch}): node {asked} reports leader {q['leader_id']} "
          f"epoch {q['leader_epoch']} after {elapsed:.2f} s")
    assert elapsed <= FAILOVER_LIMIT_S + POLL_SLACK_S, \
        f"new leader after {elapsed:.2f} s (limit {FAILOVER_LIMIT_S} s + {POLL_SLACK_S} s slack)"
    new, new_epoch, _ = c.wait_until(lambda: c.agreed_leader(survivors), timeout=10,
                                     what=f"survivors {survivors} to agree on the new leader")
    assert new in survivors and new_epoch > old_epoch, (new, new_epoch, old_epoch)

    via = next(i for i in survivors if i != new)
    attempts = create_topic_retrying(c.bootstrap_of(via), "after-failover", partitions=2, replication_factor=2)
    print(f"CreateTopics through node {via} succeeded after {attempts} attempt(s)")

    def topic_on(i):
        def check():
            md = c.rdkafka_metadata(i, topic="after-failover")
            t = md.topics.get("after-failover")
            return t is not None and t.error is None and len(t.partitions) == 2
        return check
    for i in survivors:
        c.wait_until(topic_on(i), timeout=15, interval=0.25, what=f"after-failover in node {i}'s Metadata")

    committed = c.describe_quorum(new)["high_watermark"]
    c.start(old)

    def caught_up():
        qq = c.describe_quorum(new)
        state = qq["voters"].get(old)
        return qq if state and state["log_end_offset"] >= committed else None
    c.wait_until(caught_up, timeout=20, interval=0.1,
                 what=f"restarted node {old} to replicate the metadata log up to {committed}")
    leader, epoch, answers = c.wait_until(lambda: c.agreed_leader(c.ids), timeout=10,
                                          what="all three nodes to agree on the leader after the rejoin")
    assert (leader, epoch) == (new, new_epoch), \
        f"the rejoining node disrupted the leader (pre-vote should prevent that): {answers}"

    status_out, repl_out = quorum_tool(c, [(old, "--status"), (old, "--replication")])
    status = parse_quorum_status(status_out)
    assert (status["LeaderId"], status["LeaderEpoch"]) == (new, new_epoch), status_out
    assert sorted(status["CurrentVoters"]) == [1, 2, 3], status_out
    rows = {r["NodeId"]: r for r in parse_quorum_replication(repl_out)}
    assert sorted(rows) == [1, 2, 3], repl_out
    assert rows[old]["Status"] == "Follower", repl_out
    assert rows[old]["LogEndOffset"] >= committed, f"node {old} should have caught up to {committed}:\n{repl_out}"
    c.wait_until(topic_on(old), timeout=15, interval=0.25,
                 what=f"the topic created while node {old} was down in its own Metadata")


def test_crashed_broker_restarted_at_once_waits_for_its_old_session(running_cluster):
    """ClusterControlManager.registerBroker: a new incarnation of a broker whose session is still valid is refused
    with DUPLICATE_BROKER_REGISTRATION (another process may hold the node id). A node SIGKILLed and restarted at once
    retries until the controller fences the old session, then registers with a new broker epoch and serves."""
    c = running_cluster
    leader, _, _ = c.agreed_leader()
    wait_brokers(c, c.ids, c.ids)
    victim = next(i for i in c.ids if i != leader)
    t0 = time.monotonic()
    c.kill(victim)
    c.start(victim, wait=False)
    c.wait_serving(victim, timeout=40)
    elapsed = time.monotonic() - t0
    log = c.node(victim).log_text(400)
    restarted = log[log.rfind("=== harness: start #2"):]
    assert "broker registration refused with error 101" in restarted, restarted  # DUPLICATE_BROKER_REGISTRATION
    print(f"node {victim} SIGKILLed and restarted: serving again after {elapsed:.1f} s")
    assert elapsed >= SESSION_TIMEOUT_S - HEARTBEAT_INTERVAL_S - POLL_SLACK_S, \
        f"registered {elapsed:.1f} s after the crash: before its old session could have expired"
    wait_brokers(c, c.ids, c.ids, timeout=20)


def test_full_restart_keeps_every_topic(running_cluster):
    c = running_cluster
    wait_brokers(c, c.ids, c.ids)
    topics = {"keep-three": (3, 3), "keep-one": (1, 1), "keep-five": (5, 2)}
    outs = tool_batch(*[(TOPICS_TOOL, "--bootstrap-server", c.bootstrap, "--create", "--topic", t,
                         "--partitions", str(p), "--replication-factor", str(rf)) for t, (p, rf) in topics.items()])
    for t, o in zip(topics, outs):
        assert f"Created topic {t}." in step_ok(o), o

    def all_complete(ids):
        def check():
            views = describe_topics(c, ids)
            ok = all(complete(v, t, p) for v in views.values() for t, (p, _) in topics.items())
            return views if ok else None
        return check
    before = c.wait_until(all_complete([1]), timeout=60, interval=0.5, what="the three topics")[1]

    codes = c.stop_all()
    assert codes == {1: 0, 2: 0, 3: 0}, f"exit codes after SIGTERM to all three: {codes}\n{c.logs(80)}"
    c.start_all()
    c.wait_until(c.agreed_leader, timeout=20, what="a leader after the full restart")
    after = c.wait_until(all_complete(c.ids), timeout=90, interval=0.5,
                         what="every topic led again on every node after the restart")
    for i, view in after.items():
        assert sorted(view) == sorted(before), f"node {i} after the restart: {sorted(view)}, before: {sorted(before)}"
        for t in topics:
            b, a = before[t], view[t]
            assert (a["id"], a["partition_count"], a["rf"]) == (b["id"], b["partition_count"], b["rf"]), (i, t, a, b)
            assert {p: x["replicas"] for p, x in a["partitions"].items()} == \
                {p: x["replicas"] for p, x in b["partitions"].items()}, (i, t, a, b)
            for p, x in a["partitions"].items():
                assert x["leader"] in x["replicas"], (i, t, p, x)


def test_paused_broker_is_fenced_then_unfenced(running_cluster):
    c = running_cluster
    leader, _, _ = c.agreed_leader()
    wait_brokers(c, c.ids, c.ids)
    step_ok(tool_batch((TOPICS_TOOL, "--bootstrap-server", c.bootstrap_of(leader), "--create", "--topic",
                        "fence-topic", "--partitions", "3", "--replication-factor", "3"))[0])
    view = c.wait_until(lambda: (lambda v: v if complete(v, "fence-topic", 3) else None)(
        describe_topics(c, [leader], "fence-topic")[leader]), timeout=60, interval=0.5, what="fence-topic led")
    led = {p: x["leader"] for p, x in view["fence-topic"]["partitions"].items()}
    paused = next((i for i in c.ids if i != leader and i in led.values()), None)
    if paused is None:
        pytest.fail(f"no broker other than the controller {leader} leads a partition of fence-topic: {led}")
    moved = [p for p, l in led.items() if l == paused]
    live = [i for i in c.ids if i != paused]

    c.pause(paused)
    t0 = time.monotonic()

    def fenced():
        md = c.rdkafka_metadata(leader, topic="fence-topic")
        if paused in md.brokers:
            return None
        leaders = {p: md.topics["fence-topic"].partitions[p].leader for p in moved}
        if any(l in (paused, -1) for l in leaders.values()):
            return None
        return sorted(md.brokers), leaders
    brokers, new_leaders = c.wait_until(fenced, timeout=30, interval=0.25,
                                        what=f"broker {paused} fenced and partitions {moved} led elsewhere")
    elapsed = time.monotonic() - t0
    print(f"paused broker {paused}: fenced, partitions {moved} moved to {new_leaders}, {elapsed:.2f} s after SIGSTOP")
    assert FENCE_MIN_S <= elapsed <= FENCE_MAX_S, \
        f"fenced {elapsed:.2f} s after SIGSTOP; expected between {FENCE_MIN_S} and {FENCE_MAX_S} s"
    assert brokers == live, brokers
    assert c.node(paused).alive(), "the paused process must still exist"

    for i, v in describe_topics(c, live, "fence-topic").items():
        parts = v["fence-topic"]["partitions"]
        for p in moved:
            assert parts[p]["leader"] in live, f"node {i}: partition {p} {parts[p]}"
            assert parts[p]["leader"] in parts[p]["replicas"], f"node {i}: partition {p} {parts[p]}"

    c.resume(paused)
    t1 = time.monotonic()
    c.wait_until(lambda: paused in c.rdkafka_metadata(leader).brokers, timeout=30, interval=0.25,
                 what=f"broker {paused} unfenced in the leader's Metadata")
    elapsed = time.monotonic() - t1
    print(f"resumed broker {paused}: a live broker again {elapsed:.2f} s after SIGCONT")
    assert elapsed <= UNFENCE_LIMIT_S + POLL_SLACK_S, \
        f"unfenced {elapsed:.2f} s after SIGCONT (limit {UNFENCE_LIMIT_S} s + {POLL_SLACK_S} s slack)"
    wait_brokers(c, c.ids, c.ids, timeout=15)


def test_produce_consume_through_the_cluster(running_cluster):
    c = running_cluster
    wait_brokers(c, c.ids, c.ids)
    topic = "cluster-data"
    create_topic(c.bootstrap, topic, partitions=3)  # replication factor 1: replication is not built yet

    def led_everywhere():
        leaders = {}
        for i in c.ids:
            t = c.rdkafka_metadata(i, topic=topic).topics[topic]
            if t.error is not None or sorted(t.partitions) != [0, 1, 2] or \
                    any(p.leader < 0 for p in t.partitions.values()):
                return None
            leaders[i] = {p: x.leader for p, x in t.partitions.items()}
        return leaders if len({tuple(sorted(v.items())) for v in leaders.values()}) == 1 else None
    leaders = c.wait_until(led_everywhere, timeout=20, interval=0.25, what=f"{topic} led, same view on every node")
    by_partition = leaders[1]
    print(f"{topic} partition leaders: {by_partition}")
    assert len(set(by_partition.values())) >= 2, f"Kafka spreads partitions over the brokers: {by_partition}"

    records = [(f"key-{i}", f"value-{i}") for i in range(30)]
    produced = rdkafka_produce(c.bootstrap, topic, records, timeout=30, acks=1)
    for p in range(3):
        offsets = sorted(o for part, o, _, _ in produced if part == p)
        assert offsets == list(range(len(offsets))), f"partition {p} offsets {offsets}"
    consumed = rdkafka_consume(c.bootstrap_of(1), topic, {0: 0, 1: 0, 2: 0}, count=len(records), timeout=30)
    assert sorted(consumed) == sorted(produced), (consumed, produced)


def test_java_idempotent_producer_through_a_follower(running_cluster):
    """Apache Kafka's Java producer at its defaults (acks=all, enable.idempotence=true) bootstrapped from a node
    that is not the active controller: its InitProducerId needs a producer-id block, which that node gets from
    the controller with a forwarded AllocateProducerIds."""
    c = running_cluster
    wait_brokers(c, c.ids, c.ids)
    leader = c.agreed_leader()
    follower = next(i for i in c.ids if i != leader)
    topic = "cluster-java"
    # Replication factor 1 (replication is not built yet), so min.insync.replicas 1 for acks=all.
    create_topic(c.bootstrap_of(follower), topic, partitions=2, config={"min.insync.replicas": "1"})
    c.wait_until(lambda: all(c.rdkafka_metadata(i, topic=topic).topics[topic].error is None and
                             len(c.rdkafka_metadata(i, topic=topic).topics[topic].partitions) == 2 for i in c.ids),
                 timeout=20, interval=0.25, what=f"{topic} on every node")
    _, produced = java_json("mala.it.Produce", "--bootstrap", c.bootstrap_of(follower), "--topic", topic,
                            "--count", 50, "--key-prefix", "k", "--key-count", 10)
    assert len(produced) == 50
    consumed = rdkafka_consume(c.bootstrap, topic, {0: 0, 1: 0}, count=50, timeout=30)
    assert sorted((p, o) for p, o, _, _ in consumed) == sorted((r["partition"], r["offset"]) for r in produced)


def test_metadata_snapshots_written_loaded_and_fetched(tmp_path):
    """KIP-630: with a small metadata.log.max.record.bytes.between.snapshots every node writes snapshots of its
    metadata (Kafka's <offset>-<epoch>.checkpoint files in __cluster_metadata-0) and, with segments rolled
    every 200 ms, drops the segments they cover; a node that was down while that happened is behind the
    leader's log start, gets the leader's snapshot with FetchSnapshot and installs it; a restarted node loads
    its own snapshot. Every node then shows every topic."""
    from cluster import own_cluster

    with own_cluster(tmp_path, extra_config={"metadata.log.max.record.bytes.between.snapshots": 2000,
                                             "metadata.log.segment.ms": 200}) as c:
        c.start_all()
        c.wait_until(c.agreed_leader, timeout=20, what="a quorum leader")
        wait_brokers(c, c.ids, c.ids)
        leader = c.agreed_leader()
        lagging = next(i for i in c.ids if i != leader)
        c.kill(lagging)
        survivors = [i for i in c.ids if i != lagging]
        names = [f"snap-{k}" for k in range(12)]
        for name in names:
            create_topic_retrying(c.bootstrap_of(*survivors), name, partitions=4, replication_factor=1)
            time.sleep(0.25)  # lets segments roll between the writes

        def snapshots(i):
            part = c.node(i).log_dir / "__cluster_metadata-0"
            return sorted(p.name for p in part.glob("*.checkpoint"))

        def log_start_moved(i):
            part = c.node(i).log_dir / "__cluster_metadata-0"
            return min(int(p.name.split(".")[0]) for p in part.glob("*.log")) > 0

        for i in survivors:
            c.wait_until(lambda: snapshots(i) and log_start_moved(i), timeout=20, interval=0.25,
                         what=f"node {i} wrote a snapshot and dropped the segments it covers")
            assert re.fullmatch(r"\d{20}-\d{10}\.checkpoint", snapshots(i)[-1]), snapshots(i)

        c.start(lagging)

        def sees_all(i):
            t = c.rdkafka_metadata(i).topics
            return all(n in t and t[n].error is None and len(t[n].partitions) == 4 for n in names)
        c.wait_until(lambda: sees_all(lagging), timeout=30, interval=0.5,
                     what=f"node {lagging} knows every topic after catching up")
        assert "installed snapshot" in c.node(lagging).log_text(tail_lines=2000), \
            "the lagging node should have caught up with FetchSnapshot"

        # A restart loads the node's own snapshot, then the records after it.
        c.stop(survivors[0])
        c.start(survivors[0])
        c.wait_until(lambda: sees_all(survivors[0]), timeout=30, interval=0.5,
                     what=f"node {survivors[0]} knows every topic after a restart")
        assert "metadata loaded from snapshot" in c.node(survivors[0]).log_text(tail_lines=2000)


def test_replication_factor_3_acks_all_through_follower_fetchers(running_cluster):
    """Follower fetchers (Kafka's ReplicaFetcherThread): with replication factor 3 and min.insync.replicas 2 an
    acks=all produce completes only once followers fetched the records and the leader's high watermark moved; every
    record is then readable through each node, and every replica ends with the same log."""
    from confluent_kafka import KafkaError, KafkaException
    from confluent_kafka.admin import AdminClient, NewTopic

    c = running_cluster
    wait_brokers(c, c.ids, c.ids)
    topic = "cluster-rf3"
    partitions = 3

    def created():
        admin = AdminClient({"bootstrap.servers": c.bootstrap, "socket.timeout.ms": 5000, "log_level": 2})
        futures = admin.create_topics([NewTopic(topic, num_partitions=partitions, replication_factor=3,
                                                config={"min.insync.replicas": "2"})],
                                      request_timeout=5, operation_timeout=5)
        try:
            futures[topic].result(timeout=10)
            return True
        except KafkaException as e:
            err = e.args[0]
            if err.code() == KafkaError.TOPIC_ALREADY_EXISTS:  # an earlier attempt created it
                return True
            print(f"CreateTopics {topic}: {err}")
            return None
    c.wait_until(created, timeout=20, interval=0.5, what=f"CreateTopics {topic} RF 3")

    def replicated_everywhere():
        for i in c.ids:
            t = c.rdkafka_metadata(i, topic=topic).topics[topic]
            if t.error is not None or sorted(t.partitions) != list(range(partitions)):
                return None
            if any(p.leader < 0 or sorted(p.replicas) != sorted(c.ids) for p in t.partitions.values()):
                return None
        return True
    c.wait_until(replicated_everywhere, timeout=20, interval=0.25, what=f"{topic} led with 3 replicas everywhere")

    records = [(f"key-{i % 17}", f"value-{i}") for i in range(200)]
    started = time.monotonic()
    produced = rdkafka_produce(c.bootstrap, topic, records, timeout=60, acks="all")
    print(f"200 acks=all records acknowledged in {time.monotonic() - started:.2f} s")
    assert all(r is not None for r in produced)
    for p in range(partitions):
        offsets = sorted(o for part, o, _, _ in produced if part == p)
        assert offsets == list(range(len(offsets))), f"partition {p} offsets {offsets}"

    for i in c.ids:
        consumed = rdkafka_consume(c.bootstrap_of(i), topic, {p: 0 for p in range(partitions)},
                                   count=len(records), timeout=30)
        assert sorted(consumed) == sorted(produced), f"through node {i}"

    def logs_of(i):
        out = {}
        for p in range(partitions):
            d = c.node(i).log_dir / f"{topic}-{p}"
            out[p] = sorted((f.name, f.stat().st_size) for f in d.glob("*.log")) if d.is_dir() else None
        return out

    def same_logs():
        views = {i: logs_of(i) for i in c.ids}
        first = views[c.ids[0]]
        if any(v is None or not v or all(size == 0 for _, size in v) for v in first.values()):
            return None
        return views if all(v == first for v in views.values()) else None
    views = c.wait_until(same_logs, timeout=10, interval=0.25, what=f"{topic} replicas with the same logs")
    print(f"{topic} segments on every node: {views[c.ids[0]]}")


def test_broker_only_node_observes_the_quorum(tmp_path):
    """A fourth node with process.roles [broker] is no voter: it follows the metadata log as a Raft observer
    (DescribeQuorum lists it among the observers), registers and heartbeats with the active controller,
    serves Metadata, and forwards CreateTopics to the active controller."""
    from cluster import own_cluster

    with own_cluster(tmp_path, size=4, broker_only=(4,)) as c:
        c.start_all()
        c.wait_until(lambda: c.agreed_leader(ids=[1, 2, 3]), timeout=20, what="a leader of the three voters")
        wait_brokers(c, [1, 4], [1, 2, 3, 4], timeout=30)
        leader = c.agreed_leader(ids=[1, 2, 3])[0]

        def observer_listed():
            q = c.describe_quorum(leader)
            return q if 4 in q["observers"] else None
        q = c.wait_until(observer_listed, timeout=20, interval=0.25, what="node 4 among the quorum's observers")
        assert set(q["voters"]) == {1, 2, 3}, q
        # The broker-only node answers DescribeQuorum too (forwarded to the active controller).
        assert c.describe_quorum(4)["leader_id"] == leader

        create_topic_retrying(c.bootstrap_of(4), "through-broker-only", partitions=2, replication_factor=1)
        c.wait_until(lambda: "through-broker-only" in c.rdkafka_metadata(4).topics and
                     "through-broker-only" in c.rdkafka_metadata(1).topics,
                     timeout=20, interval=0.25, what="the topic on the broker-only node and a voter")


# KIP-853: node 1 and 3 are formatted with directory ids, node 2 without one (the zero uuid).
DYNAMIC_DIRECTORY_IDS = {1: "4RspKMKtQmuz0jTYBfO7Bg", 3: "Cvw4bKKMTE2y4ElMCkK2UQ"}
INITIAL_CONTROLLERS = ",".join(
    f"{i}@127.0.0.1:{{{i}}}" + (f":{DYNAMIC_DIRECTORY_IDS[i]}" if i in DYNAMIC_DIRECTORY_IDS else "")
    for i in (1, 2, 3))


def test_dynamic_quorum_from_bootstrap_servers(tmp_path):
    """KIP-853: no node has controller.quorum.voters. The three controllers are started with
    --initial-controllers (kafka-storage format's option), which writes the voter set into the bootstrap
    checkpoint of their metadata logs; every node, including a broker-only fourth one, has only
    controller.quorum.bootstrap.servers. The voters elect a leader, the broker-only node finds it through a
    bootstrap server (the Fetch answer's NodeEndpoints), registers and forwards CreateTopics, kafka-metadata-quorum
    shows the voter set with its endpoints and directory ids, a SIGKILLed leader is replaced, and a voter restarted
    without the option reads its voter set back from its log."""
    from cluster import own_cluster

    # Small snapshot intervals: the voter set must survive in later snapshots once the bootstrap checkpoint is
    # pruned.
    with own_cluster(tmp_path, size=4, broker_only=(4,), initial_controllers=INITIAL_CONTROLLERS,
                     extra_config={"metadata.log.max.record.bytes.between.snapshots": 2000,
                                   "metadata.log.segment.ms": 200}) as c:
        c.start_all()
        leader, epoch, _ = c.wait_until(lambda: c.agreed_leader(ids=[1, 2, 3]), timeout=20,
                                        what="a leader of the three voters")
        for i in (1, 2, 3):
            text = c.node(i).config_path.read_text()
            assert "controller.quorum.voters" not in text and "controller.quorum.bootstrap.servers" in text, text
            assert "KIP-853 quorum: voters 1,2,3 from the metadata log" in c.node(i).log_text(400)
        wait_brokers(c, [1, 4], [1, 2, 3, 4], timeout=40)

        def observer_listed():
            q = c.describe_quorum(leader)
            return q if 4 in q["observers"] else None
        q = c.wait_until(observer_listed, timeout=20, interval=0.25, what="node 4 among the quorum's observers")
        assert set(q["voters"]) == {1, 2, 3}, q

        status_out, repl_out = quorum_tool(c, [(4, "--status"), (1, "--replication")])
        status = parse_quorum_status(status_out)
        assert (status["LeaderId"], status["LeaderEpoch"]) == (leader, epoch), status_out
        assert {v: e for v, e in status["CurrentVoters"].items()} == {
            i: [f"CONTROLLER://127.0.0.1:{c.node(i).controller_port}"] for i in (1, 2, 3)}, status_out
        assert 4 in status["CurrentObservers"], status_out
        rows = {r["NodeId"]: r for r in parse_quorum_replication(repl_out)}
        assert rows[1]["DirectoryId"] == DYNAMIC_DIRECTORY_IDS[1], repl_out
        assert rows[3]["DirectoryId"] == DYNAMIC_DIRECTORY_IDS[3], repl_out
        assert rows[2]["DirectoryId"] == "AAAAAAAAAAAAAAAAAAAAAA", repl_out
        assert rows[4]["Status"] == "Observer", repl_out

        create_topic_retrying(c.bootstrap_of(4), "dynamic-one", partitions=2, replication_factor=3)
        c.wait_until(lambda: "dynamic-one" in c.rdkafka_metadata(1).topics, timeout=20, interval=0.25,
                     what="the topic created through the broker-only node on node 1")

        def snapshots(i):
            return sorted(p.name for p in (c.node(i).log_dir / "__cluster_metadata-0").glob("*.checkpoint"))
        for k in range(6):
            create_topic_retrying(c.bootstrap_of(1), f"dynamic-more-{k}", partitions=4, replication_factor=1)
        c.wait_until(lambda: snapshots(leader) and snapshots(leader)[0] != "00000000000000000000-0000000000.checkpoint",
                     timeout=30, interval=0.25, what=f"node {leader} to write snapshots past the bootstrap checkpoint")

        # The leader dies: the other two voters elect a new one and the broker-only node follows it.
        survivors = [i for i in (1, 2, 3) if i != leader]
        c.kill(leader)
        c.wait_until(lambda: c.quorum_leader(ids=survivors, min_epoch=epoch + 1, exclude={leader}), timeout=20,
                     interval=0.1, what=f"a new leader among {survivors}")
        create_topic_retrying(c.bootstrap_of(4), "dynamic-two", partitions=1, replication_factor=2, timeout=30)

        # Restarted without --initial-controllers: the voter set comes from its own log.
        c.node(leader).extra_args = []
        c.start(leader, wait=False)
        c.wait_serving(leader, timeout=40)
        new_leader, _, _ = c.wait_until(lambda: c.agreed_leader(ids=[1, 2, 3]), timeout=30,
                                        what="the three voters to agree again")
        assert "KIP-853 quorum: voters 1,2,3 from the metadata log" in c.node(leader).log_text(100)
        c.wait_until(lambda: c.describe_quorum(new_leader)["voters"].get(leader, {}).get("last_fetch", -1) > 0,
                     timeout=20, interval=0.25, what=f"node {leader} fetching as a voter again")
        c.wait_until(lambda: "dynamic-two" in c.rdkafka_metadata(leader).topics, timeout=20, interval=0.25,
                     what=f"the topic created while node {leader} was down in its Metadata")


def test_standalone_controller_and_a_broker_from_bootstrap_servers(tmp_path):
    """KIP-853 with one voter: node 1 (broker + controller) started with --standalone (kafka-storage format
    --standalone) is the whole quorum, with the directory id of its metadata log dir; node 2, broker only, knows
    nothing but controller.quorum.bootstrap.servers. Both serve clients: a topic spread over both is written and
    read back."""
    from cluster import own_cluster

    with own_cluster(tmp_path, size=2, broker_only=(2,), initial_controllers="1@127.0.0.1:{1}",
                     extra_config={"min.insync.replicas": 1, "offsets.topic.replication.factor": 2,
                                   "default.replication.factor": 2}) as c:
        c.node(1).extra_args = ["--standalone"]
        c.start_all()
        c.wait_until(lambda: c.agreed_leader(ids=[1, 2]), timeout=20, what="node 1 leading, seen by both nodes")
        wait_brokers(c, [1, 2], [1, 2], timeout=30)
        q = c.wait_until(lambda: (lambda q: q if 2 in q["observers"] else None)(c.describe_quorum(1)), timeout=20,
                         interval=0.25, what="node 2 among the observers")
        assert (q["leader_id"], set(q["voters"])) == (1, {1}), q

        meta = (c.node(1).log_dir / "meta.properties").read_text()
        directory_id = re.search(r"^directory\.id=(\S+)$", meta, re.M)[1]
        status_out, repl_out = quorum_tool(c, [(2, "--status"), (2, "--replication")])
        status = parse_quorum_status(status_out)
        assert status["CurrentVoters"] == {1: [f"CONTROLLER://127.0.0.1:{c.node(1).controller_port}"]}, status_out
        rows = {r["NodeId"]: r for r in parse_quorum_replication(repl_out)}
        assert rows[1]["DirectoryId"] == directory_id and rows[1]["Status"] == "Leader", repl_out
        assert rows[2]["Status"] == "Observer", repl_out

        topic = "standalone-data"
        create_topic_retrying(c.bootstrap_of(2), topic, partitions=2, replication_factor=2)
        records = [(f"key-{i}", f"value-{i}") for i in range(20)]
        produced = rdkafka_produce(c.bootstrap_of(2), topic, records, timeout=30, acks="all")
        consumed = rdkafka_consume(c.bootstrap_of(1), topic, {0: 0, 1: 0}, count=len(records), timeout=30)
        assert sorted(consumed) == sorted(produced), (consumed, produced)


def test_a_voter_restarted_on_another_controller_port_updates_its_entry(tmp_path):
    """KIP-853 (KafkaRaftClient.pollFollowerAsVoter): a voter of a dynamic quorum restarted with its CONTROLLER
    listener on another port finds its entry in the voter set stale once it follows the leader, and sends
    UpdateRaftVoter; the leader writes the new endpoint into the voter set, which kafka-metadata-quorum shows on
    every node, and the quorum goes on (a topic is created, the voter still counts)."""
    from cluster import own_cluster
    from conftest import free_port

    with own_cluster(tmp_path, size=3, initial_controllers=INITIAL_CONTROLLERS) as c:
        c.start_all()
        leader, _, _ = c.wait_until(lambda: c.agreed_leader(ids=[1, 2, 3]), timeout=30,
                                    what="a leader of the three voters")
        victim = 3 if leader != 3 else 1  # a voter formatted with a directory id
        n = c.node(victim)
        c.stop(victim)
        old_port, n.controller_port = n.controller_port, free_port()
        n.config["listeners"] = [f"PLAINTEXT://127.0.0.1:{n.port}", f"CONTROLLER://127.0.0.1:{n.controller_port}"]
        c.start(victim, wait=False)
        c.wait_serving(victim, timeout=40)

        def updated():
            status = parse_quorum_status(quorum_tool(c, [(leader, "--status")])[0])
            return status if status["CurrentVoters"].get(victim) == [
                f"CONTROLLER://127.0.0.1:{n.controller_port}"] else None
        status = c.wait_until(updated, timeout=60, interval=2, what=f"voter {victim}'s new endpoint in the set")
        print(f"voter {victim} moved from controller port {old_port} to {n.controller_port}: {status}")
        other = next(i for i in (1, 2, 3) if i not in (leader, victim))
        assert parse_quorum_status(quorum_tool(c, [(other, "--status")])[0])["CurrentVoters"][victim] == [
            f"CONTROLLER://127.0.0.1:{n.controller_port}"]
        # The leader down: the moved voter is reachable at its new port and helps elect the next one.
        c.kill(leader)
        c.wait_until(lambda: c.agreed_leader(ids=[victim, other]), timeout=30,
                     what=f"voters {victim} and {other} electing a leader")
        create_topic_retrying(c.bootstrap_of(victim), "after-the-move", partitions=1, replication_factor=2,
                              timeout=30)


def test_kafka_metadata_quorum_adds_and_removes_controllers(tmp_path):
    """KIP-853 voter changes with Kafka's own tool: voters 1-3 formatted with --initial-controllers; node 4, a
    fourth broker + controller started with neither --initial-controllers nor --standalone, observes the quorum.
    `kafka-metadata-quorum add-controller` with node 4's properties (its id, listeners and the directory id of
    its meta.properties, as an operator runs it) makes it a voter: four voters, and it counts toward commits (a
    topic is created with one original voter down). `remove-controller` then removes a dead voter, and the
    three left (node 4 among them) run the quorum alone; node 4 restarted is still a voter."""
    from cluster import own_cluster

    with own_cluster(tmp_path, size=4, initial_controllers=INITIAL_CONTROLLERS) as c:
        c.node(4).extra_args = []  # a new controller: no voter set of its own
        c.start_all()
        leader, _, _ = c.wait_until(lambda: c.agreed_leader(ids=[1, 2, 3]), timeout=30,
                                    what="a leader of the three voters")
        assert "observes until kafka-metadata-quorum add-controller adds it" in c.node(4).log_text(400)
        c.wait_until(lambda: 4 in c.describe_quorum(leader)["observers"] or None, timeout=30, interval=0.25,
                     what="node 4 among the observers")

        n4 = c.node(4)
        meta = (n4.log_dir / "meta.properties").read_text()
        directory_id = re.search(r"^directory\.id=(\S+)$", meta, re.M)[1]
        props = tmp_path / "controller-4.properties"
        props.write_text("\n".join([
            "node.id=4", "process.roles=broker,controller", f"log.dirs={n4.log_dir}",
            "controller.listener.names=CONTROLLER",
            f"listeners=PLAINTEXT://127.0.0.1:{n4.port},CONTROLLER://127.0.0.1:{n4.controller_port}",
            "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT", ""]))
        out = tool_batch((QUORUM_TOOL, "--bootstrap-server", c.bootstrap_of(1), "--command-config", str(props),
                          "add-controller"))
        print(out[0]["stdout"], out[0]["stderr"])
        assert "Added controller 4" in step_ok(out[0])

        def voters_are(expected, via):
            q = c.describe_quorum(via)
            return q if set(q["voters"]) == set(expected) else None
        c.wait_until(lambda: voters_are({1, 2, 3, 4}, leader), timeout=20, interval=0.25, what="four voters")
        c.wait_until(lambda: "the voters are now [1,2,3,4]" in n4.log_text(400), timeout=20, interval=0.25,
                     what="node 4 learning it is a voter")
        status = parse_quorum_status(quorum_tool(c, [(4, "--status")])[0])
        assert set(status["CurrentVoters"]) == {1, 2, 3, 4}, status
        rows = {r["NodeId"]: r for r in parse_quorum_replication(quorum_tool(c, [(1, "--replication")])[0])}
        assert rows[4]["DirectoryId"] == directory_id and rows[4]["Status"] in ("Follower", "Leader"), rows

        # One original voter (not the leader) down: three of four voters, node 4 one of them, still commit.
        down = next(i for i in (1, 2, 3) if i != leader)
        c.kill(down)
        create_topic_retrying(c.bootstrap_of(4), "with-four-voters", partitions=1, replication_factor=2,
                              timeout=30)

        # The dead voter is removed: three voters remain.
        down_directory = DYNAMIC_DIRECTORY_IDS.get(down, "AAAAAAAAAAAAAAAAAAAAAA")
        out = tool_batch((QUORUM_TOOL, "--bootstrap-server", c.bootstrap_of(4), "remove-controller",
                          "--controller-id", str(down), "--controller-directory-id", down_directory))
        print(out[0]["stdout"], out[0]["stderr"])
        assert f"Removed KRaft controller {down} with directory id {down_directory}" in step_ok(out[0])
        remaining = sorted({1, 2, 3, 4} - {down})
        c.wait_until(lambda: voters_are(remaining, leader), timeout=20, interval=0.25,
                     what=f"voters {remaining}")
        # Removing it again, through a controller listener as operators do: VOTER_NOT_FOUND.
        out = tool_batch((QUORUM_TOOL, "--bootstrap-controller", f"127.0.0.1:{n4.controller_port}", "remove-controller",
                          "--controller-id", str(down), "--controller-directory-id", down_directory))
        assert out[0]["exit"] != 0 and "VoterNotFound" in out[0]["stdout"] + out[0]["stderr"], out[0]

        # Node 4 restarted is a voter from its own log; the three voters agree on a leader.
        c.stop(4)
        c.start(4, wait=False)
        c.wait_serving(4, timeout=40)
        c.wait_until(lambda: c.agreed_leader(ids=remaining), timeout=30, what=f"voters {remaining} agreeing")
        assert "KIP-853 quorum: voters" in n4.log_text(200)
        create_topic_retrying(c.bootstrap_of(4), "after-removal", partitions=1, replication_factor=2, timeout=30)

        # The leader removes itself: it resigns once the change commits, the other two elect a leader, and it
        # carries on as an observer (and a broker).
        leader, _, _ = c.agreed_leader(ids=remaining)
        leader_directory = directory_id if leader == 4 else DYNAMIC_DIRECTORY_IDS.get(leader, "AAAAAAAAAAAAAAAAAAAAAA")
        out = tool_batch((QUORUM_TOOL, "--bootstrap-server", c.bootstrap_of(leader), "remove-controller",
                          "--controller-id", str(leader), "--controller-directory-id", leader_directory))
        print(out[0]["stdout"], out[0]["stderr"])
        assert f"Removed KRaft controller {leader}" in step_ok(out[0])
        last_two = [i for i in remaining if i != leader]
        new_leader, _, _ = c.wait_until(lambda: c.agreed_leader(ids=last_two), timeout=30,
                                        what=f"voters {last_two} electing a leader")
        assert new_leader != leader
        c.wait_until(lambda: leader in c.describe_quorum(new_leader)["observers"] or None, timeout=30,
                     interval=0.25, what=f"node {leader} observing")
        create_topic_retrying(c.bootstrap_of(leader), "after-leader-removal", partitions=1, replication_factor=2,
                              timeout=30)


def test_kafka_features_upgrades_a_static_quorum_to_kraft_version_1(tmp_path):
    """KIP-853's upgrade of a static quorum (Kafka 4.1+): three voters from controller.quorum.voters run at
    kraft.version 0, each sending UpdateRaftVoter (its directory id and listener) to the leader.
    `kafka-features upgrade --feature kraft.version=1` makes the leader append the voter set; every node's
    ApiVersions then finalizes kraft.version 1, `kafka-metadata-quorum describe` shows each voter's directory id,
    and voter changes work: a voter is removed with remove-controller and added back with add-controller. A restart
    of every node, with controller.quorum.voters still in their configs, keeps the voter set of the log."""
    import kafka_wire
    from cluster import own_cluster

    features_tool = "org.apache.kafka.tools.FeatureCommand"  # kafka-features.sh
    with own_cluster(tmp_path, size=3) as c:
        c.start_all()
        leader, _, _ = c.wait_until(lambda: c.agreed_leader(ids=[1, 2, 3]), timeout=30, what="a leader")

        def kraft_versions():
            return {i: kafka_wire.api_versions_features(c.nodes[i].port)[1].get("kraft.version", 0)
                    for i in c.running_ids()}
        assert set(kraft_versions().values()) == {0}, kraft_versions()
        directory_ids = {i: re.search(r"^directory\.id=(\S+)$", (c.node(i).log_dir / "meta.properties").read_text(),
                                      re.M)[1] for i in (1, 2, 3)}

        # The upgrade succeeds once every voter has reported to this epoch's leader (a voter's first check comes
        # 3 fetch timeouts after it started following); until then it is refused with INVALID_UPDATE_VERSION.
        attempts = []

        def upgraded():
            out = tool_batch((features_tool, "--bootstrap-server", c.bootstrap_of(1), "upgrade", "--feature",
                              "kraft.version=1"))[0]
            attempts.append(out["stdout"] + out["stderr"])
            return out if out["exit"] == 0 else None
        out = c.wait_until(upgraded, timeout=60, interval=2, what="kafka-features upgrading kraft.version to 1")
        print("kafka-features attempts:", attempts)
        assert "kraft.version was upgraded to 1" in out["stdout"], out
        assert all("Could not upgrade kraft.version to 1" in a and "has not sent UpdateRaftVoter" in a
                   for a in attempts[:-1]), attempts
        c.wait_until(lambda: set(kraft_versions().values()) == {1} or None, timeout=20, interval=0.5,
                     what="every node finalizing kraft.version 1")
        rows = {r["NodeId"]: r for r in parse_quorum_replication(quorum_tool(c, [(2, "--replication")])[0])}
        assert {i: rows[i]["DirectoryId"] for i in (1, 2, 3)} == directory_ids, rows
        status = parse_quorum_status(quorum_tool(c, [(3, "--status")])[0])
        assert {i: status["CurrentVoters"][i] for i in (1, 2, 3)} == {
            i: [f"CONTROLLER://127.0.0.1:{c.node(i).controller_port}"] for i in (1, 2, 3)}, status

        # A voter that does not lead is removed, observes, and is added back.
        leader, _, _ = c.agreed_leader(ids=[1, 2, 3])
        victim = 3 if leader != 3 else 2
        out = tool_batch((QUORUM_TOOL, "--bootstrap-server", c.bootstrap_of(1), "remove-controller",
                          "--controller-id", str(victim), "--controller-directory-id", directory_ids[victim]))
        assert f"Removed KRaft controller {victim}" in step_ok(out[0]), out
        c.wait_until(lambda: victim in c.describe_quorum(leader)["observers"] or None, timeout=30, interval=0.25,
                     what=f"node {victim} observing")
        n = c.node(victim)
        props = tmp_path / f"controller-{victim}.properties"
        props.write_text("\n".join([
            f"node.id={victim}", "process.roles=broker,controller", f"log.dirs={n.log_dir}",
            "controller.listener.names=CONTROLLER",
            f"listeners=PLAINTEXT://127.0.0.1:{n.port},CONTROLLER://127.0.0.1:{n.controller_port}",
            "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT", ""]))
        out = tool_batch((QUORUM_TOOL, "--bootstrap-server", c.bootstrap_of(1), "--command-config", str(props),
                          "add-controller"))
        assert f"Added controller {victim}" in step_ok(out[0]), out
        c.wait_until(lambda: set(c.describe_quorum(leader)["voters"]) == {1, 2, 3} or None, timeout=20,
                     interval=0.25, what="three voters again")

        # Every node restarted: the voter set comes from the log, kraft.version stays 1, the quorum commits.
        for i in (1, 2, 3):
            c.stop(i)
        for i in (1, 2, 3):
            c.start(i, wait=False)
        for i in (1, 2, 3):
            c.wait_serving(i, timeout=40)
        c.wait_until(lambda: c.agreed_leader(ids=[1, 2, 3]), timeout=30, what="a leader after the restart")
        c.wait_until(lambda: set(kraft_versions().values()) == {1} or None, timeout=20, interval=0.5,
                     what="kraft.version 1 after the restart")
        rows = {r["NodeId"]: r for r in parse_quorum_replication(quorum_tool(c, [(1, "--replication")])[0])}
        assert {i: rows[i]["DirectoryId"] for i in (1, 2, 3)} == directory_ids, rows
        create_topic_retrying(c.bootstrap_of(victim), "after-the-upgrade", partitions=1, replication_factor=3,
                              timeout=30)
