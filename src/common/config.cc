// Loading and validating a node's configuration: gather raw values (YAML or properties file, then overrides),
// parse each known key by its Kafka type, check its validator, then run the cross-key checks Kafka's
// KafkaConfig runs for KRaft nodes (listeners, controller listeners, quorum voters, roles, time-unit chains).
#include "mala/common/config.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <set>
#include <sstream>

#include <yaml-cpp/yaml.h>

#include "mala/common/assert.h"
#include "mala/common/ssl_principal_mapper.h"
#include "mala/common/tls_settings.h"
#include "mala/common/uuid.h"

namespace mala {

// A refused configuration as the loading steps report it; load() turns it into a status.
struct config_error {
  std::string key;  // the offending key; empty for file-level problems (unreadable file, YAML syntax)
  std::string message;
};

namespace {

struct raw_value {
  std::optional<std::string> text;  // nullopt: YAML null, i.e. "use the default"
  config_source source = config_source::file;
};

std::string_view trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

std::string lower(std::string_view s) {
  std::string out(s);
  for (auto& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

std::string upper(std::string_view s) {
  std::string out(s);
  for (auto& c : out) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return out;
}

std::string join(const std::vector<std::string>& items, std::string_view sep = ",") {
  std::string out;
  for (size_t i = 0; i < items.size(); ++i) {
    if (i > 0) out += sep;
    out += items[i];
  }
  return out;
}

config_error invalid(std::string_view key, std::string_view raw, std::string_view reason) {
  return {std::string(key), "Invalid value '" + std::string(raw) + "' for configuration " + std::string(key) +
                                ": " + std::string(reason)};
}

// Every message names its key, so that an operator reading only the message knows what to fix.
config_error error(std::string_view key, std::string message) {
  if (!key.empty() && message.find(key) == std::string::npos) message = std::string(key) + ": " + message;
  return {std::string(key), std::move(message)};
}

// ---- Reading files

// Flattens nested maps with dots; a sequence of scalars becomes Kafka's comma-separated form.
std::optional<config_error> flatten_yaml(const YAML::Node& node, const std::string& prefix,
                                         std::vector<std::pair<std::string, raw_value>>& out) {
  for (const auto& item : node) {
    if (!item.first.IsScalar()) return error(prefix, "YAML keys must be scalars (under '" + prefix + "')");
    std::string key = prefix.empty() ? item.first.Scalar() : prefix + "." + item.first.Scalar();
    const YAML::Node& value = item.second;
    switch (value.Type()) {
      case YAML::NodeType::Null:
      case YAML::NodeType::Undefined:
        out.emplace_back(key, raw_value{std::nullopt});
        break;
      case YAML::NodeType::Scalar:
        out.emplace_back(key, raw_value{value.Scalar()});
        break;
      case YAML::NodeType::Sequence: {
        std::vector<std::string> elements;
        for (const auto& element : value) {
          if (!element.IsScalar()) return error(key, key + ": list elements must be plain values");
          elements.push_back(element.Scalar());
        }
        out.emplace_back(key, raw_value{join(elements)});
        break;
      }
      case YAML::NodeType::Map:
        if (auto err = flatten_yaml(value, key, out)) return err;
        break;
    }
  }
  return std::nullopt;
}

std::variant<std::vector<std::pair<std::string, raw_value>>, config_error> read_yaml(std::string_view text) {
  std::vector<std::pair<std::string, raw_value>> out;
  // Configuration is read once at start-up, off the request path; yaml-cpp reports syntax errors by throwing.
  try {
    YAML::Node root = YAML::Load(std::string(text));
    if (root.IsNull()) return out;
    if (!root.IsMap())
      return error("", "the configuration must be a YAML map of Kafka property names to values");
    if (auto err = flatten_yaml(root, "", out)) return *err;
  } catch (const YAML::Exception& e) {
    return error("", std::string("YAML syntax error: ") + e.what());
  }
  // Both `log.dirs:` and `log: {dirs:}` in one file is a mistake, not an override.
  std::set<std::string> seen;
  for (const auto& [key, value] : out) {
    if (!seen.insert(key).second) return error(key, key + " is set more than once in the configuration file");
  }
  return out;
}

// ---- Typed parsing

template <typename Int>
std::optional<Int> parse_integer(std::string_view text) {
  if (!text.empty() && text.front() == '+') text.remove_prefix(1);  // Java's parseInt accepts a leading '+'
  Int value{};
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || ec != std::errc{} || end != text.data() + text.size()) return std::nullopt;
  return value;
}

std::variant<node_config::value, config_error> parse_typed(const config_key& key, std::string_view raw_text) {
  auto text = trim(raw_text);
  switch (key.type) {
    case config_type::boolean: {
      auto v = lower(text);
      if (v == "true") return true;
      if (v == "false") return false;
      return invalid(key.name, raw_text, "Expected value to be either true or false");
    }
    case config_type::int32: {
      auto v = parse_integer<int32_t>(text);
      if (!v) return invalid(key.name, raw_text, "Not a number of type int");
      return static_cast<int64_t>(*v);
    }
    case config_type::int16: {
      auto v = parse_integer<int16_t>(text);
      if (!v) return invalid(key.name, raw_text, "Not a number of type short");
      return static_cast<int64_t>(*v);
    }
    case config_type::int64: {
      auto v = parse_integer<int64_t>(text);
      if (!v) return invalid(key.name, raw_text, "Not a number of type long");
      return *v;
    }
    case config_type::float64: {
      std::string s(text);
      char* end = nullptr;
      errno = 0;
      double v = std::strtod(s.c_str(), &end);
      if (s.empty() || errno != 0 || end != s.c_str() + s.size())
        return invalid(key.name, raw_text, "Not a number of type double");
      return v;
    }
    case config_type::string:
    case config_type::password:
    case config_type::class_name:
      return std::string(text);
    case config_type::list: {
      std::vector<std::string> items;
      if (text.empty()) return items;
      while (true) {
        auto comma = text.find(',');
        auto item = trim(text.substr(0, comma));
        if (item.empty()) return invalid(key.name, raw_text, "empty element in comma-separated list");
        items.emplace_back(item);
        if (comma == std::string_view::npos) break;
        text.remove_prefix(comma + 1);
      }
      return items;
    }
  }
  return invalid(key.name, raw_text, "unsupported type");
}

std::optional<config_error> check_validator(const config_key& key, const node_config::value& v,
                                            std::string_view raw) {
  if (auto* n = std::get_if<int64_t>(&v)) {
    if (key.min && *n < *key.min)
      return invalid(key.name, raw, "Value must be at least " + std::to_string(*key.min));
    if (key.max && *n > *key.max)
      return invalid(key.name, raw, "Value must be no more than " + std::to_string(*key.max));
  }
  if (key.allowed.empty()) return std::nullopt;
  auto allowed = [&](std::string_view s) {
    return std::find(key.allowed.begin(), key.allowed.end(), s) != key.allowed.end();
  };
  std::string choices;
  for (auto a : key.allowed) choices += (choices.empty() ? "" : ", ") + std::string(a);
  if (auto* s = std::get_if<std::string>(&v)) {
    if (!allowed(*s)) return invalid(key.name, raw, "String must be one of: " + choices);
  }
  if (auto* l = std::get_if<std::vector<std::string>>(&v)) {
    for (const auto& item : *l) {
      if (!allowed(item)) return invalid(key.name, raw, "'" + item + "' is not one of: " + choices);
    }
  }
  return std::nullopt;
}

std::string format_value(const node_config::value& v) {
  struct visitor {
    std::string operator()(std::monostate) const { return ""; }
    std::string operator()(bool b) const { return b ? "true" : "false"; }
    std::string operator()(int64_t n) const { return std::to_string(n); }
    std::string operator()(double d) const {
      std::ostringstream s;
      s << d;
      return s.str();
    }
    std::string operator()(const std::string& s) const { return s; }
    std::string operator()(const std::vector<std::string>& l) const { return join(l); }
  };
  return std::visit(visitor{}, v);
}

bool explicitly_set(const std::map<std::string, raw_value, std::less<>>& raw, std::string_view key) {
  auto it = raw.find(key);
  return it != raw.end() && it->second.text.has_value();
}

bool is_literal_ipv6(const std::string& host) {
  return host.find(':') != std::string::npos;
}
bool is_literal_ipv4(const std::string& host) {
  return !host.empty() &&
         std::all_of(host.begin(), host.end(), [](char c) { return std::isdigit(c) || c == '.'; });
}

// The SASL settings Mala reads under a `listener.name.<name>.` prefix: the mechanisms, and the JAAS
// configuration per mechanism (`plain.sasl.jaas.config`, ...) or for the whole listener.
bool is_served_listener_sasl_setting(std::string_view rest) {
  if (rest == "sasl.enabled.mechanisms" || rest == "sasl.jaas.config") return true;
  // OAUTHBEARER's validator class and its sasl.oauthbearer.* settings, with or without the mechanism prefix.
  if (rest == "oauthbearer.sasl.server.callback.handler.class") return true;
  if (rest.starts_with("oauthbearer.")) rest.remove_prefix(std::string_view("oauthbearer.").size());
  if ((rest.starts_with("sasl.oauthbearer.") || rest.starts_with("sasl.login.")) && find_config_key(rest))
    return true;
  for (std::string_view mechanism : {"plain.", "scram-sha-256.", "scram-sha-512.", "oauthbearer."}) {
    if (rest.starts_with(mechanism) && rest.substr(mechanism.size()) == "sasl.jaas.config") return true;
  }
  return false;
}

// A SASL setting (`sasl.*`, or under a `listener.name.<name>.` prefix) that Mala would otherwise ignore as
// unknown: what it configures, or nullopt for any other key (including the SASL keys Mala serves).
std::optional<std::string> unsupported_security_setting(std::string_view key) {
  std::string_view rest = key;
  bool prefixed = false;
  if (rest.starts_with("listener.name.")) {
    rest.remove_prefix(std::string_view("listener.name.").size());
    auto dot = rest.find('.');
    if (dot == std::string_view::npos) return std::nullopt;
    rest.remove_prefix(dot + 1);
    prefixed = true;
  }
  if (prefixed && is_served_listener_sasl_setting(rest)) return std::nullopt;
  if (rest.starts_with("sasl.") && (prefixed || !find_config_key(rest))) {
    return "a SASL setting (Mala serves sasl.enabled.mechanisms, sasl.mechanism.inter.broker.protocol, "
           "sasl.mechanism.controller.protocol, sasl.jaas.config, sasl.server.max.receive.size, "
           "sasl.oauthbearer.*, OAUTHBEARER's sasl.login.* settings, and per listener the mechanisms, JAAS "
           "configurations and OAUTHBEARER's validator and login)";
  }
  return std::nullopt;
}

// Checks one SSL listener's settings that need no file: store types, that a key store is given, client
// authentication, protocols and principal mapping rules. Errors name the key (with its listener prefix when
// overridden).
std::optional<config_error> validate_tls_settings(const tls_settings& tls) {
  const std::string where = " (listener " + tls.listener_name + ")";
  for (const auto& [base, type] :
       {std::pair<std::string_view, const std::string*>{"ssl.keystore.type", &tls.keystore_type},
        {"ssl.truststore.type", &tls.truststore_type}}) {
    const std::string key = tls.key_name(base);
    if (*type == "JKS") {
      return error(key, key + ": JKS key stores are not supported" + where +
                            "; convert it to PKCS12 (keytool -importkeystore -deststoretype PKCS12) or PEM");
    }
    if (*type != "PEM" && *type != "PKCS12") {
      return error(key, key + ": unsupported store type '" + *type + "'" + where + " (PEM or PKCS12)");
    }
  }
  const bool inline_chain = tls.keystore_certificate_chain.has_value();
  const bool inline_key = tls.keystore_key.has_value();
  if (tls.keystore_location && (inline_chain || inline_key)) {
    return error(tls.key_name("ssl.keystore.location"),
                 tls.key_name("ssl.keystore.location") +
                     " and ssl.keystore.certificate.chain/ssl.keystore.key "
                     "are both set" +
                     where + "; give the key store one way");
  }
  if (!tls.keystore_location && !inline_chain && !inline_key) {
    return error(tls.key_name("ssl.keystore.location"),
                 tls.key_name("ssl.keystore.location") + " is required for an SSL listener" + where +
                     " (or ssl.keystore.certificate.chain and ssl.keystore.key)");
  }
  if (inline_chain != inline_key) {
    const auto missing = inline_chain ? "ssl.keystore.key" : "ssl.keystore.certificate.chain";
    return error(tls.key_name(missing),
                 tls.key_name(missing) + " is required with " +
                     (inline_chain ? "ssl.keystore.certificate.chain" : "ssl.keystore.key") + where);
  }
  if (inline_chain && tls.keystore_type != "PEM") {
    return error(tls.key_name("ssl.keystore.type"),
                 tls.key_name("ssl.keystore.type") + ": inline ssl.keystore.key requires type PEM" + where);
  }
  if (tls.truststore_location && tls.truststore_certificates) {
    return error(
        tls.key_name("ssl.truststore.location"),
        tls.key_name("ssl.truststore.location") + " and ssl.truststore.certificates are both set" + where);
  }
  if (tls.truststore_certificates && tls.truststore_type != "PEM") {
    return error(tls.key_name("ssl.truststore.type"),
                 tls.key_name("ssl.truststore.type") +
                     ": inline ssl.truststore.certificates requires type PEM" + where);
  }
  static const std::set<std::string, std::less<>> versions = {"TLSv1", "TLSv1.1", "TLSv1.2", "TLSv1.3"};
  if (tls.enabled_protocols.empty()) {
    return error(tls.key_name("ssl.enabled.protocols"),
                 tls.key_name("ssl.enabled.protocols") + " must name at least one protocol" + where);
  }
  for (const auto& p : tls.enabled_protocols) {
    if (!versions.contains(p)) {
      return error(tls.key_name("ssl.enabled.protocols"), tls.key_name("ssl.enabled.protocols") +
                                                              ": unsupported protocol '" + p + "'" + where +
                                                              " (TLSv1.2, TLSv1.3, TLSv1.1, TLSv1)");
    }
  }
  if (tls.protocol != "TLS" && !versions.contains(tls.protocol)) {
    return error(tls.key_name("ssl.protocol"),
                 tls.key_name("ssl.protocol") + ": unsupported protocol '" + tls.protocol + "'" + where);
  }
  if (auto mapper = ssl_principal_mapper::parse(tls.principal_mapping_rules); !mapper.ok()) {
    return error(tls.key_name("ssl.principal.mapping.rules"),
                 tls.key_name("ssl.principal.mapping.rules") + ": " + mapper.error().message + where);
  }
  return std::nullopt;
}

}  // namespace

// Builds a node_config from raw values; a class so that it may fill node_config's private members.
class node_config_loader {
 public:
  static std::variant<node_config, config_error> build(std::vector<std::pair<std::string, raw_value>> raw,
                                                       const std::vector<std::string>& overrides,
                                                       std::vector<std::string> warnings);

