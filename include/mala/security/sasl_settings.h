// What each SASL listener accepts, from the node's configuration (Kafka's sasl.enabled.mechanisms and its
// listener.name.<listener>.sasl.enabled.mechanisms override, and the PlainLoginModule users of the JAAS
// configuration), plus the limits of the authentication exchange. Built once at start-up, immutable after:
// readable from any shard.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "mala/common/config.h"
#include "mala/common/result.h"
#include "mala/security/oauthbearer.h"

namespace mala::security {

struct listener_sasl_settings {
  std::vector<std::string> enabled_mechanisms;  // as configured, in order (SaslHandshake answers them)
  // PLAIN's users, name -> password, from the PlainLoginModule's user_<name>="<password>" options.
  std::map<std::string, std::string> plain_users;
  // OAUTHBEARER's token validator (set when OAUTHBEARER is enabled): Kafka's default unsecured validator with
  // the OAuthBearerLoginModule's unsecuredValidator* options, or, with
  // <listener>.oauthbearer.sasl.server.callback.handler.class set to Kafka's
  // OAuthBearerValidatorCallbackHandler, signed JWTs against the key set of
  // sasl.oauthbearer.jwks.endpoint.url.
  oauthbearer_validator oauthbearer;
  bool enabled(std::string_view mechanism) const;
};

struct sasl_settings {
  std::map<std::string, listener_sasl_settings> listeners;  // SASL listeners only, by name
  int32_t max_receive_size = 524288;                        // sasl.server.max.receive.size
  int64_t connections_max_reauth_ms = 0;                    // connections.max.reauth.ms (KIP-368); 0: never
  const listener_sasl_settings* find(const std::string& listener) const;
};

// The mechanisms Mala serves.
bool is_supported_sasl_mechanism(std::string_view mechanism);

// Every SASL listener's settings. Refuses (invalid_config, naming the key) a mechanism Mala does not serve
// (GSSAPI, anything unknown) on a SASL listener, OAUTHBEARER enabled without an OAuthBearerLoginModule, an
// empty mechanism list, a JAAS configuration that does not parse, PLAIN enabled without a PlainLoginModule,
// an inter-broker SASL listener whose sasl.mechanism.inter.broker.protocol is not enabled there, and a SASL
// controller listener of this node whose sasl.mechanism.controller.protocol is not enabled there. Kafka's
// default GSSAPI is accepted untouched only when no listener uses SASL. (The credentials the node itself
// presents: sasl_client.h.)
result<sasl_settings> build_sasl_settings(const node_config& config);

// A sasl.oauthbearer.* (or sasl.login.*) setting as Kafka's ConfigurationUtils reads it for a listener's
// OAUTHBEARER: listener.name.<l>.oauthbearer.<key>, then listener.name.<l>.<key>, then <key>.
std::optional<std::string> oauthbearer_setting(const node_config& config, const std::string& listener,
                                               const std::string& key);

// The PlainLoginModule users of a JAAS configuration text (invalid_config when it does not parse or has no
// PlainLoginModule).
result<std::map<std::string, std::string>> plain_users_from_jaas(std::string_view jaas);

}  // namespace mala::security
