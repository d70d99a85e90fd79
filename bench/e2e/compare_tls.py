#!/usr/bin/env python3
"""TLS: one Mala node against one Apache Kafka 4.x node with the same certificate and cipher (issue 23).

Each broker gets compare.py's single-node server.properties plus an SSL listener (a PEM key store made at the start
of the run with openssl: a CA, and a server certificate for 127.0.0.1; TLS 1.3 with TLS_AES_128_GCM_SHA256 only, on
both brokers and in every client). Apache Kafka's ProducerPerformance and ConsumerPerformance drive both listeners of
each broker, one after the other:
  - produce 1 KiB records at full speed (acks=1) over PLAINTEXT, then over SSL;
  - consume them back over PLAINTEXT, then over SSL (ConsumerPerformance, a new group each time);
  - produce at a fixed rate over SSL for the p50/p99/p99.9 latency.
Per row: MB/s, the broker's CPU seconds per GB (/proc/<pid>/stat), and what TLS costs each broker: its CPU per GB
over SSL divided by its CPU per GB over PLAINTEXT. Brokers alternate order over the rounds; the table holds medians
with Mala/Kafka ratios, and every raw number goes to a JSON file. Nothing is asserted: docs/performance.md reads the
numbers.

  bench/e2e/compare_tls.py                       # 2 rounds
  bench/e2e/compare_tls.py --quick               # 1 round, small counts
  bench/e2e/compare_tls.py --from-json run.json  # the table of an earlier run

Needs what compare.py needs for the Java tools (the Kafka jars, a JDK, confluent-kafka for topic creation) and
openssl.
"""

import argparse
import datetime
import json
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import compare

PROTOCOL = "TLSv1.3"
CIPHER = "TLS_AES_128_GCM_SHA256"
PROFILES = {
    "quick": {"rounds": 1, "records": 100_000, "latency_rate": 2000, "latency_seconds": 5},
    "default": {"rounds": 2, "records": 1_000_000, "latency_rate": 5000, "latency_seconds": 20},
}


def make_pki(work):
    """A CA and a server certificate for 127.0.0.1 (RSA 2048), as PEM: server.pem holds the unencrypted PKCS#8 key
    and the certificate chain (the PEM key store both brokers read), ca.pem the CA the clients trust."""
    def run(*args):
        subprocess.run(["openssl", *args], cwd=work, check=True, capture_output=True, timeout=60)
    run("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out", "ca.pem", "-days", "2",
        "-subj", "/CN=bench-ca")
    run("req", "-newkey", "rsa:2048", "-nodes", "-keyout", "server.key", "-out", "server.csr", "-subj",
        "/CN=127.0.0.1")
    (work / "san.ext").write_text("subjectAltName=IP:127.0.0.1,DNS:localhost\n")
    run("x509", "-req", "-in", "server.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial", "-out",
        "server.crt", "-days", "2", "-extfile", "san.ext")
    run("pkcs8", "-topk8", "-nocrypt", "-in", "server.key", "-out", "server.pk8")
    (work / "server.pem").write_text((work / "server.pk8").read_text() + (work / "server.crt").read_text() +
                                     (work / "ca.pem").read_text())
    return work / "server.pem", work / "ca.pem"


def with_ssl_listener(base, pki):
    """A broker class of compare.py whose server.properties also has an SSL listener on a port of its own."""
    keystore, _ = pki

    class Tls(base):
        def __init__(self, env, tag):
            super().__init__(env, tag)
            self.ssl_port = compare.add_listener(self, "SSL", [
                "ssl.keystore.type=PEM",
                f"ssl.keystore.location={keystore}",
                f"ssl.enabled.protocols={PROTOCOL}",
                f"ssl.protocol={PROTOCOL}",
                f"ssl.cipher.suites={CIPHER}",
            ])

        @property
        def ssl_bootstrap(self):
            return f"127.0.0.1:{self.ssl_port}"

    Tls.name = base.name
    return Tls


def client_properties(ca):
    return {"security.protocol": "SSL", "ssl.truststore.type": "PEM", "ssl.truststore.location": str(ca),
            "ssl.enabled.protocols": PROTOCOL, "ssl.protocol": PROTOCOL, "ssl.cipher.suites": CIPHER}


def measured(broker, fn):
    cpu0 = broker.cpu_seconds()
    t0 = time.monotonic()
    out = fn()
    out["seconds"] = time.monotonic() - t0
    out["broker_cpu_s"] = broker.cpu_seconds() - cpu0
    out["broker_cpu_s_per_gb"] = out["broker_cpu_s"] / (out["bytes"] / compare.GB) if out.get("bytes") else None
    return out


def produce(env, broker, bootstrap, topic, records, throughput, props):
    args = ["--bootstrap-server", bootstrap, "--topic", topic, "--num-records", str(records), "--record-size",
            "1024", "--throughput", str(throughput), "--command-property", "acks=1",
            *[f"{k}={v}" for k, v in props.items()]]
    r = compare.run_checked(env.java_cmd(compare.PRODUCER_PERF, args), 900, "ProducerPerformance", broker)
    m = None
    for line in r.stdout.splitlines():
        m = compare.PRODUCER_PERF_RE.search(line) or m
    if r.returncode != 0 or m is None or int(m.group(1)) != records:
        raise RuntimeError(f"ProducerPerformance exit {r.returncode}: {compare.short(r.stdout + r.stderr)}")
    return {"records": records, "bytes": records * 1024, "mb_per_sec": float(m.group(3)),
            "p50_ms": float(m.group(6)), "p99_ms": float(m.group(8)), "p999_ms": float(m.group(9))}


