#!/usr/bin/env python3
"""Checks Mala's message definitions (proto/*.msg) against Apache Kafka's JSON message schemas.

Run by ctest (proto_matches_kafka_reference). For every definition it finds the reference schema with the same
message name and compares, at every version both sides know: the ordered fields present at that version (recursing
through inline structs and common structs), each field's type, nullability, tagged-ness and tag, default (normalised),
ignorable/mapKey/entityType and per-field flexibleVersions; plus the message kind, api key and flexible versions.
It also checks that each API's `versions=` spans Kafka 4.x's minimum (or its extra versions) to the reference's
newest, and that every API Mala serves has a request and a response definition.

Definitions of kind `metadata` (KRaft metadata log records) are compared against --metadata-reference-dir
(Kafka's metadata/src/main/resources/common/metadata) when given: every record there must have a definition, and
versions= must equal the reference's validVersions. The raft control records (CONTROL_RECORDS) are `data`
definitions compared against --reference-dir like any other.

Exit status: 0 all match, 1 any mismatch (one precise line each), 77 (ctest skip) if the reference dir is absent.
A missing metadata reference dir only skips the metadata records (with a note).
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import proto_model  # noqa: E402
from proto_model import Field, Message, VersionRange  # noqa: E402

# The APIs Mala serves: api key -> (API name, Kafka 4.x minimum version, extra versions Mala also serves).
#
# Minimums: the `validVersions` lower bounds in `common/message/*.json` of the kafka-clients 4.0.0 jar from Maven
# Central (org.apache.kafka:kafka-clients:4.0.0), i.e. after KIP-896 removed the pre-2.1 protocol versions. The
# kafka-clients 4.0.1, 4.1.1 and 4.4.0 jars have the same lower bounds except JoinGroup, which is 0 again there.
# Extras (versions below that minimum which Kafka 4.x still advertises or answers):
#   Produce v0-v2: KAFKA-18659 (apache/kafka#18727, 4.0.0) - ApiVersions advertises Produce from v0 because
#     librdkafka refuses to produce compressed batches otherwise; the schema JSON itself still says 3+.
#   JoinGroup v0-v1: KAFKA-19444 (apache/kafka#20116, 4.0.1 and 4.1.0) - restored for older librdkafka with
#     Kerberos; the 4.0.1+ jars' JoinGroupRequest.json says 0-9.
# APIs and records Mala deliberately defines below the reference's newest version (Kafka 4.4): API or record name
# -> (newest version Mala serves, why). The test fails if an entry is stale (the definition reaches the reference's
# newest version, or serves another version than the entry says), so entries are removed as the versions are built.
# For these the field ranges are compared up to the served version only (a field the reference ends at the first
# version Mala does not serve, e.g. `Name v0-12` where v13 uses topic ids, matches Mala's `Name v0+`).
# A definition whose newest version is `unstable-latest` serves the version below it.
OLDER_THAN_REFERENCE: dict[str, tuple[int, str]] = {
    "Metadata": (12, "v13 top-level ErrorCode (REBOOTSTRAP_REQUIRED): 0 would do on the wire, but "
                  "it is on every client's path: a change of its own, with its tests"),
    "OffsetCommit": (9, "v10 topic ids instead of names (KIP-848) not built"),
    "OffsetFetch": (9, "v10 topic ids instead of names (KIP-848) not built"),
    "DescribeGroups": (5, "v6 (KIP-1043) GROUP_ID_NOT_FOUND / classic-vs-consumer group errors not built"),
    "ApiVersions": (4, "v5 (KIP-1242) ClusterId/NodeId check and REBOOTSTRAP_REQUIRED not built"),
    "AlterPartitionReassignments": (0, "v1 AllowReplicationFactorChange not built"),
    "DescribeCluster": (1, "v2 (KIP-1073) IncludeFencedBrokers / fenced broker list not built"),
    "ConsumerGroupDescribe": (0, "v1 MemberType (KIP-1099) not built"),
    "TxnOffsetCommit": (5, "v6 topic ids (KIP-1319) not built"),
}
# Reference records Mala has no definition for yet: name -> why. Stale entries (a definition exists) fail.
NOT_DEFINED: dict[str, str] = {
}

API_MINIMUMS: dict[int, tuple[str, int, str]] = {
    0: ("Produce", 3, "0-2"),
    1: ("Fetch", 4, "none"),
    2: ("ListOffsets", 1, "none"),
    3: ("Metadata", 0, "none"),
    8: ("OffsetCommit", 2, "none"),
    9: ("OffsetFetch", 1, "none"),
    10: ("FindCoordinator", 0, "none"),
    11: ("JoinGroup", 2, "0-1"),
    12: ("Heartbeat", 0, "none"),
    13: ("LeaveGroup", 0, "none"),
    14: ("SyncGroup", 0, "none"),
    15: ("DescribeGroups", 0, "none"),
    16: ("ListGroups", 0, "none"),
    17: ("SaslHandshake", 0, "none"),
    18: ("ApiVersions", 0, "none"),
    19: ("CreateTopics", 2, "none"),
    20: ("DeleteTopics", 1, "none"),
    21: ("DeleteRecords", 0, "none"),
    22: ("InitProducerId", 0, "none"),
    23: ("OffsetForLeaderEpoch", 2, "none"),
    24: ("AddPartitionsToTxn", 0, "none"),
    25: ("AddOffsetsToTxn", 0, "none"),
    26: ("EndTxn", 0, "none"),
    27: ("WriteTxnMarkers", 1, "none"),
    28: ("TxnOffsetCommit", 0, "none"),
    29: ("DescribeAcls", 1, "none"),
    30: ("CreateAcls", 1, "none"),
    31: ("DeleteAcls", 1, "none"),
    32: ("DescribeConfigs", 1, "none"),
    33: ("AlterConfigs", 0, "none"),
    34: ("AlterReplicaLogDirs", 1, "none"),
    35: ("DescribeLogDirs", 1, "none"),
    36: ("SaslAuthenticate", 0, "none"),
    37: ("CreatePartitions", 0, "none"),
    42: ("DeleteGroups", 0, "none"),
    43: ("ElectLeaders", 0, "none"),
    44: ("IncrementalAlterConfigs", 0, "none"),
    45: ("AlterPartitionReassignments", 0, "none"),
    46: ("ListPartitionReassignments", 0, "none"),
    47: ("OffsetDelete", 0, "none"),
    48: ("DescribeClientQuotas", 0, "none"),
    49: ("AlterClientQuotas", 0, "none"),
    50: ("DescribeUserScramCredentials", 0, "none"),
    51: ("AlterUserScramCredentials", 0, "none"),
    52: ("Vote", 0, "none"),
    53: ("BeginQuorumEpoch", 0, "none"),
    54: ("EndQuorumEpoch", 0, "none"),
    55: ("DescribeQuorum", 0, "none"),
    56: ("AlterPartition", 2, "none"),
    57: ("UpdateFeatures", 0, "none"),
    58: ("Envelope", 0, "none"),
    59: ("FetchSnapshot", 0, "none"),
    60: ("DescribeCluster", 0, "none"),
    61: ("DescribeProducers", 0, "none"),
    62: ("BrokerRegistration", 0, "none"),
    63: ("BrokerHeartbeat", 0, "none"),
    64: ("UnregisterBroker", 0, "none"),
    65: ("DescribeTransactions", 0, "none"),
    66: ("ListTransactions", 0, "none"),
    67: ("AllocateProducerIds", 0, "none"),
    68: ("ConsumerGroupHeartbeat", 0, "none"),
    69: ("ConsumerGroupDescribe", 0, "none"),
    70: ("ControllerRegistration", 0, "none"),
    71: ("GetTelemetrySubscriptions", 0, "none"),
    72: ("PushTelemetry", 0, "none"),
    73: ("AssignReplicasToDirs", 0, "none"),
    74: ("ListConfigResources", 0, "none"),
    75: ("DescribeTopicPartitions", 0, "none"),
    80: ("AddRaftVoter", 0, "none"),
    81: ("RemoveRaftVoter", 0, "none"),
    82: ("UpdateRaftVoter", 0, "none"),
}
HEADERS = ("RequestHeader", "ResponseHeader")
# KRaft control records (written in control batches of __cluster_metadata-0 and snapshots; "type": "data" in
# messages/). The metadata log records proper ("type": "metadata") come from --metadata-reference-dir, all of them.
CONTROL_RECORDS = ("LeaderChangeMessage", "SnapshotHeaderRecord", "SnapshotFooterRecord", "VotersRecord",
                   "KRaftVersionRecord")

# Coordinator records (Kafka 4.4's "coordinator-key"/"coordinator-value" schemas): a key's `apiKey` is its record
# type, the int16 that starts the key bytes, and its fields are at version 0. Mala's key definitions are `data` with
# versions= the record types they cover (the int16 is read as the version), so key version v is compared with the
# key schema whose apiKey is v: the schema of the same name, or the one named here. Values keep their own versions.
#   OffsetCommitKey v0: Kafka 4.4 names record type 0 LegacyOffsetCommitKey (same fields, same bytes).
COORDINATOR_KEY_ALIASES: dict[tuple[str, int], str] = {
    ("OffsetCommitKey", 0): "LegacyOffsetCommitKey",
}

INT_TYPES = {"int8", "int16", "uint16", "int32", "int64", "uint32"}


def strip_json_comments(text: str) -> str:
    """Kafka's schema files carry `//` (and possibly `/* */`) comments; JSON does not allow them."""
    out: list[str] = []
    i, n, in_string = 0, len(text), False
    while i < n:
        c = text[i]
        if in_string:
            out.append(c)
            if c == "\\" and i + 1 < n:
                out.append(text[i + 1])
                i += 2
                continue
            if c == '"':
                in_string = False
            i += 1
        elif c == '"':
            in_string = True
            out.append(c)
            i += 1
        elif text.startswith("//", i):
            while i < n and text[i] != "\n":
                i += 1
        elif text.startswith("/*", i):
            end = text.find("*/", i + 2)
            i = n if end < 0 else end + 2
        else:
            out.append(c)
            i += 1
    return "".join(out)