 private:
  static std::optional<config_error> validate_cross_keys(
      node_config& config, const std::map<std::string, raw_value, std::less<>>& raw);
};

std::variant<node_config, config_error> node_config_loader::build(
    std::vector<std::pair<std::string, raw_value>> raw_entries, const std::vector<std::string>& overrides,
    std::vector<std::string> warnings) {
  std::map<std::string, raw_value, std::less<>> raw;
  for (auto& [key, value] : raw_entries) raw[std::string(trim(key))] = std::move(value);
  for (const auto& item : overrides) {
    auto eq = item.find('=');
    auto key = trim(std::string_view(item).substr(0, eq));
    if (eq == std::string::npos || key.empty())
      return error(key, "override '" + item + "' is not of the form key=value");
    raw[std::string(key)] = raw_value{item.substr(eq + 1), config_source::override_value};
  }

  node_config config;
  for (const auto& [key, value] : raw) {
    if (auto reason = unsupported_security_setting(key)) {
      return error(key, std::string(key) + " (from " + std::string(to_string(value.source)) + ") is " +
                            *reason +
                            ", which Mala does not support yet; refusing to start rather than "
                            "ignore it");
    }
    if (key.starts_with("listener.name.") && value.text) {
      // Per-listener overrides (listener.name.<listener>.<key>) are read by the listener's subsystem; those
      // no subsystem reads are warned about below like any unknown key.
      config._listener_settings[key] = *value.text;
      std::string_view rest = std::string_view(key).substr(std::string_view("listener.name.").size());
      const auto dot = rest.find('.');
      if (dot != std::string_view::npos && is_served_listener_sasl_setting(rest.substr(dot + 1))) continue;
    }
    if (auto override_key = parse_listener_ssl_key(key)) {
      const config_key* base = find_config_key(override_key->second);
      if (base && value.text) {
        auto parsed = parse_typed(*base, *value.text);
        if (auto* err = std::get_if<config_error>(&parsed)) return error(key, err->message);
        auto& v = std::get<node_config::value>(parsed);
        if (auto err = check_validator(*base, v, *value.text)) return error(key, err->message);
        // Stored under the listener's lower-cased name; all_values() lists table keys only, so that these
        // (passwords among them) never show.
        config._values["listener.name." + override_key->first + "." + override_key->second] =
            node_config::stored_value{std::move(v), value.source};
        continue;
      }
    }
    if (!find_config_key(key)) {
      warnings.push_back("unknown configuration key '" + key + "' (from " +
                         std::string(to_string(value.source)) + ") is ignored");
    }
  }
  for (const auto& key : known_config_keys()) {
    node_config::stored_value stored;
    auto it = raw.find(key.name);
    std::optional<std::string> text;
    if (it != raw.end() && it->second.text) {
      text = it->second.text;
      stored.source = it->second.source;
    } else if (key.default_value) {
      text = std::string(*key.default_value);
    }
    if (!text) {
      if (key.required) {
        return error(key.name, "Missing required configuration \"" + std::string(key.name) +
                                   "\" which has no default value.");
      }
      config._values.emplace(std::string(key.name), std::move(stored));
      continue;
    }
    auto parsed = parse_typed(key, *text);
    if (auto* err = std::get_if<config_error>(&parsed)) return *err;
    stored.parsed = std::move(std::get<node_config::value>(parsed));
    if (auto err = check_validator(key, stored.parsed, *text)) return *err;
    config._values.emplace(std::string(key.name), std::move(stored));
  }
  config._warnings = std::move(warnings);
  if (auto err = validate_cross_keys(config, raw)) return *err;
  return config;
}

std::optional<config_error> node_config_loader::validate_cross_keys(
    node_config& config, const std::map<std::string, raw_value, std::less<>>& raw) {
  // --- Log dirs and time-unit chains (Kafka's validateLogConfig)
  auto log_dirs = config.get_list("log.dirs");
  config._log_dirs = log_dirs ? *log_dirs : std::vector<std::string>{};
  if (config._log_dirs.empty()) {
    auto dir = config.get_string("log.dir").value_or("");
    if (!dir.empty()) config._log_dirs.push_back(dir);
  }
  if (config._log_dirs.empty())
    return error("log.dirs", "At least one log directory must be defined via log.dirs or log.dir.");
  {
    std::set<std::string> seen;
    for (const auto& d : config._log_dirs) {
      if (!seen.insert(d).second) return error("log.dirs", "log.dirs lists the directory " + d + " twice");
    }
  }
  // KIP-1066 (KafkaConfig.validateCordonedLogDirs): the cordoned dirs are log dirs, or "*" alone.
  if (auto cordoned = config.get_list("cordoned.log.dirs"); cordoned && !cordoned->empty()) {
    const bool all = std::find(cordoned->begin(), cordoned->end(), "*") != cordoned->end();
    if (all && cordoned->size() > 1)
      return error("cordoned.log.dirs",
                   "When cordoned.log.dirs is set to *, it must not contain other values");
    std::string missing;
    for (const auto& d : *cordoned) {
      if (all || std::find(config._log_dirs.begin(), config._log_dirs.end(), d) != config._log_dirs.end())
        continue;
      missing += (missing.empty() ? "" : ",") + d;
    }
    if (!missing.empty()) {
      return error(
          "cordoned.log.dirs",
          "All entries in cordoned.log.dirs must be present in log.dirs or log.dir. Missing entries : " +
              missing);
    }
  }
  if (config.log_retention_ms() == 0) {
    const char* key = config.get_long("log.retention.ms")       ? "log.retention.ms"
                      : config.get_int("log.retention.minutes") ? "log.retention.minutes"
                                                                : "log.retention.hours";
    return error(key, std::string(key) + ": log retention must be unlimited (-1) or at least 1 ms");
  }

  // --- Roles
  config._process_roles = *config.get_list("process.roles");
  if (config._process_roles.empty())
    return error("process.roles", "process.roles must contain 'broker', 'controller' or both");
  {
    std::set<std::string> roles(config._process_roles.begin(), config._process_roles.end());
    if (roles.size() != config._process_roles.size())
      return error("process.roles",
                   "Duplicate role names found in process.roles: " + join(config._process_roles));
  }
  config._node_id = *config.get_int("node.id");
  bool broker = config.has_role("broker");
  bool controller = config.has_role("controller");

  // --- Listeners and their security protocols
  auto map_text = config.get_string("listener.security.protocol.map").value_or("");
  auto parsed_map = parse_security_protocol_map(map_text);
  if (const auto* err = parsed_map.ok() ? nullptr : &parsed_map.error())
    return invalid("listener.security.protocol.map", map_text, err->message);
  std::map<std::string, security_protocol> protocol_map;
  for (const auto& m : parsed_map.value()) protocol_map[m.listener_name] = m.protocol;

  auto listeners_text = join(*config.get_list("listeners"));
  auto parsed_listeners = parse_listeners(listeners_text);
  if (const auto* err = parsed_listeners.ok() ? nullptr : &parsed_listeners.error())
    return invalid("listeners", listeners_text, err->message);
  const auto& endpoints = parsed_listeners.value();
  if (endpoints.empty()) return error("listeners", "listeners must define at least one listener");
  // Kafka: each listener needs its own port, except one IPv4 and one IPv6 listener sharing it (KIP-797).
  for (size_t i = 0; i < endpoints.size(); ++i) {
    for (size_t j = i + 1; j < endpoints.size(); ++j) {
      const auto& a = endpoints[i];
      const auto& b = endpoints[j];
      if (a.port == 0 || a.port != b.port) continue;
      bool dual_stack = (is_literal_ipv4(a.host) && is_literal_ipv6(b.host)) ||
                        (is_literal_ipv6(a.host) && is_literal_ipv4(b.host));
      if (!dual_stack)
        return invalid(
            "listeners", listeners_text,
            "listeners " + a.name + " and " + b.name + " use the same port " + std::to_string(a.port));
    }
  }

  config._controller_listener_names.clear();
  auto controller_names = config.get_list("controller.listener.names").value_or(std::vector<std::string>{});
  for (const auto& name : controller_names) config._controller_listener_names.push_back(upper(name));
  auto is_controller_listener = [&](const std::string& name) {
    const auto& names = config._controller_listener_names;
    return std::find(names.begin(), names.end(), name) != names.end();
  };

  // Kafka (KRaft): when listener.security.protocol.map is not set explicitly and no SSL/SASL listener is in
  // use, controller listeners map to PLAINTEXT, so `CONTROLLER://:9093` works without spelling out the map.
  if (!explicitly_set(raw, "listener.security.protocol.map")) {
    auto ssl_or_sasl = [](const std::string& n) {
      return n == "SSL" || n == "SASL_SSL" || n == "SASL_PLAINTEXT";
    };
    bool secure =
        std::any_of(config._controller_listener_names.begin(), config._controller_listener_names.end(),
                    ssl_or_sasl) ||
        std::any_of(endpoints.begin(), endpoints.end(), [&](auto& e) { return ssl_or_sasl(e.name); });
    if (!secure) {
      for (const auto& name : config._controller_listener_names)
        protocol_map.try_emplace(name, security_protocol::plaintext);
    }
  }

  auto resolve = [&](const std::vector<listener_endpoint>& list, std::string_view key,
                     std::vector<listener_config>& out) -> std::optional<config_error> {
    out.clear();
    for (const auto& e : list) {
      auto it = protocol_map.find(e.name);
      if (it == protocol_map.end()) {
        return error(key, std::string(key) + ": no security protocol defined for listener " + e.name +
                              " (add it to listener.security.protocol.map)");
      }
      out.push_back({e.name, e.host, e.port, it->second});
    }
    return std::nullopt;
  };
  if (auto err = resolve(endpoints, "listeners", config._listeners)) return err;
  // PLAINTEXT, SSL, SASL_PLAINTEXT and SASL_SSL are all served (SASL's state machine does not depend on the
  // transport: security/sasl_settings.h); SSL and SASL_SSL listeners need valid TLS settings.
  for (const auto& l : config._listeners) {
    if (l.protocol == security_protocol::ssl || l.protocol == security_protocol::sasl_ssl) {
      if (auto err = validate_tls_settings(tls_settings_for(config, l.name))) return err;
    }
  }
  for (const auto& name : config._controller_listener_names) {
    if (!protocol_map.contains(name)) {
      return error("controller.listener.names", "Controller listener with name " + name +
                                                    " defined in controller.listener.names not found in "
                                                    "listener.security.protocol.map");
    }
    // Raft, broker registration and forwarding connect with the node's settings of this listener: TLS
    // (net::tls_client_context) on SSL and SASL_SSL, SASL (sasl.mechanism.controller.protocol) on SASL ones.
  }

  // advertised.listeners: explicit, or listeners minus controller listeners (Kafka's
  // effectiveAdvertisedListeners).
  auto advertised_list = config.get_list("advertised.listeners");
  std::vector<listener_endpoint> advertised;
  if (advertised_list) {
    auto advertised_text = join(*advertised_list);
    if (controller && !broker) {
      return error("advertised.listeners",
                   "The advertised.listeners config must be empty when process.roles=controller");
    }
    auto parsed = parse_listeners(advertised_text);
    if (const auto* err = parsed.ok() ? nullptr : &parsed.error())
      return invalid("advertised.listeners", advertised_text, err->message);
    advertised = parsed.value();
    for (const auto& a : advertised) {
      if (is_controller_listener(a.name)) {
        return error("advertised.listeners",
                     "The advertised.listeners config must not contain KRaft controller listeners from "
                     "controller.listener.names when process.roles contains the broker role (found " +
                         a.name + ")");
      }
      bool in_listeners =
          std::any_of(endpoints.begin(), endpoints.end(), [&](auto& e) { return e.name == a.name; });
      if (!in_listeners) {
        return error("advertised.listeners", "advertised.listeners listener " + a.name +
                                                 " is not among the listener names defined in listeners");
      }
      if (a.host == "0.0.0.0") {
        return error("advertised.listeners",
                     "advertised.listeners cannot use the nonroutable meta-address 0.0.0.0. Use a routable "
                     "IP address.");
      }
    }
  } else {
    for (const auto& e : endpoints) {
      if (!is_controller_listener(e.name)) advertised.push_back(e);
    }
  }
  if (auto err = resolve(advertised, "advertised.listeners", config._advertised_listeners)) return err;

  // inter.broker.listener.name, else the listener named after security.inter.broker.protocol.
  auto inter_broker_name = config.get_string("inter.broker.listener.name");
  if (inter_broker_name && explicitly_set(raw, "security.inter.broker.protocol")) {
    return error("inter.broker.listener.name",
                 "Only one of inter.broker.listener.name and security.inter.broker.protocol should be set.");
  }
  config._inter_broker_listener_name =
      inter_broker_name ? upper(*inter_broker_name) : *config.get_string("security.inter.broker.protocol");

  if (broker) {
    if (config._advertised_listeners.empty()) {
      return error("advertised.listeners",
                   "There must be at least one advertised listener. Perhaps all listeners appear in "
                   "controller.listener.names?");
    }
    bool advertised_inter_broker =
        std::any_of(config._advertised_listeners.begin(), config._advertised_listeners.end(),
                    [&](auto& l) { return l.name == config._inter_broker_listener_name; });
    if (!advertised_inter_broker) {
      std::vector<std::string> names;
      for (const auto& l : config._advertised_listeners) names.push_back(l.name);
      return error(
          "inter.broker.listener.name",
          "inter.broker.listener.name must be a listener name defined in advertised.listeners. The valid "
          "options based on currently configured listeners are " +
              join(names));
    }
    if (is_controller_listener(config._inter_broker_listener_name)) {
      return error("inter.broker.listener.name",
                   "controller.listener.names must not contain the inter-broker "
                   "listener name " +
                       config._inter_broker_listener_name);
    }
  }

  // --- KRaft quorum
  auto voters_text = join(*config.get_list("controller.quorum.voters"));
  auto voters = parse_quorum_voters(voters_text);
  if (const auto* err = voters.ok() ? nullptr : &voters.error())
    return invalid("controller.quorum.voters", voters_text, err->message);
  config._quorum_voters = voters.value();
  auto bootstrap_text = join(*config.get_list("controller.quorum.bootstrap.servers"));
  auto bootstrap = parse_host_ports(bootstrap_text);
  if (const auto* err = bootstrap.ok() ? nullptr : &bootstrap.error())
    return invalid("controller.quorum.bootstrap.servers", bootstrap_text, err->message);
  config._quorum_bootstrap_servers = bootstrap.value();
  if (config._quorum_voters.empty() && config._quorum_bootstrap_servers.empty()) {
    return error(
        "controller.quorum.voters",
        "If using process.roles, either controller.quorum.bootstrap.servers must contain the set of "
        "bootstrap controllers or controller.quorum.voters must contain a parseable set of controllers.");
  }
  bool node_is_voter = std::any_of(config._quorum_voters.begin(), config._quorum_voters.end(),
                                   [&](auto& v) { return v.id == config._node_id; });

  // --- Role-specific checks (Kafka's validateKraftBrokerConfig / ControllerConfig / CombinedModeConfig)
  auto controller_listeners = config.controller_listeners();
  if (controller) {
    if (!config._quorum_voters.empty() && !node_is_voter) {
      return error("controller.quorum.voters",
                   "If process.roles contains the 'controller' role, the node id " +
                       std::to_string(config._node_id) +
                       " must be included in the set of voters controller.quorum.voters");
    }
    if (controller_listeners.empty()) {
      return error("controller.listener.names",
                   "controller.listener.names must contain at least one value appearing in the 'listeners' "
                   "configuration when running the KRaft controller role");
    }
    for (const auto& name : config._controller_listener_names) {
      bool present = std::any_of(endpoints.begin(), endpoints.end(), [&](auto& e) { return e.name == name; });
      if (!present) {
        return error("controller.listener.names",
                     "controller.listener.names must only contain values appearing in the 'listeners' "
                     "configuration when running the KRaft controller role (" +
                         name + " is not)");
      }
    }
    if (!broker && !config._advertised_listeners.empty()) {
      return error("listeners",
                   "The listeners config must only contain KRaft controller listeners from "
                   "controller.listener.names when process.roles=controller");
    }
  } else {
    if (node_is_voter) {
      return error("node.id", "If process.roles contains just the 'broker' role, the node id " +
                                  std::to_string(config._node_id) +
                                  " must not be included in the set of voters controller.quorum.voters");
    }
    if (config._controller_listener_names.empty()) {
      return error(
          "controller.listener.names",
          "controller.listener.names must contain at least one value when running KRaft with just the "
          "broker role");
    }
    if (!controller_listeners.empty()) {
      return error(
          "controller.listener.names",
          "controller.listener.names must not contain a value appearing in the 'listeners' configuration "
          "when running KRaft with just the broker role");
    }
    if (config._controller_listener_names.size() > 1) {
      config._warnings.push_back(
          "controller.listener.names has multiple entries; only the first will be used since "
          "process.roles=broker: " +
          join(config._controller_listener_names));
    }
  }

  // --- Replication
  if (config.replica_fetch_wait_max_ms() > config.replica_lag_time_max_ms()) {
    return error("replica.fetch.wait.max.ms",
                 "replica.fetch.wait.max.ms should always be less than or equal to "
                 "replica.lag.time.max.ms to prevent frequent changes in ISR");
  }

  // --- Mala-specific
  if (auto id = config.cluster_id()) {
    auto parsed = uuid::parse(*id);
    if (!parsed || parsed->is_zero()) {
      return invalid("cluster.id", *id,
                     "a cluster id is a 22-character URL-safe base64 uuid (as kafka-storage "
                     "random-uuid prints)");
    }
  }
  return std::nullopt;
}

namespace {

// The status a refusal becomes: invalid_config, its message led by the key ("key: message") when there is
// one.
status refused(const config_error& err) {
  return status::error(error_code::invalid_config,
                       err.key.empty() ? err.message : err.key + ": " + err.message);
}

std::variant<node_config, config_error> load_text(std::string_view text, config_format format,
                                                  const std::vector<std::string>& overrides) {
  std::vector<std::pair<std::string, raw_value>> raw;
  std::vector<std::string> warnings;
  if (format == config_format::properties) {
    std::set<std::string> seen;
    for (auto& [key, value] : parse_java_properties(text)) {
      // java.util.Properties keeps the last value of a repeated key; say so, since it is usually a mistake.
      if (!seen.insert(key).second)
        warnings.push_back(key + " is set more than once; the last value is used");
      raw.emplace_back(std::move(key), raw_value{std::move(value)});
    }
  } else {
    auto parsed = read_yaml(text);
    if (auto* err = std::get_if<config_error>(&parsed)) return *err;
    raw = std::move(std::get<0>(parsed));
  }
  return node_config_loader::build(std::move(raw), overrides, std::move(warnings));
}

}  // namespace

result<node_config> node_config::load_from_string(std::string_view text, config_format format,
                                                  const std::vector<std::string>& overrides) {
  auto loaded = load_text(text, format, overrides);
  if (auto* err = std::get_if<config_error>(&loaded)) return refused(*err);
  return std::get<node_config>(std::move(loaded));
}

result<node_config> node_config::load(const std::filesystem::path* file,
                                      const std::vector<std::string>& overrides) {
  if (file == nullptr) return load_from_string(embedded_default_config(), config_format::yaml, overrides);
  std::ifstream in(*file, std::ios::binary);
  if (!in) {
    return refused(
        error("", "cannot read configuration file " + file->string() + ": " + std::strerror(errno)));
  }
  std::ostringstream contents;
  contents << in.rdbuf();
  if (in.bad()) return refused(error("", "cannot read configuration file " + file->string()));
  auto format = file->extension() == ".properties" ? config_format::properties : config_format::yaml;
  auto loaded = load_text(contents.str(), format, overrides);
  if (auto* err = std::get_if<config_error>(&loaded)) {
    if (err->key.empty()) err->message = file->string() + ": " + err->message;
    return refused(*err);
  }
  return std::get<node_config>(std::move(loaded));
}

// ---- Accessors

const node_config::stored_value* node_config::find(std::string_view name) const {
  auto it = _values.find(name);
  return it == _values.end() ? nullptr : &it->second;
}

std::optional<int32_t> node_config::get_int(std::string_view name) const {
  auto* key = find_config_key(name);
  auto* v = find(name);
  if (!key || !v || (key->type != config_type::int32 && key->type != config_type::int16)) return std::nullopt;
  if (auto* n = std::get_if<int64_t>(&v->parsed)) return static_cast<int32_t>(*n);
  return std::nullopt;
}

std::optional<int64_t> node_config::get_long(std::string_view name) const {
  auto* v = find(name);
  if (!v) return std::nullopt;
  if (auto* n = std::get_if<int64_t>(&v->parsed)) return *n;
  return std::nullopt;
}

std::optional<double> node_config::get_double(std::string_view name) const {
  auto* v = find(name);
  if (!v) return std::nullopt;
  if (auto* d = std::get_if<double>(&v->parsed)) return *d;
  return std::nullopt;
}

std::optional<bool> node_config::get_bool(std::string_view name) const {
  auto* v = find(name);
  if (!v) return std::nullopt;
  if (auto* b = std::get_if<bool>(&v->parsed)) return *b;
  return std::nullopt;
}

std::optional<std::string> node_config::get_string(std::string_view name) const {
  auto* v = find(name);
  if (!v) return std::nullopt;
  if (auto* s = std::get_if<std::string>(&v->parsed)) return *s;
  return std::nullopt;
}

std::optional<std::vector<std::string>> node_config::get_list(std::string_view name) const {
  auto* v = find(name);
  if (!v) return std::nullopt;
  if (auto* l = std::get_if<std::vector<std::string>>(&v->parsed)) return *l;
  return std::nullopt;
}

std::optional<std::pair<std::string, std::string>> parse_listener_ssl_key(std::string_view key) {
  constexpr std::string_view prefix = "listener.name.";
  if (!key.starts_with(prefix)) return std::nullopt;
  key.remove_prefix(prefix.size());
  auto dot = key.find('.');
  if (dot == std::string_view::npos || dot == 0) return std::nullopt;
  auto base = key.substr(dot + 1);
  if (!base.starts_with("ssl.")) return std::nullopt;
  return std::pair{lower(key.substr(0, dot)), std::string(base)};
}

bool is_reconfigurable_tls_key(std::string_view base) {
  static constexpr std::string_view keys[] = {
      "ssl.keystore.type",          "ssl.keystore.location",          "ssl.keystore.password",
      "ssl.key.password",           "ssl.keystore.certificate.chain", "ssl.keystore.key",
      "ssl.truststore.type",        "ssl.truststore.location",        "ssl.truststore.password",
      "ssl.truststore.certificates"};
  return std::find(std::begin(keys), std::end(keys), base) != std::end(keys);
}

bool apply_tls_setting(tls_settings& tls, std::string_view base, const std::string& value) {
  std::optional<std::string>* field = nullptr;
  if (base == "ssl.keystore.type") {
    tls.keystore_type = upper(value);
  } else if (base == "ssl.truststore.type") {
    tls.truststore_type = upper(value);
  } else if (base == "ssl.keystore.location") {
    field = &tls.keystore_location;
  } else if (base == "ssl.keystore.password") {
    field = &tls.keystore_password;
  } else if (base == "ssl.key.password") {
    field = &tls.key_password;
  } else if (base == "ssl.keystore.certificate.chain") {
    field = &tls.keystore_certificate_chain;
  } else if (base == "ssl.keystore.key") {
    field = &tls.keystore_key;
  } else if (base == "ssl.truststore.location") {
    field = &tls.truststore_location;
  } else if (base == "ssl.truststore.password") {
    field = &tls.truststore_password;
  } else if (base == "ssl.truststore.certificates") {
    field = &tls.truststore_certificates;
  } else {
    return false;
  }
  if (field) *field = value;
  // A new key store file replaces an inline one and the other way round.
  if (base == "ssl.keystore.location") {
    tls.keystore_certificate_chain.reset();
    tls.keystore_key.reset();
  } else if (base == "ssl.keystore.certificate.chain" || base == "ssl.keystore.key") {
    tls.keystore_location.reset();
  } else if (base == "ssl.truststore.location") {
    tls.truststore_certificates.reset();
  } else if (base == "ssl.truststore.certificates") {
    tls.truststore_location.reset();
  }
  if (std::find(tls.overridden.begin(), tls.overridden.end(), base) == tls.overridden.end())
    tls.overridden.emplace_back(base);
  return true;
}

std::string tls_settings::key_name(std::string_view base) const {
  if (std::find(overridden.begin(), overridden.end(), base) == overridden.end()) return std::string(base);
  return "listener.name." + lower(listener_name) + "." + std::string(base);
}

tls_settings tls_settings_for(const node_config& config, std::string_view listener_name) {
  tls_settings tls;
  tls.listener_name = std::string(listener_name);
  const std::string prefix = "listener.name." + lower(listener_name) + ".";
  // The override when set, else the listener-less key.
  auto text = [&](std::string_view base) -> std::optional<std::string> {
    if (auto v = config.get_string(prefix + std::string(base))) {
      tls.overridden.emplace_back(base);
      return v;
    }
    return config.get_string(base);
  };
  auto list = [&](std::string_view base) {
    if (auto v = config.get_list(prefix + std::string(base))) {
      tls.overridden.emplace_back(base);
      return *v;
    }
    return config.get_list(base).value_or(std::vector<std::string>{});
  };
  tls.keystore_location = text("ssl.keystore.location");
  tls.keystore_password = text("ssl.keystore.password");
  tls.key_password = text("ssl.key.password");
  tls.keystore_certificate_chain = text("ssl.keystore.certificate.chain");
  tls.keystore_key = text("ssl.keystore.key");
  tls.truststore_location = text("ssl.truststore.location");
  tls.truststore_password = text("ssl.truststore.password");
  tls.truststore_certificates = text("ssl.truststore.certificates");
  // Unset store types: PKCS12 for a .p12/.pfx file, PEM otherwise (Kafka's JKS default is unsupported).
  auto store_type = [](const std::optional<std::string>& type, const std::optional<std::string>& location) {
    if (type && !type->empty()) return upper(*type);
    if (location && (location->ends_with(".p12") || location->ends_with(".pfx")))
      return std::string("PKCS12");
    return std::string("PEM");
  };
  tls.keystore_type = store_type(text("ssl.keystore.type"), tls.keystore_location);
  tls.truststore_type = store_type(text("ssl.truststore.type"), tls.truststore_location);
  const auto client_auth = text("ssl.client.auth").value_or("none");
  tls.client_auth = client_auth == "required"    ? ssl_client_auth::required
                    : client_auth == "requested" ? ssl_client_auth::requested
                                                 : ssl_client_auth::none;
  tls.enabled_protocols = list("ssl.enabled.protocols");
  tls.protocol = text("ssl.protocol").value_or("TLSv1.3");
  tls.cipher_suites = list("ssl.cipher.suites");
  tls.endpoint_identification_algorithm = text("ssl.endpoint.identification.algorithm").value_or("");
  tls.principal_mapping_rules = text("ssl.principal.mapping.rules").value_or("DEFAULT");
  tls.allow_dn_changes = lower(text("ssl.allow.dn.changes").value_or("false")) == "true";
  tls.allow_san_changes = lower(text("ssl.allow.san.changes").value_or("false")) == "true";
  return tls;
}

std::map<std::string, config_entry, std::less<>> node_config::all_values() const {
  std::map<std::string, config_entry, std::less<>> out;
  for (const auto& [name, stored] : _values) {
    if (!find_config_key(name)) continue;  // listener.name.<listener>.ssl.* overrides
    config_entry entry;
    entry.source = stored.source;
    if (!std::holds_alternative<std::monostate>(stored.parsed)) {
      auto* key = find_config_key(name);
      entry.value = key && key->type == config_type::password ? "[hidden]" : format_value(stored.parsed);
    }
    out.emplace(name, std::move(entry));
  }
  return out;
}

bool node_config::has_role(std::string_view role) const {
  return std::find(_process_roles.begin(), _process_roles.end(), role) != _process_roles.end();
}

std::optional<std::string> node_config::listener_setting(std::string_view listener,
                                                         std::string_view key) const {
  std::string name = "listener.name.";
  for (char c : listener) name.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(c))));
  name += '.';
  name += key;
  auto it = _listener_settings.find(name);
  if (it == _listener_settings.end()) return std::nullopt;
  return it->second;
}