def consume(env, broker, bootstrap, topic, records, props, work):
    config = work / f"consumer-{uuid.uuid4().hex[:6]}.properties"
    config.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
    args = ["--bootstrap-server", bootstrap, "--topic", topic, "--num-records", str(records), "--group",
            f"bench-tls-{uuid.uuid4().hex[:8]}", "--timeout", "15000", "--command-config", str(config)]
    r = compare.run_checked(env.java_cmd(compare.CONSUMER_PERF, args), 900, "ConsumerPerformance", broker)
    rows = [ln.split(",") for ln in r.stdout.splitlines() if ln.count(",") == 9 and not ln.startswith("start.time")]
    if r.returncode != 0 or not rows or int(rows[-1][4].strip()) < records:
        raise RuntimeError(f"ConsumerPerformance exit {r.returncode}: {compare.short(r.stdout + r.stderr)}")
    f = [x.strip() for x in rows[-1]]
    return {"records": int(f[4]), "bytes": int(float(f[2]) * compare.MIB), "mb_per_sec": float(f[8])}


def run_session(env, broker_cls, round_no, prof, pki, work):
    broker = broker_cls(env, f"round{round_no}-{broker_cls.name}")
    ssl_props = client_properties(pki[1])
    rows = {}
    try:
        broker.prepare()
        broker.spawn()
        topics = {"plain": f"tls-plain-{uuid.uuid4().hex[:6]}", "ssl": f"tls-ssl-{uuid.uuid4().hex[:6]}",
                  "latency": f"tls-latency-{uuid.uuid4().hex[:6]}"}
        compare.create_topics_once_serving(broker, list(topics.values()), 2)
        n = prof["records"]
        for kind, bootstrap, props in (("plain", broker.bootstrap, {}), ("ssl", broker.ssl_bootstrap, ssl_props)):
            compare.log(f"{broker.name} round {round_no}: produce over {kind}")
            rows[f"produce_{kind}"] = measured(broker, lambda: produce(env, broker, bootstrap, topics[kind], n, -1,
                                                                       props))
            compare.log(f"{broker.name} round {round_no}: consume over {kind}")
            rows[f"consume_{kind}"] = measured(broker, lambda: consume(env, broker, bootstrap, topics[kind], n, props,
                                                                       broker.dir))
        compare.log(f"{broker.name} round {round_no}: latency over ssl")
        count = prof["latency_rate"] * prof["latency_seconds"]
        rows["latency_ssl"] = measured(broker, lambda: produce(env, broker, broker.ssl_bootstrap, topics["latency"],
                                                               count, prof["latency_rate"], ssl_props))
    finally:
        broker.stop()
        broker.cleanup()
    return {"broker": broker_cls.name, "round": round_no, "rows": rows}


def render(results):
    sessions = results["sessions"]
    table = compare.RatioTable("{:.2f}")
    row = table.row
    median_of = compare.session_median

    for kind in ("produce", "consume"):
        for proto in ("plain", "ssl"):
            name = f"{kind}_{proto}"
            label = f"{kind} 1 KiB over {'SSL' if proto == 'ssl' else 'PLAINTEXT'}"
            row(f"{label}: MB/s", lambda b, n=name: median_of(sessions, b, n, "mb_per_sec"), "{:.0f}")
            row(f"{label}: broker CPU s/GB", lambda b, n=name: median_of(sessions, b, n, "broker_cpu_s_per_gb"))

        def cost(b, k=kind):
            ssl, plain = (median_of(sessions, b, f"{k}_ssl", "broker_cpu_s_per_gb"),
                          median_of(sessions, b, f"{k}_plain", "broker_cpu_s_per_gb"))
            return ssl / plain if ssl and plain else None
        row(f"{kind}: TLS cost (CPU per GB over SSL / over PLAINTEXT)", cost)
    for q in ("p50_ms", "p99_ms", "p999_ms"):
        row(f"produce over SSL at {results['profile']['latency_rate']} records/s: {q.replace('_ms', '')} (ms)",
            lambda b, f=q: median_of(sessions, b, "latency_ssl", f), "{:.1f}")
    return table.text()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--records", type=int, help="1 KiB records per produce/consume run")
    compare.add_single_node_args(ap)
    args = ap.parse_args()
    if args.from_json:
        print(render(json.loads(Path(args.from_json).read_text())))
        return 0
    prof = dict(PROFILES["quick" if args.quick else "default"])
    if args.rounds:
        prof["rounds"] = args.rounds
    if args.records:
        prof["records"] = args.records
    work = Path(tempfile.mkdtemp(prefix="mala-tls-bench-"))
    env = compare.Env(args, work)
    problems = env.check({"mala", "kafka"})
    problems = [p for p in problems if not p.startswith("go ")]  # franzload is not used here
    if problems:
        print("\n".join(problems), file=sys.stderr)
        return 2
    pki = make_pki(work)
    classes = [with_ssl_listener(compare.MalaBroker, pki), with_ssl_listener(compare.KafkaBroker, pki)]
    sessions = compare.alternating_sessions(classes, prof["rounds"],
                                            lambda cls, r: run_session(env, cls, r, prof, pki, work))
    results = {"date": datetime.datetime.now(datetime.timezone.utc).isoformat(), "profile": prof,
               "kafka_version": env.kafka_version(), "protocol": PROTOCOL, "cipher": CIPHER, "sessions": sessions}
    compare.save_and_print(results, args, work, render)
    return 0


if __name__ == "__main__":
    sys.exit(main())
