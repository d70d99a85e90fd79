#include "mala/security/sasl_settings.h"

#include <algorithm>
#include <cctype>

#include "mala/security/jaas_config.h"
#include "mala/security/jwks_source.h"

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

constexpr std::string_view unsecured_validator_class =
    "org.apache.kafka.common.security.oauthbearer.internals.unsecured."
    "OAuthBearerUnsecuredValidatorCallbackHandler";
constexpr std::string_view signed_validator_classes[] = {
    "org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler",
    "org.apache.kafka.common.security.oauthbearer.secured.OAuthBearerValidatorCallbackHandler",  // before 4.0
};

result<int64_t> oauthbearer_number(const node_config& config, const std::string& listener,
                                   const std::string& key, int64_t fallback, int64_t min, int64_t max) {
  auto text = oauthbearer_setting(config, listener, key);
  if (!text) {
    if (auto global = config.get_long(key)) return *global;
    if (auto global = config.get_int(key)) return *global;
  }
  if (!text || text->empty()) return fallback;
  try {
    size_t used = 0;
    const int64_t v = std::stoll(*text, &used);
    if (used == text->size() && v >= min && v <= max) return v;
  } catch (const std::exception&) {  // NOLINT(bugprone-empty-catch): refused below
  }
  return refuse(key, "must be a number from " + std::to_string(min) + " to " + std::to_string(max));
}

// The OAUTHBEARER token validator of listener `listener`: Kafka's default unsecured one, or with its
// oauthbearer.sasl.server.callback.handler.class set to OAuthBearerValidatorCallbackHandler, signed JWTs
// against the key set of sasl.oauthbearer.jwks.endpoint.url (read or fetched now; a broker whose keys cannot
// be read does not start, as Kafka's).
result<oauthbearer_validator> oauthbearer_validator_for(
    const node_config& config, const std::string& listener,
    const std::map<std::string, std::string>& jaas_options) {
  const std::string handler_key =
      "listener.name." + lower(listener) + ".oauthbearer.sasl.server.callback.handler.class";
  const auto handler = config.listener_setting(listener, "oauthbearer.sasl.server.callback.handler.class");
  const bool is_signed =
      handler && std::find(std::begin(signed_validator_classes), std::end(signed_validator_classes),
                           *handler) != std::end(signed_validator_classes);
  if (handler && !is_signed && *handler != unsecured_validator_class) {
    return refuse(handler_key, "Mala validates OAUTHBEARER tokens with Kafka's " +
                                   std::string(signed_validator_classes[0]) +
                                   " or its unsecured validator, not " + *handler);
  }
  if (!is_signed) {
    auto options = unsecured_validator_options_from(jaas_options);
    if (!options.ok())
      return refuse("listener.name." + lower(listener) + ".oauthbearer.sasl.jaas.config",
                    options.error().message);
    return make_unsecured_validator(std::move(*options));
  }
  jwks_source_options source_options;
  auto url = oauthbearer_setting(config, listener, "sasl.oauthbearer.jwks.endpoint.url");
  if (!url || url->empty()) {
    return refuse("sasl.oauthbearer.jwks.endpoint.url", "listener " + listener +
                                                            " validates OAUTHBEARER tokens with " + *handler +
                                                            ", which needs the key set's URL");
  }
  source_options.url = *url;
  auto refresh = oauthbearer_number(config, listener, "sasl.oauthbearer.jwks.endpoint.refresh.ms", 3'600'000,
                                    1, INT64_MAX / 2);
  auto backoff = oauthbearer_number(config, listener, "sasl.oauthbearer.jwks.endpoint.retry.backoff.ms", 100,
                                    1, INT32_MAX);
  auto backoff_max = oauthbearer_number(
      config, listener, "sasl.oauthbearer.jwks.endpoint.retry.backoff.max.ms", 10'000, 1, INT32_MAX);
  auto skew =
      oauthbearer_number(config, listener, "sasl.oauthbearer.clock.skew.seconds", 30, 0, INT32_MAX / 1000);
  for (const auto* r : {&refresh, &backoff, &backoff_max, &skew}) {
    if (!r->ok()) return r->error();
  }
  source_options.refresh_ms = *refresh;
  source_options.retry_backoff_ms = *backoff;
  source_options.retry_backoff_max_ms = std::max(*backoff, *backoff_max);
  signed_jwt_options options;
  options.clock_skew_seconds = static_cast<int32_t>(*skew);
  if (auto audience = oauthbearer_setting(config, listener, "sasl.oauthbearer.expected.audience")) {
    options.expected_audiences = split_list(*audience);
  } else if (auto global = config.get_list("sasl.oauthbearer.expected.audience")) {
    options.expected_audiences = *global;
  }
  if (auto issuer = oauthbearer_setting(config, listener, "sasl.oauthbearer.expected.issuer");
      issuer && !issuer->empty()) {
    options.expected_issuer = *issuer;
  }
  if (auto scope = oauthbearer_setting(config, listener, "sasl.oauthbearer.scope.claim.name");
      scope && !scope->empty()) {
    options.scope_claim = *scope;
  }
  if (auto sub = oauthbearer_setting(config, listener, "sasl.oauthbearer.sub.claim.name");
      sub && !sub->empty()) {
    options.sub_claim = *sub;
  }
  auto source = jwks_source::open(std::move(source_options));
  if (!source.ok()) return refuse("sasl.oauthbearer.jwks.endpoint.url", source.error().message);
  std::shared_ptr<jwks_source> keys = std::move(*source);
  return oauthbearer_validator(
      [keys, options](std::string_view token,
                      int64_t now_ms) -> std::variant<oauthbearer_token, oauthbearer_refusal> {
        auto outcome = validate_signed_jwt(token, *keys->current(), options, now_ms);
        if (auto* refusal = std::get_if<jwt_refusal>(&outcome)) {
          if (refusal->unknown_key && refusal->kid) keys->request_refresh(*refusal->kid);
          return oauthbearer_refusal{refusal->reason, std::nullopt};
        }
        return std::get<oauthbearer_token>(std::move(outcome));
      });
}

}  // namespace

