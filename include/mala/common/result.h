// Results on the request path: a Kafka error code with a human-readable detail for logs, or a value. No exceptions.
#pragma once

#include <string>
#include <utility>
#include <variant>

#include "mala/common/error_code.h"

namespace mala {

struct status {
  error_code code = error_code::none;
  std::string message;  // for logs; never sent to clients as-is

  bool ok() const { return code == error_code::none; }
  static status success() { return {}; }
  static status error(error_code code, std::string message) { return {code, std::move(message)}; }
};

template <typename T>
class result {
 public:
  result(T value) : _v(std::move(value)) {}  // NOLINT: implicit on purpose, like std::expected
  result(status error) : _v(std::move(error)) {}

  bool ok() const { return std::holds_alternative<T>(_v); }
  explicit operator bool() const { return ok(); }
  T& value() { return std::get<T>(_v); }
  const T& value() const { return std::get<T>(_v); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() { return value(); }
  const T& operator*() const { return value(); }
  const status& error() const { return std::get<status>(_v); }

 private:
  std::variant<T, status> _v;
};

}  // namespace mala
