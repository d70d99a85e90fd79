// Golden bytes: requests captured from real Kafka clients (and the responses a mala node gave them), decoded
// with the generated structs at the captured version, checked field by field, and re-encoded to the exact
// same bytes. A generator change that moves a field, gets a version range or a compact/non-compact form wrong
// shows up here against what clients really send, not against our own reading of the schemas.
//
// How the captures were made (2026-11-29, on 127.0.0.1; each constant below is a frame without its 4-byte
// size prefix, as printed by tests/unit/protocol/capture_first_request.py):
//   * ApiVersions requests: `capture_first_request.py listen --max-requests 1 --run '<client>'`, a listener
//     that records the first frame and never answers.
//   * Metadata requests and mala's responses: a mala node (build/src/app/mala from commit a319be0) started
//   with
//       --override listeners=PLAINTEXT://127.0.0.1:P,CONTROLLER://127.0.0.1:C
//       --override advertised.listeners=PLAINTEXT://127.0.0.1:Q --override
//       controller.quorum.voters=1@127.0.0.1:C
//       --override log.dirs=/tmp/golden/malalog
//     and `capture_first_request.py proxy --port Q --upstream 127.0.0.1:P --run '<client>'` in front of it
//     (advertising the proxy's port Q keeps the clients' later connections going through the proxy too).
//     The node's cluster id was aI7BFS8BSH29iEdKvr4wAg and Q was 38973; both appear in the responses.
// Clients:
//   * kcat 1.7.1 (Debian package, librdkafka 2.0.2 built in): `kcat -L -b 127.0.0.1:{port} -m 5`.
//   * confluent-kafka-python 2.16.1 (librdkafka 2.16.0, from PyPI):
//       AdminClient({"bootstrap.servers": ...}).list_topics(timeout=2)
//   * Apache Kafka Java client kafka-clients 4.1.1 (Maven Central), Java 17: Admin.create(bootstrap.servers
//     only, default client.id) then describeCluster().clusterId().get() and listTopics().names().get().
#include <gtest/gtest.h>

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "mala/protocol/messages/api_versions_request.h"
#include "mala/protocol/messages/api_versions_response.h"
#include "mala/protocol/messages/metadata_request.h"
#include "mala/protocol/messages/metadata_response.h"
#include "mala/protocol/request_header.h"
#include "mala/protocol/wire.h"

