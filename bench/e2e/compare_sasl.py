#!/usr/bin/env python3
"""SASL/SCRAM connection set-up: one Mala node against one Apache Kafka 4.x node (issue 23).

Each broker gets compare.py's single-node server.properties plus a SASL_PLAINTEXT listener with SCRAM-SHA-256 and
SCRAM-SHA-512 enabled, and a user made through the PLAINTEXT listener (AlterUserScramCredentials, 4096 iterations,
Kafka's default). franzload's connect mode (franz-go) then sets up connections, a few at a time, each a new client
that connects, authenticates, asks for metadata once and closes: first over PLAINTEXT without SASL (the baseline),
then with SCRAM-SHA-256, then SCRAM-SHA-512.

Per row: connections set up per second, and the broker's and the client's CPU milliseconds per 1,000 connections
(/proc/<pid>/stat; getrusage of the finished franzload). Both share this 2-core machine, so the rate is bound by
whichever of the two spends more (each SCRAM set-up costs the client a PBKDF2 of 4,096 rounds; the broker holds the
salted keys and computes a few HMACs): the CPU columns say which, and the broker's CPU per connection is the
comparison. Brokers alternate order over the rounds; the table holds medians with Mala/Kafka
ratios, and every raw number goes to a JSON file. Nothing is asserted: docs/performance.md reads the numbers.

  bench/e2e/compare_sasl.py                       # 3 rounds
  bench/e2e/compare_sasl.py --quick               # 1 round, fewer connections
  bench/e2e/compare_sasl.py --from-json run.json  # the table of an earlier run

Needs what compare.py needs (the Kafka jars, a JDK, confluent-kafka for the user and topic, Go for franzload).
"""

import argparse
import datetime
import json
import sys
import tempfile
import time
from pathlib import Path

from confluent_kafka.admin import AdminClient, ScramCredentialInfo, ScramMechanism, UserScramCredentialUpsertion

import compare

USER, PASSWORD = "bench", "bench-secret"
SCRAM_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule"
MECHANISMS = ("none", "SCRAM-SHA-256", "SCRAM-SHA-512")
PROFILES = {
    "quick": {"rounds": 1, "connections": 300, "workers": 4},
    "default": {"rounds": 3, "connections": 2000, "workers": 4},
}


def with_sasl_listener(base):
    """A broker class of compare.py whose server.properties also has a SASL_PLAINTEXT listener with SCRAM."""

    class Sasl(base):
        def __init__(self, env, tag):
            super().__init__(env, tag)
            self.sasl_port = compare.add_listener(self, "SASL_PLAINTEXT", [
                "sasl.enabled.mechanisms=SCRAM-SHA-256,SCRAM-SHA-512",
                f"listener.name.sasl_plaintext.scram-sha-256.sasl.jaas.config={SCRAM_MODULE} required;",
                f"listener.name.sasl_plaintext.scram-sha-512.sasl.jaas.config={SCRAM_MODULE} required;",
            ])

        @property
        def sasl_bootstrap(self):
            return f"127.0.0.1:{self.sasl_port}"

    Sasl.name = base.name
    return Sasl


def add_user(broker, timeout=60.0):
    """The SCRAM credentials of USER for both mechanisms, through the PLAINTEXT listener."""
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    deadline = time.monotonic() + timeout
    while True:
        try:
            # One request per mechanism: a user may be altered only once per request.
            for m in (ScramMechanism.SCRAM_SHA_256, ScramMechanism.SCRAM_SHA_512):
                upsert = UserScramCredentialUpsertion(USER, ScramCredentialInfo(m, 4096), PASSWORD.encode())
                for f in admin.alter_user_scram_credentials([upsert]).values():
                    f.result(timeout=30)
            return
        except Exception as e:  # noqa: BLE001 (the controller may still be settling)
            if time.monotonic() > deadline:
                raise RuntimeError(f"{broker.name}: could not create the SCRAM user: {e}") from e
            time.sleep(0.5)


