"""A full disk turns the partition offline with an error to producers, never a crash or a half-written batch served
(issue 4).

Two ways to fill a disk: the node runs with RLIMIT_FSIZE (what `prlimit --fsize` sets), so a segment growing past
the limit gets EFBIG from write(2) (mala ignores SIGXFSZ), as a full disk gives ENOSPC; and, where the test may mount
(root outside a restricted container), one log dir is a tiny tmpfs that really fills up (ENOSPC; memory-mapped index
pages on a full tmpfs are where a careless broker dies of SIGBUS). Two log dirs: the topic filling its segment sits
in one, another topic in the other. librdkafka produces until deliveries fail; then:
- the failed deliveries carry KAFKA_STORAGE_ERROR (56); a raw Produce and a raw Fetch to the partition answer 56;
- the node is alive, Metadata lists the replica as offline and the partition without a leader
  (LEADER_NOT_AVAILABLE), and the topic in the other dir still takes and serves records;
- restarted (without the limit; the tmpfs stays full) the failed dir is recovered, since it got no clean-shutdown
  marker, and the partition holds exactly the acknowledged records, at their offsets, and nothing else.
"""

import resource
import struct
import subprocess
import time

import pytest

from conftest import MALA_BIN, MalaNode
from kafka_wire import Connection, frame, nullable_string, request_header_v1
from real_clients import create_topic, rdkafka_consume, rdkafka_produce

FSIZE_LIMIT = 12 * 1024 * 1024  # above the metadata log's 10 MiB preallocated index, below the data written
TMPFS_SIZE = 8 * 1024 * 1024
VALUE_SIZE = 8 * 1024

KAFKA_STORAGE_ERROR = 56
LEADER_NOT_AVAILABLE = 5
PRODUCE = 0
FETCH = 1
METADATA = 3


class FsizeLimitedNode(MalaNode):
    """A MalaNode whose process runs with RLIMIT_FSIZE = fsize_limit bytes (None: no limit)."""

    fsize_limit = None

    def launch(self, extra_args=()):
        if not MALA_BIN.exists():
            pytest.fail(f"mala binary not found at {MALA_BIN} (build it, or set MALA_BIN)")
        self.write_config()
        self._stderr_file = open(self.stderr_path, "ab")
        limit = self.fsize_limit

        def apply_limit():
            if limit is not None:
                resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

        # subprocess restores SIGXFSZ to its default action (terminate) in the child: mala must ignore it itself.
        self.proc = subprocess.Popen(
            [str(MALA_BIN), "--config", str(self.config_path), *extra_args],
            stdin=subprocess.DEVNULL, stdout=self._stderr_file, stderr=self._stderr_file, cwd=self.work_dir,
            preexec_fn=apply_limit)
        self.exit_checked = False
        return self


@pytest.fixture
def tiny_tmpfs(tmp_path):
    """A TMPFS_SIZE tmpfs mounted at tmp_path/dir-b; skips the test where mounting is not allowed."""
    mount_point = tmp_path / "dir-b"
    mount_point.mkdir()
    result = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={TMPFS_SIZE}", "tmpfs", str(mount_point)],
                            capture_output=True, text=True, timeout=30)
    if result.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {result.stderr.strip()}")
    yield mount_point
    # Lazy: the node may still hold files open if the test failed before stopping it.
    subprocess.run(["umount", "-l", str(mount_point)], capture_output=True, timeout=30)


@pytest.fixture
def limited_node(request, tmp_path):
    """One FsizeLimitedNode with log dirs tmp_path/dir-a and tmp_path/dir-b; at teardown it must stop on SIGTERM
    with exit code 0."""
    node = FsizeLimitedNode(tmp_path, name="disk", extra_config={
        "log.dirs": f"{tmp_path / 'dir-a'},{tmp_path / 'dir-b'}",
        "log.index.size.max.bytes": 1024 * 1024,
    })
    yield node
    was_running = node.alive()
    code = node.stop()
    node.close_log()
    failed = getattr(getattr(request.node, "rep_call", None), "failed", False)
    if failed or (was_running and code != 0):
        print(node.log_text())
    if was_running and code != 0:
        pytest.fail(f"exit code {code} after SIGTERM (expected 0)\n{node.log_text(50)}")


