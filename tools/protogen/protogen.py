#!/usr/bin/env python3
"""Generates C++ message structs from Mala's definitions in proto/ (grammar: docs/protocol-definitions.md).

For each proto/<Name>.msg of kind request, response, data or metadata (a metadata log record: generated like data,
with its record type as api_key) it writes <name>.h and <name>.cc into --out-dir, plus
all_messages.h, message_catalog.cc (name, key, versions, decode/re-encode entry points per message) and
message_samples.cc (a deterministic, fully populated instance of every message at every version, for round-trip
tests and fuzz seeds). Header kinds are hand-written in src/protocol/request_header.cc: the request header's ClientId
is never compact even in flexible versions, which the grammar does not express.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from proto_model import Field, Message, ProtoError, VersionRange, load_all, snake_case  # noqa: E402

CPP_KEYWORDS = {
    "alignas", "alignof", "and", "asm", "auto", "bool", "break", "case", "catch", "char", "class", "const",
    "constexpr", "continue", "default", "delete", "do", "double", "else", "enum", "explicit", "export", "extern",
    "false", "float", "for", "friend", "goto", "if", "inline", "int", "long", "mutable", "namespace", "new",
    "noexcept", "not", "nullptr", "operator", "or", "private", "protected", "public", "register", "return",
    "short", "signed", "sizeof", "static", "struct", "switch", "template", "this", "throw", "true", "try",
    "typedef", "typeid", "typename", "union", "unsigned", "using", "virtual", "void", "volatile", "while", "xor",
}

PRIM_CPP = {
    "bool": "bool", "int8": "int8_t", "int16": "int16_t", "uint16": "uint16_t", "int32": "int32_t",
    "int64": "int64_t", "uint32": "uint32_t", "float64": "double", "string": "std::string",
    "bytes": "std::vector<uint8_t>", "uuid": "::mala::uuid", "records": "records_view",
}
FIXED_SIZE = {"bool": 1, "int8": 1, "int16": 2, "uint16": 2, "int32": 4, "int64": 8, "uint32": 4, "float64": 8,
              "uuid": 16}
WRITE_FN = {"bool": "write_bool", "int8": "write_int8", "int16": "write_int16", "uint16": "write_uint16",
            "int32": "write_int32", "int64": "write_int64", "uint32": "write_uint32", "float64": "write_float64",
            "uuid": "write_uuid"}
READ_FN = {k: v.replace("write_", "read_") for k, v in WRITE_FN.items()}


# Names the generated encode/decode/encoded_size bodies use for their parameters and locals; a field with one of
# these names (the raft control records' `Version`) gets a trailing underscore so it is not shadowed.
RESERVED_MEMBER_NAMES = {"version", "flexible"}


def member_name(name: str) -> str:
    s = snake_case(name)
    return s + "_" if s in CPP_KEYWORDS or s in RESERVED_MEMBER_NAMES else s


def range_cond(r: VersionRange, var: str = "version") -> str:
    if r.is_none():
        return "false"
    parts = []
    if r.low > 0:
        parts.append(f"{var} >= {r.low}")
    if r.high != VersionRange.OPEN:
        parts.append(f"{var} <= {r.high}")
    return " && ".join(parts) if parts else "true"


class StructDef:
    def __init__(self, name: str, cpp: str, fields: list[Field]):
        self.name = name
        self.cpp = cpp  # unqualified C++ name inside the message scope
        self.fields = fields


class MessageGen:
    def __init__(self, msg: Message):
        self.msg = msg
        self.cpp = snake_case(msg.name)
        self.versions = msg.versions
        self.structs: dict[str, StructDef] = {}
        self.order: list[str] = []  # dependency order
        field_names = set()
        self._collect_names(msg.fields, field_names)
        for s in msg.common_structs:
            self._collect_names(s.fields, field_names)
        self.field_names = field_names
        for s in msg.common_structs:
            self._declare(s.name, s.fields)
        self._walk(msg.fields)
        for s in msg.common_structs:
            self._walk(s.fields)
        self._order_structs()

    # --- struct discovery ---------------------------------------------------------------------------------
    def _collect_names(self, fields: list[Field], out: set[str]):
        for f in fields:
            out.add(member_name(f.name))
            self._collect_names(f.fields, out)

    def _declare(self, name: str, fields: list[Field]):
        if name in self.structs:
            if fields and self.structs[name].fields and self.structs[name].fields is not fields:
                raise ProtoError(f"{self.msg.name}: struct {name} defined twice")
            if fields and not self.structs[name].fields:
                self.structs[name].fields = fields
            return
        cpp = snake_case(name)
        if cpp in self.field_names or cpp in CPP_KEYWORDS or cpp == self.cpp:
            cpp += "_data"
        self.structs[name] = StructDef(name, cpp, fields)

    def _walk(self, fields: list[Field]):
        for f in fields:
            if f.is_struct:
                self._declare(f.element_type, f.fields)
                self._walk(f.fields)

    def _order_structs(self):
        seen: set[str] = set()

        def visit(name: str, stack: tuple[str, ...]):
            if name in seen:
                return
            if name in stack:
                raise ProtoError(f"{self.msg.name}: recursive struct {name}")
            sd = self.structs.get(name)
            if sd is None:
                raise ProtoError(f"{self.msg.name}: unknown type {name}")
            for f in sd.fields:
                if f.is_struct:
                    visit(f.element_type, stack + (name,))
            seen.add(name)
            self.order.append(name)

        for name in list(self.structs):
            visit(name, ())
        for f in self.msg.fields:
            if f.is_struct and f.element_type not in self.structs:
                raise ProtoError(f"{self.msg.name}: unknown type {f.element_type}")

    # --- helpers ------------------------------------------------------------------------------------------
    def flat(self, struct_name: str) -> str:
        """Namespace-scope name of a message's struct. Structs are defined outside the message (and aliased into it)
        because clang refuses to construct a nested class with default member initializers before the enclosing
        class is complete."""
        return f"{self.cpp}__{self.structs[struct_name].cpp}"

    def qual(self, struct_name: str) -> str:
        return f"::mala::protocol::{self.flat(struct_name)}"

    def nullable_anywhere(self, f: Field) -> bool:
        return not f.nullable.intersect(self.versions).is_none()

    def elem_cpp(self, f: Field) -> str:
        t = f.element_type
        return PRIM_CPP[t] if t in PRIM_CPP else self.qual(t)

    def field_cpp(self, f: Field) -> str:
        if f.is_array:
            base = f"std::vector<{self.elem_cpp(f)}>"
        else:
            base = self.elem_cpp(f)
        if f.type == "records":
            return base
        if self.nullable_anywhere(f) and (f.is_array or f.type in ("string", "bytes") or f.is_struct):
            return f"std::optional<{base}>"
        return base

    def default_init(self, f: Field) -> str:
        d = f.default
        t = f.type
        nullable = self.nullable_anywhere(f) and t != "records"
        if f.is_array or f.is_struct:
            if nullable:
                return "" if d == "null" else "{std::in_place}"
            return ""
        if t in ("string", "bytes"):
            if nullable:
                if d == "null":
                    return ""
                if t == "string":
                    return "{std::in_place}" if not d else f"{{std::string({cpp_string(d)})}}"
                return "{std::in_place}"
            if t == "string" and d:
                return f"{{{cpp_string(d)}}}"
            return ""
        if t == "records" or t == "uuid":
            return ""
        if t == "bool":
            return "{true}" if d == "true" else "{false}"
        if t == "float64":
            return f"{{{float(d) if d else 0.0}}}"
        if d is None or d == "":
            return "{0}"
        val = int(d, 0)
        cpp = PRIM_CPP[t]
        if t == "int64" and val == -(2 ** 63):
            return "{INT64_MIN}"
        if t == "int32" and val == -(2 ** 31):
            return "{INT32_MIN}"
        return f"{{static_cast<{cpp}>({val})}}"

    def is_default_expr(self, f: Field, m: str) -> str:
        """True when member m still holds its default value (Kafka writes a tagged field only when it differs)."""
        d = f.default
        t = f.type
        nullable = self.nullable_anywhere(f) and t != "records"
        if f.is_array or t == "bytes":
            if nullable:
                return f"!{m}" if d == "null" else f"({m} && {m}->empty())"
            return f"{m}.empty()"
        if f.is_struct:
            if nullable and d == "null":
                return f"!{m}"
            value = f"*{m}" if nullable else m
            guard = f"{m} && " if nullable else ""
            return f"({guard}{value} == std::remove_cvref_t<decltype({value})>{{}})"
        if t == "string":
            if nullable:
                return f"!{m}" if d == "null" else f"({m} && *{m} == {cpp_string(d or '')})"
            return f"{m} == {cpp_string(d or '')}"
        if t == "records":
            return f"{m}.null"
        if t == "uuid":
            return f"{m}.is_zero()"
        init = self.default_init(f)
        return f"{m} == {PRIM_CPP[t]}{init}"

    # --- encode / decode / size bodies -------------------------------------------------------------------
    def encode_value(self, f: Field, expr: str, out: list[str], ind: str, nullable_here: str):
        """Emit code writing `expr` (a value of f's C++ type) with writer `w`."""
        t = f.type
        is_opt = self.nullable_anywhere(f) and t != "records"
        if f.is_array:
            elem = f.element_type
            if is_opt:
                out.append(f"{ind}if (!{expr}) {{")
                out.append(f"{ind}  w.write_array_length({nullable_here} ? -1 : 0, flexible);")
                out.append(f"{ind}}} else {{")
                self._encode_array(f, f"(*{expr})", out, ind + "  ", elem)
                out.append(f"{ind}}}")
            else:
                self._encode_array(f, expr, out, ind, elem)
            return
        if f.is_struct:
            if is_opt:
                out.append(f"{ind}if (!{expr}) {{")
                out.append(f"{ind}  w.write_int8(-1);")
                out.append(f"{ind}}} else {{")
                out.append(f"{ind}  w.write_int8(1);")
                out.append(f"{ind}  {expr}->encode(w, version);")
                out.append(f"{ind}}}")
            else:
                out.append(f"{ind}{expr}.encode(w, version);")
            return
        out.extend(ind + line for line in self._encode_prim(t, expr, is_opt, nullable_here))

    def _encode_prim(self, t: str, expr: str, is_opt: bool, nullable_here: str) -> list[str]:
        if t in WRITE_FN:
            return [f"w.{WRITE_FN[t]}({expr});"]
        if t == "string":
            if is_opt:
                return [f"if ({expr} || {nullable_here}) w.write_nullable_string({expr}, flexible);",
                        f"else w.write_string(\"\", flexible);"]
            return [f"w.write_string({expr}, flexible);"]
        if t == "bytes":
            if is_opt:
                return [f"if ({expr} || {nullable_here}) w.write_nullable_bytes({expr}, flexible);",
                        f"else w.write_bytes({{}}, flexible);"]
            return [f"w.write_bytes({expr}, flexible);"]
        if t == "records":
            return [f"w.write_records({expr}, flexible);"]
        raise ProtoError(f"unknown type {t}")

    def _encode_array(self, f: Field, expr: str, out: list[str], ind: str, elem: str):
        out.append(f"{ind}w.write_array_length(static_cast<int32_t>({expr}.size()), flexible);")
        out.append(f"{ind}for (const auto& element : {expr}) {{")
        if elem in PRIM_CPP:
            out.extend(ind + "  " + line for line in self._encode_prim(elem, "element", False, "false"))
        else:
            out.append(f"{ind}  element.encode(w, version);")
        out.append(f"{ind}}}")

    def decode_value(self, f: Field, expr: str, out: list[str], ind: str, nullable_here: str):
        t = f.type
        is_opt = self.nullable_anywhere(f) and t != "records"
        if f.is_array:
            elem = f.element_type
            out.append(f"{ind}{{")
            out.append(f"{ind}  const int32_t count = r.read_array_length(flexible);")
            out.append(f"{ind}  if (count < 0) {{")
            if is_opt:
                out.append(f"{ind}    if (!({nullable_here})) r.fail(decode_status::invalid_length);")
                out.append(f"{ind}    {expr}.reset();")
            else:
                out.append(f"{ind}    r.fail(decode_status::invalid_length);")
            out.append(f"{ind}  }} else {{")
            target = f"(*{expr})" if is_opt else expr
            if is_opt:
                out.append(f"{ind}    {expr}.emplace();")
            out.append(f"{ind}    {target}.clear();")
            if elem in PRIM_CPP:
                out.append(f"{ind}    {target}.reserve(static_cast<size_t>(count));")
            out.append(f"{ind}    for (int32_t i = 0; i < count && r.ok(); ++i) {{")
            if elem in PRIM_CPP:
                out.append(f"{ind}      {target}.push_back({self._decode_prim_expr(elem, False)});")
            else:
                out.append(f"{ind}      {target}.emplace_back().decode(r, version);")
            out.append(f"{ind}    }}")
            out.append(f"{ind}  }}")
            out.append(f"{ind}}}")
            return
        if f.is_struct:
            if is_opt:
                out.append(f"{ind}if (r.read_int8() < 0) {{")
                out.append(f"{ind}  {expr}.reset();")
                out.append(f"{ind}}} else {{")
                out.append(f"{ind}  {expr}.emplace().decode(r, version);")
                out.append(f"{ind}}}")
            else:
                out.append(f"{ind}{expr}.decode(r, version);")
            return
        if t in ("string", "bytes") and is_opt:
            fn = "read_nullable_string" if t == "string" else "read_nullable_bytes"
            out.append(f"{ind}{expr} = r.{fn}(flexible);")
            out.append(f"{ind}if (!{expr} && !({nullable_here})) r.fail(decode_status::invalid_length);")
            return
        out.append(f"{ind}{expr} = {self._decode_prim_expr(t, False)};")

    def _decode_prim_expr(self, t: str, is_opt: bool) -> str:
        if t in READ_FN:
            return f"r.{READ_FN[t]}()"
        if t == "string":
            return "r.read_string(flexible)"
        if t == "bytes":
            return "r.read_bytes(flexible)"
        if t == "records":
            return "r.read_records(flexible)"
        raise ProtoError(f"unknown type {t}")

    def size_value(self, f: Field, expr: str, out: list[str], ind: str, nullable_here: str):
        t = f.type
        is_opt = self.nullable_anywhere(f) and t != "records"
        if f.is_array:
            elem = f.element_type
            if is_opt:
                out.append(f"{ind}if (!{expr}) {{")
                out.append(f"{ind}  size += array_length_size({nullable_here} ? -1 : 0, flexible);")
                out.append(f"{ind}}} else {{")
                self._size_array(f"(*{expr})", out, ind + "  ", elem)
                out.append(f"{ind}}}")
            else:
                self._size_array(expr, out, ind, elem)
            return
        if f.is_struct:
            if is_opt:
                out.append(f"{ind}size += 1;")
                out.append(f"{ind}if ({expr}) size += {expr}->encoded_size(version);")
            else:
                out.append(f"{ind}size += {expr}.encoded_size(version);")
            return
        out.append(f"{ind}size += {self._size_prim_expr(t, expr, is_opt)};")

    def _size_prim_expr(self, t: str, expr: str, is_opt: bool) -> str:
        if t in FIXED_SIZE:
            return str(FIXED_SIZE[t])
        if t == "string":
            if is_opt:
                return f"({expr} ? string_size({expr}->size(), flexible) : null_string_size(flexible))"
            return f"string_size({expr}.size(), flexible)"
        if t == "bytes":
            if is_opt:
                return f"({expr} ? bytes_size({expr}->size(), flexible) : null_bytes_size(flexible))"
            return f"bytes_size({expr}.size(), flexible)"
        if t == "records":
            return f"({expr}.null ? null_bytes_size(flexible) : bytes_size({expr}.size(), flexible))"
        raise ProtoError(f"unknown type {t}")

    def _size_array(self, expr: str, out: list[str], ind: str, elem: str):
        out.append(f"{ind}size += array_length_size(static_cast<int32_t>({expr}.size()), flexible);")
        if elem in FIXED_SIZE:
            out.append(f"{ind}size += {FIXED_SIZE[elem]} * {expr}.size();")
        else:
            out.append(f"{ind}for (const auto& element : {expr}) {{")
            if elem in PRIM_CPP:
                out.append(f"{ind}  size += {self._size_prim_expr(elem, 'element', False)};")
            else:
                out.append(f"{ind}  size += element.encoded_size(version);")
            out.append(f"{ind}}}")

    # --- struct emission ----------------------------------------------------------------------------------
    def struct_decl(self, cpp: str, fields: list[Field], top: bool) -> list[str]:
        out = []
        ind = "  "
        for f in fields:
            init = self.default_init(f)
            out.append(f"{ind}{self.field_cpp(f)} {member_name(f.name)}{init};")
        out.append("")
        out.append(f"{ind}void encode(wire_writer& w, int16_t version) const;")
        if top:
            out.append(f"{ind}decode_status decode(wire_reader& r, int16_t version);")
        else:
            out.append(f"{ind}void decode(wire_reader& r, int16_t version);")
        out.append(f"{ind}size_t encoded_size(int16_t version) const;")
        out.append(f"{ind}friend bool operator==(const {cpp}&, const {cpp}&) = default;")
        return out

    def for_each_inline(self, fields: list[Field], out: list[str], emit):
        """Emits, for each field that is written inline (present and not tagged) at some version, a version guard
        around emit(field, member, out, indent, nullable-at-this-version expression)."""
        for f in fields:
            cond = range_cond(f.versions)
            if cond == "false":
                continue
            out.append(f"  if (({cond}) && !({range_cond(f.tagged)})) {{")
            emit(f, member_name(f.name), out, "    ", f"({range_cond(f.nullable)})")
            out.append("  }")

    def struct_impl(self, qual: str, fields: list[Field], top: bool) -> list[str]:
        msg = self.cpp
        tagged = sorted([f for f in fields if not f.tagged.is_none()], key=lambda f: f.tag)
        out = []
        # encode
        out.append(f"void {qual}::encode(wire_writer& w, int16_t version) const {{")
        out.append(f"  const bool flexible = {msg}::is_flexible(version);")
        out.append("  (void)flexible;")
        self.for_each_inline(fields, out, self.encode_value)
        out.append("  if (flexible) {")
        if tagged:
            out.append("    uint32_t tag_count = 0;")
            for f in tagged:
                m = member_name(f.name)
                out.append(f"    const bool write_{m} = ({range_cond(f.tagged)}) && !({self.is_default_expr(f, m)});")
                out.append(f"    if (write_{m}) ++tag_count;")
            out.append("    w.write_uvarint(tag_count);")
            for f in tagged:
                m = member_name(f.name)
                out.append(f"    if (write_{m}) {{")
                out.append(f"      std::vector<uint8_t> tagged_bytes;")
                out.append(f"      wire_writer tw(tagged_bytes);")
                out.append(f"      {{")
                out.append(f"        wire_writer& w = tw;")
                self.encode_value(f, m, out, "        ", f"({range_cond(f.nullable)})")
                out.append(f"      }}")
                out.append(f"      w.write_uvarint({f.tag});")
                out.append(f"      w.write_uvarint(static_cast<uint32_t>(tagged_bytes.size()));")
                out.append(f"      w.write_raw(tagged_bytes);")
                out.append(f"    }}")
        else:
            out.append("    w.write_uvarint(0);")
        out.append("  }")
        out.append("}")
        out.append("")
        # decode
        ret = "decode_status" if top else "void"
        out.append(f"{ret} {qual}::decode(wire_reader& r, int16_t version) {{")
        out.append(f"  const bool flexible = {msg}::is_flexible(version);")
        out.append("  (void)flexible;")
        self.for_each_inline(fields, out, self.decode_value)
        out.append("  if (flexible) {")
        out.append("    const uint32_t tag_count = r.read_tag_count();")
        out.append("    for (uint32_t i = 0; i < tag_count && r.ok(); ++i) {")
        out.append("      const uint32_t tag = r.read_uvarint();")
        out.append("      const uint32_t tag_size = r.read_uvarint();")
        out.append("      if (tag_size > r.remaining()) {")
        out.append("        r.fail(decode_status::truncated);")
        out.append("        break;")
        out.append("      }")
        if tagged:
            out.append("      switch (tag) {")
            for f in tagged:
                m = member_name(f.name)
                out.append(f"        case {f.tag}:")
                out.append(f"          if ({range_cond(f.tagged)}) {{")
                out.append(f"            wire_reader tagged_reader(r.read_span(tag_size));")
                out.append(f"            {{")
                out.append(f"              wire_reader& r = tagged_reader;")
                self.decode_value(f, m, out, "              ", f"({range_cond(f.nullable)})")
                out.append(f"            }}")
                out.append(f"            if (!tagged_reader.ok()) r.fail(tagged_reader.status());")
                out.append(f"            continue;")
                out.append(f"          }}")
                out.append(f"          break;")
            out.append("        default:")
            out.append("          break;")
            out.append("      }")
        else:
            out.append("      (void)tag;")
        out.append("      r.skip(tag_size);")
        out.append("    }")
        out.append("  }")
        if top:
            out.append("  return r.status();")
        out.append("}")
        out.append("")
        # size
        out.append(f"size_t {qual}::encoded_size(int16_t version) const {{")
        out.append(f"  const bool flexible = {msg}::is_flexible(version);")
        out.append("  (void)flexible;")
        out.append("  size_t size = 0;")
        self.for_each_inline(fields, out, self.size_value)
        out.append("  if (flexible) {")
        if tagged:
            out.append("    uint32_t tag_count = 0;")
            for f in tagged:
                m = member_name(f.name)
                out.append(f"    if (({range_cond(f.tagged)}) && !({self.is_default_expr(f, m)})) {{")
                out.append("      ++tag_count;")
                out.append("      size_t field_size = 0;")
                out.append("      {")
                out.append("        size_t& size = field_size;")
                self.size_value(f, m, out, "        ", f"({range_cond(f.nullable)})")
                out.append("      }")
                out.append(f"      size += uvarint_size({f.tag}) + uvarint_size(static_cast<uint32_t>(field_size))"
                           " + field_size;")
                out.append("    }")
            out.append("    size += uvarint_size(tag_count);")
        else:
            out.append("    size += 1;")
        out.append("  }")
        out.append("  return size;")
        out.append("}")
        out.append("")
        return out

    # --- samples -------------------------------------------------------------------------------------------
    def sample_value(self, f: Field, expr: str, out: list[str], ind: str):
        """Fills expr with a deterministic non-default value valid at `version` (seed is a uint32_t&)."""
        t = f.type
        is_opt = self.nullable_anywhere(f) and t != "records"
        nullable_cond = range_cond(f.nullable)
        if is_opt:
            out.append(f"{ind}if (({nullable_cond}) && next_sample(seed) % 5 == 0) {{")
            out.append(f"{ind}  {expr}.reset();")
            out.append(f"{ind}}} else {{")
            out.append(f"{ind}  {expr}.emplace();")
            target = f"(*{expr})"
            ind2 = ind + "  "
        else:
            target = expr
            ind2 = ind
        if f.is_array:
            elem = f.element_type
            out.append(f"{ind2}{target}.resize(next_sample(seed) % 3);")
            out.append(f"{ind2}for (auto& element : {target}) {{")
            if elem in PRIM_CPP:
                out.extend(ind2 + "  " + line for line in self._sample_prim(elem, "element"))
            else:
                out.append(f"{ind2}  fill_sample(element, version, seed);")
            out.append(f"{ind2}}}")
        elif f.is_struct:
            out.append(f"{ind2}fill_sample({target}, version, seed);")
        else:
            out.extend(ind2 + line for line in self._sample_prim(t, target))
        if is_opt:
            out.append(f"{ind}}}")

    def _sample_prim(self, t: str, expr: str) -> list[str]:
        if t == "bool":
            return [f"{expr} = next_sample(seed) % 2 == 0;"]
        if t in ("int8", "int16", "uint16", "int32", "int64", "uint32"):
            cpp = PRIM_CPP[t]
            if t == "int64":
                return [f"{expr} = static_cast<int64_t>((uint64_t{{next_sample(seed)}} << 32) | next_sample(seed));"]
            return [f"{expr} = static_cast<{cpp}>(next_sample(seed));"]
        if t == "float64":
            return [f"{expr} = static_cast<double>(next_sample(seed) % 1000) / 8.0;"]
        if t == "string":
            return [f"{expr} = \"s\" + std::to_string(next_sample(seed) % 100000);"]
        if t == "bytes":
            return [f"{expr}.assign(next_sample(seed) % 5, static_cast<uint8_t>(next_sample(seed)));"]
        if t == "uuid":
            return [f"for (auto& b : {expr}.bytes) b = static_cast<uint8_t>(next_sample(seed));"]
        if t == "records":
            return [f"{expr} = records_view::of(std::span<const uint8_t>(sample_record_bytes, "
                    f"next_sample(seed) % sizeof(sample_record_bytes)));"]
        raise ProtoError(t)

    def sample_impl(self, qual: str, fields: list[Field]) -> list[str]:
        out = [f"void fill_sample({qual}& value, int16_t version, uint32_t& seed) {{", "  (void)version;",
               "  (void)seed;"]
        for f in fields:
            present = f.versions
            cond = range_cond(present)
            if cond == "false":
                continue
            out.append(f"  if ({cond}) {{")
            self.sample_value(f, f"value.{member_name(f.name)}", out, "    ")
            out.append("  }")
        out.append("}")
        out.append("")
        return out

    # --- files ---------------------------------------------------------------------------------------------
    def header(self) -> str:
        m = self.msg
        lines = [
            f"// Generated by tools/protogen/protogen.py from proto/{m.path.name if m.path else m.name}. Do not edit.",
            "#pragma once", "",
            "#include <cstdint>", "#include <optional>", "#include <string>", "#include <vector>", "",
            '#include "mala/common/uuid.h"', '#include "mala/protocol/wire.h"', "",
            "namespace mala::protocol {", "",
        ]
        for name in self.order:
            sd = self.structs[name]
            lines.append(f"struct {self.flat(name)} {{")
            lines.extend(self.struct_decl(self.flat(name), sd.fields, False))
            lines.append("};")
            lines.append("")
        lines.append(f"struct {self.cpp} {{")
        if m.api_key is not None:
            lines.append(f"  static constexpr int16_t api_key = {m.api_key};")
        lines.append(f"  static constexpr int16_t min_version = {m.versions.low};")
        lines.append(f"  static constexpr int16_t max_version = {m.versions.high};")
        ev = m.extra_versions
        first_supported = ev.high + 1 if not ev.is_none() and ev.low == m.versions.low else m.versions.low
        lines.append(f"  // Oldest version Kafka 4.x serves in full; older ones are kept for compatibility only.")
        lines.append(f"  static constexpr int16_t kafka4_min_version = {first_supported};")
        lines.append(f"  static constexpr bool latest_version_unstable = {'true' if m.unstable_latest else 'false'};")
        lines.append(f"  static constexpr bool is_flexible([[maybe_unused]] int16_t version) {{ return {range_cond(m.flexible)}; }}")
        lines.append("")
        for name in self.order:
            lines.append(f"  using {self.structs[name].cpp} = {self.flat(name)};")
        lines.append("")
        lines.extend(self.struct_decl(self.cpp, m.fields, True))
        lines.append("};")
        lines.append("")
        lines.append("}  // namespace mala::protocol")
        lines.append("")
        return "\n".join(lines)

    def source(self) -> str:
        lines = [
            f"// Generated by tools/protogen/protogen.py. Do not edit.",
            f'#include "mala/protocol/messages/{self.cpp}.h"', "",
            "#include <climits>", "#include <type_traits>", "",
            "namespace mala::protocol {", "",
        ]
        for name in self.order:
            sd = self.structs[name]
            lines.extend(self.struct_impl(self.flat(name), sd.fields, False))
        lines.extend(self.struct_impl(self.cpp, self.msg.fields, True))
        lines.append("}  // namespace mala::protocol")
        lines.append("")
        return "\n".join(lines)

    def error_code_walkers(self) -> list[str]:
        """collect_error_codes(value, out) for the message and each of its structs: every ErrorCode field, at every
        depth (what Kafka's AbstractResponse.errorCounts gathers; a field the decoded version lacks holds 0)."""
        out = []
        types = [(self.flat(n), self.structs[n].fields) for n in self.order] + [(self.cpp, self.msg.fields)]
        for qual, _ in types:
            out.append(f"[[maybe_unused]] void collect_error_codes(const {qual}& value, std::vector<int16_t>& out);")
        for qual, fields in types:
            out.append(f"void collect_error_codes([[maybe_unused]] const {qual}& value, "
                       "[[maybe_unused]] std::vector<int16_t>& out) {")
            for f in fields:
                m = member_name(f.name)
                nullable = self.nullable_anywhere(f) and f.type != "records"
                if f.is_struct:
                    if f.is_array:
                        each = f"*value.{m}" if nullable else f"value.{m}"
                        guard = f"if (value.{m}) " if nullable else ""
                        out.append(f"  {guard}for (const auto& e : {each}) collect_error_codes(e, out);")
                    elif nullable:
                        out.append(f"  if (value.{m}) collect_error_codes(*value.{m}, out);")
                    else:
                        out.append(f"  collect_error_codes(value.{m}, out);")
                elif f.type == "int16" and f.name == "ErrorCode":
                    out.append(f"  out.push_back(value.{m});")
            out.append("}")
            out.append("")
        return out

    def samples(self) -> list[str]:
        out = []
        for name in self.order:
            sd = self.structs[name]
            out.append(f"void fill_sample({self.flat(name)}& value, int16_t version, uint32_t& seed);")
        for name in self.order:
            sd = self.structs[name]
            out.extend(self.sample_impl(self.flat(name), sd.fields))
        out.extend(self.sample_impl(self.cpp, self.msg.fields))
        return out


def cpp_string(s: str) -> str:
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'


def write_if_changed(path: Path, text: str):
    if path.exists() and path.read_text() == text:
        return
    path.write_text(text)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--proto-dir", required=True, type=Path)
    ap.add_argument("--out-dir", required=True, type=Path)
    args = ap.parse_args()
    try:
        messages = [m for m in load_all(args.proto_dir)]
    except ProtoError as e:
        print(f"protogen: {e}", file=sys.stderr)
        return 1
    args.out_dir.mkdir(parents=True, exist_ok=True)
    gens = []
    for m in messages:
        if m.kind == "header":
            # Hand-written in src/protocol/request_header.cc (see module docstring); emit an empty unit so the
            # build's file list stays uniform.
            name = snake_case(m.name)
            write_if_changed(args.out_dir / f"{name}.h", f"// {m.name}: hand-written in mala/protocol/request_header.h\n#pragma once\n")
            write_if_changed(args.out_dir / f"{name}.cc", f"// {m.name}: hand-written in src/protocol/request_header.cc\n")
            continue
        try:
            g = MessageGen(m)
            write_if_changed(args.out_dir / f"{g.cpp}.h", g.header())
            write_if_changed(args.out_dir / f"{g.cpp}.cc", g.source())
        except ProtoError as e:
            print(f"protogen: {m.path}: {e}", file=sys.stderr)
            return 1
        gens.append(g)

    # all_messages.h
    inc = ["// Generated by tools/protogen/protogen.py. Do not edit.", "#pragma once", ""]
    inc += [f'#include "mala/protocol/messages/{g.cpp}.h"' for g in gens]
    write_if_changed(args.out_dir / "all_messages.h", "\n".join(inc) + "\n")

    # message_catalog.cc
    cat = ["// Generated by tools/protogen/protogen.py. Do not edit.",
           '#include "mala/protocol/message_catalog.h"', '#include "mala/protocol/messages/all_messages.h"', "",
           "namespace mala::protocol {", "", "namespace {", ""]
    for g in gens:
        if g.msg.kind == "response":
            cat.extend(g.error_code_walkers())
            cat.append(f"decode_status error_codes_{g.cpp}(std::span<const uint8_t> in, int16_t version, "
                       "std::vector<int16_t>& out) {")
            cat.append(f"  {g.cpp} message;")
            cat.append("  wire_reader r(in);")
            cat.append("  const decode_status status = message.decode(r, version);")
            cat.append("  if (status == decode_status::ok) collect_error_codes(message, out);")
            cat.append("  return status;")
            cat.append("}")
            cat.append("")
        cat.append(f"decode_status round_trip_{g.cpp}(std::span<const uint8_t> in, int16_t version, "
                   "std::vector<uint8_t>* out) {")
        cat.append(f"  {g.cpp} message;")
        cat.append("  wire_reader r(in);")
        cat.append("  const decode_status status = message.decode(r, version);")
        cat.append("  if (status == decode_status::ok && out) {")
        cat.append("    out->clear();")
        cat.append("    out->reserve(message.encoded_size(version));")
        cat.append("    wire_writer w(*out);")
        cat.append("    message.encode(w, version);")
        cat.append("  }")
        cat.append("  return status;")
        cat.append("}")
        cat.append("")
    cat.append("constexpr message_info catalog[] = {")
    for g in gens:
        m = g.msg
        key = m.api_key if m.api_key is not None else -1
        flex = m.flexible.low if not m.flexible.is_none() else -1
        cat.append(f'    {{"{m.name}", message_kind::{m.kind}, {key}, {g.cpp}::min_version, {g.cpp}::max_version, '
                   f"{g.cpp}::kafka4_min_version, {flex}, {'true' if m.unstable_latest else 'false'}, "
                   f"&round_trip_{g.cpp}, "
                   f"{('&error_codes_' + g.cpp) if m.kind == 'response' else 'nullptr'}}},")
    cat.append("};")
    cat.append("")
    cat.append("}  // namespace")
    cat.append("")
    cat.append("std::span<const message_info> message_catalog() { return catalog; }")
    cat.append("")
    cat.append("const message_info* find_message(int16_t api_key, message_kind kind) {")
    cat.append("  for (const auto& info : catalog) {")
    cat.append("    if (info.api_key == api_key && info.kind == kind) return &info;")
    cat.append("  }")
    cat.append("  return nullptr;")
    cat.append("}")
    cat.append("")
    cat.append("}  // namespace mala::protocol")
    write_if_changed(args.out_dir / "message_catalog.cc", "\n".join(cat) + "\n")

    # message_samples.cc
    smp = ["// Generated by tools/protogen/protogen.py. Do not edit.",
           '#include "mala/protocol/message_samples.h"', '#include "mala/protocol/messages/all_messages.h"', "",
           "#include <string>", "",
           "namespace mala::protocol {", "", "namespace {", "",
           "uint32_t next_sample(uint32_t& seed) {",
           "  seed = seed * 1664525u + 1013904223u;",
           "  return seed >> 8;",
           "}", "",
           "// A real v2 record batch would do, but the codec treats records as opaque bytes here.",
           "constexpr uint8_t sample_record_bytes[] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15};", ""]
    for g in gens:
        smp.extend(g.samples())
    smp.append("}  // namespace")
    smp.append("")
    smp.append("bool encode_sample(std::string_view message_name, int16_t version, uint32_t seed, "
               "std::vector<uint8_t>& out) {")
    for g in gens:
        smp.append(f'  if (message_name == "{g.msg.name}") {{')
        smp.append(f"    {g.cpp} value;")
        smp.append("    fill_sample(value, version, seed);")
        smp.append("    out.clear();")
        smp.append("    wire_writer w(out);")
        smp.append("    value.encode(w, version);")
        smp.append("    return value.encoded_size(version) == out.size();")
        smp.append("  }")
    smp.append("  return false;")
    smp.append("}")
    smp.append("")
    smp.append("}  // namespace mala::protocol")
    write_if_changed(args.out_dir / "message_samples.cc", "\n".join(smp) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
