"""Start-up and shutdown of the real binary: configuration errors refuse to start with a message that names the
problem, unknown keys only warn (as Kafka does), and SIGTERM is a clean exit."""

import re
import uuid

from clients import kcat_metadata
from conftest import free_port

REFUSE_TIMEOUT_S = 15


def test_sigterm_exits_cleanly(mala_factory):
    node = mala_factory().start()
    assert kcat_metadata(node.bootstrap)["brokers"][0]["id"] == 1
    assert node.stop() == 0, node.log_text()


def test_restart_on_same_log_dir(mala_factory, tmp_path):
    first = mala_factory(name="first", log_dir=tmp_path / "data").start()
    assert first.stop() == 0, first.log_text()
    second = mala_factory(name="second", log_dir=tmp_path / "data").start()
    assert [b["id"] for b in kcat_metadata(second.bootstrap)["brokers"]] == [1]


def test_log_dir_of_another_node_id_refuses_to_start(mala_factory, tmp_path):
    data = tmp_path / "data"
    first = mala_factory(name="first", node_id=1, log_dir=data).start()
    assert first.stop() == 0, first.log_text()

    other = mala_factory(name="other", node_id=2, log_dir=data).launch()
    code = other.wait_exit(REFUSE_TIMEOUT_S)
    log = other.full_log()
    assert code != 0, log[-5000:]
    assert str(data) in log, f"the error should name the log dir {data}\n{log[-5000:]}"


def test_kafka_meta_properties_of_another_node_id_refuses_to_start(mala_factory, tmp_path):
    # A log dir formatted by Kafka (kafka-storage.sh format) for node 7: meta.properties is the on-disk contract.
    data = tmp_path / "kafka-data"
    data.mkdir()
    (data / "meta.properties").write_text(
        "#\n#Written by tests/integration\n"
        f"node.id=7\ndirectory.id=gKlYq7MGQXKa0XUXvMVuvg\nversion=1\ncluster.id={uuid.uuid4().hex[:22]}\n")
    node = mala_factory(node_id=1, log_dir=data).launch()
    code = node.wait_exit(REFUSE_TIMEOUT_S)
    log = node.full_log()
    assert code != 0, log[-5000:]
    assert str(data) in log, f"the error should name the log dir {data}\n{log[-5000:]}"


def test_unknown_config_key_warns_but_starts(mala_factory):
    node = mala_factory(extra_config={"no.such.broker.setting": "x"}).start()
    assert [b["id"] for b in kcat_metadata(node.bootstrap)["brokers"]] == [1]
    log = node.full_log()
    line = next((l for l in log.splitlines() if "no.such.broker.setting" in l), None)
    assert line is not None, f"no log line names the unknown key\n{log[-5000:]}"
    assert re.search(r"warn", line, re.I), f"the unknown key should be logged as a warning: {line}"


def test_invalid_value_refuses_to_start(mala_factory):
    node = mala_factory(extra_config={"num.partitions": -3}).launch()
    code = node.wait_exit(REFUSE_TIMEOUT_S)
    log = node.full_log()
    assert code != 0, log[-5000:]
    assert "num.partitions" in log, f"the error should name the key\n{log[-5000:]}"


def test_security_listener_or_setting_refuses_to_start(mala_factory, tmp_path):
    """A secure listener Mala cannot serve as configured refuses the start and says why: an SSL or SASL_SSL
    listener without a key store names the key, a SASL listener with no mechanism Mala serves (GSSAPI is Kafka's
    default) names sasl.enabled.mechanisms; a sasl.* setting Mala does not serve is never ignored."""
    for protocol in ("SSL", "SASL_PLAINTEXT", "SASL_SSL"):
        probe = mala_factory(name=f"probe-{protocol.lower()}")
        probe.config["listeners"] += f",SECURE://127.0.0.1:{free_port()}"
        probe.config["listener.security.protocol.map"] = f"PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT,SECURE:{protocol}"
        probe.launch()
        code = probe.wait_exit(REFUSE_TIMEOUT_S)
        log = probe.full_log()
        assert code != 0, f"a {protocol} listener was opened\n{log[-5000:]}"
        assert "SECURE" in log, f"the error should name the listener\n{log[-5000:]}"
        expected = "sasl.enabled.mechanisms" if protocol == "SASL_PLAINTEXT" else "ssl.keystore.location"
        assert expected in log, f"the error should name {expected}\n{log[-5000:]}"
    for key in ("sasl.kerberos.service.name",):
        node = mala_factory(name=f"probe-{key.split('.')[0]}", extra_config={key: "x"}).launch()
        code = node.wait_exit(REFUSE_TIMEOUT_S)
        log = node.full_log()
        assert code != 0, f"{key} was ignored\n{log[-5000:]}"
        assert key in log, f"the error should name the key\n{log[-5000:]}"


