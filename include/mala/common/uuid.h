// A 128-bit identifier as Kafka uses for topic ids, cluster ids and incarnation ids. Printed the way Kafka prints
// it: URL-safe base64 without padding (22 characters).
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace mala {

struct uuid {
  std::array<uint8_t, 16> bytes{};

  bool is_zero() const;
  std::string to_string() const;
  static std::optional<uuid> parse(std::string_view base64);
  // A random version-4 uuid that is neither zero nor Kafka's reserved METADATA_TOPIC_ID (1), and whose base64 form
  // does not start with '-' (Kafka avoids those so that ids do not look like command-line flags).
  static uuid random();
  friend bool operator==(const uuid&, const uuid&) = default;
};

}  // namespace mala
