"""Hand encoding of a few Kafka requests for the bad-input tests.

Real clients never send malformed frames, so the tests that inject them (test_bad_input.py) build bytes here with
struct.pack, following the Kafka protocol guide: a frame is an int32 size followed by a request header and body;
header v1 = api_key int16, api_version int16, correlation_id int32, client_id nullable string (int16 length);
header v2 (flexible requests) adds a tagged-field section. Responses start with correlation_id int32 (and a tagged
field section for flexible responses, except ApiVersions which always uses response header v0, KIP-511).
This module is not a client: it knows only what the tests need.
"""

import socket
import struct
import time

API_VERSIONS = 18
METADATA = 3
UNSUPPORTED_VERSION = 35


def uvarint(n: int) -> bytes:
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def read_uvarint(buf: bytes, pos: int):
    shift = 0
    value = 0
    while True:
        b = buf[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if not b & 0x80:
            return value, pos
        shift += 7


def nullable_string(s):
    if s is None:
        return struct.pack(">h", -1)
    data = s.encode()
    return struct.pack(">h", len(data)) + data


def compact_string(s):
    if s is None:
        return uvarint(0)
    data = s.encode()
    return uvarint(len(data) + 1) + data


def request_header_v1(api_key: int, api_version: int, correlation_id: int, client_id="mala-bad-input") -> bytes:
    return struct.pack(">hhi", api_key, api_version, correlation_id) + nullable_string(client_id)


def request_header_v2(api_key: int, api_version: int, correlation_id: int, client_id="mala-bad-input") -> bytes:
    return request_header_v1(api_key, api_version, correlation_id, client_id) + uvarint(0)  # no tagged fields


def frame(payload: bytes) -> bytes:
    return struct.pack(">i", len(payload)) + payload


def api_versions_request(version: int, correlation_id: int) -> bytes:
    """A complete ApiVersions frame; v3+ is flexible (header v2, client software name and version)."""
    if version >= 3:
        body = compact_string("mala-tests") + compact_string("1.0") + uvarint(0)
        return frame(request_header_v2(API_VERSIONS, version, correlation_id) + body)
    return frame(request_header_v1(API_VERSIONS, version, correlation_id))


def metadata_request_v1_body(topics) -> bytes:
    """Metadata v1 body: nullable array of topic names (int32 count, -1 = all topics)."""
    if topics is None:
        return struct.pack(">i", -1)
    return struct.pack(">i", len(topics)) + b"".join(nullable_string(t) for t in topics)


def metadata_request_v12(correlation_id: int, topics=None) -> bytes:
    """Metadata v12 frame: compact nullable array of (topic_id, name), allow_auto_topic_creation,
    include_topic_authorized_operations, tagged fields."""
    if topics is None:
        body = uvarint(0)
    else:
        body = uvarint(len(topics) + 1)
        for t in topics:
            body += b"\x00" * 16 + compact_string(t) + uvarint(0)
    body += b"\x00" + b"\x00" + uvarint(0)
    return frame(request_header_v2(METADATA, 12, correlation_id) + body)


def parse_api_versions(body: bytes, version: int):
    """Parses an ApiVersions response body (after the correlation id). Returns (error_code, {key: (min, max)})."""
    (error_code,) = struct.unpack_from(">h", body, 0)
    pos = 2
    keys = {}
    if version >= 3:
        n, pos = read_uvarint(body, pos)
        count = n - 1
        for _ in range(max(count, 0)):
            key, lo, hi = struct.unpack_from(">hhh", body, pos)
            pos += 6
            tags, pos = read_uvarint(body, pos)
            assert tags == 0, "unexpected tagged fields in ApiVersion entry"
            keys[key] = (lo, hi)
    else:
        (count,) = struct.unpack_from(">i", body, pos)
        pos += 4
        for _ in range(max(count, 0)):
            key, lo, hi = struct.unpack_from(">hhh", body, pos)
            pos += 6
            keys[key] = (lo, hi)
    return error_code, keys


def parse_api_versions_features(body: bytes):
    """The KIP-584 tagged fields of an ApiVersions v3+ response body (after the correlation id): returns
    (finalized_features_epoch, {name: finalized max level}, {name: (supported min, max)})."""
    pos = 2
    n, pos = read_uvarint(body, pos)
    for _ in range(max(n - 1, 0)):
        pos += 6
        tags, pos = read_uvarint(body, pos)
        assert tags == 0, "unexpected tagged fields in ApiVersion entry"
    pos += 4  # ThrottleTimeMs
    epoch, finalized, supported = -1, {}, {}

    def features(data):
        out, q = {}, 0
        count, q = read_uvarint(data, q)
        for _ in range(max(count - 1, 0)):
            length, q = read_uvarint(data, q)
            name = data[q:q + length - 1].decode()
            q += length - 1
            lo, hi = struct.unpack_from(">hh", data, q)
            q += 4
            tags, q = read_uvarint(data, q)
            assert tags == 0, "unexpected tagged fields in a feature entry"
            out[name] = (lo, hi)
        return out

    tags, pos = read_uvarint(body, pos)
    for _ in range(tags):
        tag, pos = read_uvarint(body, pos)
        size, pos = read_uvarint(body, pos)
        data = body[pos:pos + size]
        pos += size
        if tag == 0:
            supported = features(data)
        elif tag == 1:
            (epoch,) = struct.unpack_from(">q", data, 0)
        elif tag == 2:
            # FinalizedFeatureKey: Name, MaxVersionLevel, MinVersionLevel.
            finalized = {name: levels[0] for name, levels in features(data).items()}
    return epoch, finalized, supported


def api_versions_features(port: int, correlation_id=7, timeout=5.0):
    """One ApiVersions v3 round trip; returns parse_api_versions_features' answer."""
    with Connection(port, timeout=timeout) as conn:
        assert conn.send(api_versions_request(3, correlation_id)), "connection closed before sending"
        payload = conn.recv_frame()
        assert payload is not None, "connection closed without an ApiVersions response"
        (error_code,) = struct.unpack_from(">h", payload, 4)
        assert error_code == 0, f"ApiVersions error {error_code}"
        return parse_api_versions_features(payload[4:])


class Connection:
    """A raw TCP connection to the node with bounded waits (every call has a timeout)."""

    def __init__(self, port: int, host="127.0.0.1", timeout=5.0):
        self.sock = socket.create_connection((host, port), timeout=timeout)
        self.timeout = timeout

    def close(self):
        try:
            self.sock.close()
        except OSError:
            pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def send(self, data: bytes) -> bool:
        """Sends data; returns False if the peer already closed the connection."""
        try:
            self.sock.sendall(data)
            return True
        except (BrokenPipeError, ConnectionResetError):
            return False

    def shutdown_write(self):
        try:
            self.sock.shutdown(socket.SHUT_WR)
        except OSError:
            pass

    def _recv_exact(self, n: int, deadline: float):
        buf = bytearray()
        while len(buf) < n:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError(f"timed out reading {n} bytes (got {len(buf)})")
            self.sock.settimeout(remaining)
            try:
                chunk = self.sock.recv(n - len(buf))
            except socket.timeout:
                raise TimeoutError(f"timed out reading {n} bytes (got {len(buf)})") from None
            except ConnectionResetError:
                return None
            if not chunk:
                return None
            buf += chunk
        return bytes(buf)

    def recv_frame(self, timeout=None):
        """Returns the next response payload, or None if the connection was closed. Raises TimeoutError."""
        deadline = time.monotonic() + (timeout or self.timeout)
        size = self._recv_exact(4, deadline)
        if size is None:
            return None
        (n,) = struct.unpack(">i", size)
        assert 0 <= n < 64 * 1024 * 1024, f"implausible response size {n}"
        return self._recv_exact(n, deadline)

    def wait_closed(self, timeout=None) -> bool:
        """Drains input until the peer closes (True) or the timeout passes (False)."""
        deadline = time.monotonic() + (timeout or self.timeout)
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return False
            self.sock.settimeout(remaining)
            try:
                chunk = self.sock.recv(65536)
            except socket.timeout:
                return False
            except ConnectionResetError:
                return True
            if not chunk:
                return True

    def read_until_closed(self, timeout=None):
        """Collects every byte the peer sends until it closes. Returns (data, closed)."""
        deadline = time.monotonic() + (timeout or self.timeout)
        data = bytearray()
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return bytes(data), False
            self.sock.settimeout(remaining)
            try:
                chunk = self.sock.recv(65536)
            except socket.timeout:
                return bytes(data), False
            except ConnectionResetError:
                return bytes(data), True
            if not chunk:
                return bytes(data), True
            data += chunk


def split_frames(data: bytes):
    """Splits a byte stream into complete response frames; a trailing partial frame is returned separately."""
    frames = []
    pos = 0
    while pos + 4 <= len(data):
        (n,) = struct.unpack_from(">i", data, pos)
        if n < 0 or pos + 4 + n > len(data):
            break
        frames.append(data[pos + 4 : pos + 4 + n])
        pos += 4 + n
    return frames, data[pos:]


def api_versions(port: int, version=3, correlation_id=7, timeout=5.0):
    """One ApiVersions round trip on a fresh connection. Returns (error_code, {key: (min, max)})."""
    with Connection(port, timeout=timeout) as conn:
        assert conn.send(api_versions_request(version, correlation_id)), "connection closed before sending"
        payload = conn.recv_frame()
        assert payload is not None, "connection closed without an ApiVersions response"
        (corr,) = struct.unpack_from(">i", payload, 0)
        assert corr == correlation_id, f"correlation id {corr} != {correlation_id}"
        return parse_api_versions(payload[4:], version)
