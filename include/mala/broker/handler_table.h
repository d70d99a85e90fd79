// The table of Kafka APIs this node serves: one entry per API with its supported version range and the
// function that decodes the request, runs the handler and encodes the response. ApiVersions answers are
// derived from this table, never listed by hand. Adding an API is adding a handler file pair in
// src/broker/handlers/ and one line in handler_table.cc.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include <asio/awaitable.hpp>

#include "mala/broker/request_context.h"
#include "mala/net/request_dispatcher.h"
#include "mala/protocol/wire.h"

namespace mala::broker {

// A file range whose bytes belong in an encoded body after its first `position` bytes: the records of a
// zero-copy Fetch, sent from the segment file.
struct body_file_range {
  size_t position = 0;
  net::file_range range;
};

// Outcome of running a handler on one request body.
struct handler_outcome {
  enum class kind : uint8_t { response, no_response, bad_request };
  kind what = kind::response;
  std::vector<uint8_t> body;           // encoded response body (no header), without the file ranges' bytes
  protocol::decode_status status{};    // why the request was rejected, for bad_request
  std::vector<body_file_range> files;  // in body order
  // The request counts toward the client's request quota (not exempt): so does sending its response
  // (net::dispatch_result::record_send_time).
  bool quota_charged = false;
};

// Every handler runs as a coroutine on the connection's shard: one that needs another shard's state (a
// partition, the controller on shard 0) or waits (long-poll Fetch, acks=all Produce) co_awaits inside. A
// handler struct H provides either
//   static response handle(request_context&, const request&, int16_t version)                  (synchronous),
//   or static asio::awaitable<std::optional<response>> handle_async(request_context&, request, int16_t
//   version)
// where nullopt means "send no response" (Produce with acks=0).
// A response whose records fields are external (protocol::records_view::external, zero copy) also provides
//   std::span<const net::file_range> external_records() const
// indexed by the records' external_id; its encoded_size() must then leave the external bytes out.
using handler_fn = asio::awaitable<handler_outcome> (*)(request_context& ctx, protocol::wire_reader& body,
                                                        int16_t version);

struct handler_entry {
  int16_t api_key;
  std::string_view name;
  int16_t min_version;
  int16_t max_version;
  // Lowest version advertised in ApiVersions; below min_version only where Kafka advertises more than it
  // serves (Produce is advertised from v0 since KAFKA-18659).
  int16_t advertised_min_version;
  bool flexible_from_known;  // whether first_flexible_version is meaningful
  int16_t first_flexible_version;
  handler_fn handle;
  // Served on controller listeners only (the KRaft and broker-lifecycle RPCs, Kafka's "listeners":
  // ["controller"]): elsewhere the API is not advertised and a request for it closes the connection.
  bool controller_only = false;
  // Advertised only when the node takes client telemetry (broker_services::telemetry): KIP-714's two APIs,
  // which Kafka advertises only with a ClientTelemetryReceiver configured.
  bool client_telemetry_only = false;
};

class handler_table {
 public:
  handler_table();
  const handler_entry* find(int16_t api_key) const;
  std::span<const handler_entry> entries() const { return _entries; }

 private:
  std::vector<handler_entry> _entries;
};

}  // namespace mala::broker
