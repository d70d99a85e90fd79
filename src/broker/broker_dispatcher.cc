#include "mala/broker/broker_dispatcher.h"

#include <algorithm>
#include <chrono>
#include <optional>
#include <utility>

#include <fmt/format.h>
#include <asio/co_spawn.hpp>
#include <asio/detached.hpp>
#include <asio/io_context.hpp>

#include "handlers/api_versions.h"
#include "handlers/data_path.h"
#include "mala/broker/broker_metrics.h"
#include "mala/broker/client_quota_manager.h"
#include "mala/broker/refused_requests.h"
#include "mala/broker/sasl_authenticator.h"
#include "mala/common/logging.h"
#include "mala/metadata/metadata_image.h"
#include "mala/protocol/messages/sasl_authenticate_request.h"
#include "mala/protocol/messages/sasl_handshake_request.h"

namespace mala::broker {

namespace {

// The client id of a request header v1/v2 (every request but ControlledShutdown v0), read without knowing the
// API: printable ASCII, at most 100 characters, for a log line; "" when absent or unreadable.
std::string client_id_for_log(std::span<const uint8_t> request) {
  constexpr size_t client_id_at = 8;  // after api key, api version and correlation id
  if (request.size() < client_id_at + 2) return "";
  const int16_t length = static_cast<int16_t>((request[client_id_at] << 8) | request[client_id_at + 1]);
  if (length <= 0) return "";
  const size_t available = std::min<size_t>(static_cast<size_t>(length), request.size() - client_id_at - 2);
  std::string id;
  for (size_t i = 0; i < std::min<size_t>(available, 100); ++i) {
    const auto c = static_cast<char>(request[client_id_at + 2 + i]);
    id.push_back(c >= 0x20 && c < 0x7f ? c : '?');
  }
  return id;
}

// Closes the connection for a request Mala does not serve, logging it (rate-limited per API, version and
// client) here rather than as every closed connection is logged.
net::dispatch_result refuse_unserved(const net::connection_info& connection, std::span<const uint8_t> request,
                                     int16_t api_key, int16_t api_version, std::string reason) {
  const std::string client_id = client_id_for_log(request);
  log_refused_request(
      fmt::format("api {} v{} client {}", api_key, api_version, client_id),
      fmt::format("refused a request Mala does not serve: {} from client id '{}' ({}, connection {}); the "
                  "connection is closed, as Kafka does",
                  reason, client_id, connection.peer, connection.id));
  auto result = net::dispatch_result::close(std::move(reason));
  result.logged = true;
  return result;
}

}  // namespace

asio::awaitable<net::dispatch_result> broker_dispatcher::dispatch(net::connection_info& connection,
                                                                  std::span<uint8_t> request,
                                                                  net::ordering_point& order) {
  sasl_authenticator* auth = authenticator_of(connection);
  if (auth && auth->expects_raw_token()) co_return sasl_raw_token(connection, *auth, request);
  protocol::wire_reader r(request);
  protocol::request_header header;
  const handler_entry* entry = nullptr;
  bool flexible = false;
  if (auto early = parse_header(connection, request, r, header, entry, flexible)) co_return std::move(*early);
  if (auth) {
    const int64_t now = now_ms();
    switch (auth->classify(header.api_key, now)) {
      case sasl_authenticator::verdict::serve:
        break;
      case sasl_authenticator::verdict::api_versions:
        auth->api_versions_served();
        break;
      case sasl_authenticator::verdict::handshake:
      case sasl_authenticator::verdict::reauthenticate:
        co_return sasl_handshake(connection, *auth, *entry, header, flexible, r);
      case sasl_authenticator::verdict::authenticate:
        co_return sasl_authenticate(connection, *auth, *entry, header, flexible, r);
      case sasl_authenticator::verdict::refuse:
        co_return net::dispatch_result::close(fmt::format("{} (correlation id {}, principal User:{})",
                                                          auth->refusal_reason(header.api_key, now),
                                                          header.correlation_id, connection.principal_name));
    }
  }
  co_return co_await serve(connection, request, r, header, *entry, flexible, order);
}

asio::awaitable<net::dispatch_result> broker_dispatcher::dispatch_forwarded(net::connection_info& connection,
                                                                            std::span<uint8_t> request) {
  protocol::wire_reader r(request);
  protocol::request_header header;
  const handler_entry* entry = nullptr;
  bool flexible = false;
  if (auto early = parse_header(connection, request, r, header, entry, flexible)) co_return std::move(*early);
  net::ordering_point order;  // the envelope's own ordering point covers the request inside it
  co_return co_await serve(connection, request, r, header, *entry, flexible, order);
}

asio::awaitable<net::dispatch_result> broker_dispatcher::serve(net::connection_info& connection,
                                                               std::span<uint8_t> request,
                                                               protocol::wire_reader& r,
                                                               const protocol::request_header& header,
                                                               const handler_entry& handler, bool flexible,
                                                               net::ordering_point& order) {
  const handler_entry* entry = &handler;
  // Kafka serves the KRaft and broker-lifecycle RPCs on controller listeners only; elsewhere the API does not
  // exist, and an unknown API closes the connection.
  if (entry->controller_only && !is_controller_listener(_services, connection.listener_name)) {
    co_return net::dispatch_result::close(fmt::format(
        "{} is served on controller listeners only (correlation id {})", entry->name, header.correlation_id));
  }

  request_context ctx{header, connection, _services, request, {}, &order};
  ctx.dispatch_inner = [this](net::connection_info& inner_connection, std::span<uint8_t> inner) {
    return dispatch_forwarded(inner_connection, inner);
  };
  const auto started = std::chrono::steady_clock::now();
  handler_outcome outcome = co_await entry->handle(ctx, r, header.api_version);
  if (_services.metrics) {
    const auto micros =
        std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - started)
            .count();
    _services.metrics->here().record_request(ctx.replica_fetch ? fetch_follower_metric_key : header.api_key,
                                             header.api_version, static_cast<uint64_t>(micros));
  }
  if (outcome.what == handler_outcome::kind::no_response && !ctx.close_reason.empty()) {
    co_return net::dispatch_result::close(std::move(ctx.close_reason));
  }
  const bool quota_charged = outcome.quota_charged;
  net::dispatch_result result = frame_response(*entry, header, flexible, std::move(outcome));
  if (quota_charged && result.what == net::dispatch_result::action::respond)
    result.record_send_time = handlers::request_quota_send_recorder(ctx);
  // The copy path, for connections that cannot send file ranges themselves: the records are read into the
  // response here. Their length is already encoded, so a range that cannot be read whole closes the
  // connection, as it would on the zero-copy path.
  if (!connection.zero_copy && !result.pieces.empty()) {
    if (auto st = result.materialize(); !st.ok()) {
      co_return net::dispatch_result::close(fmt::format("{} v{} response (correlation id {}): {}",
                                                        entry->name, header.api_version,
                                                        header.correlation_id, st.message));
    }
  }
  co_return result;
}

