// The TLS settings of one SSL listener, resolved from a node_config: each `ssl.*` key, or its
// `listener.name.<listener>.ssl.*` override (which wins, as in Kafka). node_config validates them when it
// loads (types, protocols, principal mapping rules, a key store given); the files and PEM themselves are read
// by net when the listener is bound.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "mala/common/config.h"

namespace mala {

// Kafka's ssl.client.auth.
enum class ssl_client_auth { none, requested, required };

struct tls_settings {
  std::string listener_name;
  std::string keystore_type;  // "PEM" or "PKCS12", upper-cased
  std::optional<std::string> keystore_location;
  std::optional<std::string> keystore_password;
  std::optional<std::string> key_password;
  std::optional<std::string> keystore_certificate_chain;
  std::optional<std::string> keystore_key;
  std::string truststore_type;  // "PEM" or "PKCS12"
  std::optional<std::string> truststore_location;
  std::optional<std::string> truststore_password;
  std::optional<std::string> truststore_certificates;
  ssl_client_auth client_auth = ssl_client_auth::none;
  std::vector<std::string> enabled_protocols;
  std::string protocol;
  std::vector<std::string> cipher_suites;
  std::string endpoint_identification_algorithm;
  std::string principal_mapping_rules;
  // ssl.allow.dn.changes / ssl.allow.san.changes: whether a key store update at run time may change the
  // certificate's subject DN, or drop one of its subjectAltNames.
  bool allow_dn_changes = false;
  bool allow_san_changes = false;
  // The key a setting was read from: `listener.name.<listener>.<base>` when overridden, else `base`
  // (error messages name it).
  std::vector<std::string> overridden;  // base keys overridden for this listener
  std::string key_name(std::string_view base) const;
};

// The settings of `listener_name` (any listener; meaningful for SSL ones), overrides applied.
tls_settings tls_settings_for(const node_config& config, std::string_view listener_name);

// `listener.name.<listener>.ssl.<...>`: the listener (lower-cased) and the base key `ssl.<...>`.
std::optional<std::pair<std::string, std::string>> parse_listener_ssl_key(std::string_view key);

// Kafka's SslConfigs.RECONFIGURABLE_CONFIGS: the key and trust store keys an SSL listener takes at run time,
// set per broker as `listener.name.<listener>.<key>` (kafka-configs --entity-type brokers --entity-name
// <id>).
bool is_reconfigurable_tls_key(std::string_view base);

// Sets one reconfigurable key's value in `tls` (marked overridden); false for any other key.
bool apply_tls_setting(tls_settings& tls, std::string_view base, const std::string& value);

}  // namespace mala
