#include "mala/common/listener.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <set>

namespace mala {

namespace {

status invalid_list_error(std::string message) {
  return status::error(error_code::invalid_config, std::move(message));
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

// Kafka splits these values on commas with surrounding whitespace; an empty value is an empty list.
std::vector<std::string_view> split_csv(std::string_view csv) {
  std::vector<std::string_view> out;
  csv = trim(csv);
  if (csv.empty()) return out;
  while (true) {
    auto comma = csv.find(',');
    out.push_back(trim(csv.substr(0, comma)));
    if (comma == std::string_view::npos) break;
    csv.remove_prefix(comma + 1);
  }
  return out;
}

std::string upper(std::string_view s) {
  std::string out(s);
  for (auto& c : out) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return out;
}

std::string quoted(std::string_view s) {
  return "'" + std::string(s) + "'";
}

// Parses a decimal port; `min_port` is 0 for listeners (ephemeral) and 1 for addresses we connect to.
std::optional<uint16_t> parse_port(std::string_view text, int min_port) {
  if (text.empty() || text.size() > 5) return std::nullopt;
  int value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc{} || end != text.data() + text.size()) return std::nullopt;
  if (value < min_port || value > 65535) return std::nullopt;
  return static_cast<uint16_t>(value);
}

// Splits `host:port` or `[v6]:port`. The host may be empty (all interfaces) only where allowed.
result<host_port> split_host_port(std::string_view text, int min_port, bool allow_empty_host) {
  std::string_view host;
  std::string_view port;
  if (!text.empty() && text.front() == '[') {
    auto close = text.find(']');
    if (close == std::string_view::npos) return invalid_list_error("unterminated '[' in " + quoted(text));
    host = text.substr(1, close - 1);
    auto rest = text.substr(close + 1);
    if (rest.empty() || rest.front() != ':') return invalid_list_error("missing port in " + quoted(text));
    port = rest.substr(1);
    if (host.empty()) return invalid_list_error("empty IPv6 address in " + quoted(text));
  } else {
    auto colon = text.rfind(':');
    if (colon == std::string_view::npos) return invalid_list_error("missing port in " + quoted(text));
    host = text.substr(0, colon);
    port = text.substr(colon + 1);
    if (host.find(':') != std::string_view::npos)
      return invalid_list_error("IPv6 addresses must be written in brackets, e.g. [::1]:9092, in " +
                                quoted(text));
  }
  if (port.empty()) return invalid_list_error("missing port in " + quoted(text));
  if (host.empty() && !allow_empty_host) return invalid_list_error("missing host in " + quoted(text));
  for (char c : host) {
    if (std::isspace(static_cast<unsigned char>(c)) || c == '/' || c == '@' || c == '[' || c == ']')
      return invalid_list_error("invalid host in " + quoted(text));
  }
  auto parsed_port = parse_port(port, min_port);
  if (!parsed_port) {
    return invalid_list_error("invalid port " + quoted(port) + " in " + quoted(text) + " (expected " +
                              std::to_string(min_port) + "-65535)");
  }
  return host_port{std::string(host), *parsed_port};
}

bool valid_listener_name(std::string_view name) {
  if (name.empty()) return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.';
  });
}

}  // namespace

std::string_view to_string(security_protocol protocol) {
  switch (protocol) {
    case security_protocol::plaintext:
      return "PLAINTEXT";
    case security_protocol::ssl:
      return "SSL";
    case security_protocol::sasl_plaintext:
      return "SASL_PLAINTEXT";
    case security_protocol::sasl_ssl:
      return "SASL_SSL";
  }
  return "PLAINTEXT";
}

std::optional<security_protocol> parse_security_protocol(std::string_view name) {
  auto n = upper(trim(name));
  if (n == "PLAINTEXT") return security_protocol::plaintext;
  if (n == "SSL") return security_protocol::ssl;
  if (n == "SASL_PLAINTEXT") return security_protocol::sasl_plaintext;
  if (n == "SASL_SSL") return security_protocol::sasl_ssl;
  return std::nullopt;
}

