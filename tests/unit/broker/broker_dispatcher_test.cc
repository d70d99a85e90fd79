// The dispatcher on hand-built frames: KIP-511 handling of a too-new ApiVersions, ApiVersions derived from
// the handler table, Metadata from the image, and closing on unknown keys, unsupported versions and malformed
// bodies.
#include <gtest/gtest.h>

#include "mala/broker/broker_dispatcher.h"
#include "mala/broker/client_quota_manager.h"
#include "mala/broker/client_telemetry.h"
#include "mala/broker/controller_channel.h"
#include "mala/broker/handler_table.h"
#include "mala/broker/refused_requests.h"
#include "mala/common/config.h"
#include "mala/net/request_meter.h"
#include "mala/protocol/messages/alter_configs_response.h"
#include "mala/protocol/messages/api_versions_request.h"
#include "mala/protocol/messages/api_versions_response.h"
#include "mala/protocol/messages/create_acls_request.h"
#include "mala/protocol/messages/create_acls_response.h"
#include "mala/protocol/messages/create_partitions_response.h"
#include "mala/protocol/messages/create_topics_response.h"
#include "mala/protocol/messages/delete_acls_request.h"
#include "mala/protocol/messages/delete_acls_response.h"
#include "mala/protocol/messages/delete_topics_response.h"
#include "mala/protocol/messages/describe_acls_request.h"
#include "mala/protocol/messages/describe_acls_response.h"
#include "mala/protocol/messages/elect_leaders_response.h"
#include "mala/protocol/messages/find_coordinator_request.h"
#include "mala/protocol/messages/find_coordinator_response.h"
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
  // Every API but the two of client telemetry, which need a receiver (broker_services::telemetry).
  size_t telemetry_only = 0;
  for (const auto& e : table.entries()) {
    bool found = false;
    for (const auto& k : resp.api_keys) {
      if (k.api_key == e.api_key) {
        found = true;
        EXPECT_EQ(k.max_version, e.max_version);
      }
    }
    EXPECT_EQ(found, !e.client_telemetry_only) << e.name;
    telemetry_only += e.client_telemetry_only ? 1 : 0;
  }
  EXPECT_EQ(telemetry_only, 2u);  // GetTelemetrySubscriptions, PushTelemetry
  EXPECT_EQ(resp.api_keys.size(), table.entries().size() - telemetry_only);
  EXPECT_EQ(connection.client_software_name, "librdkafka");

  // With client telemetry, every API.
  client_telemetry telemetry;
  services.telemetry = &telemetry;
  result = send(frame(18, 3, req));
  wire_reader again(result.response);
  again.read_int32();
  api_versions_response with_telemetry;
  ASSERT_EQ(with_telemetry.decode(again, 3), decode_status::ok);
  EXPECT_EQ(with_telemetry.api_keys.size(), table.entries().size());
}