def set_ups(env, broker, mechanism, prof):
    bootstrap = broker.bootstrap if mechanism == "none" else broker.sasl_bootstrap
    cmd = [str(env.franz_load), "connect", "--bootstrap", bootstrap, "--topic", "unused", "--mechanism", mechanism,
           "--user", USER, "--password", PASSWORD, "--connections", str(prof["connections"]),
           "--workers", str(prof["workers"]), "--timeout", "600s"]
    cpu0, client0 = broker.cpu_seconds(), compare.children_cpu_seconds()
    out = compare.json_tool(cmd, 660, f"franzload connect {mechanism}", broker)
    out["broker_cpu_s"] = broker.cpu_seconds() - cpu0
    out["client_cpu_s"] = compare.children_cpu_seconds() - client0
    n = out["connections"]
    out["broker_cpu_ms_per_1000"] = out["broker_cpu_s"] * 1e6 / n if n else None
    out["client_cpu_ms_per_1000"] = out["client_cpu_s"] * 1e6 / n if n else None
    return out


def run_session(env, broker_cls, round_no, prof):
    broker = broker_cls(env, f"round{round_no}-{broker_cls.name}")
    rows = {}
    try:
        broker.prepare()
        broker.spawn()
        compare.create_topics_once_serving(broker, ["sasl-bench"], 1)
        add_user(broker)
        set_ups(env, broker, "SCRAM-SHA-256", {**prof, "connections": 20})  # warm-up (JIT, caches)
        for mechanism in MECHANISMS:
            compare.log(f"{broker.name} round {round_no}: {prof['connections']} set-ups, {mechanism}")
            rows[mechanism] = set_ups(env, broker, mechanism, prof)
    finally:
        broker.stop()
        broker.cleanup()
    return {"broker": broker_cls.name, "round": round_no, "rows": rows}


def render(results):
    sessions = results["sessions"]
    table = compare.RatioTable("{:.0f}")
    row = table.row
    median_of = compare.session_median

    for mechanism in MECHANISMS:
        label = "PLAINTEXT, no SASL" if mechanism == "none" else f"SASL_PLAINTEXT {mechanism}"
        row(f"{label}: set-ups/s", lambda b, m=mechanism: median_of(sessions, b, m, "connections_per_sec"))
        row(f"{label}: broker CPU ms per 1,000 set-ups",
            lambda b, m=mechanism: median_of(sessions, b, m, "broker_cpu_ms_per_1000"), "{:.1f}")
        row(f"{label}: client CPU ms per 1,000 set-ups",
            lambda b, m=mechanism: median_of(sessions, b, m, "client_cpu_ms_per_1000"), "{:.1f}")
    return table.text()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--connections", type=int, help="set-ups per row")
    compare.add_single_node_args(ap)
    args = ap.parse_args()
    if args.from_json:
        print(render(json.loads(Path(args.from_json).read_text())))
        return 0
    prof = dict(PROFILES["quick" if args.quick else "default"])
    if args.rounds:
        prof["rounds"] = args.rounds
    if args.connections:
        prof["connections"] = args.connections
    work = Path(tempfile.mkdtemp(prefix="mala-sasl-bench-"))
    env = compare.Env(args, work)
    problems = env.check({"mala", "kafka"})
    if problems:
        print("\n".join(problems), file=sys.stderr)
        return 2
    env.build_franz_load()
    classes = [with_sasl_listener(compare.MalaBroker), with_sasl_listener(compare.KafkaBroker)]
    sessions = compare.alternating_sessions(classes, prof["rounds"], lambda cls, r: run_session(env, cls, r, prof))
    results = {"date": datetime.datetime.now(datetime.timezone.utc).isoformat(), "profile": prof,
               "kafka_version": env.kafka_version(), "sessions": sessions}
    compare.save_and_print(results, args, work, render)
    return 0


if __name__ == "__main__":
    sys.exit(main())