namespace mala::protocol {
namespace {

// --- ApiVersions requests (the first request of every connection) ---

// kcat 1.7.1 / librdkafka 2.0.2: ApiVersions v3, header v2, correlation id 1.
constexpr std::string_view kcat_api_versions_v3 =
    "0012000300000001000772646b61666b61000b6c696272646b61666b6106322e302e3200";

// confluent-kafka-python 2.16.1 / librdkafka 2.16.0: ApiVersions v3 as well (librdkafka still starts at v3).
constexpr std::string_view confluent_kafka_python_api_versions_v3 =
    "0012000300000001000772646b61666b610017636f6e666c75656e742d6b61666b612d707974686f6e16322e31362e312d72646b"
    "61666b612d322e31362e3000";

// kafka-clients 4.1.1 Admin: ApiVersions v4, header v2, correlation id 0.
constexpr std::string_view java_api_versions_v4 =
    "0012000400000000000d61646d696e636c69656e742d3100126170616368652d6b61666b612d6a61766106342e312e3100";

// --- Metadata requests (sent after mala answered ApiVersions with Metadata 0-12) ---

// kcat: librdkafka 2.0.2 tops out at Metadata v4 (header v1). First a brokers-only request (empty topic
// array), then "all topics" (null array) with AllowAutoTopicCreation true.
constexpr std::string_view kcat_metadata_v4_brokers_only = "0003000400000002000772646b61666b610000000000";
constexpr std::string_view kcat_metadata_v4_all_topics = "0003000400000003000772646b61666b61ffffffff01";

// confluent-kafka-python: Metadata v12 (header v2). Brokers only: compact empty array, AllowAutoTopicCreation
// false, IncludeTopicAuthorizedOperations false.
constexpr std::string_view confluent_kafka_python_metadata_v12_brokers_only =
    "0003000c00000002000772646b61666b610001000000";

// confluent-kafka-python list_topics(): "all topics" at v12. librdkafka reserves 4 bytes for the topic count
// and, for a null array at v9+, leaves them as they are (librdkafka issue #5049: "Metadata request doesn't
// handle topics length correctly"). Read by the schema the body is: topics null (00), AllowAutoTopicCreation
// false (00), IncludeTopicAuthorizedOperations false (00), no tagged fields (00), then 3 trailing bytes
// (01 00 00: what librdkafka meant as AllowAutoTopicCreation true, false, no tags). Kafka brokers read it the
// same way and ignore the trailing bytes, so mala must too.
constexpr std::string_view confluent_kafka_python_metadata_v12_all_topics =
    "0003000c00000003000772646b61666b610000000000010000";

// kafka-clients 4.1.1: describeCluster() against a broker without DescribeCluster asks Metadata v12 for no
// topics with AllowAutoTopicCreation true; listTopics() asks for all topics (null array).
constexpr std::string_view java_metadata_v12_no_topics =
    "0003000c00000001000d61646d696e636c69656e742d310001010000";
constexpr std::string_view java_metadata_v12_all_topics =
    "0003000c00000005000d61646d696e636c69656e742d310000010000";

// --- mala's responses to those requests ---

// ApiVersions v3 response to kcat (header v0 even for a flexible version, KIP-511): Metadata 0-12 and
// ApiVersions 0-4, no throttle, no tagged fields.
constexpr std::string_view mala_api_versions_v3_response =
    "0000000100000300030000000c00001200000004000000000000";
// The same answer to the Java client's ApiVersions v4 (correlation id 0).
constexpr std::string_view mala_api_versions_v4_response =
    "0000000000000300030000000c00001200000004000000000000";

// Metadata v4 response to kcat's brokers-only request: one broker (1, 127.0.0.1:38973, no rack), cluster id,
// controller 1, no topics.
constexpr std::string_view mala_metadata_v4_response =
    "0000000200000000000000010000000100093132372e302e302e310000983dffff00166149374246533842534832396945644b76"
    "72347741670000000100000000";
// Metadata v12 response to the Java client's describeCluster() (response header v1).
constexpr std::string_view mala_metadata_v12_response =
    "00000001000000000002000000010a3132372e302e302e310000983d0000176149374246533842534832396945644b7672347741"
    "67000000010100";

constexpr std::string_view mala_cluster_id = "aI7BFS8BSH29iEdKvr4wAg";
constexpr int32_t mala_advertised_port = 38973;

std::vector<uint8_t> from_hex(std::string_view hex) {
  auto nibble = [](char c) -> uint8_t {
    if (c >= '0' && c <= '9') return static_cast<uint8_t>(c - '0');
    return static_cast<uint8_t>(c - 'a' + 10);
  };
  std::vector<uint8_t> out;
  out.reserve(hex.size() / 2);
  for (size_t i = 0; i + 1 < hex.size(); i += 2) {
    out.push_back(static_cast<uint8_t>(nibble(hex[i]) << 4 | nibble(hex[i + 1])));
  }
  return out;
}

std::string to_hex(std::span<const uint8_t> bytes) {
  static constexpr char digits[] = "0123456789abcdef";
  std::string out;
  for (uint8_t b : bytes) {
    out.push_back(digits[b >> 4]);
    out.push_back(digits[b & 0xf]);
  }
  return out;
}

template <typename Message>
struct decoded_request {
  request_header header;
  Message body;
  decode_status status = decode_status::ok;
  size_t trailing = 0;  // bytes left after the body
};

// Decodes a captured request the way the broker does: header prefix, the rest of the header for the version's
// header version, then the body.
template <typename Message>
decoded_request<Message> decode_request(std::span<const uint8_t> frame) {
  decoded_request<Message> out;
  wire_reader r(frame);
  out.status = decode_request_header_prefix(r, out.header);
  if (out.status != decode_status::ok) return out;
  const int16_t version = out.header.api_version;
  out.status =
      decode_request_header_rest(r, out.header, request_header_version(Message::is_flexible(version)));
  if (out.status != decode_status::ok) return out;
  out.status = out.body.decode(r, version);
  out.trailing = r.remaining();
  return out;
}

template <typename Message>
std::vector<uint8_t> encode_request(const request_header& header, const Message& body) {
  const int16_t version = header.api_version;
  std::vector<uint8_t> out;
  wire_writer w(out);
  encode_request_header(w, header, request_header_version(Message::is_flexible(version)));
  const size_t header_size = out.size();
  body.encode(w, version);
  EXPECT_EQ(out.size() - header_size, body.encoded_size(version)) << "encoded_size disagrees with encode";
  return out;
}

template <typename Message>
struct decoded_response {
  int32_t correlation_id = 0;
  Message body;
  decode_status status = decode_status::ok;
  size_t trailing = 0;
};

// Response header v0 is the correlation id; v1 adds a tagged-field section (empty in everything mala sends).
template <typename Message>
decoded_response<Message> decode_response(std::span<const uint8_t> frame, int16_t version,
                                          int16_t header_version) {
  decoded_response<Message> out;
  wire_reader r(frame);
  out.correlation_id = r.read_int32();
  if (header_version >= 1) {
    const uint32_t tags = r.read_tag_count();
    for (uint32_t i = 0; i < tags && r.ok(); ++i) {
      r.read_uvarint();
      r.skip(r.read_uvarint());
    }
  }
  out.status = r.status();
  if (out.status != decode_status::ok) return out;
  out.status = out.body.decode(r, version);
  out.trailing = r.remaining();
  return out;
}

template <typename Message>
std::vector<uint8_t> encode_response(int32_t correlation_id, const Message& body, int16_t version,
                                     int16_t header_version) {
  std::vector<uint8_t> out;
  wire_writer w(out);
  encode_response_header(w, correlation_id, header_version);
  const size_t header_size = out.size();
  body.encode(w, version);
  EXPECT_EQ(out.size() - header_size, body.encoded_size(version)) << "encoded_size disagrees with encode";
  return out;
}

void expect_header(const request_header& header, int16_t api_key, int16_t api_version, int32_t correlation_id,
                   std::optional<std::string> client_id) {
  EXPECT_EQ(header.api_key, api_key);
  EXPECT_EQ(header.api_version, api_version);
  EXPECT_EQ(header.correlation_id, correlation_id);
  EXPECT_EQ(header.client_id, client_id);
}

// --- ApiVersions requests ---

void check_api_versions_request(std::string_view hex, int16_t version, int32_t correlation_id,
                                const std::string& client_id, const std::string& software_name,
                                const std::string& software_version) {
  const auto frame = from_hex(hex);
  const auto decoded = decode_request<api_versions_request>(frame);
  ASSERT_EQ(decoded.status, decode_status::ok) << decode_status_name(decoded.status);
  EXPECT_EQ(decoded.trailing, 0u);
  expect_header(decoded.header, api_versions_request::api_key, version, correlation_id, client_id);
  EXPECT_EQ(decoded.body.client_software_name, software_name);
  EXPECT_EQ(decoded.body.client_software_version, software_version);
  EXPECT_EQ(to_hex(encode_request(decoded.header, decoded.body)), hex);
}

TEST(golden_bytes, kcat_api_versions_v3) {
  check_api_versions_request(kcat_api_versions_v3, 3, 1, "rdkafka", "librdkafka", "2.0.2");
}

TEST(golden_bytes, confluent_kafka_python_api_versions_v3) {
  check_api_versions_request(confluent_kafka_python_api_versions_v3, 3, 1, "rdkafka",
                             "confluent-kafka-python", "2.16.1-rdkafka-2.16.0");
}

TEST(golden_bytes, java_api_versions_v4) {
  check_api_versions_request(java_api_versions_v4, 4, 0, "adminclient-1", "apache-kafka-java", "4.1.1");
}

// --- Metadata requests ---

struct expected_metadata_request {
  int16_t version;
  int32_t correlation_id;
  std::string client_id;
  bool topics_null;  // null array: all topics; otherwise an empty array: brokers only
  bool allow_auto_topic_creation;
  bool include_topic_authorized_operations;
};

void check_metadata_request(std::string_view hex, const expected_metadata_request& expected,
                            size_t trailing = 0) {
  const auto frame = from_hex(hex);
  const auto decoded = decode_request<metadata_request>(frame);
  EXPECT_EQ(decoded.status, decode_status::ok) << decode_status_name(decoded.status);
  EXPECT_EQ(decoded.trailing, trailing);
  expect_header(decoded.header, metadata_request::api_key, expected.version, expected.correlation_id,
                expected.client_id);
  if (expected.topics_null) {
    EXPECT_FALSE(decoded.body.topics.has_value());
  } else {
    EXPECT_TRUE(decoded.body.topics.has_value() && decoded.body.topics->empty());
  }
  EXPECT_EQ(decoded.body.allow_auto_topic_creation, expected.allow_auto_topic_creation);
  EXPECT_FALSE(decoded.body.include_cluster_authorized_operations);
  EXPECT_EQ(decoded.body.include_topic_authorized_operations, expected.include_topic_authorized_operations);
  // Re-encoding reproduces the capture, less any bytes the client sent past the end of the body.
  EXPECT_EQ(to_hex(encode_request(decoded.header, decoded.body)), hex.substr(0, hex.size() - 2 * trailing));
}

TEST(golden_bytes, kcat_metadata_v4_brokers_only) {
  check_metadata_request(kcat_metadata_v4_brokers_only, {4, 2, "rdkafka", false, false, false});
}

TEST(golden_bytes, kcat_metadata_v4_all_topics) {
  check_metadata_request(kcat_metadata_v4_all_topics, {4, 3, "rdkafka", true, true, false});
}

TEST(golden_bytes, confluent_kafka_python_metadata_v12_brokers_only) {
  check_metadata_request(confluent_kafka_python_metadata_v12_brokers_only,
                         {12, 2, "rdkafka", false, false, false});
}

TEST(golden_bytes, confluent_kafka_python_metadata_v12_all_topics_has_trailing_bytes) {
  // See the comment on the constant: librdkafka's 4-byte placeholder for a null compact array.
  check_metadata_request(confluent_kafka_python_metadata_v12_all_topics,
                         {12, 3, "rdkafka", true, false, false},
                         /*trailing=*/3);
  const auto frame = from_hex(confluent_kafka_python_metadata_v12_all_topics);
  EXPECT_EQ(to_hex(std::span(frame).last(3)), "010000");
}

TEST(golden_bytes, java_metadata_v12_no_topics) {
  check_metadata_request(java_metadata_v12_no_topics, {12, 1, "adminclient-1", false, true, false});
}

TEST(golden_bytes, java_metadata_v12_all_topics) {
  check_metadata_request(java_metadata_v12_all_topics, {12, 5, "adminclient-1", true, true, false});
}

// --- mala's responses, as the clients received them ---

void check_mala_api_versions_response(std::string_view hex, int16_t version, int32_t correlation_id) {
  const auto frame = from_hex(hex);
  // ApiVersions responses always use response header v0 (KIP-511), so an old client can read the error.
  const auto decoded = decode_response<api_versions_response>(frame, version, 0);
  ASSERT_EQ(decoded.status, decode_status::ok) << decode_status_name(decoded.status);
  EXPECT_EQ(decoded.trailing, 0u);
  EXPECT_EQ(decoded.correlation_id, correlation_id);
  EXPECT_EQ(decoded.body.error_code, 0);
  ASSERT_EQ(decoded.body.api_keys.size(), 2u);
  EXPECT_EQ(decoded.body.api_keys[0], (api_versions_response::api_version{3, 0, 12}));
  EXPECT_EQ(decoded.body.api_keys[1], (api_versions_response::api_version{18, 0, 4}));
  EXPECT_EQ(decoded.body.throttle_time_ms, 0);
  EXPECT_TRUE(decoded.body.supported_features.empty());
  EXPECT_EQ(decoded.body.finalized_features_epoch, -1);
  EXPECT_TRUE(decoded.body.finalized_features.empty());
  EXPECT_EQ(to_hex(encode_response(decoded.correlation_id, decoded.body, version, 0)), hex);
}

TEST(golden_bytes, mala_api_versions_v3_response) {
  check_mala_api_versions_response(mala_api_versions_v3_response, 3, 1);
}

TEST(golden_bytes, mala_api_versions_v4_response) {
  check_mala_api_versions_response(mala_api_versions_v4_response, 4, 0);
}

void check_mala_metadata_response(std::string_view hex, int16_t version, int32_t correlation_id) {
  const auto frame = from_hex(hex);
  const int16_t header_version = metadata_response::is_flexible(version) ? 1 : 0;
  const auto decoded = decode_response<metadata_response>(frame, version, header_version);
  ASSERT_EQ(decoded.status, decode_status::ok) << decode_status_name(decoded.status);
  EXPECT_EQ(decoded.trailing, 0u);
  EXPECT_EQ(decoded.correlation_id, correlation_id);
  EXPECT_EQ(decoded.body.throttle_time_ms, 0);
  ASSERT_EQ(decoded.body.brokers.size(), 1u);
  EXPECT_EQ(decoded.body.brokers[0].node_id, 1);
  EXPECT_EQ(decoded.body.brokers[0].host, "127.0.0.1");
  EXPECT_EQ(decoded.body.brokers[0].port, mala_advertised_port);
  EXPECT_EQ(decoded.body.brokers[0].rack, std::nullopt);
  EXPECT_EQ(decoded.body.cluster_id, std::string(mala_cluster_id));
  EXPECT_EQ(decoded.body.controller_id, 1);
  EXPECT_TRUE(decoded.body.topics.empty());
  EXPECT_EQ(to_hex(encode_response(decoded.correlation_id, decoded.body, version, header_version)), hex);
}

TEST(golden_bytes, mala_metadata_v4_response) {
  check_mala_metadata_response(mala_metadata_v4_response, 4, 2);
}

TEST(golden_bytes, mala_metadata_v12_response) {
  check_mala_metadata_response(mala_metadata_v12_response, 12, 1);
}

// --- Hand-checked response ---

// ApiVersions v0 response to a request whose version the broker does not support: error 35
// (UNSUPPORTED_VERSION) and the ApiVersions range, so the client can retry at a version both sides know
// (KIP-511). Written out by hand from the protocol spec: response header v0, then the v0 body
//   correlation_id int32 | error_code int16 | api_keys ARRAY(int32 count) of {api_key int16, min int16, max
//   int16}
// (v0 has no throttle_time_ms and no tagged fields).
TEST(golden_bytes, api_versions_v0_unsupported_version_response_by_hand) {
  const std::vector<uint8_t> expected = {
      0x00, 0x00, 0x00, 0x2a,  // correlation id 42
      0x00, 0x23,              // error_code 35 UNSUPPORTED_VERSION
      0x00, 0x00, 0x00, 0x01,  // api_keys: 1 entry (int32 count, not compact)
      0x00, 0x12,              //   api_key 18 ApiVersions
      0x00, 0x00,              //   min_version 0
      0x00, 0x04,              //   max_version 4
  };
  api_versions_response response;
  response.error_code = 35;
  response.api_keys.push_back({18, 0, 4});
  EXPECT_EQ(to_hex(encode_response(42, response, 0, 0)), to_hex(expected));

  const auto decoded = decode_response<api_versions_response>(expected, 0, 0);
  ASSERT_EQ(decoded.status, decode_status::ok);
  EXPECT_EQ(decoded.trailing, 0u);
  EXPECT_EQ(decoded.correlation_id, 42);
  EXPECT_EQ(decoded.body, response);
}

}  // namespace
}  // namespace mala::protocol