def test_override_on_the_command_line(mala_factory):
    # --override key=value wins over the file (here: an invalid value in the file, fixed on the command line).
    node = mala_factory(extra_config={"num.partitions": -3})
    node.start(extra_args=["--override", "num.partitions=3"])
    assert [b["id"] for b in kcat_metadata(node.bootstrap)["brokers"]] == [1]


def test_missing_config_file_refuses_to_start(mala_factory, tmp_path):
    node = mala_factory()
    node.config_path = tmp_path / "does-not-exist.yaml"
    node.write_config = lambda: None  # leave the file missing
    node.launch()
    code = node.wait_exit(REFUSE_TIMEOUT_S)
    log = node.full_log()
    assert code != 0, log[-5000:]
    assert "does-not-exist.yaml" in log, f"the error should name the file\n{log[-5000:]}"


def test_clean_shutdown_marker_written_on_sigterm_and_consumed_on_start(mala_factory, tmp_path):
    # Kafka's contract for skipping log recovery: a clean stop leaves .kafka_cleanshutdown (with the broker epoch,
    # KIP-966) in every log dir; a start removes it, so a crash after that is seen as unclean.
    data = tmp_path / "data"
    first = mala_factory(name="first", log_dir=data).start()
    assert not (data / ".kafka_cleanshutdown").exists()
    assert first.stop() == 0, first.log_text()
    marker = data / ".kafka_cleanshutdown"
    assert marker.exists(), first.log_text()
    assert '"brokerEpoch"' in marker.read_text()
    assert (data / "recovery-point-offset-checkpoint").exists()

    second = mala_factory(name="second", log_dir=data).start()
    assert not marker.exists(), "the marker must be consumed at start-up"
    second.proc.kill()  # SIGKILL: no marker this time
    second.proc.wait(timeout=10)
    second.exit_checked = True
    assert not marker.exists()

    third = mala_factory(name="third", log_dir=data).start()
    assert [b["id"] for b in kcat_metadata(third.bootstrap)["brokers"]] == [1]
    assert third.stop() == 0, third.log_text()


def test_high_watermarks_checkpointed_on_shutdown_and_served_after_restart(mala_factory):
    """Records acknowledged before a clean shutdown are below the high watermark after the restart:
    replication-offset-checkpoint holds each partition's high watermark (Kafka's format: version, count,
    "topic partition offset" lines) and the restarted replica starts from it."""
    import subprocess
    node = mala_factory().start()
    lines = "".join(f"k{i}:v{i}\n" for i in range(25))
    subprocess.run(["kcat", "-P", "-b", node.bootstrap, "-t", "hw-topic", "-K:", "-X", "acks=all"],
                   input=lines, text=True, check=True, timeout=30)
    assert node.stop() == 0
    checkpoint = (node.log_dir / "replication-offset-checkpoint").read_text().split("\n")
    assert checkpoint[0] == "0", checkpoint
    assert "hw-topic 0 25" in checkpoint, checkpoint
    node.start()
    out = subprocess.run(["kcat", "-C", "-b", node.bootstrap, "-t", "hw-topic", "-o", "beginning", "-e", "-q",
                          "-f", "%k\n"], capture_output=True, text=True, check=True, timeout=30).stdout.split()
    assert out == [f"k{i}" for i in range(25)]


def test_initial_voters_need_a_kip_853_controller(mala_factory):
    # --standalone / --initial-controllers (kafka-storage format's options) only make sense for a controller
    # without controller.quorum.voters: with static voters Mala refuses to start rather than ignore them.
    for args in (["--standalone"], ["--initial-controllers", "1@localhost:9093"]):
        node = mala_factory().launch(extra_args=args)
        code = node.wait_exit(REFUSE_TIMEOUT_S)
        log = node.full_log()
        assert code == 1, log[-5000:]
        assert "--standalone / --initial-controllers need the controller role" in log, log[-5000:]
    node = mala_factory().launch(extra_args=["--standalone", "--initial-controllers", "1@localhost:9093"])
    assert node.wait_exit(REFUSE_TIMEOUT_S) == 2, "the two options exclude each other (usage error)"
