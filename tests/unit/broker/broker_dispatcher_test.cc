// The dispatcher on hand-built frames: KIP-511 handling of a too-new ApiVersions, ApiVersions derived from
// the handler table, Metadata from the image, and closing on unknown keys, unsupported versions and malformed
// bodies.
#include <gtest/gtest.h>

#include "mala/broker/broker_dispatcher.h"
#include "mala/broker/handler_table.h"
#include "mala/protocol/messages/api_versions_request.h"
#include "mala/protocol/messages/api_versions_response.h"
#include "mala/protocol/messages/metadata_request.h"
#include "mala/protocol/messages/metadata_response.h"

namespace mala::broker {
namespace {

using namespace mala::protocol;

class dispatcher_test : public ::testing::Test {
 protected:
  void SetUp() override {
    auto image = std::make_shared<metadata::metadata_image>();
    image->cluster_id = "test-cluster";
    image->controller_id = 1;
    metadata::broker_registration b;
    b.id = 1;
    b.endpoints.push_back({"PLAINTEXT", "127.0.0.1", 9092, "PLAINTEXT"});
    b.endpoints.push_back({"INTERNAL", "broker-1", 19092, "PLAINTEXT"});
    image->brokers[1] = b;
    metadata::topic_metadata t;
    t.name = "bus-events";
    t.id = uuid::random();
    for (int32_t p = 0; p < 3; ++p) t.partitions.push_back({p, 1, 5, 5, {1}, {1}, {}, {}});
    image->topics[t.name] = t;
    cache.publish(image);
    services = {1, &cache, &table, {}};
    connection.listener_name = "PLAINTEXT";
  }

  template <typename Request>
  std::vector<uint8_t> frame(int16_t key, int16_t version, const Request& body) {
    std::vector<uint8_t> out;
    wire_writer w(out);
    request_header h{key, version, 42, std::string("unit-test")};
    encode_request_header(w, h, request_header_version(Request::is_flexible(version)));
    body.encode(w, version);
    return out;
  }

  net::dispatch_result send(std::span<const uint8_t> bytes) {
    broker_dispatcher d(services);
    return d.dispatch_now(connection, bytes);
  }