std::optional<std::string> oauthbearer_setting(const node_config& config, const std::string& listener,
                                               const std::string& key) {
  if (auto v = config.listener_setting(listener, "oauthbearer." + key)) return v;
  if (auto v = config.listener_setting(listener, key)) return v;
  return config.get_string(key);  // string keys; numbers and lists: their typed getters below
}

bool listener_sasl_settings::enabled(std::string_view mechanism) const {
  return std::find(enabled_mechanisms.begin(), enabled_mechanisms.end(), mechanism) !=
         enabled_mechanisms.end();
}

const listener_sasl_settings* sasl_settings::find(const std::string& listener) const {
  auto it = listeners.find(listener);
  return it == listeners.end() ? nullptr : &it->second;
}

bool is_supported_sasl_mechanism(std::string_view mechanism) {
  return mechanism == "PLAIN" || mechanism == "SCRAM-SHA-256" || mechanism == "SCRAM-SHA-512" ||
         mechanism == "OAUTHBEARER";
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
        return refuse(mechanisms_key, "SASL mechanism " + m + " (listener " + l.name +
                                          ") is not supported by Mala (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 "
                                          "and OAUTHBEARER are); refusing "
                                          "to start rather than accept no client");
      }
    }
    if (settings.enabled("OAUTHBEARER")) {
      auto found = find_listener_jaas(config, l.name, "OAUTHBEARER");
      const std::string& key = found.key;
      const auto& jaas = found.text;
      std::optional<std::map<std::string, std::string>> options;
      if (jaas) {
        auto modules = parse_jaas_config(*jaas);
        if (!modules.ok()) return refuse(key, modules.error().message);
        for (const auto& m : *modules) {
          if (m.class_name == oauthbearer_login_module) options = m.options;
        }
      }
      if (!options) {
        return refuse(prefix + "oauthbearer.sasl.jaas.config",
                      "SASL mechanism OAUTHBEARER is enabled on listener " + l.name +
                          " but no JAAS configuration "
                          "with an " +
                          std::string(oauthbearer_login_module) + " is set (" + prefix +
                          "oauthbearer.sasl.jaas.config)");
      }
      auto validator = oauthbearer_validator_for(config, l.name, *options);
      if (!validator.ok()) return validator.error();
      settings.oauthbearer = std::move(*validator);
    }
    if (settings.enabled("PLAIN")) {
      auto found = find_listener_jaas(config, l.name, "PLAIN");
      const std::string& key = found.key;
      const auto& jaas = found.text;
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
  }
  const auto& controllers = config.controller_listener_names();
  if (const auto* controller = controllers.empty() ? nullptr : out.find(controllers.front())) {
    const auto mechanism = config.get_string("sasl.mechanism.controller.protocol").value_or("GSSAPI");
    if (!controller->enabled(mechanism)) {
      return refuse("sasl.mechanism.controller.protocol",
                    "sasl.mechanism.controller.protocol " + mechanism +
                        " must be included in the controller listener's sasl.enabled.mechanisms");
    }
  }
  return out;
}

}  // namespace mala::security
