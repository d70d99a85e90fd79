#include "mala/broker/sasl_authenticator.h"

#include <fmt/format.h>

#include "mala/security/plain.h"

namespace mala::broker {

namespace {

constexpr int16_t api_versions_key = 18;
constexpr int16_t sasl_handshake_key = 17;
constexpr int16_t sasl_authenticate_key = 36;

}  // namespace

sasl_authenticator::sasl_authenticator(const security::listener_sasl_settings& settings,
                                       scram_credential_lookup scram_lookup,
                                       int64_t connections_max_reauth_ms)
    : _settings(settings),
      _scram_lookup(std::move(scram_lookup)),
      _max_reauth_ms(connections_max_reauth_ms) {}

sasl_authenticator::verdict sasl_authenticator::classify(int16_t api_key, int64_t now_ms) const {
  switch (_phase) {
    case phase::handshake_or_versions:
      if (api_key == api_versions_key) return verdict::api_versions;
      return api_key == sasl_handshake_key ? verdict::handshake : verdict::refuse;
    case phase::handshake:
      return api_key == sasl_handshake_key ? verdict::handshake : verdict::refuse;
    case phase::authenticate:
      return api_key == sasl_authenticate_key ? verdict::authenticate : verdict::refuse;
    case phase::complete:
      // Re-authentication may begin before the session ends; anything else after it closes the connection.
      // (A session has an end when connections.max.reauth.ms is set or its credential expires.)
      if (api_key == sasl_handshake_key && _session_expiry_ms > 0) return verdict::reauthenticate;
      if (_session_expiry_ms > 0 && now_ms >= _session_expiry_ms) return verdict::refuse;
      return verdict::serve;
    case phase::failed:
      return verdict::refuse;
  }
  return verdict::refuse;
}

std::string sasl_authenticator::refusal_reason(int16_t api_key, int64_t now_ms) const {
  switch (_phase) {
    case phase::handshake_or_versions:
    case phase::handshake:
      return fmt::format(
          "Unexpected Kafka request of type {} during SASL handshake. (IllegalSaslStateException)", api_key);
    case phase::authenticate:
      return fmt::format(
          "Unexpected Kafka request of type {} during SASL authentication. (IllegalSaslStateException)",
          api_key);
    case phase::complete:
      return fmt::format(
          "the SASL session of {} expired {} ms ago (connections.max.reauth.ms={}) and the client "
          "did not re-authenticate",
          _user, now_ms - _session_expiry_ms, _max_reauth_ms);
    case phase::failed:
      return "SASL authentication failed earlier on this connection";
  }
  return {};
}

void sasl_authenticator::api_versions_served() {
  if (_phase == phase::handshake_or_versions) _phase = phase::handshake;
}

sasl_authenticator::handshake_answer sasl_authenticator::handshake(const std::string& mechanism,
                                                                   int16_t version) {
  handshake_answer out;
  out.response.mechanisms = _settings.enabled_mechanisms;
  if (_phase == phase::complete) {
    // KIP-368 re-authentication: same mechanism only (Kafka's REAUTH_BAD_MECHANISM fails the exchange).
    _reauthenticating = true;
    if (mechanism != _mechanism) {
      out.response.error_code = to_wire(error_code::unsupported_sasl_mechanism);
      out.close = true;
      out.log = fmt::format(
          "SASL mechanism '{}' requested by client is not supported for re-authentication of "
          "mechanism '{}'",
          mechanism, _mechanism);
      _phase = phase::failed;
      return out;
    }
  }
  if (!_settings.enabled(mechanism)) {
    out.response.error_code = to_wire(error_code::unsupported_sasl_mechanism);
    out.close = true;
    out.log = fmt::format("Unsupported SASL mechanism {} (enabled: {})", mechanism,
                          fmt::join(_settings.enabled_mechanisms, ", "));
    _phase = phase::failed;
    return out;
  }
  _mechanism = mechanism;
  _kafka_headers = version >= 1;
  _scram.reset();
  _oauthbearer.reset();
  if (mechanism == "OAUTHBEARER" && _settings.oauthbearer) _oauthbearer.emplace(_settings.oauthbearer);
  if (auto scram = security::scram_mechanism_from_name(mechanism);
      scram != security::scram_mechanism::unknown) {
    auto lookup = _scram_lookup;
    _scram.emplace(scram,
                   [lookup, scram](const std::string& user) -> std::optional<security::scram_credential> {
                     if (!lookup) return std::nullopt;
                     return lookup(scram, user);
                   });
  }
  _phase = phase::authenticate;
  return out;
}

sasl_authenticator::authenticate_answer sasl_authenticator::fail(std::string client_message,
                                                                 std::string log) {
  authenticate_answer out;
  out.response.error_code = to_wire(error_code::sasl_authentication_failed);
  out.response.error_message = std::move(client_message);
  out.close = true;
  out.log = std::move(log);
  _phase = phase::failed;
  _scram.reset();
  _oauthbearer.reset();
  return out;
}

sasl_authenticator::authenticate_answer sasl_authenticator::authenticate(net::connection_info& connection,
                                                                         std::span<const uint8_t> token,
                                                                         int16_t version, int64_t now_ms) {
  const char* what = _reauthenticating ? "re-authentication" : "authentication";
  std::string user;
  std::vector<uint8_t> response_bytes;
  bool complete = false;
  std::optional<int64_t> credential_expiry_ms;  // OAUTHBEARER: the token's exp
  if (_mechanism == "PLAIN") {
    auto outcome = security::plain_authenticate(token, _settings.plain_users);
    if (auto* failure = std::get_if<security::plain_failure>(&outcome)) {
      return fail(failure->message, fmt::format("SASL/PLAIN {} failed: {}", what, failure->message));
    }
    user = std::get<security::plain_success>(outcome).user;
    complete = true;
  } else if (_scram) {
    auto outcome = _scram->evaluate(token);
    if (auto* failure = std::get_if<security::scram_server::failure>(&outcome)) {
      // Kafka sends a generic message for SaslException so as not to reveal whether the user exists.
      std::string client_message = failure->client_message.value_or(
          fmt::format("Authentication failed during {} due to invalid credentials with SASL mechanism {}",
                      what, _mechanism));
      return fail(std::move(client_message),
                  fmt::format("SASL/{} {} failed: {}", _mechanism, what, failure->log_reason));
    }
    auto& step = std::get<security::scram_server::step>(outcome);
    response_bytes = std::move(step.response);
    complete = step.complete;
    if (complete) user = _scram->authorized_user();
  } else if (_oauthbearer) {
    auto outcome = _oauthbearer->evaluate(token, now_ms);
    if (auto* failure = std::get_if<security::oauthbearer_server::failure>(&outcome)) {
      return fail(failure->client_message,
                  fmt::format("SASL/OAUTHBEARER {} failed: {}", what, failure->log_reason));
    }
    auto& step = std::get<security::oauthbearer_server::step>(outcome);
    response_bytes = std::move(step.response);
    complete = step.complete;
    if (complete) {
      user = _oauthbearer->token().principal;
      credential_expiry_ms = _oauthbearer->token().lifetime_ms;
    }
  } else {
    return fail("Authentication failed: no SASL mechanism negotiated", "SaslAuthenticate before a mechanism");
  }

  authenticate_answer out;
  out.response.error_message = std::nullopt;
  out.response.auth_bytes = std::move(response_bytes);
  if (!complete) return out;
  if (_reauthenticating && user != _user) {
    // Kafka's ensurePrincipalUnchanged.
    return fail(
        fmt::format("Cannot change principals during re-authentication from User:{}: User:{}", _user, user),
        "re-authentication tried to change the principal");
  }
  _user = std::move(user);
  _phase = phase::complete;
  _reauthenticating = false;
  _scram.reset();
  _oauthbearer.reset();
  connection.principal_type = "User";
  connection.principal_name = _user;
  connection.max_receive_bytes = 0;
  // KIP-368: the session lasts connections.max.reauth.ms, and no longer than the credential (an OAUTHBEARER
  // token's exp), as Kafka's ReauthInfo; only SaslAuthenticate v1+ can tell the client.
  int64_t lifetime_ms = 0;
  if (credential_expiry_ms || _max_reauth_ms > 0) {
    lifetime_ms = !credential_expiry_ms ? _max_reauth_ms
                  : _max_reauth_ms <= 0 ? *credential_expiry_ms - now_ms
                                        : std::min(*credential_expiry_ms - now_ms, _max_reauth_ms);
    lifetime_ms = std::max<int64_t>(lifetime_ms, 0);
    _session_expiry_ms = now_ms + lifetime_ms;
  } else {
    _session_expiry_ms = 0;
  }
  if (version >= 1) out.response.session_lifetime_ms = lifetime_ms;
  return out;
}

}  // namespace mala::broker