// Kafka's network-thread time: a request charged to a request quota has its response's send charged too
// (recordNoThrottle), through the recorder the dispatcher puts in the result; none without a meter.
TEST_F(dispatcher_test, a_request_under_a_request_quota_charges_its_send_too) {
  client_quota_manager quotas;
  services.quotas = &quotas;
  // A configuration that names the controller listener: PLAINTEXT is a client listener (without one every
  // listener counts as the controller's, which request quotas exempt).
  auto config = node_config::load_from_string(
      "node.id: 1\nprocess.roles: broker,controller\nlisteners: PLAINTEXT://:9092,CONTROLLER://:9093\n"
      "controller.listener.names: CONTROLLER\n"
      "listener.security.protocol.map: PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT\n"
      "controller.quorum.voters: 1@localhost:9093\nlog.dirs: /tmp/unused\n",
      config_format::yaml, {});
  ASSERT_TRUE(config.ok()) << config.error().message;
  services.config = &config.value();
  auto image = std::make_shared<metadata::metadata_image>(*cache.current());
  metadata::client_quota_map map;
  map[{{"client-id", "unit-test"}}]["request_percentage"] = 1;
  image->client_quotas.entities = std::make_shared<const metadata::client_quota_map>(std::move(map));
  cache.publish(image);
  metadata_request req;
  EXPECT_FALSE(send(frame(3, 12, req)).record_send_time) << "no meter: no request quota applies";

  net::request_meter meter;
  net::dispatch_result result;
  {
    net::request_meter_scope scope(&meter);
    result = send(frame(3, 12, req));
  }
  ASSERT_EQ(result.what, net::dispatch_result::action::respond);
  ASSERT_TRUE(result.record_send_time);
  // 5 s of thread time sending: the client's next request finds its quota (1 %) spent.
  result.record_send_time(5'000'000'000);
  const auto next =
      quotas.record(image->client_quotas, client_quota_type::request, "ANONYMOUS", "unit-test", 0);
  EXPECT_GT(next.throttle_ms, 0);
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
  auto result = send(bytes);
  EXPECT_EQ(result.what, net::dispatch_result::action::close);
  EXPECT_TRUE(result.logged);  // by the dispatcher, rate-limited, with the client id
}

TEST_F(dispatcher_test, unsupported_version_closes_the_connection) {
  metadata_request req;
  auto bytes = frame(3, 12, req);
  bytes[3] = 99;  // version 99
  auto result = send(bytes);
  EXPECT_EQ(result.what, net::dispatch_result::action::close);
  EXPECT_TRUE(result.logged);
  EXPECT_NE(result.close_reason.find("Metadata"), std::string::npos) << result.close_reason;
}

TEST(refusal_rate_limit_test, logs_the_first_then_one_per_interval_with_the_count_left_out) {
  using namespace std::chrono_literals;
  refusal_rate_limit limit(10s);
  const auto t0 = std::chrono::steady_clock::time_point{} + 1h;
  EXPECT_EQ(limit.admit("api 65 v0 client a", t0), std::optional<uint64_t>(0));
  EXPECT_EQ(limit.admit("api 65 v0 client a", t0 + 1s), std::nullopt);
  EXPECT_EQ(limit.admit("api 65 v0 client a", t0 + 9s), std::nullopt);
  EXPECT_EQ(limit.admit("api 65 v0 client b", t0 + 9s), std::optional<uint64_t>(0));  // another client
  EXPECT_EQ(limit.admit("api 65 v0 client a", t0 + 10s), std::optional<uint64_t>(2));
  EXPECT_EQ(limit.admit("api 65 v0 client a", t0 + 21s), std::optional<uint64_t>(0));
}

// KIP-584 features in ApiVersions v3+: what `kafka-features describe` prints. metadata.version and
// transaction.version are the image's (absent when the image has none); the behaviours Mala always has
// (KIP-966 ELR, KIP-848 groups) are finalized at level 1.
TEST_F(dispatcher_test, api_versions_lists_supported_and_finalized_features) {
  auto image = std::make_shared<metadata::metadata_image>(*cache.current());
  image->finalized_features["metadata.version"] = 33;
  image->finalized_features["transaction.version"] = 2;
  image->metadata_offset = 1234;
  cache.publish(image);
  api_versions_request req;
  req.client_software_name = "apache-kafka-java";
  req.client_software_version = "4.4.0";
  for (int16_t version : {int16_t{3}, int16_t{4}}) {
    auto result = send(frame(18, version, req));
    ASSERT_EQ(result.what, net::dispatch_result::action::respond);
    wire_reader r(result.response);
    r.read_int32();
    api_versions_response resp;
    ASSERT_EQ(resp.decode(r, version), decode_status::ok);
    std::map<std::string, std::pair<int16_t, int16_t>> supported;
    for (const auto& f : resp.supported_features) supported[f.name] = {f.min_version, f.max_version};
    EXPECT_EQ(supported["metadata.version"], std::make_pair(int16_t{7}, int16_t{33}));
    EXPECT_EQ(supported["eligible.leader.replicas.version"], std::make_pair(int16_t{0}, int16_t{1}));
    EXPECT_EQ(supported["group.version"], std::make_pair(int16_t{0}, int16_t{1}));
    EXPECT_EQ(supported["kraft.version"], std::make_pair(int16_t{0}, int16_t{1}));
    EXPECT_EQ(supported["transaction.version"], std::make_pair(int16_t{0}, int16_t{2}));
    std::map<std::string, int16_t> finalized;
    for (const auto& f : resp.finalized_features) {
      EXPECT_EQ(f.min_version_level, f.max_version_level) << f.name;
      finalized[f.name] = f.max_version_level;
    }
    EXPECT_EQ(finalized["metadata.version"], 33);
    EXPECT_EQ(finalized["eligible.leader.replicas.version"], 1);
    EXPECT_EQ(finalized["group.version"], 1);
    EXPECT_EQ(finalized["transaction.version"], 2);
    EXPECT_EQ(resp.finalized_features_epoch, 1234);
  }
  // transaction.version removed (downgraded to 0): not listed as finalized; a new epoch.
  image = std::make_shared<metadata::metadata_image>(*image);
  image->finalized_features.erase("transaction.version");
  image->metadata_offset = 1240;
  cache.publish(image);
  auto result = send(frame(18, 3, req));
  wire_reader r(result.response);
  r.read_int32();
  api_versions_response resp;
  ASSERT_EQ(resp.decode(r, 3), decode_status::ok);
  for (const auto& f : resp.finalized_features) EXPECT_NE(f.name, "transaction.version");
  EXPECT_EQ(resp.finalized_features_epoch, 1240);
}

// Without an authorizer Kafka answers the ACL APIs with SECURITY_DISABLED (kafka-acls prints the message).
TEST_F(dispatcher_test, acl_apis_answer_security_disabled) {
  constexpr int16_t security_disabled = 54;
  for (int16_t version = 1; version <= 3; ++version) {
    describe_acls_request describe;
    describe.resource_type_filter = 1;  // ANY
    describe.operation = 1;
    describe.permission_type = 1;
    auto d = send(frame(29, version, describe));
    ASSERT_EQ(d.what, net::dispatch_result::action::respond);
    wire_reader dr(d.response);
    dr.read_int32();
    if (version >= 2) dr.read_uvarint();  // response header v1 tagged fields
    describe_acls_response dresp;
    ASSERT_EQ(dresp.decode(dr, version), decode_status::ok);
    EXPECT_EQ(dresp.error_code, security_disabled);
    EXPECT_EQ(dresp.error_message, std::optional<std::string>("No Authorizer is configured."));

    create_acls_request create;
    create.creations.resize(2);
    auto c = send(frame(30, version, create));
    wire_reader cr(c.response);
    cr.read_int32();
    if (version >= 2) cr.read_uvarint();
    create_acls_response cresp;
    ASSERT_EQ(cresp.decode(cr, version), decode_status::ok);
    ASSERT_EQ(cresp.results.size(), 2u);
    for (const auto& res : cresp.results) EXPECT_EQ(res.error_code, security_disabled);

    delete_acls_request del;
    del.filters.resize(3);
    auto x = send(frame(31, version, del));
    wire_reader xr(x.response);
    xr.read_int32();
    if (version >= 2) xr.read_uvarint();
    delete_acls_response xresp;
    ASSERT_EQ(xresp.decode(xr, version), decode_status::ok);
    ASSERT_EQ(xresp.filter_results.size(), 3u);
    for (const auto& res : xresp.filter_results) {
      EXPECT_EQ(res.error_code, security_disabled);
      EXPECT_TRUE(res.matching_acls.empty());
    }
  }
}

// Without a transaction coordinator (and __transaction_state) every key answers COORDINATOR_NOT_AVAILABLE,
// which clients retry.
TEST_F(dispatcher_test, find_coordinator_for_a_transactional_id_without_a_coordinator_is_retriable) {
  find_coordinator_request req;
  req.key_type = 1;
  req.key = "txn-1";
  req.coordinator_keys = {"txn-1", "txn-2"};
  for (int16_t version : {int16_t{1}, int16_t{3}, int16_t{4}, int16_t{6}}) {
    auto result = send(frame(10, version, req));
    ASSERT_EQ(result.what, net::dispatch_result::action::respond);
    wire_reader r(result.response);
    r.read_int32();
    if (find_coordinator_request::is_flexible(version)) r.read_uvarint();
    find_coordinator_response resp;
    ASSERT_EQ(resp.decode(r, version), decode_status::ok);
    if (version < 4) {
      EXPECT_EQ(resp.error_code, 15);  // COORDINATOR_NOT_AVAILABLE
      EXPECT_EQ(resp.node_id, -1);
    } else {
      ASSERT_EQ(resp.coordinators.size(), 2u);
      for (const auto& c : resp.coordinators) {
        EXPECT_EQ(c.error_code, 15);
        EXPECT_EQ(c.node_id, -1);
      }
    }
  }
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

// A forwarded answer that says the node reached is not the active controller (any of its codes) makes the
// broker try the new one instead of relaying NOT_CONTROLLER (Kafka's NodeToControllerChannelManager).
TEST(controller_forwarding, answers_naming_not_controller_are_retried) {
  const int16_t not_controller = to_wire(error_code::not_controller);
  protocol::create_topics_response created;
  created.topics.emplace_back().error_code = 0;
  EXPECT_FALSE(answers_not_controller(created));
  created.topics.emplace_back().error_code = not_controller;
  EXPECT_TRUE(answers_not_controller(created));

  protocol::create_partitions_response partitions;
  partitions.results.emplace_back().error_code = to_wire(error_code::invalid_partitions);
  EXPECT_FALSE(answers_not_controller(partitions));
  partitions.results.back().error_code = not_controller;
  EXPECT_TRUE(answers_not_controller(partitions));

  protocol::delete_topics_response deleted;
  deleted.responses.emplace_back().error_code = not_controller;
  EXPECT_TRUE(answers_not_controller(deleted));

  protocol::alter_configs_response configs;
  configs.responses.emplace_back().error_code = to_wire(error_code::invalid_config);
  EXPECT_FALSE(answers_not_controller(configs));

  protocol::elect_leaders_response elected;
  EXPECT_FALSE(answers_not_controller(elected));
  elected.error_code = not_controller;
  EXPECT_TRUE(answers_not_controller(elected));
}

}  // namespace
}  // namespace mala::broker