std::vector<listener_config> node_config::controller_listeners() const {
  std::vector<listener_config> out;
  for (const auto& l : _listeners) {
    if (std::find(_controller_listener_names.begin(), _controller_listener_names.end(), l.name) !=
        _controller_listener_names.end())
      out.push_back(l);
  }
  return out;
}

int64_t node_config::log_roll_ms() const {
  if (auto ms = get_long("log.roll.ms")) return *ms;
  return int64_t{60} * 60 * 1000 * int_value("log.roll.hours");
}

int64_t node_config::log_retention_ms() const {
  int64_t ms = 0;
  if (auto v = get_long("log.retention.ms")) {
    ms = *v;
  } else if (auto minutes = get_int("log.retention.minutes")) {
    ms = int64_t{60} * 1000 * *minutes;
  } else {
    ms = int64_t{60} * 60 * 1000 * int_value("log.retention.hours");
  }
  return ms < 0 ? -1 : ms;  // Kafka: any negative value means "no time limit"
}

int64_t node_config::log_flush_interval_ms() const {
  if (auto ms = get_long("log.flush.interval.ms")) return *ms;
  return long_value("log.flush.scheduler.interval.ms");
}

int32_t node_config::int_value(std::string_view name) const {
  auto v = get_int(name);
  MALA_ASSERT(v, "int value missing for key {}", name);
  return *v;
}

int64_t node_config::long_value(std::string_view name) const {
  auto v = get_long(name);
  MALA_ASSERT(v, "long value missing for key {}", name);
  return *v;
}

bool node_config::bool_value(std::string_view name) const {
  auto v = get_bool(name);
  MALA_ASSERT(v, "boolean value missing for key {}", name);
  return *v;
}

std::string node_config::string_value(std::string_view name) const {
  auto v = get_string(name);
  MALA_ASSERT(v, "string value missing for key {}", name);
  return *v;
}

std::vector<std::string> node_config::list_value(std::string_view name) const {
  auto v = get_list(name);
  MALA_ASSERT(v, "list value missing for key {}", name);
  return *v;
}

}  // namespace mala