def load_schema(path: Path) -> dict:
    return json.loads(strip_json_comments(path.read_text()))


def load_reference(reference_dir: Path) -> dict[str, dict]:
    """Reference schemas by message name (not by file name)."""
    schemas: dict[str, dict] = {}
    for path in sorted(reference_dir.glob("*.json")):
        schema = load_schema(path)
        if "name" in schema:
            schemas[schema["name"]] = schema
    return schemas


def field_versions(node: dict) -> str:
    """A schema field's "versions", or its "taggedVersions" when it has none."""
    return node["versions"] if "versions" in node else node["taggedVersions"]


def json_default_text(value: object) -> str:
    """A JSON `default` as the literal our grammar writes (the schemas use both "false" and false, "-1" and -1)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:  # "default": null (a nullable struct or string whose default is null)
        return "null"
    return str(value)


# --- reference JSON -> proto_model objects (independent of json_to_proto.py's text output) ---

def _ref_field(node: dict) -> Field:
    # A tagged field without "versions" exists in its tagged versions (as Kafka's generator reads it; 4.4's
    # TransactionLogValue.json writes its tagged fields so).
    f = Field(name=node["name"], type=node["type"], versions=VersionRange.parse(field_versions(node)))
    f.nullable = VersionRange.parse(node.get("nullableVersions", "none"))
    f.tagged = VersionRange.parse(node.get("taggedVersions", "none"))
    f.tag = int(node["tag"]) if "tag" in node else None  # BrokerHeartbeatRequest.json writes "tag": "0"
    f.default = json_default_text(node["default"]) if "default" in node else None
    f.ignorable = bool(node.get("ignorable", False))
    f.mapkey = bool(node.get("mapKey", False))
    f.entity = node.get("entityType")
    if "flexibleVersions" in node:
        f.flexible = VersionRange.parse(node["flexibleVersions"])
    f.fields = [_ref_field(c) for c in node.get("fields", [])]
    return f


def reference_message(schema: dict) -> Message:
    msg = Message(kind=schema["type"], name=schema["name"], api_key=schema.get("apiKey"),
                  versions=VersionRange.parse(schema["validVersions"]),
                  flexible=VersionRange.parse(schema.get("flexibleVersions", "none")),
                  unstable_latest=bool(schema.get("latestVersionUnstable", False)))
    msg.fields = [_ref_field(f) for f in schema.get("fields", [])]
    for s in schema.get("commonStructs", []):
        msg.common_structs.append(proto_model.Struct(name=s["name"], versions=VersionRange.parse(s["versions"]),
                                                     fields=[_ref_field(f) for f in s.get("fields", [])]))
    return msg


def _at_version(f: Field, v: int) -> Field | None:
    """A copy of a version-0 coordinator key field moved to version v (None if absent at version 0)."""
    if not f.versions.contains(0):
        return None
    moved = Field(name=f.name, type=f.type, versions=VersionRange(v, v))
    moved.nullable = VersionRange(v, v) if f.nullable.contains(0) else VersionRange.parse("none")
    moved.tagged = VersionRange(v, v) if f.tagged.contains(0) else VersionRange.parse("none")
    moved.tag, moved.default, moved.ignorable, moved.mapkey, moved.entity = (f.tag, f.default, f.ignorable,
                                                                             f.mapkey, f.entity)
    moved.fields = [c for c in (_at_version(child, v) for child in f.fields) if c is not None]
    return moved


def coordinator_key_reference(mine: Message, schemas: dict[str, dict]) -> Message | str:
    """The reference for a Mala coordinator key definition: the key schemas of each record type in versions=,
    their fields moved to that version and merged (see COORDINATOR_KEY_ALIASES), or an error."""
    merged = Message(kind="data", name=mine.name, api_key=None, versions=mine.versions,
                     flexible=VersionRange.parse("none"), unstable_latest=False)
    for v in range(mine.versions.low, mine.versions.high + 1):
        name = COORDINATOR_KEY_ALIASES.get((mine.name, v), mine.name)
        schema = schemas.get(name)
        if schema is None or schema.get("type") != "coordinator-key" or schema.get("apiKey") != v:
            return f"{mine.name} v{v}: no coordinator-key schema {name} with apiKey {v} (the record type)"
        ref = reference_message(schema)
        if str(ref.versions) != "0" or not ref.flexible.is_none():
            return f"{mine.name} v{v}: {name} has validVersions {ref.versions}, flexible {ref.flexible}; expected 0, none"
        for f in ref.fields:
            moved = _at_version(f, v)
            if moved is None:
                continue
            same = next((g for g in merged.fields if g.name == moved.name and g.type == moved.type), None)
            if same is None:
                merged.fields.append(moved)
            else:
                same.versions = VersionRange(same.versions.low, v)
    return merged


# --- per-version flattening ---

def _struct_registry(msg: Message) -> dict[str, list[Field]]:
    """Struct type name -> its fields, from common structs and from struct fields declared inline."""
    registry: dict[str, list[Field]] = {s.name: s.fields for s in msg.common_structs}

    def walk(fields: list[Field]) -> None:
        for f in fields:
            if f.is_struct and f.fields:
                registry.setdefault(f.element_type, f.fields)
            walk(f.fields)

    walk(msg.fields)
    for s in msg.common_structs:
        walk(s.fields)
    return registry


def _normalised_default(f: Field) -> str:
    t = f.element_type
    if f.is_array:
        return "null" if f.default == "null" else "[]"
    if f.default is None:
        implicit = {"bool": "false", "float64": "0.0", "string": "''", "bytes": "''", "records": "null",
                    "uuid": "AAAAAAAAAAAAAAAAAAAAAA"}
        return "0" if t in INT_TYPES else implicit.get(t, "struct")
    d = f.default
    if d == "null":
        return "null"
    if t in INT_TYPES:
        try:
            return str(int(d, 0))
        except ValueError:
            return f"invalid-int({d})"
    if t == "bool":
        return d.lower()
    if t == "float64":
        return repr(float(d))
    if t in ("string", "bytes"):
        return repr(d)
    return d


def _on(r: VersionRange, v: int) -> bool:
    return r.contains(v)


def flatten(msg: Message, version: int) -> list[tuple[str, dict[str, object]]]:
    """The fields present at `version`, depth first, each as (path, properties at that version)."""
    registry = _struct_registry(msg)
    out: list[tuple[str, dict[str, object]]] = []

    def walk(fields: list[Field], prefix: str, depth: int) -> None:
        if depth > 32:
            raise proto_model.ProtoError(f"{msg.name}: struct nesting too deep (recursive type?)")
        for f in fields:
            if not f.versions.contains(version):
                continue
            path = prefix + f.name
            tagged = f.tagged.contains(version)
            flexible_override = getattr(f, "flexible", None)
            out.append((path, {
                "type": f.type,
                "nullable": f.nullable.contains(version),
                "tagged": tagged,
                "tag": f.tag if tagged else None,
                "default": _normalised_default(f),
                "ignorable": f.ignorable,
                "mapkey": f.mapkey,
                "entity": f.entity,
                "flexible-override": None if flexible_override is None else flexible_override.contains(version),
            }))
            if f.is_struct:
                children = f.fields or registry.get(f.element_type)
                if children is None:
                    out.append((path + ".?", {"type": f"unresolved struct type {f.element_type}"}))
                    continue
                walk(children, path + ("[]." if f.is_array else "."), depth + 1)

    walk(msg.fields, "", 0)
    return out


def compare_version(mine: Message, ref: Message, version: int) -> list[str]:
    errors: list[str] = []
    where = f"{mine.name} v{version}"
    a, b = flatten(mine, version), flatten(ref, version)
    names_a, names_b = [p for p, _ in a], [p for p, _ in b]
    if names_a != names_b:
        missing = [p for p in names_b if p not in names_a]
        extra = [p for p in names_a if p not in names_b]
        if missing:
            errors.append(f"{where}: missing field(s) {', '.join(missing)}")
        if extra:
            errors.append(f"{where}: field(s) not in the reference: {', '.join(extra)}")
        if not missing and not extra:
            for i, (x, y) in enumerate(zip(names_a, names_b)):
                if x != y:
                    errors.append(f"{where}: field order differs at position {i}: {x} (reference: {y})")
                    break
    for path, props in a:
        if str(props.get("type", "")).startswith("unresolved"):
            errors.append(f"{where}: {path}: {props['type']} (no inline definition or common struct)")
    props_b = dict(b)
    for path, props in a:
        other = props_b.get(path)
        if other is None:
            continue
        for key, value in props.items():
            if other.get(key) != value:
                errors.append(f"{where}: {path}: {key} is {value!r}, reference says {other.get(key)!r}")
    for flag in ("flexible",):
        if mine.flexible.contains(version) != ref.flexible.contains(version):
            errors.append(f"{where}: {flag} is {mine.flexible.contains(version)}, reference flexibleVersions "
                          f"{ref.flexible}")
    return errors


def expected_range(msg: Message, ref: Message) -> tuple[int, str] | str:
    """(expected low version, expected extra-versions) for a request/response, or an error."""
    entry = API_MINIMUMS.get(ref.api_key if ref.api_key is not None else -1)
    if entry is None:
        return f"{msg.name}: api key {ref.api_key} is not in compare_reference.py's list of APIs Mala serves"
    _, minimum, extras = entry
    extra_range = VersionRange.parse(extras)
    return (extra_range.low if not extra_range.is_none() else minimum), extras


def compare_message(mine: Message, ref: Message) -> tuple[list[str], int]:
    errors: list[str] = []
    n = mine.name
    if mine.kind != ref.kind:
        errors.append(f"{n}: kind is {mine.kind}, reference says {ref.kind}")
    if mine.api_key != ref.api_key:
        errors.append(f"{n}: key={mine.api_key}, reference apiKey is {ref.api_key}")
    if str(mine.flexible) != str(ref.flexible):
        errors.append(f"{n}: flexible={mine.flexible}, reference flexibleVersions is {ref.flexible}")
    older = OLDER_THAN_REFERENCE.get(base_name(mine))
    if mine.versions.is_none():
        errors.append(f"{n}: versions=none")
    elif older is None:
        if mine.unstable_latest != ref.unstable_latest:
            errors.append(f"{n}: unstable-latest is {mine.unstable_latest}, reference latestVersionUnstable is "
                          f"{ref.unstable_latest}")
        if mine.versions.high != ref.versions.high:
            errors.append(f"{n}: versions={mine.versions} must end at the reference's newest version "
                          f"{ref.versions.high} (or be listed in OLDER_THAN_REFERENCE)")
    else:
        unstable = mine.unstable_latest or base_name(mine) in UNSTABLE_LATEST_APIS  # the flag is on requests only
        served = mine.versions.high - (1 if unstable else 0)
        newest_stable = ref.versions.high - (1 if ref.unstable_latest else 0)
        if served >= newest_stable or mine.versions.high > ref.versions.high:
            errors.append(f"{n}: serves v{served}, the reference's newest; remove its OLDER_THAN_REFERENCE entry")
        elif served != older[0]:
            errors.append(f"{n}: serves up to v{served}, OLDER_THAN_REFERENCE says {older[0]}")
    if mine.kind in ("request", "response"):
        expected = expected_range(mine, ref)
        if isinstance(expected, str):
            errors.append(expected)
        else:
            low, extras = expected
            if mine.versions.low != low:
                errors.append(f"{n}: versions={mine.versions} must start at {low} (Kafka 4.x minimum "
                              f"{API_MINIMUMS[ref.api_key][1]}, extra versions {extras})")
            if str(mine.extra_versions) != str(VersionRange.parse(extras)):
                errors.append(f"{n}: extra-versions={mine.extra_versions}, expected {extras}")
    else:
        if str(mine.versions) != str(ref.versions) and (older is None or mine.versions.low != ref.versions.low):
            errors.append(f"{n}: versions={mine.versions}, reference validVersions is {ref.versions}")
        if not mine.extra_versions.is_none():
            errors.append(f"{n}: extra-versions is only meaningful for requests and responses")
    if not mine.extra_versions.is_none() and not (mine.versions.contains(mine.extra_versions.low) and
                                                   mine.versions.contains(mine.extra_versions.high)):
        errors.append(f"{n}: extra-versions={mine.extra_versions} lies outside versions={mine.versions}")
    # Field ranges are copied as the reference states them ("0+" stays "0+" even where versions= starts later).
    clip = None if older is None or mine.versions.is_none() else mine.versions.high
    ranges_ref = dict(_ranges(ref, clip))
    for path, text in _ranges(mine, clip):
        if path in ranges_ref and ranges_ref[path] != text:
            errors.append(f"{n}: {path}: ranges {text}, reference states {ranges_ref[path]}")
    common = mine.versions.intersect(ref.versions)
    compared = 0
    # The same problem usually shows at many versions: report it once with the versions it affects.
    per_problem: dict[str, list[int]] = {}
    if not common.is_none():
        for v in range(common.low, common.high + 1):
            for e in compare_version(mine, ref, v):
                per_problem.setdefault(e.split(": ", 1)[1], []).append(v)
            compared += 1
    for problem, versions in per_problem.items():
        errors.append(f"{n} v{_versions_text(versions)}: {problem}")
    return errors, compared


def _ranges(msg: Message, clip: int | None = None) -> list[tuple[str, str]]:
    """Every declared field (all versions) with its version, nullable and tagged ranges as written; with `clip`,
    the ranges cut at that version (fields only present above it are left out)."""
    out: list[tuple[str, str]] = []

    def cut(r: VersionRange) -> VersionRange:
        return r if clip is None else r.intersect(VersionRange(0, clip))

    def walk(fields: list[Field], prefix: str) -> None:
        for f in fields:
            if clip is not None and cut(f.versions).is_none():
                continue
            out.append((prefix + f.name,
                        f"v{cut(f.versions)} nullable={cut(f.nullable)} tagged={cut(f.tagged)}"))
            walk(f.fields, prefix + f.name + ("[]." if f.is_array else "."))

    walk(msg.fields, "")
    for s in msg.common_structs:
        walk(s.fields, f"struct {s.name}.")
    return out


# API names whose request definition is unstable-latest (filled by main before comparing).
UNSTABLE_LATEST_APIS: set[str] = set()


def base_name(msg: Message) -> str:
    """The allow-list name: the API name for a request or response, else the message name."""
    if msg.kind in ("request", "response") and msg.api_key in API_MINIMUMS:
        return API_MINIMUMS[msg.api_key][0]
    return msg.name


def _versions_text(versions: list[int]) -> str:
    runs: list[str] = []
    start = prev = versions[0]
    for v in versions[1:] + [None]:
        if v is not None and v == prev + 1:
            prev = v
            continue
        runs.append(str(start) if start == prev else f"{start}-{prev}")
        if v is not None:
            start = prev = v
    return ",".join(runs)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--proto-dir", type=Path, required=True)
    ap.add_argument("--reference-dir", type=Path, required=True)
    ap.add_argument("--metadata-reference-dir", type=Path)
    # Record schemas of the coordinators' internal topics (__consumer_offsets, __transaction_state).
    ap.add_argument("--coordinator-reference-dir", type=Path)
    args = ap.parse_args()
    if not args.reference_dir.is_dir():
        print(f"skip: reference dir {args.reference_dir} not present")
        return 77
    reference = load_reference(args.reference_dir)
    metadata_reference: dict[str, dict] | None = None
    if args.metadata_reference_dir is not None:
        if args.metadata_reference_dir.is_dir():
            metadata_reference = load_reference(args.metadata_reference_dir)
        else:
            print(f"note: metadata reference dir {args.metadata_reference_dir} not present, metadata records "
                  "not compared")
    coordinator_reference: dict[str, dict] = {}
    if args.coordinator_reference_dir is not None and args.coordinator_reference_dir.is_dir():
        coordinator_reference = load_reference(args.coordinator_reference_dir)
    try:
        messages = proto_model.load_all(args.proto_dir)
    except proto_model.ProtoError as e:
        print(f"FAIL parse: {e}")
        return 1

    failures = 0
    UNSTABLE_LATEST_APIS.update(base_name(m) for m in messages if m.kind == "request" and m.unstable_latest)
    by_name: dict[str, Message] = {}
    for msg in messages:
        by_name[msg.name] = msg
        if msg.path is not None and msg.path.stem != msg.name:
            print(f"FAIL {msg.name}: defined in {msg.path.name}, expected {msg.name}.msg")
            failures += 1
        if msg.kind == "metadata":
            if metadata_reference is None:
                print(f"note {msg.name}: metadata record, no metadata reference dir, not compared")
                continue
            schema = metadata_reference.get(msg.name)
            if schema is None:
                print(f"FAIL {msg.name}: no metadata record schema named {msg.name} in "
                      f"{args.metadata_reference_dir}")
                failures += 1
                continue
        else:
            schema = reference.get(msg.name)
            if schema is None and msg.kind == "data":
                schema = coordinator_reference.get(msg.name)
        if schema is None:
            if msg.kind == "data":
                print(f"note {msg.name}: no reference schema (Mala-only data), not compared")
                continue
            print(f"FAIL {msg.name}: no reference schema named {msg.name} in {args.reference_dir}")
            failures += 1
            continue
        if schema.get("type") == "coordinator-key":
            ref = coordinator_key_reference(msg, coordinator_reference)
            if isinstance(ref, str):
                print(f"FAIL {ref}")
                failures += 1
                continue
        else:
            ref = reference_message(schema)
            if ref.kind == "coordinator-value":  # record type in apiKey; a Mala value is plain `data`
                ref.kind, ref.api_key = "data", None
        errors, compared = compare_message(msg, ref)
        if errors:
            failures += 1
            for e in errors:
                print(f"FAIL {e}")
        else:
            older = OLDER_THAN_REFERENCE.get(base_name(msg))
            note = "" if older is None else f"; allowed below the reference's newest: {older[1]}"
            print(f"ok {msg.name} v{msg.versions} ({compared} version{'' if compared == 1 else 's'}{note})")

    missing: list[str] = []
    for key, (api, _, _) in sorted(API_MINIMUMS.items()):
        for suffix in ("Request", "Response"):
            m = by_name.get(api + suffix)
            if m is None:
                missing.append(api + suffix)
            elif m.api_key != key:
                print(f"FAIL {m.name}: key={m.api_key}, expected {key}")
                failures += 1
    for h in HEADERS + CONTROL_RECORDS:
        if h not in by_name:
            missing.append(h)
    if metadata_reference is not None:
        for name in sorted(metadata_reference):
            if name in NOT_DEFINED:
                if name in by_name:
                    print(f"FAIL {name}: defined now; remove its NOT_DEFINED entry")
                    failures += 1
                else:
                    print(f"allowed {name}: not defined ({NOT_DEFINED[name]})")
            elif name not in by_name:
                missing.append(name)
            elif by_name[name].kind != "metadata":
                print(f"FAIL {name}: kind {by_name[name].kind}, expected metadata")
                failures += 1
    for name in sorted(OLDER_THAN_REFERENCE):
        if name not in by_name and name + "Request" not in by_name:
            print(f"FAIL OLDER_THAN_REFERENCE names {name}, which has no definition")
            failures += 1
    for name in missing:
        print(f"FAIL missing definition proto/{name}.msg")
    failures += len(missing)
    # A request and its response must cover the same versions (the generator pairs them by api key).
    for key, (api, _, _) in sorted(API_MINIMUMS.items()):
        req, resp = by_name.get(api + "Request"), by_name.get(api + "Response")
        if req and resp and (str(req.versions) != str(resp.versions) or
                             str(req.extra_versions) != str(resp.extra_versions)):
            print(f"FAIL {api}: request versions={req.versions} extra={req.extra_versions} but response "
                  f"versions={resp.versions} extra={resp.extra_versions}")
            failures += 1

    records = "" if metadata_reference is None else f" + {len(metadata_reference)} metadata records"
    print(f"summary: {len(messages)} definitions, {len(API_MINIMUMS)} APIs + {len(HEADERS)} headers + "
          f"{len(CONTROL_RECORDS)} control records{records} required, {failures} failure(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