# --- Raw requests: what the broker answers for the partition itself, whatever a client's metadata says --------

def crc32c(data: bytes) -> int:
    crc = 0xFFFFFFFF
    for b in data:
        crc ^= b
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 & -(crc & 1))
    return crc ^ 0xFFFFFFFF


def zigzag_varint(n: int) -> bytes:
    n = (n << 1) ^ (n >> 63)
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def record_batch(value: bytes, timestamp_ms: int) -> bytes:
    """One v2 batch holding one record without key or headers."""
    body = b"\x00" + zigzag_varint(0) + zigzag_varint(0) + zigzag_varint(-1) + zigzag_varint(len(value)) + value
    body += zigzag_varint(0)
    record = zigzag_varint(len(body)) + body
    after_crc = struct.pack(">hiqqqhii", 0, 0, timestamp_ms, timestamp_ms, -1, -1, -1, 1) + record
    head = struct.pack(">ib", -1, 2) + struct.pack(">I", crc32c(after_crc))  # leader epoch, magic, crc
    batch_length = len(head) + len(after_crc)
    return struct.pack(">qi", 0, batch_length) + head + after_crc


def round_trip(port: int, api_key: int, version: int, body: bytes, correlation_id: int) -> bytes:
    with Connection(port, timeout=10) as conn:
        assert conn.send(frame(request_header_v1(api_key, version, correlation_id) + body))
        payload = conn.recv_frame()
        assert payload is not None, "connection closed without a response"
        (corr,) = struct.unpack_from(">i", payload, 0)
        assert corr == correlation_id
        return payload[4:]


def raw_produce_error(port: int, topic: str, partition: int) -> int:
    """Produce v3 (acks=1) of one record; returns the partition's error code."""
    records = record_batch(b"after the disk filled", int(time.time() * 1000))
    body = nullable_string(None) + struct.pack(">hi", 1, 10000) + struct.pack(">i", 1) + nullable_string(topic)
    body += struct.pack(">i", 1) + struct.pack(">ii", partition, len(records)) + records
    resp = round_trip(port, PRODUCE, 3, body, 11)
    pos = 4  # topics count
    (name_len,) = struct.unpack_from(">h", resp, pos)
    pos += 2 + name_len + 4  # name, partitions count
    _, error = struct.unpack_from(">ih", resp, pos)
    return error


def raw_fetch_error(port: int, topic: str, partition: int) -> int:
    """Fetch v4 (a consumer) from offset 0; returns the partition's error code."""
    body = struct.pack(">iiiib", -1, 0, 1, 1024 * 1024, 0) + struct.pack(">i", 1) + nullable_string(topic)
    body += struct.pack(">i", 1) + struct.pack(">iqi", partition, 0, 1024 * 1024)
    resp = round_trip(port, FETCH, 4, body, 12)
    pos = 4 + 4  # throttle time, topics count
    (name_len,) = struct.unpack_from(">h", resp, pos)
    pos += 2 + name_len + 4
    _, error = struct.unpack_from(">ih", resp, pos)
    return error


def raw_metadata_partition(port: int, topic: str):
    """Metadata v5 for one topic: (error_code, leader_id, replicas, offline_replicas) of its partition 0."""
    body = struct.pack(">i", 1) + nullable_string(topic) + b"\x00"
    resp = round_trip(port, METADATA, 5, body, 13)
    pos = 4  # throttle time
    (brokers,) = struct.unpack_from(">i", resp, pos)
    pos += 4
    for _ in range(brokers):
        pos += 4
        (host_len,) = struct.unpack_from(">h", resp, pos)
        pos += 2 + host_len + 4
        (rack_len,) = struct.unpack_from(">h", resp, pos)
        pos += 2 + max(rack_len, 0)
    (cluster_len,) = struct.unpack_from(">h", resp, pos)
    pos += 2 + max(cluster_len, 0) + 4  # cluster id, controller id
    (topics,) = struct.unpack_from(">i", resp, pos)
    assert topics == 1
    pos += 4 + 2  # topic error code
    (name_len,) = struct.unpack_from(">h", resp, pos)
    pos += 2 + name_len + 1 + 4  # name, is_internal, partitions count

    def int_array():
        nonlocal pos
        (n,) = struct.unpack_from(">i", resp, pos)
        pos += 4
        values = list(struct.unpack_from(f">{n}i", resp, pos))
        pos += 4 * n
        return values

    error, _, leader = struct.unpack_from(">hii", resp, pos)
    pos += 10
    replicas = int_array()
    int_array()  # isr
    offline = int_array()
    return error, leader, replicas, offline


