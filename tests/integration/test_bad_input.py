"""Malformed and hostile input on the Kafka port must never crash the node or stop it serving others.

No Kafka client sends these bytes, so they are built by hand (kafka_wire.py) and sent on raw sockets. After every
case the node must still be alive and answer a fresh ApiVersions round trip and a `kcat -L`.

What Apache Kafka does, and what these tests hold Mala to:
- a size prefix above socket.request.max.bytes, or negative: the connection is closed (InvalidReceiveException);
- a request header with an API key the broker does not know: Kafka cannot parse the request, logs
  "Closing socket ... because of error" (InvalidRequestException) and closes the connection; it sends no response
  since it has no schema to answer with;
- ApiVersions with a version above the broker's range: a v0-format response with error 35 (UNSUPPORTED_VERSION) and
  the broker's ApiVersions range, so the client can retry at a version both support (KIP-511);
- a request body that does not parse (bad lengths, truncated strings): the connection is closed.
"""

import random
import struct
import time

import pytest

import kafka_wire as kw
from clients import kcat_metadata

MAX_REQUEST_BYTES = 65536  # socket.request.max.bytes for these nodes (Kafka's default is 100 MiB)
CLOSE_TIMEOUT_S = 5


@pytest.fixture
def node(mala_factory):
    return mala_factory(extra_config={"socket.request.max.bytes": MAX_REQUEST_BYTES}).start()


def assert_still_serving(node):
    assert node.alive(), f"node died\n{node.log_text()}"
    error, keys = kw.api_versions(node.port, version=3)
    assert error == 0 and kw.API_VERSIONS in keys, (error, keys)
    md = kcat_metadata(node.bootstrap)
    assert [b["id"] for b in md["brokers"]] == [1]
    assert node.alive(), f"node died\n{node.log_text()}"


def send_expect_closed(node, data: bytes, what: str):
    with kw.Connection(node.port) as conn:
        conn.send(data)
        assert conn.wait_closed(CLOSE_TIMEOUT_S), f"{what}: connection not closed within {CLOSE_TIMEOUT_S} s"


def send_expect_closed_or_response(node, data: bytes, correlation_id: int, what: str):
    """Either the node closes the connection, or it answers with a frame carrying our correlation id and then
    keeps the connection usable. Returns the response payload or None when closed."""
    with kw.Connection(node.port) as conn:
        conn.send(data)
        payload = conn.recv_frame(CLOSE_TIMEOUT_S)
        if payload is None:
            return None
        (corr,) = struct.unpack_from(">i", payload, 0)
        assert corr == correlation_id, f"{what}: response correlation id {corr} != {correlation_id}"
        return payload


def test_oversized_size_prefix_closes_connection(node):
    send_expect_closed(node, struct.pack(">i", MAX_REQUEST_BYTES + 1) + b"\x00" * 64, "size above the limit")
    assert_still_serving(node)
    send_expect_closed(node, struct.pack(">i", 0x7FFFFFFF), "size 2^31-1")
    assert_still_serving(node)


def test_request_at_the_size_limit_is_read(node):
    # A frame of exactly socket.request.max.bytes is allowed (Kafka rejects only size > max): an ApiVersions v0
    # request padded with trailing bytes. Kafka ignores bytes after a v0 body; either an answer or a close is fine,
    # but the node must read the whole frame without trouble.
    header = kw.request_header_v1(kw.API_VERSIONS, 0, 11)
    payload = header + b"\x00" * (MAX_REQUEST_BYTES - len(header))
    send_expect_closed_or_response(node, kw.frame(payload), 11, "frame at the limit")
    assert_still_serving(node)


@pytest.mark.parametrize("size", [-1, -2, -(2**31)])
def test_negative_size_closes_connection(node, size):
    send_expect_closed(node, struct.pack(">i", size) + b"\x00" * 16, f"size {size}")
    assert_still_serving(node)


def test_zero_size_frame(node):
    # An empty frame has no request header: Kafka cannot parse it and closes the connection.
    send_expect_closed(node, struct.pack(">i", 0), "size 0")
    assert_still_serving(node)


