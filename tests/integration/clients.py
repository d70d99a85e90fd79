"""Runs the real Kafka clients the integration tests use: kcat (librdkafka) and Apache Kafka's Java tools.

The Java side (jars and the compiled programs of tests/integration/java) is put under tests/integration/.deps by
scripts/install-test-clients.sh. Every subprocess call has a timeout.
"""

import json
import shutil
import subprocess
from pathlib import Path

import pytest

IT_DIR = Path(__file__).resolve().parent
KAFKA_LIBS = IT_DIR / ".deps" / "kafka-libs"
JAVA_CLASSES = IT_DIR / ".deps" / "classes"


def run(cmd, timeout=60, check=True):
    """Runs a command with a timeout; returns CompletedProcess with text output."""
    try:
        result = subprocess.run(cmd, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired as e:
        pytest.fail(f"timed out after {timeout} s: {' '.join(map(str, cmd))}\nstdout: {e.stdout}\nstderr: {e.stderr}")
    if check and result.returncode != 0:
        pytest.fail(f"exit code {result.returncode}: {' '.join(map(str, cmd))}\n"
                    f"stdout: {result.stdout}\nstderr: {result.stderr}")
    return result


def kcat_metadata(bootstrap: str, topic=None, timeout=30):
    """`kcat -L -J` (metadata as JSON). Returns the parsed document."""
    if shutil.which("kcat") is None:
        pytest.fail("kcat not installed (scripts/install-test-clients.sh)")
    cmd = ["kcat", "-L", "-J", "-b", bootstrap, "-m", "10"]
    if topic is not None:
        cmd += ["-t", topic]
    result = run(cmd, timeout=timeout)
    try:
        return json.loads(result.stdout)
    except json.JSONDecodeError:
        pytest.fail(f"kcat printed no JSON:\nstdout: {result.stdout}\nstderr: {result.stderr}")


def java_classpath() -> str:
    if not KAFKA_LIBS.is_dir() or not JAVA_CLASSES.is_dir():
        pytest.fail(f"Kafka jars or test programs missing under {IT_DIR / '.deps'} "
                    "(run scripts/install-test-clients.sh)")
    return f"{KAFKA_LIBS}/*:{JAVA_CLASSES}"


def java(main_class: str, *args, timeout=90, check=True):
    """Runs a Java main class (Apache Kafka tool or one of our programs) with the Kafka jars on the class path."""
    cmd = [
        "java",
        "-Xmx256m",
        "-XX:TieredStopAtLevel=1",  # start-up time matters more than peak speed here
        "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn",
        "-Dorg.slf4j.simpleLogger.logFile=System.err",
        "-cp",
        java_classpath(),
        main_class,
        *map(str, args),
    ]
    return run(cmd, timeout=timeout, check=check)
