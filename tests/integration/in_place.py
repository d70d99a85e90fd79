"""Kafka and Mala on the same data dirs (issue 24): Mala started on a data dir with the server.properties Apache
Kafka ran with (apache_kafka.py starts Kafka), and the confluent-kafka helpers the in-place tests share: an
idempotent acks=all producer, a full read of a topic, offset commits, and waiting for full ISRs."""

import hashlib
import signal
import subprocess
import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient

from conftest import MALA_BIN, port_accepts

FEATURE_TOOL = "org.apache.kafka.tools.FeatureCommand"  # kafka-features.sh


class MalaOnDir:
    """Mala started with a server.properties file (the one Kafka ran with), logging to a file beside it."""

    def __init__(self, config_path: Path, port: int):
        self.config_path = config_path
        self.port = port
        self.log_path = config_path.parent / "mala.log"
        self.proc = None

    def start(self, wait_serving=True, timeout=60):
        self._log = open(self.log_path, "ab")
        self.proc = subprocess.Popen([str(MALA_BIN), "--config", str(self.config_path)], stdin=subprocess.DEVNULL,
                                     stdout=self._log, stderr=subprocess.STDOUT)
        if wait_serving:
            self.start_wait(timeout)
        return self

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start_wait(self, timeout=60):
        deadline = time.monotonic() + timeout
        while not port_accepts(self.port):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"Mala did not serve on {self.port} (exit {self.proc.poll()}):\n{self.log_tail()}")
            time.sleep(0.1)

    def log_text(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def log_tail(self, lines=40) -> str:
        return "\n".join(self.log_text().splitlines()[-lines:])

    def kill(self):
        """kill -9: no controlled shutdown, nothing flushed."""
        if self.proc and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self._log.close()

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                code = self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
                pytest.fail(f"Mala did not stop on SIGTERM:\n{self.log_tail()}")
            assert code == 0, f"Mala exited with {code} after SIGTERM:\n{self.log_tail()}"
        self._log.close()


def admin(bootstrap):
    return AdminClient({"bootstrap.servers": bootstrap, "log_level": 0})


def admin_call(bootstrap, method, *args):
    """Calls an AdminClient method and waits for every future it returns (the client must outlive them)."""
    client = admin(bootstrap)
    result = getattr(client, method)(*args)
    futures = result.values() if isinstance(result, dict) else [result]
    return [f.result(timeout=30) for f in futures]


def produce(bootstrap, topic, count, start):
    """Keyed records from an idempotent acks=all producer; returns nothing, fails on any undelivered record."""
    errors = []
    p = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "acks": "all", "log_level": 0,
                  "linger.ms": 5})
    for i in range(start, start + count):
        p.produce(topic, key=f"k{i % 700}".encode(), value=f"value-{i}".encode(),
                  on_delivery=lambda err, msg: err and errors.append(err))
    assert p.flush(60) == 0 and not errors, errors[:3]


def contents(bootstrap, topic, partitions):
    """Every record of the topic as (partition, offset, key, value), read from offset 0."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"reader-{time.monotonic_ns()}",
                  "enable.auto.commit": False, "log_level": 0})
    c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    out, idle = [], 0
    while idle < 6:
        msgs = c.consume(500, timeout=1)
        if not msgs:
            idle += 1
            continue
        idle = 0
        for m in msgs:
            assert not m.error(), m.error()
            out.append((m.partition(), m.offset(), m.key(), m.value()))
    c.close()
    return sorted(out)


def commit(bootstrap, group, topic, offset):
    """Commits `offset` for partition 0, retrying while the coordinator loads or moves (a broker just started)."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "log_level": 0})
    deadline = time.monotonic() + 60
    while True:
        try:
            c.commit(offsets=[TopicPartition(topic, 0, offset)], asynchronous=False)
            break
        except KafkaException as e:
            if not e.args[0].retriable() and e.args[0].code() not in (
                    KafkaError.COORDINATOR_LOAD_IN_PROGRESS, KafkaError.NOT_COORDINATOR,
                    KafkaError.COORDINATOR_NOT_AVAILABLE):
                raise
            assert time.monotonic() < deadline, e
            time.sleep(0.5)
    c.close()


def committed(bootstrap, group, topic):
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "log_level": 0})
    [tp] = c.committed([TopicPartition(topic, 0)], timeout=20)
    c.close()
    return tp.offset


def digest(records):
    return hashlib.sha256(repr(records).encode()).hexdigest()


THREE_NODES = {
    "default.replication.factor": "3", "min.insync.replicas": "2", "offsets.topic.replication.factor": "3",
    "transaction.state.log.replication.factor": "3", "transaction.state.log.min.isr": "2",
    "group.initial.rebalance.delay.ms": "0",
}


def in_sync_everywhere(bootstrap, topic, replicas):
    """Waits until every partition of the topic has a leader and `replicas` in-sync replicas."""
    deadline = time.monotonic() + 60
    while True:
        md = admin(bootstrap).list_topics(topic, timeout=10).topics[topic]
        if md.error is None and md.partitions and all(
                p.leader >= 0 and len(p.isrs) == replicas for p in md.partitions.values()):
            return
        assert time.monotonic() < deadline, {p.id: (p.leader, p.isrs) for p in md.partitions.values()}
        time.sleep(0.5)