  metadata::metadata_cache cache;
  handler_table table;
  broker_services services;
  net::connection_info connection;
};

TEST_F(dispatcher_test, api_versions_lists_the_handler_table) {
  api_versions_request req;
  req.client_software_name = "librdkafka";
  req.client_software_version = "2.6.1";
  auto result = send(frame(18, 3, req));
  ASSERT_EQ(result.what, net::dispatch_result::action::respond);
  wire_reader r(result.response);
  EXPECT_EQ(r.read_int32(), 42);  // response header v0 even for a flexible request (KIP-511)
  api_versions_response resp;
  ASSERT_EQ(resp.decode(r, 3), decode_status::ok);
  EXPECT_EQ(resp.error_code, 0);
  ASSERT_EQ(resp.api_keys.size(), table.entries().size());
  for (const auto& e : table.entries()) {
    bool found = false;
    for (const auto& k : resp.api_keys) {
      if (k.api_key == e.api_key) {
        found = true;
        EXPECT_EQ(k.max_version, e.max_version);
      }
    }
    EXPECT_TRUE(found) << e.name;
  }
  EXPECT_EQ(connection.client_software_name, "librdkafka");
}

TEST_F(dispatcher_test, api_versions_rejects_invalid_client_software_name) {
  api_versions_request req;
  req.client_software_name = "bad name!";
  req.client_software_version = "1.0";
  auto result = send(frame(18, 3, req));
  ASSERT_EQ(result.what, net::dispatch_result::action::respond);
  wire_reader r(result.response);
  r.read_int32();
  api_versions_response resp;
  ASSERT_EQ(resp.decode(r, 3), decode_status::ok);
  EXPECT_EQ(resp.error_code, 42);  // INVALID_REQUEST
}

TEST_F(dispatcher_test, too_new_api_versions_gets_v0_unsupported_version) {
  // Only the fixed header prefix is meaningful; the rest is in a format from the future.
  std::vector<uint8_t> bytes = {0, 18, 0, 127, 0, 0, 0, 9, 0xde, 0xad};
  auto result = send(bytes);
  ASSERT_EQ(result.what, net::dispatch_result::action::respond);
  const std::vector<uint8_t> expected = {0, 0,  0, 9,         // correlation id (header v0)
                                         0, 35,               // UNSUPPORTED_VERSION
                                         0, 0,  0, 1,         // one api key
                                         0, 18, 0, 0, 0, 4};  // ApiVersions 0-4
  EXPECT_EQ(result.response, expected);
}

TEST_F(dispatcher_test, unknown_api_key_closes_the_connection) {
  std::vector<uint8_t> bytes = {0x03, 0xe7, 0, 0, 0, 0, 0, 1, 0xff, 0xff};
  EXPECT_EQ(send(bytes).what, net::dispatch_result::action::close);
}

TEST_F(dispatcher_test, unsupported_version_closes_the_connection) {
  metadata_request req;
  auto bytes = frame(3, 12, req);
  bytes[3] = 99;  // version 99
  EXPECT_EQ(send(bytes).what, net::dispatch_result::action::close);
}

TEST_F(dispatcher_test, short_frame_closes_the_connection) {
  std::vector<uint8_t> bytes = {0, 3, 0};
  EXPECT_EQ(send(bytes).what, net::dispatch_result::action::close);
}

TEST_F(dispatcher_test, truncated_metadata_body_closes_the_connection) {
  metadata_request req;
  req.topics.emplace();
  req.topics->emplace_back().name = "bus-events";
  auto bytes = frame(3, 9, req);
  bytes.resize(bytes.size() - 3);
  EXPECT_EQ(send(bytes).what, net::dispatch_result::action::close);
}

metadata_response decode_metadata(const net::dispatch_result& result, int16_t version) {
  wire_reader r(result.response);
  r.read_int32();
  if (metadata_request::is_flexible(version)) r.read_uvarint();
  metadata_response resp;
  EXPECT_EQ(resp.decode(r, version), decode_status::ok);
  return resp;
}

TEST_F(dispatcher_test, metadata_all_topics_every_version) {
  for (int16_t v = 0; v <= 12; ++v) {
    metadata_request req;
    if (v == 0) {
      req.topics.emplace();  // v0: empty list means all topics
    } else {
      req.topics.reset();
    }
    auto result = send(frame(3, v, req));
    ASSERT_EQ(result.what, net::dispatch_result::action::respond) << "v" << v;
    auto resp = decode_metadata(result, v);
    ASSERT_EQ(resp.brokers.size(), 1u);
    EXPECT_EQ(resp.brokers[0].host, "127.0.0.1");  // the endpoint of the listener the request came in on
    EXPECT_EQ(resp.brokers[0].port, 9092);
    ASSERT_EQ(resp.topics.size(), 1u) << "v" << v;
    EXPECT_EQ(resp.topics[0].partitions.size(), 3u);
    if (v >= 1) {
      EXPECT_EQ(resp.controller_id, 1);
    }
    if (v >= 2) {
      EXPECT_EQ(resp.cluster_id, std::optional<std::string>("test-cluster"));
    }
    if (v >= 7) {
      EXPECT_EQ(resp.topics[0].partitions[0].leader_epoch, 5);
    }
  }
}

TEST_F(dispatcher_test, metadata_other_listener_gets_its_own_endpoint) {
  connection.listener_name = "INTERNAL";
  metadata_request req;
  auto resp = decode_metadata(send(frame(3, 12, req)), 12);
  ASSERT_EQ(resp.brokers.size(), 1u);
  EXPECT_EQ(resp.brokers[0].host, "broker-1");
  EXPECT_EQ(resp.brokers[0].port, 19092);
}

TEST_F(dispatcher_test, metadata_unknown_invalid_and_empty_topic_lists) {
  metadata_request req;
  req.topics.emplace();
  req.topics->emplace_back().name = "nope";
  req.topics->emplace_back().name = "bad/name";
  auto resp = decode_metadata(send(frame(3, 12, req)), 12);
  ASSERT_EQ(resp.topics.size(), 2u);
  EXPECT_EQ(resp.topics[0].error_code, 3);   // UNKNOWN_TOPIC_OR_PARTITION
  EXPECT_EQ(resp.topics[1].error_code, 17);  // INVALID_TOPIC_EXCEPTION

  metadata_request none;
  none.topics.emplace();  // v1+: empty list means no topics
  EXPECT_TRUE(decode_metadata(send(frame(3, 12, none)), 12).topics.empty());
}

TEST_F(dispatcher_test, metadata_by_topic_id) {
  const auto id = cache.current()->find_topic(std::string("bus-events"))->id;
  metadata_request req;
  req.topics.emplace();
  auto& t = req.topics->emplace_back();
  t.name.reset();
  t.topic_id = id;
  auto& unknown = req.topics->emplace_back();
  unknown.name.reset();
  unknown.topic_id = uuid::random();
  auto resp = decode_metadata(send(frame(3, 12, req)), 12);
  ASSERT_EQ(resp.topics.size(), 2u);
  EXPECT_EQ(resp.topics[0].name, std::optional<std::string>("bus-events"));
  EXPECT_EQ(resp.topics[1].error_code, 100);  // UNKNOWN_TOPIC_ID
}

TEST_F(dispatcher_test, metadata_reports_a_local_replica_with_an_offline_log_dir) {
  services.local_replica_offline = [](const std::string& topic, int32_t partition) {
    return topic == "bus-events" && partition == 1;
  };
  metadata_request req;
  req.topics.reset();  // null: every topic
  auto resp = decode_metadata(send(frame(3, 12, req)), 12);
  ASSERT_EQ(resp.topics.size(), 1u);
  const auto& parts = resp.topics[0].partitions;
  EXPECT_EQ(parts[0].error_code, 0);
  EXPECT_TRUE(parts[0].offline_replicas.empty());
  EXPECT_EQ(parts[1].error_code, 5);  // LEADER_NOT_AVAILABLE
  EXPECT_EQ(parts[1].leader_id, -1);
  EXPECT_EQ(parts[1].offline_replicas, std::vector<int32_t>{1});
}

}  // namespace
}  // namespace mala::broker
