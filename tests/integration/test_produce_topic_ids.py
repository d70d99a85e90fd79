"""Produce v13 (KIP-516): topics named by id instead of by name.

- Apache Kafka's Java producer (kafka-clients 4.4) writes with Produce v13 once the broker advertises it: a proxy in
  front of the node (the node advertises the proxy's port, so every connection of the client goes through it)
  records the version of each request, and the records read back must be the acknowledged ones.
- A v13 request naming a topic id the node does not know is answered UNKNOWN_TOPIC_ID (100) for its partitions, the
  topic named by the same id, as Kafka's KafkaApis answers it; the node keeps serving.
"""

import struct
import threading
import uuid

import kafka_wire as kw
from netns_topology import _Forwarder as Forwarder
from real_clients import create_topic, java_json

PRODUCE = 0
UNKNOWN_TOPIC_ID = 100


class RequestVersions:
    """Records (api_key, api_version) of every request frame a client sends through a forwarder."""

    def __init__(self):
        self.lock = threading.Lock()
        self.pending: dict[object, bytes] = {}  # per connection: bytes of a frame not complete yet
        self.requests: list[tuple[int, int]] = []

    def __call__(self, connection, data: bytes):
        with self.lock:
            frames, self.pending[connection] = kw.split_frames(self.pending.get(connection, b"") + data)
            self.requests.extend(struct.unpack_from(">hh", f, 0) for f in frames if len(f) >= 4)

    def produce_versions(self) -> set[int]:
        with self.lock:
            return {v for k, v in self.requests if k == PRODUCE}


def records(json_records):
    return sorted((r["partition"], r["offset"], r["key"], r["value"]) for r in json_records)


def test_java_producer_writes_by_topic_id(mala_factory):
    node = mala_factory()
    seen = RequestVersions()
    proxy = Forwarder(0, ("127.0.0.1", node.port), observe=seen)
    try:
        node.config["advertised.listeners"] = f"PLAINTEXT://127.0.0.1:{proxy.port}"
        node.start()
        bootstrap = f"127.0.0.1:{proxy.port}"
        topic = "by-topic-id"
        create_topic(bootstrap, topic, partitions=3)
        _, produced = java_json("mala.it.Produce", "--bootstrap", bootstrap, "--topic", topic, "--count", 200,
                                "--key-prefix", "k", "--key-count", 30)
        assert len(produced) == 200
        assert 13 in seen.produce_versions(), f"Produce versions seen: {sorted(seen.produce_versions())}"
        _, consumed = java_json("mala.it.Consume", "--bootstrap", bootstrap, "--topic", topic, "--offset", 0)
        assert records(consumed) == records(produced)
        assert len({r["partition"] for r in produced}) == 3
    finally:
        proxy.close()


def produce_v13_request(correlation_id: int, topic_id: bytes, partition: int) -> bytes:
    """Produce v13 (flexible, header v2): acks=1, one topic by id, one partition with null records."""
    body = (kw.uvarint(0)  # TransactionalId: null
            + struct.pack(">hi", 1, 5000)  # Acks, TimeoutMs
            + kw.uvarint(2) + topic_id  # TopicData: 1 entry, TopicId
            + kw.uvarint(2) + struct.pack(">i", partition) + kw.uvarint(0) + kw.uvarint(0)  # Index, null Records
            + kw.uvarint(0)  # topic tags
            + kw.uvarint(0))  # request tags
    return kw.frame(kw.request_header_v2(PRODUCE, 13, correlation_id) + body)


def test_produce_v13_with_an_unknown_topic_id_is_unknown_topic_id(mala_factory):
    node = mala_factory().start()
    topic_id = uuid.uuid4().bytes
    with kw.Connection(node.port) as conn:
        assert conn.send(produce_v13_request(11, topic_id, 0))
        payload = conn.recv_frame()
    assert payload is not None, "connection closed without a Produce response"
    corr, pos = struct.unpack_from(">i", payload, 0)[0], 4
    assert corr == 11
    pos += 1  # response header v1: no tagged fields
    topics, pos = kw.read_uvarint(payload, pos)
    assert topics - 1 == 1
    assert payload[pos:pos + 16] == topic_id
    pos += 16
    partitions, pos = kw.read_uvarint(payload, pos)
    assert partitions - 1 == 1
    index, error, base_offset = struct.unpack_from(">ihq", payload, pos)
    assert (index, error, base_offset) == (0, UNKNOWN_TOPIC_ID, -1)
    error_code, keys = kw.api_versions(node.port)
    assert error_code == 0 and keys[PRODUCE] == (0, 13), keys
