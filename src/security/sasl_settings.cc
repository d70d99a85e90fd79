#include "mala/security/sasl_settings.h"

#include <algorithm>
#include <cctype>

#include "mala/security/jaas_config.h"

namespace mala::security {

namespace {

std::string lower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return out;
}

std::vector<std::string> split_list(const std::string& text) {
  std::vector<std::string> out;
  size_t from = 0;
  while (from <= text.size()) {
    size_t comma = text.find(',', from);
    if (comma == std::string::npos) comma = text.size();
    std::string item = text.substr(from, comma - from);
    item.erase(0, item.find_first_not_of(" \t"));
    item.erase(item.find_last_not_of(" \t") + 1);
    if (!item.empty()) out.push_back(std::move(item));
    from = comma + 1;
  }
  return out;
}

status refuse(std::string key, std::string message) {
  return status::error(error_code::invalid_config, key + ": " + message);
}

}  // namespace

bool listener_sasl_settings::enabled(std::string_view mechanism) const {
  return std::find(enabled_mechanisms.begin(), enabled_mechanisms.end(), mechanism) !=
         enabled_mechanisms.end();
}

const listener_sasl_settings* sasl_settings::find(const std::string& listener) const {
  auto it = listeners.find(listener);
  return it == listeners.end() ? nullptr : &it->second;
}

bool is_supported_sasl_mechanism(std::string_view mechanism) {
  return mechanism == "PLAIN" || mechanism == "SCRAM-SHA-256" || mechanism == "SCRAM-SHA-512";
}

result<std::map<std::string, std::string>> plain_users_from_jaas(std::string_view jaas) {
  auto modules = parse_jaas_config(jaas);
  if (!modules.ok()) return modules.error();
  for (const auto& m : *modules) {
    if (m.class_name != plain_login_module) continue;
    std::map<std::string, std::string> users;
    for (const auto& [option, value] : m.options) {
      if (option.starts_with("user_") && option.size() > 5) users[option.substr(5)] = value;
    }
    return users;
  }
  return status::error(error_code::invalid_config,
                       "the JAAS configuration has no " + std::string(plain_login_module) + " entry");
}

result<sasl_settings> build_sasl_settings(const node_config& config) {
  sasl_settings out;
  out.max_receive_size = config.get_int("sasl.server.max.receive.size").value_or(524288);
  out.connections_max_reauth_ms = config.get_long("connections.max.reauth.ms").value_or(0);
  const auto global_mechanisms =
      config.get_list("sasl.enabled.mechanisms").value_or(std::vector<std::string>{});
  for (const auto& l : config.listeners()) {
    if (l.protocol != security_protocol::sasl_plaintext && l.protocol != security_protocol::sasl_ssl)
      continue;
    const std::string prefix = "listener.name." + lower(l.name) + ".";
    listener_sasl_settings settings;
    std::string mechanisms_key = "sasl.enabled.mechanisms";
    if (auto own = config.listener_setting(l.name, "sasl.enabled.mechanisms")) {
      settings.enabled_mechanisms = split_list(*own);
      mechanisms_key = prefix + mechanisms_key;
    } else {
      settings.enabled_mechanisms = global_mechanisms;
    }
    if (settings.enabled_mechanisms.empty()) {
      return refuse(mechanisms_key, "no SASL mechanism is enabled for listener " + l.name);
    }
    for (const auto& m : settings.enabled_mechanisms) {
      if (!is_supported_sasl_mechanism(m)) {
        return refuse(mechanisms_key,
                      "SASL mechanism " + m + " (listener " + l.name +
                          ") is not supported by Mala (PLAIN, SCRAM-SHA-256 and SCRAM-SHA-512 are); refusing "
                          "to start rather than accept no client");
      }
    }
    if (settings.enabled("PLAIN")) {
      // Kafka's JaasContext.loadServerContext: the listener's mechanism-prefixed JAAS configuration first.
      std::string key = prefix + "plain.sasl.jaas.config";
      auto jaas = config.listener_setting(l.name, "plain.sasl.jaas.config");
      if (!jaas) {
        key = prefix + "sasl.jaas.config";
        jaas = config.listener_setting(l.name, "sasl.jaas.config");
      }
      if (!jaas) {
        key = "sasl.jaas.config";
        jaas = config.get_string("sasl.jaas.config");
      }
      if (!jaas) {
        return refuse(prefix + "plain.sasl.jaas.config",
                      "SASL mechanism PLAIN is enabled on listener " + l.name +
                          " but no JAAS configuration with a PlainLoginModule is set (" + prefix +
                          "plain.sasl.jaas.config)");
      }
      auto users = plain_users_from_jaas(*jaas);
      if (!users.ok()) return refuse(key, users.error().message);
      settings.plain_users = std::move(*users);
    }
    out.listeners.emplace(l.name, std::move(settings));
  }
  if (const auto* inter_broker = out.find(config.inter_broker_listener_name())) {
    const auto mechanism = config.get_string("sasl.mechanism.inter.broker.protocol").value_or("GSSAPI");
    if (!inter_broker->enabled(mechanism)) {
      return refuse("sasl.mechanism.inter.broker.protocol",
                    "sasl.mechanism.inter.broker.protocol " + mechanism +
                        " must be included in sasl.enabled.mechanisms when SASL is used for inter-broker "
                        "communication");
    }
    // Mala's own inter-broker client (replication, forwarding, transaction markers) does not authenticate
    // yet.
    return refuse("inter.broker.listener.name",
                  "the inter-broker listener " + config.inter_broker_listener_name() +
                      " uses SASL, which Mala's inter-broker client does not speak yet; use a PLAINTEXT "
                      "listener between brokers");
  }
  return out;
}

}  // namespace mala::security
