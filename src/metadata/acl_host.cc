#include "mala/metadata/acl_host.h"

#include <arpa/inet.h>

#include <algorithm>
#include <charconv>
#include <cstring>

namespace mala::metadata {

namespace {

bool all_digits(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

int to_int(std::string_view digits) {
  int value = 0;
  std::from_chars(digits.data(), digits.data() + digits.size(), value);
  return value;
}

void set_error(std::string* error, std::string message) {
  if (error) *error = std::move(message);
}

void mask(cidr_range& range) {
  const int bytes = range.ipv6 ? 16 : 4;
  for (int i = 0; i < bytes; ++i) {
    const int keep = std::clamp(range.prefix_bits - 8 * i, 0, 8);
    range.network[static_cast<size_t>(i)] &= static_cast<uint8_t>(keep == 0 ? 0 : 0xff << (8 - keep));
  }
}

std::optional<cidr_range> parse_ipv4(std::string_view host, std::string* error) {
  // SubnetUtils: (\d{1,3})\.(\d{1,3})\.(\d{1,3})\.(\d{1,3})/(\d{1,2}), then range checks.
  const std::string could_not_parse = "Could not parse [" + std::string(host) + "]";
  const auto slash = host.find('/');
  if (slash == std::string_view::npos) {
    set_error(error, could_not_parse);
    return std::nullopt;
  }
  std::string_view address = host.substr(0, slash);
  const std::string_view prefix = host.substr(slash + 1);
  if (!all_digits(prefix) || prefix.size() > 2) {
    set_error(error, could_not_parse);
    return std::nullopt;
  }
  cidr_range range;
  std::array<int, 4> octets{};
  for (int i = 0; i < 4; ++i) {
    const auto dot = i < 3 ? address.find('.') : address.size();
    if (dot == std::string_view::npos) {
      set_error(error, could_not_parse);
      return std::nullopt;
    }
    const std::string_view octet = address.substr(0, dot);
    if (!all_digits(octet) || octet.size() > 3) {
      set_error(error, could_not_parse);
      return std::nullopt;
    }
    octets[static_cast<size_t>(i)] = to_int(octet);
    address = dot < address.size() ? address.substr(dot + 1) : std::string_view();
  }
  for (int octet : octets) {
    if (octet > 255) {
      set_error(error, "Value [" + std::to_string(octet) + "] not in range [0,255]");
      return std::nullopt;
    }
  }
  range.prefix_bits = to_int(prefix);
  if (range.prefix_bits > 32) {
    set_error(error, "Value [" + std::to_string(range.prefix_bits) + "] not in range [0,32]");
    return std::nullopt;
  }
  for (size_t i = 0; i < 4; ++i) range.network[i] = static_cast<uint8_t>(octets[i]);
  mask(range);
  return range;
}

std::optional<cidr_range> parse_ipv6(std::string_view host, std::string* error) {
  // SubnetUtils6: "<address>/<prefix>", the prefix an int in [0, 128], the address an IPv6 address.
  const std::string could_not_parse = "Could not parse [" + std::string(host) + "]";
  const auto slash = host.find('/');
  if (slash == std::string_view::npos) {
    set_error(error, could_not_parse + " - missing prefix length");
    return std::nullopt;
  }
  std::string_view prefix = host.substr(slash + 1);
  const bool negative = !prefix.empty() && (prefix.front() == '-' || prefix.front() == '+');
  const std::string_view digits = negative ? prefix.substr(1) : prefix;
  if (!all_digits(digits) || digits.size() > 9) {
    set_error(error, could_not_parse + " - invalid prefix length");
    return std::nullopt;
  }
  const int bits = to_int(digits);
  if ((prefix.front() == '-' && bits != 0) || bits > 128) {
    set_error(error, could_not_parse + " - prefix length must be between 0 and 128");
    return std::nullopt;
  }
  std::string address(host.substr(0, slash));
  if (address.size() >= 2 && address.front() == '[' && address.back() == ']') {
    address = address.substr(1, address.size() - 2);
  }
  cidr_range range;
  range.ipv6 = true;
  range.prefix_bits = bits;
  if (inet_pton(AF_INET6, address.c_str(), range.network.data()) != 1) {
    set_error(error, could_not_parse + " - not an IPv6 address");
    return std::nullopt;
  }
  mask(range);
  return range;
}

// The client address as bytes: IPv4 (four bytes), or IPv6 unless it is IPv4-mapped.
std::optional<cidr_range> address_of(std::string_view text) {
  std::string address(text);
  if (address.size() >= 2 && address.front() == '[' && address.back() == ']') {
    address = address.substr(1, address.size() - 2);
  }
  cidr_range out;
  if (inet_pton(AF_INET, address.c_str(), out.network.data()) == 1) {
    out.prefix_bits = 32;
    return out;
  }
  std::array<uint8_t, 16> v6{};
  if (inet_pton(AF_INET6, address.c_str(), v6.data()) != 1) return std::nullopt;
  static constexpr std::array<uint8_t, 12> v4_mapped{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
  if (std::equal(v4_mapped.begin(), v4_mapped.end(), v6.begin())) {
    std::copy(v6.begin() + 12, v6.end(), out.network.begin());
    out.prefix_bits = 32;
    return out;
  }
  out.ipv6 = true;
  out.network = v6;
  out.prefix_bits = 128;
  return out;
}

}  // namespace

std::optional<cidr_range> parse_cidr(std::string_view host, std::string* error) {
  return host.find(':') != std::string_view::npos ? parse_ipv6(host, error) : parse_ipv4(host, error);
}

bool cidr_contains(const cidr_range& range, std::string_view address) {
  auto client = address_of(address);
  if (!client || client->ipv6 != range.ipv6) return false;
  client->prefix_bits = range.prefix_bits;
  mask(*client);
  return client->network == range.network;
}

std::optional<acl_host_problem> invalid_acl_host(std::string_view host, bool cidr_supported) {
  if (host.empty()) return acl_host_problem{false, "Host pattern cannot be null or empty"};
  if (host == "*" || host.find('/') == std::string_view::npos) return std::nullopt;
  if (!cidr_supported) {
    return acl_host_problem{true, "CIDR-based ACL host patterns require metadata version 4.4-IV1 or higher."};
  }
  std::string reason;
  if (!parse_cidr(host, &reason)) {
    return acl_host_problem{false, "Invalid CIDR notation '" + std::string(host) + "': " + reason};
  }
  return std::nullopt;
}

}  // namespace mala::metadata