bool broker_dispatcher::wants_request_meter(const net::connection_info& connection) const {
  if (!_services.quotas || !_services.metadata) return false;
  const auto image = _services.metadata->current();
  const auto& entities = image->client_quotas.entities;
  if (!entities) return false;
  // Whether the quota map has a request_percentage, remembered per map (a new map comes with each change;
  // the one remembered is held, so its address cannot be another's).
  thread_local std::shared_ptr<const metadata::client_quota_map> seen;
  thread_local bool has_request_quota = false;
  if (seen != entities) {
    has_request_quota = std::any_of(entities->begin(), entities->end(), [](const auto& entry) {
      return entry.second.count(quota_key(client_quota_type::request)) > 0;
    });
    seen = entities;
  }
  return has_request_quota && !is_controller_listener(_services, connection.listener_name);
}

int64_t broker_dispatcher::now_ms() const {
  if (_services.clock_ms) return _services.clock_ms();
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

sasl_authenticator* broker_dispatcher::authenticator_of(net::connection_info& connection) const {
  if (connection.protocol != security_protocol::sasl_plaintext &&
      connection.protocol != security_protocol::sasl_ssl) {
    return nullptr;
  }
  if (!connection.authentication) {
    const security::listener_sasl_settings* settings =
        _services.sasl ? _services.sasl->find(connection.listener_name) : nullptr;
    // A SASL listener without settings cannot authenticate anyone: no mechanism is enabled.
    static const security::listener_sasl_settings none;
    metadata::metadata_cache* metadata = _services.metadata;
    scram_credential_lookup lookup =
        [metadata](security::scram_mechanism mechanism,
                   const std::string& user) -> std::optional<security::scram_credential> {
      if (!metadata) return std::nullopt;
      const auto image = metadata->current();
      const auto* found = image->find_scram_credential(user, static_cast<int8_t>(mechanism));
      if (!found) return std::nullopt;
      return security::scram_credential{found->salt, found->stored_key, found->server_key, found->iterations};
    };
    connection.authentication =
        std::make_shared<sasl_authenticator>(settings ? *settings : none, std::move(lookup),
                                             _services.sasl ? _services.sasl->connections_max_reauth_ms : 0);
  }
  return static_cast<sasl_authenticator*>(connection.authentication.get());
}

net::dispatch_result broker_dispatcher::sasl_handshake(net::connection_info& connection,
                                                       sasl_authenticator& auth, const handler_entry& entry,
                                                       const protocol::request_header& header, bool flexible,
                                                       protocol::wire_reader& body) const {
  protocol::sasl_handshake_request req;
  if (const auto st = req.decode(body, header.api_version); st != protocol::decode_status::ok) {
    return frame_response(entry, header, flexible,
                          handler_outcome{handler_outcome::kind::bad_request, {}, st});
  }
  auto answer = auth.handshake(req.mechanism, header.api_version);
  handler_outcome outcome;
  protocol::wire_writer w(outcome.body);
  answer.response.encode(w, header.api_version);
  auto result = frame_response(entry, header, flexible, std::move(outcome));
  if (answer.close) {
    result.close_after_response = true;
    result.close_reason = fmt::format("{} (client {}, listener {})", answer.log,
                                      connection.client_software_name, connection.listener_name);
  }
  return result;
}

net::dispatch_result broker_dispatcher::sasl_authenticate(net::connection_info& connection,
                                                          sasl_authenticator& auth,
                                                          const handler_entry& entry,
                                                          const protocol::request_header& header,
                                                          bool flexible, protocol::wire_reader& body) const {
  protocol::sasl_authenticate_request req;
  if (const auto st = req.decode(body, header.api_version); st != protocol::decode_status::ok) {
    return frame_response(entry, header, flexible,
                          handler_outcome{handler_outcome::kind::bad_request, {}, st});
  }
  auto answer = auth.authenticate(connection, req.auth_bytes, header.api_version, now_ms());
  handler_outcome outcome;
  protocol::wire_writer w(outcome.body);
  answer.response.encode(w, header.api_version);
  auto result = frame_response(entry, header, flexible, std::move(outcome));
  if (answer.close) {
    result.close_after_response = true;
    result.close_reason = fmt::format("{} (listener {})", answer.log, connection.listener_name);
  } else if (auth.authenticated()) {
    subsystem_logger("broker")->debug("connection {} from {} authenticated as User:{} with SASL/{}",
                                      connection.id, connection.peer, auth.user(), auth.mechanism());
  }
  return result;
}

net::dispatch_result broker_dispatcher::sasl_raw_token(net::connection_info& connection,
                                                       sasl_authenticator& auth,
                                                       std::span<const uint8_t> token) const {
  auto answer = auth.authenticate(connection, token, 0, now_ms());
  // Without SaslAuthenticate framing a failure has no way to reach the client: the connection just closes
  // (Kafka does the same for SaslHandshake v0 clients).
  if (answer.close)
    return net::dispatch_result::close(fmt::format("{} (listener {})", answer.log, connection.listener_name));
  // An empty token (PLAIN's answer) is still sent, size-prefixed, as Kafka's PlainSaslServer returns byte[0].
  return net::dispatch_result::respond_with(std::move(answer.response.auth_bytes));
}

net::dispatch_result broker_dispatcher::dispatch_now(net::connection_info& connection,
                                                     std::span<const uint8_t> request) {
  asio::io_context io;
  net::dispatch_result result;
  std::vector<uint8_t> bytes(request.begin(), request.end());
  asio::co_spawn(
      io,
      [&]() -> asio::awaitable<void> {
        net::ordering_point order;
        result = co_await dispatch(connection, bytes, order);
      },
      asio::detached);
  io.run();
  return result;
}

std::optional<net::dispatch_result> broker_dispatcher::parse_header(
    const net::connection_info& connection, std::span<const uint8_t> request, protocol::wire_reader& r,
    protocol::request_header& header, const handler_entry*& entry, bool& flexible) const {
  if (protocol::decode_request_header_prefix(r, header) != protocol::decode_status::ok) {
    return net::dispatch_result::close(
        fmt::format("request of {} bytes is too short for a header", request.size()));
  }
  entry = _services.handlers->find(header.api_key);

  // KIP-511: an ApiVersions request newer than we know is answered in the v0 format with UNSUPPORTED_VERSION
  // and our range, so the client can retry; its header may be in a format we cannot parse, and we do not need
  // to.
  if (header.api_key == handlers::api_versions_handler::api_key && entry &&
      header.api_version > entry->max_version) {
    std::vector<uint8_t> out;
    protocol::wire_writer w(out);
    protocol::encode_response_header(w, header.correlation_id, 0);
    w.write_raw(handlers::api_versions_handler::unsupported_version_body());
    return net::dispatch_result::respond_with(std::move(out));
  }
  // Apache Kafka closes the connection on an unknown API key or a version it does not serve (the request
  // cannot be parsed, and no response schema exists to carry an error); clients only send what ApiVersions
  // advertised.
  if (!entry) {
    return refuse_unserved(connection, request, header.api_key, header.api_version,
                           fmt::format("unknown API key {} v{} (correlation id {})", header.api_key,
                                       header.api_version, header.correlation_id));
  }
  if (header.api_version < entry->min_version || header.api_version > entry->max_version) {
    return refuse_unserved(connection, request, header.api_key, header.api_version,
                           fmt::format("unsupported version {} of {} (serves {}-{})", header.api_version,
                                       entry->name, entry->min_version, entry->max_version));
  }
  flexible = entry->flexible_from_known && header.api_version >= entry->first_flexible_version;
  if (protocol::decode_request_header_rest(r, header, protocol::request_header_version(flexible)) !=
      protocol::decode_status::ok) {
    return net::dispatch_result::close(fmt::format("malformed {} v{} request header: {}", entry->name,
                                                   header.api_version,
                                                   protocol::decode_status_name(r.status())));
  }

  return std::nullopt;
}

net::dispatch_result broker_dispatcher::frame_response(const handler_entry& entry,
                                                       const protocol::request_header& header, bool flexible,
                                                       handler_outcome outcome) const {
  if (outcome.what == handler_outcome::kind::bad_request) {
    return net::dispatch_result::close(fmt::format("malformed {} v{} request (correlation id {}): {}",
                                                   entry.name, header.api_version, header.correlation_id,
                                                   protocol::decode_status_name(outcome.status)));
  }
  if (outcome.what == handler_outcome::kind::no_response) return net::dispatch_result::nothing();

  // Response header v1 for flexible versions, except ApiVersions, whose response header is always v0
  // (KIP-511).
  const int16_t response_header_version =
      (flexible && header.api_key != handlers::api_versions_handler::api_key) ? 1 : 0;
  std::vector<uint8_t> out;
  protocol::wire_writer w(out);
  if (outcome.files.empty()) {
    out.reserve(outcome.body.size() + 5);
    protocol::encode_response_header(w, header.correlation_id, response_header_version);
    w.write_raw(outcome.body);
    return net::dispatch_result::respond_with(std::move(out));
  }
  // Zero copy: the body cut at each file range, the header in front of the first part.
  protocol::encode_response_header(w, header.correlation_id, response_header_version);
  std::vector<net::response_piece> pieces;
  pieces.reserve(2 * outcome.files.size() + 1);
  const auto body_at = [&outcome](size_t position) {
    return outcome.body.begin() + static_cast<std::ptrdiff_t>(position);
  };
  size_t from = 0;
  for (auto& file : outcome.files) {
    std::vector<uint8_t> part = pieces.empty() ? std::move(out) : std::vector<uint8_t>{};
    part.insert(part.end(), body_at(from), body_at(file.position));
    pieces.emplace_back(std::move(part));
    pieces.emplace_back(std::move(file.range));
    from = file.position;
  }
  pieces.emplace_back(std::vector<uint8_t>(body_at(from), outcome.body.end()));
  return net::dispatch_result::respond_with(std::move(pieces));
}

}  // namespace mala::broker
