"""Pipelined connections (issue 20): a connection reads and starts the next request while earlier ones are in
flight, answers in request order, keeps Kafka's one-request-at-a-time effects (two Produce requests on one
connection append in request order), and stops reading at queued.max.requests / queued.max.request.bytes.

- Producers that pipeline (librdkafka and the Java producer with max.in.flight.requests.per.connection=5, acks=all,
  not idempotent, no retries) on a 3-node cluster: every record is acknowledged and each partition holds them in
  send order (a reordering of two in-flight Produce requests would show as a sequence going backwards).
- A client that floods one connection with Fetch requests that park (no data, long max_wait_ms) and never reads
  a response: the broker reads only up to the bound and the client's sends block, instead of the broker buffering
  everything; once data arrives every request is answered, in order. The flood is hand-encoded (kafka_wire.py):
  no real client misbehaves this way on purpose.
"""

import socket
import struct
import threading
import time
import uuid

import pytest

import kafka_wire
from cluster import cluster, running_cluster  # noqa: F401 (fixtures)
from real_clients import CONSOLE_PRODUCER, create_topic, java_with_input, rdkafka_consume, rdkafka_produce
from test_replication_failover import create_replicated_topic

PARTITIONS = 3


def produce_pipelined_rdkafka(bootstrap, topic, count):
    """Sends `count` records round-robin over the partitions with librdkafka, five requests in flight per
    connection, small batches so that many Produce requests are in flight; returns {partition: [(offset, seq)]}
    from the delivery reports, in send order per partition."""
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": False,
                         "max.in.flight.requests.per.connection": 5, "retries": 0, "linger.ms": 1,
                         "batch.num.messages": 50, "message.timeout.ms": 60000, "socket.timeout.ms": 10000})
    reports = {p: [] for p in range(PARTITIONS)}
    errors = []

    def report(err, msg):
        if err is not None:
            errors.append(err)
        else:
            reports[msg.partition()].append((msg.offset(), int(msg.value().decode())))

    for seq in range(count):
        while True:
            try:
                producer.produce(topic, value=str(seq).encode(), partition=seq % PARTITIONS, on_delivery=report)
                break
            except BufferError:
                producer.poll(0.05)
        producer.poll(0)
    assert producer.flush(90) == 0, "records left undelivered"
    assert not errors, f"delivery errors: {errors[:5]}"
    return reports


def assert_partitions_in_send_order(records_by_partition, count):
    """Every sequence number once, and increasing along each partition's offsets."""
    seen = 0
    for p, records in records_by_partition.items():
        seqs = [seq for _, seq in sorted(records)]
        assert seqs == sorted(seqs), f"partition {p}: records out of send order (first inversion at " \
            f"{next(i for i in range(1, len(seqs)) if seqs[i] < seqs[i - 1])})"
        seen += len(seqs)
    assert seen == count


def test_pipelined_producers_keep_each_partitions_send_order(running_cluster):
    c = running_cluster
    topic = f"pipeline-{uuid.uuid4().hex[:8]}"
    create_replicated_topic(c, topic, PARTITIONS)

    count = 30000
    reports = produce_pipelined_rdkafka(c.bootstrap, topic, count)
    # The delivery reports: offsets follow send order per partition.
    for p, acked in reports.items():
        offsets = [o for o, _ in acked]
        assert offsets == sorted(offsets), f"partition {p}: later sends acknowledged at lower offsets"
    consumed = rdkafka_consume(c.bootstrap, topic, {p: 0 for p in range(PARTITIONS)})
    by_partition = {p: [] for p in range(PARTITIONS)}
    for p, offset, _, value in consumed:
        by_partition[p].append((offset, int(value)))
    assert_partitions_in_send_order(by_partition, count)

    # The Java producer pipelines too (max.in.flight.requests.per.connection=5, its default), sticky partitioner.
    java_count = 20000
    lines = "".join(f"{count + i}\n" for i in range(java_count))
    result = java_with_input(CONSOLE_PRODUCER, "--bootstrap-server", c.bootstrap, "--topic", topic,
                             "--producer-property", "acks=all", "--producer-property", "enable.idempotence=false",
                             "--producer-property", "max.in.flight.requests.per.connection=5",
                             "--producer-property", "retries=0", "--producer-property", "batch.size=4096",
                             "--producer-property", "linger.ms=1", input_text=lines, timeout=120)
    assert result.returncode == 0, result.stderr
    consumed = rdkafka_consume(c.bootstrap, topic, {p: 0 for p in range(PARTITIONS)})
    by_partition = {p: [] for p in range(PARTITIONS)}
    for p, offset, _, value in consumed:
        by_partition[p].append((offset, int(value)))
    assert_partitions_in_send_order(by_partition, count + java_count)