def test_truncated_frame_then_close(node):
    with kw.Connection(node.port) as conn:
        conn.send(struct.pack(">i", 100) + b"\x00\x12\x00\x00" + b"\x00" * 6)  # 10 of the 100 announced bytes
    # And a truncated size prefix.
    with kw.Connection(node.port) as conn:
        conn.send(b"\x00\x00")
    time.sleep(0.2)
    assert_still_serving(node)


def test_request_sent_one_byte_at_a_time(node):
    # TCP may split a frame anywhere; the node must reassemble it.
    with kw.Connection(node.port) as conn:
        for b in kw.api_versions_request(3, 21):
            assert conn.send(bytes([b]))
            time.sleep(0.002)
        payload = conn.recv_frame()
    assert payload is not None
    assert struct.unpack_from(">i", payload)[0] == 21
    error, keys = kw.parse_api_versions(payload[4:], 3)
    assert error == 0 and kw.METADATA in keys


def test_pipelined_requests_answered_in_order(node):
    # Several requests in one write: each answered, in order (Kafka clients rely on it).
    data = kw.api_versions_request(3, 31) + kw.metadata_request_v12(32) + kw.api_versions_request(0, 33)
    with kw.Connection(node.port) as conn:
        assert conn.send(data)
        corr = []
        for _ in range(3):
            payload = conn.recv_frame()
            assert payload is not None, "connection closed before all responses"
            corr.append(struct.unpack_from(">i", payload)[0])
    assert corr == [31, 32, 33]


def test_unknown_api_key_closes_connection(node):
    # Apache Kafka closes the connection: an unknown API key has no schema to parse or answer with.
    payload = kw.request_header_v1(999, 0, 41) + b"\x00" * 8
    send_expect_closed(node, kw.frame(payload), "API key 999")
    assert_still_serving(node)
    payload = kw.request_header_v1(-1, 0, 42)
    send_expect_closed(node, kw.frame(payload), "API key -1")
    assert_still_serving(node)


def test_api_versions_unsupported_version_gets_v0_error_response(node):
    """KIP-511: ApiVersions v127 is answered in the v0 format with UNSUPPORTED_VERSION and the ApiVersions range.
    A client newer than the broker sends its newest ApiVersions with request header v2 (flexible)."""
    header = kw.request_header_v2(kw.API_VERSIONS, 127, 51)
    body = kw.compact_string("future-client") + kw.compact_string("9.9") + kw.uvarint(0)
    with kw.Connection(node.port) as conn:
        assert conn.send(kw.frame(header + body))
        payload = conn.recv_frame()
        assert payload is not None, "connection closed instead of an UNSUPPORTED_VERSION response"
        (corr,) = struct.unpack_from(">i", payload, 0)
        assert corr == 51
        error, keys = kw.parse_api_versions(payload[4:], 0)
        assert error == kw.UNSUPPORTED_VERSION
        assert kw.API_VERSIONS in keys
        assert keys[kw.API_VERSIONS] == (0, 4)
        # The connection stays usable: the client retries at the highest version both support.
        assert conn.send(kw.api_versions_request(4, 52))
        payload = conn.recv_frame()
        assert payload is not None and struct.unpack_from(">i", payload)[0] == 52
        error, keys = kw.parse_api_versions(payload[4:], 4)
        assert error == 0
    assert_still_serving(node)


def test_unsupported_version_of_a_known_api(node):
    # Metadata v99 is beyond any broker's range. Kafka closes the connection; a response with our correlation id
    # is accepted too.
    payload = kw.request_header_v2(kw.METADATA, 99, 61) + kw.uvarint(0) + b"\x00\x00" + kw.uvarint(0)
    send_expect_closed_or_response(node, kw.frame(payload), 61, "Metadata v99")
    assert_still_serving(node)


@pytest.mark.parametrize("count", [-2, -5, -(2**31)])
def test_metadata_negative_array_length(node, count):
    # Only -1 means null (all topics); any other negative count is malformed.
    payload = kw.request_header_v1(kw.METADATA, 1, 71) + struct.pack(">i", count)
    send_expect_closed_or_response(node, kw.frame(payload), 71, f"topic count {count}")
    assert_still_serving(node)


