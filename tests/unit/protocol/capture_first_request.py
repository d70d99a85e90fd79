#!/usr/bin/env python3
"""Records the Kafka frames a real client sends, for the golden-byte tests in golden_bytes_test.cc.

Two modes, both on 127.0.0.1:

  listen  Accepts connections and records every complete request frame the client sends, never answering.
          A Kafka client's first request on a connection is ApiVersions, so this is all that is needed to
          capture it; the client then times out and reconnects, which is harmless.

  proxy   Forwards to a real broker (e.g. a mala node) and records the frames in both directions, so
          requests sent after the ApiVersions handshake (Metadata, ...) and the broker's responses can be
          captured too.

With --run, the client command is started once the socket listens ("{port}" in it is replaced by the
listening port) and the capture stops when the command exits or --timeout passes. Frames are printed one a
line as: <direction> <api_key> <api_version> <correlation_id> <hex of the frame without its 4-byte size>
(for responses, api key and version are those of the request with the same correlation id on that
connection). The frame bytes are what the golden tests keep as hex strings.

Examples (see golden_bytes_test.cc for the exact commands used for each capture):
  python3 capture_first_request.py listen --run 'kcat -L -b 127.0.0.1:{port} -m 2'
  python3 capture_first_request.py proxy --upstream 127.0.0.1:9092 --run 'kcat -L -b 127.0.0.1:{port} -m 5'
"""

import argparse
import select
import shlex
import socket
import struct
import subprocess
import sys
import time


class frame_splitter:
    """Splits a byte stream into Kafka frames (int32 big-endian size, then that many bytes)."""

    def __init__(self):
        self.buffer = b""

    def feed(self, data):
        self.buffer += data
        frames = []
        while len(self.buffer) >= 4:
            (size,) = struct.unpack(">i", self.buffer[:4])
            if size < 0 or len(self.buffer) < 4 + size:
                break
            frames.append(self.buffer[4 : 4 + size])
            self.buffer = self.buffer[4 + size :]
        return frames


class connection:
    def __init__(self, number, client, upstream):
        self.number = number
        self.client = client
        self.upstream = upstream
        self.requests = frame_splitter()
        self.responses = frame_splitter()
        self.pending = {}  # correlation id -> (api key, api version)


def describe_request(conn, frame):
    if len(frame) < 8:
        return "req ? ? ?"
    api_key, api_version, correlation_id = struct.unpack(">hhi", frame[:8])
    conn.pending[correlation_id] = (api_key, api_version)
    return f"req {api_key} {api_version} {correlation_id}"


def describe_response(conn, frame):
    if len(frame) < 4:
        return "resp ? ? ?"
    (correlation_id,) = struct.unpack(">i", frame[:4])
    api_key, api_version = conn.pending.pop(correlation_id, ("?", "?"))
    return f"resp {api_key} {api_version} {correlation_id}"


def emit(out, conn, description, frame):
    print(f"conn{conn.number} {description} {frame.hex()}", file=out, flush=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("mode", choices=["listen", "proxy"])
    parser.add_argument("--port", type=int, default=0, help="port to listen on (0: a free one)")
    parser.add_argument("--upstream", help="host:port of the broker (proxy mode)")
    parser.add_argument("--run", help="client command to run; {port} is replaced by the listening port")
    parser.add_argument("--timeout", type=float, default=15.0, help="seconds before the capture stops")
    parser.add_argument("--max-requests", type=int, default=0, help="stop after this many requests (0: no limit)")
    parser.add_argument("--output", help="file for the captured frames (default: stdout)")
    args = parser.parse_args()
    if args.mode == "proxy" and not args.upstream:
        parser.error("proxy mode needs --upstream")

    out = open(args.output, "w") if args.output else sys.stdout
    server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    server.bind(("127.0.0.1", args.port))
    server.listen(16)
    port = server.getsockname()[1]
    print(f"# listening on 127.0.0.1:{port}", file=sys.stderr, flush=True)

    child = None
    if args.run:
        child = subprocess.Popen(shlex.split(args.run.replace("{port}", str(port))), stdout=sys.stderr)

    connections = []
    requests_seen = 0
    deadline = time.monotonic() + args.timeout
    try:
        while time.monotonic() < deadline:
            if child is not None and child.poll() is not None:
                break
            if args.max_requests and requests_seen >= args.max_requests:
                break
            sockets = [server] + [c.client for c in connections] + [c.upstream for c in connections if c.upstream]
            readable, _, _ = select.select(sockets, [], [], 0.1)
            for s in readable:
                if s is server:
                    client, _ = server.accept()
                    upstream = None
                    if args.mode == "proxy":
                        host, upstream_port = args.upstream.rsplit(":", 1)
                        upstream = socket.create_connection((host, int(upstream_port)))
                    connections.append(connection(len(connections), client, upstream))
                    continue
                conn = next(c for c in connections if s is c.client or s is c.upstream)
                data = s.recv(65536)
                if not data:
                    conn.client.close()
                    if conn.upstream:
                        conn.upstream.close()
                    connections.remove(conn)
                    continue
                if s is conn.client:
                    for frame in conn.requests.feed(data):
                        emit(out, conn, describe_request(conn, frame), frame)
                        requests_seen += 1
                    if conn.upstream:
                        conn.upstream.sendall(data)
                else:
                    for frame in conn.responses.feed(data):
                        emit(out, conn, describe_response(conn, frame), frame)
                    conn.client.sendall(data)
    finally:
        if child is not None and child.poll() is None:
            child.terminate()
            try:
                child.wait(timeout=5)
            except subprocess.TimeoutExpired:
                child.kill()
        for c in connections:
            c.client.close()
            if c.upstream:
                c.upstream.close()
        server.close()
        if out is not sys.stdout:
            out.close()


if __name__ == "__main__":
    main()