# --- The tests -----------------------------------------------------------------------------------------------

def produce_until_the_disk_is_full(bootstrap: str, topic: str, total_bytes: int):
    """Sends more than total_bytes with librdkafka (no retries, so the broker's error reaches the delivery report).
    Returns ({offset: value} acknowledged, [errors])."""
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "retries": 0,
                         "enable.idempotence": False, "linger.ms": 5, "message.timeout.ms": 5000,
                         "socket.timeout.ms": 10000})
    acked = {}
    errors = []

    def report(err, msg):
        if err is not None:
            errors.append(err)
        else:
            acked[msg.offset()] = msg.value().decode()

    for i in range(total_bytes // VALUE_SIZE + 200):
        value = f"{i:08d}" + "x" * (VALUE_SIZE - 8)
        while True:
            try:
                producer.produce(topic, value=value, partition=0, on_delivery=report)
                break
            except BufferError:
                producer.poll(0.1)
        producer.poll(0)
    remaining = producer.flush(30)
    assert remaining == 0, f"{remaining} records without a delivery report"
    return acked, errors


def check_disk_full(node, filling_dir: str, other_dir: str, limit_bytes: int, restart_limit=None):
    """The scenario of the module docstring; `filling` lives in filling_dir, `elsewhere` in other_dir (the topic
    created first goes to the first dir: both are empty)."""
    from confluent_kafka import KafkaError

    for topic in sorted(["filling", "elsewhere"], key=lambda t: (filling_dir if t == "filling" else other_dir)):
        create_topic(node.bootstrap, topic, partitions=1)
    assert (node.work_dir / filling_dir / "filling-0").is_dir()
    assert (node.work_dir / other_dir / "elsewhere-0").is_dir()

    acked, errors = produce_until_the_disk_is_full(node.bootstrap, "filling", limit_bytes)
    assert errors, "every record was acknowledged: the disk never filled"
    codes = {e.code() for e in errors}
    assert KafkaError.KAFKA_STORAGE_ERROR in codes, f"delivery errors: {sorted(codes)}"
    # Anything else is what a client says about a partition without a leader.
    assert codes <= {KafkaError.KAFKA_STORAGE_ERROR, KafkaError._MSG_TIMED_OUT, KafkaError.LEADER_NOT_AVAILABLE,
                     KafkaError.NOT_LEADER_FOR_PARTITION}, f"delivery errors: {sorted(codes)}"
    assert acked, "nothing was acknowledged before the disk filled"
    assert sorted(acked) == list(range(len(acked))), "acknowledged offsets are not contiguous from 0"
    assert len(acked) * VALUE_SIZE < limit_bytes

    assert node.alive(), f"mala died when the disk filled\n{node.log_text(40)}"
    assert "is offline" in node.full_log()

    # The broker answers for the partition itself: its replica is offline.
    assert raw_produce_error(node.port, "filling", 0) == KAFKA_STORAGE_ERROR
    assert raw_fetch_error(node.port, "filling", 0) == KAFKA_STORAGE_ERROR
    error, leader, replicas, offline = raw_metadata_partition(node.port, "filling")
    assert (error, leader, offline) == (LEADER_NOT_AVAILABLE, -1, [node.node_id]), (error, leader, replicas, offline)

    # The other log dir keeps working.
    produced = rdkafka_produce(node.bootstrap, "elsewhere", [(None, f"still here {i}") for i in range(20)],
                               timeout=30, acks="all")
    assert [o for _, o, _, _ in produced] == list(range(20))
    assert [v for _, _, _, v in rdkafka_consume(node.bootstrap, "elsewhere", {0: 0})] == \
        [f"still here {i}" for i in range(20)]

    # Restart: every acknowledged record is there, at its offset, and nothing else.
    assert node.stop() == 0
    node.close_log()
    node.fsize_limit = restart_limit
    node.start()
    consumed = rdkafka_consume(node.bootstrap, "filling", {0: 0}, timeout=60)
    assert {o: v for _, o, _, v in consumed} == acked
    assert [o for _, o, _, _ in consumed] == sorted(acked)
    return acked


def test_file_size_limit_takes_the_partition_offline_and_loses_nothing_acknowledged(limited_node):
    node = limited_node
    node.fsize_limit = FSIZE_LIMIT
    node.start()
    acked = check_disk_full(node, "dir-a", "dir-b", FSIZE_LIMIT, restart_limit=None)
    # Without the limit the partition takes records again, at the next offset.
    more = rdkafka_produce(node.bootstrap, "filling", [(None, "after restart")], timeout=30, acks="all")
    assert more[0][1] == len(acked)


def test_full_tmpfs_takes_the_partition_offline_and_a_restart_on_the_full_disk_serves_what_was_acknowledged(
        tiny_tmpfs, limited_node):
    node = limited_node
    node.start()
    check_disk_full(node, "dir-b", "dir-a", TMPFS_SIZE)


def test_full_disk_during_cleaning_leaves_the_original_segments_and_cleaning_resumes_once_space_is_back(
        tiny_tmpfs, limited_node):
    """Issue 21: a compacted partition on the tmpfs dir holds several closed segments; the tmpfs is then filled
    (a file takes all but 16 KiB) and the topic switched to compact. The cleaner's rewrite fails (ENOSPC): the node
    stays up, says so in its log, leaves no .cleaned file, and the partition keeps every record it had. Once the
    file is removed, a later round (after log.cleaner.backoff.ms) cleans the log."""
    import os

    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType

    from real_clients import rdkafka_admin, rdkafka_read_to_end, wait_until

    node = limited_node
    node.config.update({"log.cleaner.backoff.ms": 200})
    node.start()
    create_topic(node.bootstrap, "in-dir-a")  # the first topic goes to the first dir
    create_topic(node.bootstrap, "positions", config={"cleanup.policy": "delete", "segment.bytes": 1024 * 1024,
                                                      "min.cleanable.dirty.ratio": "0.01"})
    part = tiny_tmpfs / "positions-0"
    assert part.is_dir()
    value = "p" * 2000
    records = [(f"bus-{i % 20}".encode(), f"{i:06d}{value}".encode()) for i in range(1800)]
    produced = rdkafka_produce(node.bootstrap, "positions", records, timeout=60, acks="all")
    assert len(produced) == len(records)
    assert len(list(part.glob("*.log"))) >= 3
    before = rdkafka_read_to_end(node.bootstrap, "positions")
    assert len(before) == len(records)

    free = os.statvfs(tiny_tmpfs)
    filler = tiny_tmpfs / "filler"
    with open(filler, "wb") as f:
        f.write(b"\0" * max(0, free.f_bavail * free.f_frsize - 16 * 1024))

    admin = rdkafka_admin(node.bootstrap)
    res = ConfigResource(ResourceType.TOPIC, "positions", incremental_configs=[
        ConfigEntry("cleanup.policy", "compact", incremental_operation=AlterConfigOpType.SET)])
    admin.incremental_alter_configs([res], request_timeout=30)[res].result(timeout=30)

    wait_until(lambda: "positions-0: cleaning stopped" in node.full_log(), 60, "the cleaner's failure on the full disk")
    assert node.alive()
    assert "positions-0: cleaned offsets" not in node.full_log()
    assert not list(part.glob("*.cleaned")) and not list(part.glob("*.swap"))
    assert rdkafka_read_to_end(node.bootstrap, "positions") == before

    filler.unlink()
    wait_until(lambda: "positions-0: cleaned offsets" in node.full_log(), 60, "a clean once the disk has room")
    after = rdkafka_read_to_end(node.bootstrap, "positions")
    latest = {}
    for offset, key, v in before:
        latest[key] = (offset, v)
    # Every key's latest record survives (the active segment keeps what it holds as written).
    assert {k: (o, v) for o, k, v in after if latest[k][0] == o} == latest
    assert len(after) < len(before)
