#include "handlers/envelope.h"

#include <arpa/inet.h>

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "handlers/authorization.h"
#include "mala/common/logging.h"
#include "mala/controller/quorum_controller.h"
#include "mala/net/coroutine_frame_warning.h"
#include "mala/net/shard_pool.h"
#include "mala/protocol/message_catalog.h"
#include "mala/protocol/wire.h"

namespace mala::broker::handlers {

std::optional<forwarded_principal> decode_forwarded_principal(std::span<const uint8_t> bytes) {
  protocol::wire_reader r(bytes);
  if (r.read_int16() != 0) return std::nullopt;  // DefaultPrincipalData's only version
  forwarded_principal principal;
  principal.type = r.read_string(true);
  principal.name = r.read_string(true);
  r.read_bool();  // TokenAuthenticated: Mala issues no delegation tokens
  const uint32_t tags = r.read_tag_count();
  for (uint32_t i = 0; i < tags && r.ok(); ++i) {
    r.read_uvarint();
    r.skip(r.read_uvarint());
  }
  if (!r.ok() || r.remaining() != 0 || principal.type.empty()) return std::nullopt;
  return principal;
}

namespace {

// ApiKeys' forwardable APIs (Kafka 4.x): the admin requests a broker forwards to the controller. Anything
// else inside an Envelope is refused, as EnvelopeUtils refuses it.
bool forwardable(int16_t api_key) {
  switch (api_key) {
    case 19:  // CreateTopics
    case 20:  // DeleteTopics
    case 30:  // CreateAcls
    case 31:  // DeleteAcls
    case 33:  // AlterConfigs
    case 37:  // CreatePartitions
    case 38:  // CreateDelegationToken
    case 39:  // RenewDelegationToken
    case 40:  // ExpireDelegationToken
    case 43:  // ElectLeaders
    case 44:  // IncrementalAlterConfigs
    case 45:  // AlterPartitionReassignments
    case 46:  // ListPartitionReassignments
    case 49:  // AlterClientQuotas
    case 51:  // AlterUserScramCredentials
    case 55:  // DescribeQuorum
    case 57:  // UpdateFeatures
    case 64:  // UnregisterBroker
    case 67:  // AllocateProducerIds
    case 80:  // AddRaftVoter
    case 81:  // RemoveRaftVoter
      return true;
    default:
      return false;
  }
}

// ClientHostAddress: the client's IPv4 or IPv6 address, 4 or 16 bytes (InetAddress.getAddress).
std::string host_of(const std::vector<uint8_t>& address) {
  char text[INET6_ADDRSTRLEN] = {};
  if (address.size() == 4 && inet_ntop(AF_INET, address.data(), text, sizeof text)) return text;
  if (address.size() == 16 && inet_ntop(AF_INET6, address.data(), text, sizeof text)) return text;
  return {};
}

}  // namespace

bool response_holds_not_controller(int16_t api_key, int16_t api_version, std::span<const uint8_t> response) {
  const auto* request = protocol::find_message(api_key, protocol::message_kind::request);
  const auto* answer = protocol::find_message(api_key, protocol::message_kind::response);
  if (!request || !answer || !answer->error_codes) return false;
  // The response header: CorrelationId, and (v1, a flexible request's) its tagged fields.
  protocol::wire_reader r(response);
  r.read_int32();
  if (protocol::is_flexible_version(*request, api_version)) {
    const uint32_t tags = r.read_tag_count();
    for (uint32_t i = 0; i < tags && r.ok(); ++i) {
      r.read_uvarint();
      r.skip(r.read_uvarint());
    }
  }
  if (!r.ok()) return false;
  std::vector<int16_t> codes;
  if (answer->error_codes(response.subspan(response.size() - r.remaining()), api_version, codes) !=
      protocol::decode_status::ok)
    return false;
  const auto not_controller = to_wire(error_code::not_controller);
  return std::find(codes.begin(), codes.end(), not_controller) != codes.end();
}

asio::awaitable<std::optional<envelope_handler::response>> envelope_handler::handle_async(
    request_context& ctx, request req, int16_t /*version*/) {
  response resp;
  resp.response_data = std::nullopt;
  auto fail = [&](error_code code, std::string_view why) {
    subsystem_logger("broker")->info("Envelope from {} ({}) refused with {}: {}", ctx.connection.peer,
                                     ctx.connection.principal_name, to_wire(code), why);
    resp.error_code = to_wire(code);
    return resp;
  };
  if (!authorized_cluster(ctx, acl_operation::cluster_action))
    co_return fail(error_code::cluster_authorization_failed, "no CLUSTER_ACTION on the cluster");
  const auto principal =
      req.request_principal ? decode_forwarded_principal(*req.request_principal) : std::nullopt;
  if (!principal)
    co_return fail(error_code::principal_deserialization_failure, "unreadable RequestPrincipal");
  const std::string host = host_of(req.client_host_address);
  if (host.empty()) co_return fail(error_code::invalid_request, "ClientHostAddress is not an IP address");
  // The inner header: api key first. Only the admin APIs a broker forwards (never an Envelope again).
  protocol::wire_reader header(req.request_data);
  const int16_t inner_api_key = header.read_int16();
  const int16_t inner_api_version = header.read_int16();
  if (!header.ok()) co_return fail(error_code::invalid_request, "RequestData holds no request header");
  if (!forwardable(inner_api_key)) {
    co_return fail(error_code::invalid_request,
                   "API " + std::to_string(inner_api_key) + " is not one a broker forwards");
  }
  if (!ctx.dispatch_inner)
    co_return fail(error_code::invalid_request, "no dispatcher for forwarded requests");
  // Kafka answers the Envelope itself NOT_CONTROLLER when the inner answer is NOT_CONTROLLER
  // (RequestChannel.buildResponseSend), so that the forwarding broker looks for the new active controller
  // instead of handing the error to its client. A controller that is not the active one answers every
  // forwardable request so; it is told at once, before the inner request runs. One that lost the leadership
  // while the inner request ran finds NOT_CONTROLLER among the inner answer's error codes (below).
  if (auto* controller = ctx.services.controller) {
    auto is_active = [controller] { return controller->active(); };
    bool active = true;
    if (ctx.services.shards) {
      active = co_await ctx.services.shards->invoke_on(ctx.services.home_shard, std::move(is_active));
    } else {
      active = is_active();
    }
    if (!active) co_return fail(error_code::not_controller, "this controller is not the active one");
  }

  net::connection_info client = ctx.connection;
  client.principal_type = principal->type;
  client.principal_name = principal->name;
  client.peer = host + ":0";
  client.authentication.reset();  // the forwarding broker's SASL state is not the client's
  net::dispatch_result inner = co_await ctx.dispatch_inner(client, req.request_data);
  if (inner.what != net::dispatch_result::action::respond) {
    // A version or body Mala cannot read: Kafka answers UNSUPPORTED_VERSION, and the forwarding broker
    // closes its client's connection so that it negotiates versions again.
    co_return fail(error_code::unsupported_version,
                   inner.what == net::dispatch_result::action::close ? inner.close_reason : "no response");
  }
  if (!inner.pieces.empty()) {
    if (auto st = inner.materialize(); !st.ok()) co_return fail(error_code::unknown_server_error, st.message);
  }
  if (response_holds_not_controller(inner_api_key, inner_api_version, inner.response)) {
    co_return fail(error_code::not_controller, "the inner answer is NOT_CONTROLLER");
  }
  resp.error_code = 0;
  resp.response_data = std::move(inner.response);
  co_return resp;
}

}  // namespace mala::broker::handlers
