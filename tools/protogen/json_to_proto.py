#!/usr/bin/env python3
"""Converts Apache Kafka JSON message schemas into Mala's compact definitions (docs/protocol-definitions.md).

A one-off authoring aid, not part of the build: the .msg files in proto/ are the source of truth and
compare_reference.py keeps them honest. All prose ("about" text and `//` comments) is dropped; so are attributes
the grammar has no use for (zeroCopy, deprecatedVersions, listeners).

  json_to_proto.py SCHEMA.json [--min-version N] [--extra-versions R]     one definition to stdout
  json_to_proto.py --reference-dir DIR --out-dir proto                     every API Mala serves, plus the headers
  json_to_proto.py --metadata-reference-dir MDIR [--reference-dir DIR] --out-dir proto
                                  every KRaft metadata log record in MDIR ("type": "metadata" -> kind `metadata`,
                                  apiKey -> key=, the record type) and, with DIR, the raft control records

In batch mode `versions=` starts at Kafka 4.x's minimum (or the extra versions) from compare_reference.API_MINIMUMS
and ends at the reference's newest version.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from compare_reference import (API_MINIMUMS, CONTROL_RECORDS, HEADERS, field_versions, json_default_text,  # noqa: E402
                               load_schema)
from proto_model import VersionRange  # noqa: E402


def _quote(value: str) -> str:
    """The parser splits lines with shlex; quote only what needs it (empty strings, spaces, quotes, '#')."""
    if value and all(c.isalnum() or c in "-+_.:/" for c in value):
        return value
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _field_lines(node: dict, depth: int, key_version: int | None = None) -> list[str]:
    """One field (and its children); with key_version, a coordinator key field moved from version 0 to it."""
    versions = field_versions(node)
    if key_version is not None:
        versions = str(key_version) if VersionRange.parse(versions).contains(0) else "none"
    parts = [node["name"], node["type"], "v" + versions]
    if "nullableVersions" in node and not VersionRange.parse(node["nullableVersions"]).is_none():
        parts.append("nullable=" + node["nullableVersions"])
    if "taggedVersions" in node and not VersionRange.parse(node["taggedVersions"]).is_none():
        parts.append("tagged=" + node["taggedVersions"])
        parts.append(f"tag={node['tag']}")
    if "flexibleVersions" in node:
        parts.append("flexible=" + node["flexibleVersions"])
    if "default" in node:
        parts.append("default=" + _quote(json_default_text(node["default"])))
    if node.get("ignorable"):
        parts.append("ignorable")
    if node.get("mapKey"):
        parts.append("mapkey")
    if "entityType" in node:
        parts.append("entity=" + node["entityType"])
    lines = ["  " * depth + " ".join(parts)]
    for child in node.get("fields", []):
        lines.extend(_field_lines(child, depth + 1, key_version))
    return lines


def convert(schema: dict, source_name: str, min_version: int | None = None, extra_versions: str = "none") -> str:
    valid = VersionRange.parse(schema["validVersions"])
    extras = VersionRange.parse(extra_versions)
    low = valid.low if min_version is None else min_version
    if not extras.is_none():
        low = min(low, extras.low)
    versions = VersionRange(low, valid.high)
    kind = schema["type"]
    key_version = None
    if kind in ("coordinator-key", "coordinator-value"):
        # Mala's coordinator records are `data`: a value keeps its versions; a key's version is its record type
        # (apiKey), the int16 its bytes start with (compare_reference.py COORDINATOR_KEY_ALIASES).
        if kind == "coordinator-key":
            key_version = int(schema["apiKey"])
            versions = VersionRange(key_version, key_version)
        kind = "data"
        schema = {k: v for k, v in schema.items() if k != "apiKey"}
    head = [kind, schema["name"]]
    if "apiKey" in schema:
        head.append(f"key={schema['apiKey']}")
    head.append(f"versions={versions}")
    head.append(f"flexible={schema.get('flexibleVersions', 'none')}")
    if schema.get("latestVersionUnstable"):
        head.append("unstable-latest")
    if not extras.is_none():
        head.append(f"extra-versions={extras}")
    lines = [f"# Converted from Apache Kafka's {source_name} (validVersions {schema['validVersions']}) by "
             "tools/protogen/json_to_proto.py;",
             "# checked by tools/protogen/compare_reference.py. Grammar: docs/protocol-definitions.md.",
             " ".join(head)]
    for f in schema.get("fields", []):
        lines.extend(_field_lines(f, 1, key_version))
    for s in schema.get("commonStructs", []):
        lines.append(f"  struct {s['name']} v{s['versions']}")
        for f in s.get("fields", []):
            lines.extend(_field_lines(f, 2))
    return "\n".join(lines) + "\n"


def convert_records(metadata_dir: Path, messages_dir: Path | None, out_dir: Path) -> int:
    """Every metadata log record schema in metadata_dir (whole validVersions range), plus the raft control records
    from messages_dir when given. The file is named after the message (ZkMigrationRecord.json holds
    ZkMigrationStateRecord)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    written = 0
    for path in sorted(metadata_dir.glob("*.json")):
        schema = load_schema(path)
        if schema.get("type") != "metadata":
            continue
        (out_dir / f"{schema['name']}.msg").write_text(convert(schema, path.name))
        written += 1
    if messages_dir is not None:
        by_name = {}
        for path in sorted(messages_dir.glob("*.json")):
            schema = load_schema(path)
            by_name[schema.get("name", "")] = (path, schema)
        for name in CONTROL_RECORDS:
            if name not in by_name:
                print(f"error: no schema named {name} in {messages_dir}", file=sys.stderr)
                return 1
            path, schema = by_name[name]
            (out_dir / f"{name}.msg").write_text(convert(schema, path.name))
            written += 1
    print(f"wrote {written} record definitions to {out_dir}")
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("schema", nargs="?", type=Path)
    ap.add_argument("--min-version", type=int)
    ap.add_argument("--extra-versions", default="none")
    ap.add_argument("--reference-dir", type=Path)
    ap.add_argument("--metadata-reference-dir", type=Path)
    ap.add_argument("--out-dir", type=Path)
    args = ap.parse_args()

    if args.schema:
        sys.stdout.write(convert(load_schema(args.schema), args.schema.name, args.min_version, args.extra_versions))
        return 0
    if args.metadata_reference_dir and args.out_dir:
        return convert_records(args.metadata_reference_dir, args.reference_dir, args.out_dir)
    if not (args.reference_dir and args.out_dir):
        ap.error("give a SCHEMA.json, or --reference-dir and/or --metadata-reference-dir, and --out-dir")
    by_name: dict[str, tuple[Path, dict]] = {}
    for path in sorted(args.reference_dir.glob("*.json")):
        schema = load_schema(path)
        by_name[schema.get("name", "")] = (path, schema)
    args.out_dir.mkdir(parents=True, exist_ok=True)
    wanted: list[tuple[str, int | None, str]] = [(h, None, "none") for h in HEADERS]
    for key, (api, minimum, extras) in sorted(API_MINIMUMS.items()):
        wanted += [(api + "Request", minimum, extras), (api + "Response", minimum, extras)]
    for name, minimum, extras in wanted:
        if name not in by_name:
            print(f"error: no schema named {name} in {args.reference_dir}", file=sys.stderr)
            return 1
        path, schema = by_name[name]
        (args.out_dir / f"{name}.msg").write_text(convert(schema, path.name, minimum, extras))
    print(f"wrote {len(wanted)} definitions to {args.out_dir}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