def test_metadata_huge_array_length(node):
    # A count far beyond what the frame can hold must be rejected before anything is allocated for it.
    payload = kw.request_header_v1(kw.METADATA, 1, 72) + struct.pack(">i", 2**31 - 1)
    send_expect_closed_or_response(node, kw.frame(payload), 72, "topic count 2^31-1")
    payload = kw.request_header_v2(kw.METADATA, 12, 73) + kw.uvarint(2**32 - 1)
    send_expect_closed_or_response(node, kw.frame(payload), 73, "compact topic count 2^32-2")
    assert_still_serving(node)


def test_metadata_string_length_past_end(node):
    payload = kw.request_header_v1(kw.METADATA, 1, 81) + struct.pack(">i", 1) + struct.pack(">h", 1000) + b"abc"
    send_expect_closed_or_response(node, kw.frame(payload), 81, "string past the end")
    payload = kw.request_header_v2(kw.METADATA, 12, 82) + kw.uvarint(2) + b"\x00" * 16 + kw.uvarint(5000) + b"abc"
    send_expect_closed_or_response(node, kw.frame(payload), 82, "compact string past the end")
    # A client id whose length runs past the end of the header.
    payload = struct.pack(">hhih", kw.METADATA, 1, 83, 500) + b"short"
    send_expect_closed_or_response(node, kw.frame(payload), 83, "client id past the end")
    assert_still_serving(node)


def _random_cases(rng: random.Random):
    valid = [kw.api_versions_request(3, 1001), kw.api_versions_request(0, 1002), kw.metadata_request_v12(1003),
             kw.metadata_request_v12(1004, ["a", "topic-b"]),
             kw.frame(kw.request_header_v1(kw.METADATA, 1, 1005) + kw.metadata_request_v1_body(["x"]))]
    for i in range(150):
        kind = i % 3
        if kind == 0:  # pure noise, size prefix included
            yield "noise", rng.randbytes(rng.randint(1, 300))
        elif kind == 1:  # a plausible size prefix followed by noise
            body = rng.randbytes(rng.randint(0, 200))
            yield "framed noise", kw.frame(body)
        else:  # a valid request with a few bytes changed (the size prefix kept)
            data = bytearray(rng.choice(valid))
            for _ in range(rng.randint(1, 4)):
                pos = rng.randrange(4, len(data))
                data[pos] = rng.randrange(256)
            if rng.random() < 0.3:  # and sometimes cut short, with the size fixed up
                cut = rng.randint(5, len(data))
                data = bytearray(struct.pack(">i", cut - 4)) + data[4:cut]
            yield "mutated request", bytes(data)


def test_random_bytes_never_crash(node):
    rng = random.Random(20240611)
    outcomes = {"closed": 0, "answered": 0}
    for i, (kind, data) in enumerate(_random_cases(rng)):
        with kw.Connection(node.port) as conn:
            conn.send(data)
            conn.shutdown_write()  # our side is done: the node must close once it sees end of stream
            received, closed = conn.read_until_closed(CLOSE_TIMEOUT_S)
        assert closed, f"case {i} ({kind}, {data[:64].hex()}): connection not closed after the client finished"
        outcomes["answered" if received else "closed"] += 1
        if i % 25 == 24:
            assert node.alive(), f"node died on case {i} ({kind}): {data[:64].hex()}\n{node.log_text()}"
            error, _ = kw.api_versions(node.port)
            assert error == 0
    print("random input outcomes:", outcomes)
    assert_still_serving(node)


def test_idle_connection_is_closed(mala_factory):
    # connections.max.idle.ms: a connection that sends nothing (or half a frame) is closed by the node.
    node = mala_factory(extra_config={"connections.max.idle.ms": 1500}).start()
    with kw.Connection(node.port) as idle, kw.Connection(node.port) as half:
        half.send(struct.pack(">i", 50) + b"\x00\x03")
        assert idle.wait_closed(15), "idle connection still open 15 s after connections.max.idle.ms=1500"
        assert half.wait_closed(5), "connection with half a frame still open after connections.max.idle.ms"
    assert_still_serving(node)
