"""SIGKILL during log cleaning (issue 21): a node cleans a compacted topic continuously (short segment.ms, a low
dirty ratio, a short backoff, and an I/O throttle that makes each round last long enough to be interrupted) while
confluent-kafka writes numbered updates of 60 keys with acks=all. The node is killed with SIGKILL at random moments
KILLS times; the kills that cut a round (started in the node's log, not completed; some leave .cleaned / .swap
files) are counted, the node restarts, and a
reader from offset 0 must find, for every key, a latest value at least as new as the last acknowledged one and no
newer than the last sent, with offsets increasing. Some kills must have landed inside a round.
"""

import random
import threading
import time

from confluent_kafka import Producer

from conftest import MalaNode
from real_clients import create_topic, rdkafka_read_to_end, wait_until

TOPIC = "bus-latest-position"
KEYS = 60
KILLS = 50
TIMEOUT = 60


class updater:
    """Writes `key:seq` updates until stopped; remembers, per key, the last acknowledged and last sent seq."""

    def __init__(self, bootstrap, acked, sent):
        self.acked, self.sent = acked, sent
        self.producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 2,
                                  "message.timeout.ms": 5000, "socket.timeout.ms": 3000, "retries": 0})
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)

    def run(self):
        pad = "x" * 150
        while not self.stop.is_set():
            key = random.randrange(KEYS)
            seq = self.sent[key] + 1
            self.sent[key] = seq

            def done(err, msg, key=key, seq=seq):
                if err is None and seq > self.acked[key]:
                    self.acked[key] = seq

            try:
                self.producer.produce(TOPIC, key=f"bus-{key}".encode(), value=f"{seq}:{pad}".encode(),
                                      on_delivery=done)
            except BufferError:
                pass
            self.producer.poll(0.001)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.stop.set()
        self.thread.join()
        self.producer.flush(6)


def latest_by_key(bootstrap):
    """Each key's latest seq read from offset 0, and every offset read."""
    latest, offsets = {}, []
    for offset, key, value in rdkafka_read_to_end(bootstrap, TOPIC):
        offsets.append(offset)
        latest[int(key.decode().split("-")[1])] = int(value.decode().split(":")[0])
    return latest, offsets


def test_sigkill_at_random_moments_of_cleaning_loses_no_acknowledged_update(tmp_path):
    node = MalaNode(tmp_path, name="clean-crash", extra_config={
        "log.cleaner.backoff.ms": 20, "log.cleaner.io.max.bytes.per.second": 200_000})
    node.start()
    try:
        create_topic(node.bootstrap, TOPIC, config={
            "cleanup.policy": "compact", "segment.ms": "150", "min.cleanable.dirty.ratio": "0.01",
            "file.delete.delay.ms": "1000"})
        acked = [0] * KEYS
        sent = [0] * KEYS
        partition_dir = node.log_dir / f"{TOPIC}-0"
        cut_rounds = cut_with_files = 0
        log_mark = 0
        for kill in range(KILLS):
            with updater(node.bootstrap, acked, sent):
                time.sleep(random.uniform(0.3, 1.5))
                node.proc.kill()
                node.proc.wait()
            # A round was cut when the process's last round start has no completion after it (the key map was
            # being built, or the new segments written: then .cleaned / .swap files are left too).
            this_run = node.full_log()[log_mark:]
            started = this_run.rfind(f"{TOPIC}-0: cleaning round started")
            if started >= 0 and this_run.find(f"{TOPIC}-0: cleaned offsets", started) < 0:
                cut_rounds += 1
            names = [p.name for p in partition_dir.iterdir()]
            if any(n.endswith(".cleaned") or n.endswith(".swap") for n in names):
                cut_with_files += 1
            log_mark = len(node.full_log())
            node.start()
            latest, offsets = latest_by_key(node.bootstrap)
            assert offsets == sorted(set(offsets)), f"kill {kill}: offsets not increasing"
            for key in range(KEYS):
                if acked[key] == 0:
                    continue
                got = latest.get(key, 0)
                assert acked[key] <= got <= sent[key], \
                    f"kill {kill}: bus-{key} reads {got}, acknowledged {acked[key]}, sent {sent[key]}"
        assert sum(acked) > 0
        rounds = node.full_log().count(f"{TOPIC}-0: cleaned offsets")
        assert rounds > 0, "the cleaner never completed a round"
        print(f"{cut_rounds} of {KILLS} kills interrupted a cleaning round, {cut_with_files} left .cleaned/.swap "
              f"files; {rounds} rounds completed")
        assert cut_rounds >= 10, f"only {cut_rounds} of {KILLS} kills interrupted a cleaning round"
        wait_until(lambda: node.alive(), 5, "the node running")
    finally:
        node.stop()
