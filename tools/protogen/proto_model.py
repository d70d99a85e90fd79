"""Parser for Mala's message definitions in proto/ (grammar: docs/protocol-definitions.md).

Shared by the C++ generator (protogen.py) and the reference comparison (compare_reference.py).
"""
from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path

PRIMITIVES = {"bool", "int8", "int16", "uint16", "int32", "int64", "uint32", "float64", "string", "bytes",
              "uuid", "records"}
# `metadata`: a KRaft metadata log record (Kafka's "type": "metadata" schemas); `key=` is its record type, the
# api key of the ApiMessageAndVersion envelope.
KINDS = {"request", "response", "header", "data", "metadata"}


class ProtoError(Exception):
    pass


@dataclass(frozen=True)
class VersionRange:
    low: int  # -1 for "none"
    high: int  # a large number for "N+"

    OPEN = 0x7FFF

    @staticmethod
    def parse(text: str) -> "VersionRange":
        text = text.strip()
        if text == "none":
            return VersionRange(-1, -2)
        if text.endswith("+"):
            return VersionRange(int(text[:-1]), VersionRange.OPEN)
        if "-" in text:
            lo, hi = text.split("-", 1)
            return VersionRange(int(lo), int(hi))
        return VersionRange(int(text), int(text))

    def is_none(self) -> bool:
        return self.low > self.high

    def contains(self, v: int) -> bool:
        return self.low <= v <= self.high

    def intersect(self, other: "VersionRange") -> "VersionRange":
        lo, hi = max(self.low, other.low), min(self.high, other.high)
        return VersionRange(lo, hi) if lo <= hi else VersionRange(-1, -2)

    def __str__(self) -> str:
        if self.is_none():
            return "none"
        if self.high == VersionRange.OPEN:
            return f"{self.low}+"
        if self.low == self.high:
            return str(self.low)
        return f"{self.low}-{self.high}"


@dataclass
class Field:
    name: str
    type: str  # as written: "int32", "[]Topic", "LeaderIdAndEpoch"
    versions: VersionRange
    nullable: VersionRange = field(default_factory=lambda: VersionRange(-1, -2))
    tagged: VersionRange = field(default_factory=lambda: VersionRange(-1, -2))
    tag: int | None = None
    default: str | None = None
    ignorable: bool = False
    mapkey: bool = False
    entity: str | None = None
    fields: list["Field"] = field(default_factory=list)  # children for struct types
    line: int = 0
    # Per-field override of the message's flexible versions (Kafka's field-level "flexibleVersions"). Only
    # RequestHeader.ClientId uses it ("none": always a classic int16-length string, so any broker can read the
    # header of an ApiVersionsRequest newer than it knows). None means "as the message".
    flexible: VersionRange | None = None

    @property
    def is_array(self) -> bool:
        return self.type.startswith("[]")

    @property
    def element_type(self) -> str:
        return self.type[2:] if self.is_array else self.type

    @property
    def is_struct(self) -> bool:
        return self.element_type not in PRIMITIVES


@dataclass
class Struct:
    name: str
    versions: VersionRange
    fields: list[Field] = field(default_factory=list)


@dataclass
class Message:
    kind: str
    name: str
    api_key: int | None
    versions: VersionRange
    flexible: VersionRange
    unstable_latest: bool = False
    extra_versions: VersionRange = field(default_factory=lambda: VersionRange(-1, -2))
    fields: list[Field] = field(default_factory=list)
    common_structs: list[Struct] = field(default_factory=list)
    path: Path | None = None


def _parse_attrs(tokens: list[str], where: str) -> dict[str, str | bool]:
    attrs: dict[str, str | bool] = {}
    for tok in tokens:
        if "=" in tok:
            k, v = tok.split("=", 1)
            attrs[k] = v
        else:
            attrs[tok] = True
    return attrs


def _field_from(tokens: list[str], where: str, line: int) -> Field:
    if len(tokens) < 3 or not tokens[2].startswith("v"):
        raise ProtoError(f"{where}: a field needs '<Name> <type> v<range>'")
    f = Field(name=tokens[0], type=tokens[1], versions=VersionRange.parse(tokens[2][1:]), line=line)
    attrs = _parse_attrs(tokens[3:], where)
    for k, v in attrs.items():
        if k == "nullable":
            f.nullable = VersionRange.parse(str(v))
        elif k == "tagged":
            f.tagged = VersionRange.parse(str(v))
        elif k == "tag":
            f.tag = int(str(v))
        elif k == "default":
            f.default = str(v)
        elif k == "ignorable":
            f.ignorable = True
        elif k == "mapkey":
            f.mapkey = True
        elif k == "entity":
            f.entity = str(v)
        elif k == "flexible":
            f.flexible = VersionRange.parse(str(v))
        else:
            raise ProtoError(f"{where}: unknown field attribute '{k}'")
    if not f.tagged.is_none() and f.tag is None:
        raise ProtoError(f"{where}: tagged field without tag=")
    return f


def parse_message(path: Path) -> Message:
    lines = path.read_text().splitlines()
    msg: Message | None = None
    # stack of (indent, children list, owner) for nesting
    stack: list[tuple[int, list[Field]]] = []
    for lineno, raw in enumerate(lines, 1):
        text = raw.split("#", 1)[0].rstrip() if "#" in raw and '"#' not in raw else raw.rstrip()
        if not text.strip():
            continue
        where = f"{path.name}:{lineno}"
        indent = len(text) - len(text.lstrip(" "))
        if indent % 2:
            raise ProtoError(f"{where}: indentation must be a multiple of two spaces")
        tokens = shlex.split(text.strip(), posix=True)
        if indent == 0:
            if msg is not None:
                raise ProtoError(f"{where}: one message per file")
            kind, name = tokens[0], tokens[1]
            if kind not in KINDS:
                raise ProtoError(f"{where}: unknown kind '{kind}'")
            attrs = _parse_attrs(tokens[2:], where)
            msg = Message(kind=kind, name=name,
                          api_key=int(str(attrs["key"])) if "key" in attrs else None,
                          versions=VersionRange.parse(str(attrs["versions"])),
                          flexible=VersionRange.parse(str(attrs.get("flexible", "none"))),
                          unstable_latest=bool(attrs.get("unstable-latest", False)),
                          extra_versions=VersionRange.parse(str(attrs.get("extra-versions", "none"))),
                          path=path)
            stack = [(0, msg.fields)]
            continue
        if msg is None:
            raise ProtoError(f"{where}: field before the message line")
        level = indent // 2
        while stack and len(stack) > level:
            stack.pop()
        if len(stack) != level:
            raise ProtoError(f"{where}: unexpected indentation")
        if tokens[0] == "struct":
            if level != 1:
                raise ProtoError(f"{where}: common structs sit at the first level")
            s = Struct(name=tokens[1], versions=VersionRange.parse(tokens[2][1:]) if len(tokens) > 2 else
                       VersionRange.parse("0+"))
            msg.common_structs.append(s)
            stack.append((level, s.fields))
            continue
        f = _field_from(tokens, where, lineno)
        stack[-1][1].append(f)
        stack.append((level, f.fields))
    if msg is None:
        raise ProtoError(f"{path}: empty definition")
    return msg


def load_all(proto_dir: Path) -> list[Message]:
    return [parse_message(p) for p in sorted(proto_dir.glob("*.msg"))]


def snake_case(name: str) -> str:
    s = re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", name)
    return s.lower()
