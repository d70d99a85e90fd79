// A bounded JSON parser (RFC 8259) for the small documents Mala reads from untrusted sources: JWT headers and
// claims (SASL/OAUTHBEARER) and JWKS key sets. Limits on input size, nesting depth and element count are
// checked before anything grows, so a hostile document costs at most its bounded size. Strings are decoded to
// UTF-8 (\uXXXX escapes and surrogate pairs included); numbers keep their text beside the double so integers
// beyond 2^53 can be refused rather than rounded. Pure functions, callable from any thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "mala/common/result.h"

namespace mala::json {

struct value;
using array = std::vector<value>;
using object = std::vector<std::pair<std::string, value>>;  // in document order; duplicate keys refused

struct number {
  double as_double = 0;
  std::string text;  // as written
};

struct value {
  std::variant<std::nullptr_t, bool, number, std::string, array, object> data = nullptr;

  bool is_null() const { return std::holds_alternative<std::nullptr_t>(data); }
  const bool* as_bool() const { return std::get_if<bool>(&data); }
  const number* as_number() const { return std::get_if<number>(&data); }
  const std::string* as_string() const { return std::get_if<std::string>(&data); }
  const array* as_array() const { return std::get_if<array>(&data); }
  const object* as_object() const { return std::get_if<object>(&data); }
  // The member `key` of an object; null when this is not an object or has no such member.
  const value* find(std::string_view key) const;
  // An integral number that fits in int64 (no fraction, no exponent beyond it); nullopt otherwise.
  std::optional<int64_t> as_int64() const;
};

struct limits {
  size_t max_bytes = 1 << 20;
  size_t max_depth = 32;
  size_t max_elements = 100'000;  // values of every kind, counted over the whole document
};

// The document; invalid_request with the byte offset of the first problem (never the text) otherwise.
result<value> parse(std::string_view text, const limits& bounds = {});

}  // namespace mala::json