# --- the bound -----------------------------------------------------------------------------------------------------

def fetch_v4_request(correlation_id, topic, client_id, max_wait_ms, min_bytes=1):
    """A Fetch v4 of partition 0 from offset 0; `client_id` pads the request to the size wanted."""
    header = kafka_wire.request_header_v1(1, 4, correlation_id, client_id)
    topic_bytes = topic.encode()
    body = struct.pack(">iiiib", -1, max_wait_ms, min_bytes, 1024 * 1024, 0)
    body += struct.pack(">i", 1) + struct.pack(">h", len(topic_bytes)) + topic_bytes
    body += struct.pack(">i", 1) + struct.pack(">iqi", 0, 0, 1024 * 1024)
    return kafka_wire.frame(header + body)


def send_until_blocked(sock, data, settle_s=1.5):
    """Writes `data` without blocking until the socket has refused more for `settle_s`; returns bytes written."""
    sock.setblocking(False)
    sent = 0
    blocked_since = None
    deadline = time.monotonic() + 30
    while sent < len(data) and time.monotonic() < deadline:
        try:
            n = sock.send(data[sent:sent + 65536])
            sent += n
            blocked_since = None
        except BlockingIOError:
            blocked_since = blocked_since or time.monotonic()
            if time.monotonic() - blocked_since >= settle_s:
                break
            time.sleep(0.02)
    sock.setblocking(True)
    return sent


@pytest.mark.parametrize("bound", [{"queued.max.requests": 4},
                                   {"queued.max.request.bytes": 100000}],
                         ids=["queued.max.requests", "queued.max.request.bytes"])
def test_a_flooded_connection_stops_being_read_at_the_bound(mala_factory, bound):
    # Small socket buffers on both sides, so that what the kernel holds is small next to the flood.
    node = mala_factory(extra_config={"socket.receive.buffer.bytes": 32768, **bound}).start()
    topic = f"flood-{uuid.uuid4().hex[:8]}"
    create_topic(node.bootstrap, topic)

    request_count = 300
    pad = "x" * 30000  # each Fetch about 30 KB: 9 MB in all
    flood = b"".join(fetch_v4_request(i, topic, pad, max_wait_ms=60000) for i in range(request_count))
    with kafka_wire.Connection(node.port, timeout=30) as conn:
        sock = conn.sock
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 32768)
        sent = send_until_blocked(sock, flood)
        # Parked Fetches hold their place in the pipeline: the broker read up to the bound (a few requests)
        # plus what the kernel buffers, and the client's writes block instead of the broker reading on.
        assert sent < 1_500_000, f"the broker took {sent} of {len(flood)} bytes without answering"
        assert node.alive()

        # A record wakes the parked Fetches; from then on every Fetch is answered at once and the rest of the
        # flood goes in (from a second thread, while this one reads the responses).
        rdkafka_produce(node.bootstrap, topic, [(None, "wake")])
        writer_sock = sock.dup()
        writer_sock.settimeout(60)
        writer = threading.Thread(target=lambda: writer_sock.sendall(flood[sent:]))
        writer.start()
        try:
            for i in range(request_count):
                payload = conn.recv_frame(timeout=30)
                assert payload is not None, f"connection closed after {i} responses"
                assert struct.unpack(">i", payload[:4])[0] == i, "responses out of request order"
        finally:
            writer.join(timeout=60)
            writer_sock.close()