std::string format_listener(const listener_config& listener) {
  bool v6 = listener.host.find(':') != std::string::npos;
  std::string host = v6 ? "[" + listener.host + "]" : listener.host;
  return listener.name + "://" + host + ":" + std::to_string(listener.port);
}

result<std::vector<listener_endpoint>> parse_listeners(std::string_view csv) {
  std::vector<listener_endpoint> out;
  std::set<std::string> names;
  for (auto item : split_csv(csv)) {
    if (item.empty()) return invalid_list_error("empty listener in list");
    auto sep = item.find("://");
    if (sep == std::string_view::npos)
      return invalid_list_error("listener " + quoted(item) + " is not of the form NAME://host:port");
    auto name = item.substr(0, sep);
    if (!valid_listener_name(name))
      return invalid_list_error("invalid listener name " + quoted(name) + " in " + quoted(item));
    auto hp = split_host_port(item.substr(sep + 3), 0, true);
    if (!hp.ok()) return hp.error();
    auto& address = hp.value();
    listener_endpoint endpoint{upper(name), std::move(address.host), address.port};
    // Kafka: "Each listener must have a different name".
    if (!names.insert(endpoint.name).second)
      return invalid_list_error("listener name " + endpoint.name + " is used twice");
    out.push_back(std::move(endpoint));
  }
  return out;
}

result<std::vector<listener_protocol_mapping>> parse_security_protocol_map(std::string_view csv) {
  std::vector<listener_protocol_mapping> out;
  std::set<std::string> names;
  for (auto item : split_csv(csv)) {
    auto colon = item.find(':');
    if (item.empty() || colon == std::string_view::npos)
      return invalid_list_error("entry " + quoted(item) +
                                " is not of the form LISTENER_NAME:SECURITY_PROTOCOL");
    auto name = trim(item.substr(0, colon));
    auto protocol_name = trim(item.substr(colon + 1));
    if (!valid_listener_name(name)) return invalid_list_error("invalid listener name " + quoted(name));
    auto protocol = parse_security_protocol(protocol_name);
    if (!protocol)
      return invalid_list_error("invalid security protocol " + quoted(protocol_name) + " for " +
                                quoted(name));
    auto normalised = upper(name);
    if (!names.insert(normalised).second)
      return invalid_list_error("listener name " + normalised + " is mapped twice");
    out.push_back({normalised, *protocol});
  }
  return out;
}

result<std::vector<quorum_voter>> parse_quorum_voters(std::string_view csv) {
  std::vector<quorum_voter> out;
  std::set<int32_t> ids;
  for (auto item : split_csv(csv)) {
    auto at = item.find('@');
    if (item.empty() || at == std::string_view::npos)
      return invalid_list_error("voter " + quoted(item) + " is not of the form id@host:port");
    auto id_text = item.substr(0, at);
    int32_t id = 0;
    auto [end, ec] = std::from_chars(id_text.data(), id_text.data() + id_text.size(), id);
    if (id_text.empty() || ec != std::errc{} || end != id_text.data() + id_text.size() || id < 0)
      return invalid_list_error("invalid voter id " + quoted(id_text) + " in " + quoted(item));
    auto hp = split_host_port(item.substr(at + 1), 1, false);
    if (!hp.ok()) return hp.error();
    if (!ids.insert(id).second)
      return invalid_list_error("voter id " + std::to_string(id) + " appears twice");
    auto& address = hp.value();
    out.push_back({id, std::move(address.host), address.port});
  }
  return out;
}

result<std::vector<host_port>> parse_host_ports(std::string_view csv) {
  std::vector<host_port> out;
  for (auto item : split_csv(csv)) {
    if (item.empty()) return invalid_list_error("empty address in list");
    auto hp = split_host_port(item, 1, false);
    if (!hp.ok()) return hp.error();
    out.push_back(std::move(hp.value()));
  }
  return out;
}

}  // namespace mala
