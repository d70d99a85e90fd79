// The administrative and cluster handlers through the dispatcher, on a one-shard pool (the handlers hop to
// the home shard): CreateTopics / DeleteTopics / CreatePartitions / AlterConfigs / IncrementalAlterConfigs
// forwarded to a real controller over a metadata log in a temp dir, DescribeConfigs / DescribeCluster /
// DescribeTopicPartitions from the published image, DescribeLogDirs from a real log manager, InitProducerId
// with producer-id blocks from the controller. Expected answers are Apache Kafka 4.x's.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <future>
#include <map>
#include <random>

#include <asio/co_spawn.hpp>
#include <asio/detached.hpp>

#include "mala/broker/authorizer.h"
#include "mala/broker/broker_dispatcher.h"
#include "mala/broker/handler_table.h"
#include "mala/broker/producer_id_allocator.h"
#include "mala/common/logging.h"
#include "mala/controller/quorum_controller.h"
#include "mala/controller/topic_config.h"
#include "mala/net/shard_pool.h"
#include "mala/protocol/messages/alter_configs_request.h"
#include "mala/protocol/messages/alter_configs_response.h"
#include "mala/protocol/messages/create_acls_request.h"
#include "mala/protocol/messages/create_acls_response.h"
#include "mala/protocol/messages/create_partitions_request.h"
#include "mala/protocol/messages/create_partitions_response.h"
#include "mala/protocol/messages/create_topics_request.h"
#include "mala/protocol/messages/create_topics_response.h"
#include "mala/protocol/messages/delete_acls_request.h"
#include "mala/protocol/messages/delete_acls_response.h"
#include "mala/protocol/messages/delete_topics_request.h"
#include "mala/protocol/messages/delete_topics_response.h"
#include "mala/protocol/messages/describe_acls_request.h"
#include "mala/protocol/messages/describe_acls_response.h"
#include "mala/protocol/messages/describe_cluster_request.h"
#include "mala/protocol/messages/describe_cluster_response.h"
#include "mala/protocol/messages/describe_configs_request.h"
#include "mala/protocol/messages/describe_configs_response.h"
#include "mala/protocol/messages/describe_log_dirs_request.h"
#include "mala/protocol/messages/describe_log_dirs_response.h"
#include "mala/protocol/messages/describe_topic_partitions_request.h"
#include "mala/protocol/messages/describe_topic_partitions_response.h"
#include "mala/protocol/messages/incremental_alter_configs_request.h"
#include "mala/protocol/messages/incremental_alter_configs_response.h"
#include "mala/protocol/messages/init_producer_id_request.h"
#include "mala/protocol/messages/init_producer_id_response.h"
#include "mala/protocol/messages/metadata_request.h"
#include "mala/protocol/messages/metadata_response.h"
#include "mala/protocol/messages/update_features_request.h"
#include "mala/protocol/messages/update_features_response.h"
#include "mala/protocol/record_batch.h"
#include "mala/replication/replica_manager.h"
#include "mala/storage/log_manager.h"
#include "support/active_controller.h"
#include "support/local_metadata_log.h"

namespace mala::broker {
namespace {

namespace fs = std::filesystem;
using namespace mala::protocol;

constexpr int16_t err_none = 0;
constexpr int16_t err_unknown_topic = 3;
constexpr int16_t err_coordinator_load_in_progress = 14;
constexpr int16_t err_coordinator_not_available = 15;
constexpr int16_t err_invalid_topic = 17;
constexpr int16_t err_invalid_partitions = 37;
constexpr int16_t err_invalid_config = 40;
constexpr int16_t err_not_controller = 41;
constexpr int16_t err_invalid_request = 42;
constexpr int16_t err_kafka_storage_error = 56;
constexpr int16_t err_topic_deletion_disabled = 73;
constexpr int16_t err_unknown_topic_id = 100;
constexpr int16_t err_mismatched_endpoint_type = 114;
constexpr int16_t err_unsupported_endpoint_type = 115;

// ConfigSource ids.
constexpr int8_t src_topic = 1;
constexpr int8_t src_dynamic_broker = 2;
constexpr int8_t src_dynamic_default = 3;
constexpr int8_t src_static = 4;
constexpr int8_t src_default = 5;
constexpr int8_t src_logger = 6;

std::string node_yaml(const fs::path& log_dir) {
  return "node.id: 1\n"
         "process.roles: broker,controller\n"
         "listeners: PLAINTEXT://:9092,CONTROLLER://:9093\n"
         "advertised.listeners: PLAINTEXT://localhost:9092\n"
         "controller.listener.names: CONTROLLER\n"
         "listener.security.protocol.map: PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT\n"
         "controller.quorum.voters: 1@localhost:9093\n"
         "log.dirs: " +
         log_dir.string() +
         "\n"
         "log.retention.hours: 168\n"
         "log.segment.bytes: 536870912\n";
}

class admin_handlers_test : public ::testing::Test {
 protected:
  void SetUp() override {
    _root = fs::temp_directory_path() / ("mala-admin-handlers-" + std::to_string(std::random_device{}()));
    fs::create_directories(_root / "data");
    load_config({});
    open_controller();
    pool = std::make_unique<net::shard_pool>(1);
    pool->start();
    services = {1, &cache, &table, {}};
    services.config = &*config;
    services.shards = pool.get();
    services.home_shard = 0;
    services.controller = controller.get();
    services.producer_ids = &producer_ids;
    connection.listener_name = "PLAINTEXT";
  }

  void TearDown() override {
    pool->stop();
    pool->join();
    pool.reset();
    logs.reset();
    controller.reset();
    fs::remove_all(_root);
  }

  void load_config(const std::vector<std::string>& overrides) {
    auto loaded = node_config::load_from_string(node_yaml(_root / "data"), config_format::yaml, overrides);
    ASSERT_TRUE(loaded.ok()) << loaded.error().message;
    config.emplace(std::move(loaded.value()));
    services.config = &*config;
  }

  void open_controller() {
    auto log = controller::local_metadata_log::open(_root / "data");
    ASSERT_TRUE(log.ok()) << log.error().message;
    controller::controller_options options;
    options.node_id = 1;
    options.cluster_id = "MkU3OEVBNTcwNTJENDM2Qk";
    options.static_config = [this](std::string_view property) -> std::optional<std::string> {
      const auto values = config->all_values();
      auto it = values.find(property);
      if (it == values.end() || it->second.source == config_source::default_value) return std::nullopt;
      return it->second.value;
    };
    options.clock_ms = [] { return int64_t{1'700'000'000'000}; };
    auto opened = controller::open_active_controller(std::move(log.value()), options);
    ASSERT_TRUE(opened.ok()) << opened.error().message;
    controller = std::move(opened.value());
    // As a node publishes its images: clients are told this node is the controller (KRaft brokers forward to
    // it).
    controller->set_publisher([this](const metadata::metadata_image_ptr& image) { publish(image); });
    metadata::broker_registration self;
    self.id = 1;
    self.endpoints.push_back({"PLAINTEXT", "localhost", 9092, "PLAINTEXT"});
    self.incarnation_id = uuid::random();
    for (const auto& f : controller::implemented_features) {  // as a node registers
      self.supported_features[std::string(f.name)] = {f.min_level, f.max_level};
    }
    auto epoch = controller::register_unfenced_broker(*controller, self);
    ASSERT_TRUE(epoch.ok()) << epoch.error().message;
    publish(controller->image());
  }

  void publish(const metadata::metadata_image_ptr& image) {
    auto copy = std::make_shared<metadata::metadata_image>(*image);
    if (copy->controller_id < 0) copy->controller_id = 1;
    cache.publish(std::move(copy));
  }

  // Runs one request through the dispatcher on the shard and decodes the response body.
  template <typename Response, typename Request>
  Response call(int16_t key, int16_t version, const Request& body) {
    std::vector<uint8_t> bytes;
    wire_writer w(bytes);
    request_header h{key, version, 42, std::string("admin-test")};
    const bool flexible = Request::is_flexible(version);
    encode_request_header(w, h, request_header_version(flexible));
    body.encode(w, version);
    broker_dispatcher dispatcher(services);
    std::promise<net::dispatch_result> done;
    asio::co_spawn(
        pool->context(0),
        [&]() -> asio::awaitable<void> {
          net::ordering_point order;
          done.set_value(co_await dispatcher.dispatch(connection, bytes, order));
        },
        asio::detached);
    const auto result = done.get_future().get();
    Response resp;
    EXPECT_EQ(result.what, net::dispatch_result::action::respond) << result.close_reason;
    if (result.what != net::dispatch_result::action::respond) return resp;
    wire_reader r(result.response);
    EXPECT_EQ(r.read_int32(), 42);
    if (flexible) {
      EXPECT_EQ(r.read_tag_count(), 0u);
    }
    EXPECT_EQ(resp.decode(r, version), decode_status::ok);
    return resp;
  }

  create_topics_response create_topic(const std::string& name, int32_t partitions) {
    create_topics_request req;
    auto& t = req.topics.emplace_back();
    t.name = name;
    t.num_partitions = partitions;
    t.replication_factor = 1;
    return call<create_topics_response>(19, 7, req);
  }

  describe_configs_response describe_configs(int8_t type, const std::string& name, int16_t version = 4,
                                             std::optional<std::vector<std::string>> keys = std::nullopt,
                                             bool synonyms = true, bool documentation = true) {
    describe_configs_request req;
    auto& r = req.resources.emplace_back();
    r.resource_type = type;
    r.resource_name = name;
    r.configuration_keys = std::move(keys);
    req.include_synonyms = synonyms;
    req.include_documentation = documentation;
    return call<describe_configs_response>(32, version, req);
  }

  static const describe_configs_response::describe_configs_resource_result* find_config(
      const describe_configs_response::describe_configs_result& result, const std::string& name) {
    for (const auto& c : result.configs)
      if (c.name == name) return &c;
    return nullptr;
  }

  // Publishes a copy of the current image changed by `edit` (for the read-only handlers).
  template <typename Fn>
  void edit_image(Fn edit) {
    auto copy = std::make_shared<metadata::metadata_image>(*cache.current());
    edit(*copy);
    cache.publish(std::move(copy));
  }

  fs::path _root;
  std::optional<node_config> config;
  std::unique_ptr<controller::quorum_controller> controller;
  std::unique_ptr<storage::log_manager> logs;
  producer_id_allocator producer_ids;
  metadata::metadata_cache cache;
  handler_table table;
  broker_services services;
  net::connection_info connection;
  std::unique_ptr<net::shard_pool> pool;
};

// --- CreateTopics

TEST_F(admin_handlers_test, create_topics_runs_on_the_controller_and_publishes) {
  auto resp = create_topic("orders", 3);
  ASSERT_EQ(resp.topics.size(), 1u);
  EXPECT_EQ(resp.topics[0].error_code, err_none) << resp.topics[0].error_message.value_or("");
  EXPECT_EQ(resp.topics[0].num_partitions, 3);
  EXPECT_FALSE(resp.topics[0].topic_id.is_zero());
  const auto* topic = cache.current()->find_topic("orders");
  ASSERT_NE(topic, nullptr);
  EXPECT_EQ(topic->partitions.size(), 3u);
  // Again: the controller's TOPIC_ALREADY_EXISTS.
  EXPECT_EQ(create_topic("orders", 3).topics[0].error_code, 36);
}

TEST_F(admin_handlers_test, create_topics_refuses_duplicates_and_the_metadata_topic) {
  create_topics_request req;
  for (const char* name : {"dup", "fine", "dup", "__cluster_metadata"}) {
    auto& t = req.topics.emplace_back();
    t.name = name;
    t.num_partitions = 1;
    t.replication_factor = 1;
  }
  auto resp = call<create_topics_response>(19, 5, req);
  ASSERT_EQ(resp.topics.size(), 3u);
  std::map<std::string, create_topics_response::creatable_topic_result> by_name;
  for (const auto& t : resp.topics) by_name[t.name] = t;
  EXPECT_EQ(by_name["fine"].error_code, err_none);
  EXPECT_EQ(by_name["dup"].error_code, err_invalid_request);
  EXPECT_EQ(by_name["dup"].error_message, "Duplicate topic name.");
  EXPECT_EQ(by_name["__cluster_metadata"].error_code, err_invalid_request);
  EXPECT_EQ(by_name["__cluster_metadata"].error_message,
            "Creation of internal topic __cluster_metadata is prohibited.");
  EXPECT_EQ(cache.current()->find_topic("dup"), nullptr);
}

TEST_F(admin_handlers_test, controller_requests_without_a_controller_are_not_controller) {
  services.controller = nullptr;
  auto created = create_topic("orders", 1);
  ASSERT_EQ(created.topics.size(), 1u);
  EXPECT_EQ(created.topics[0].error_code, err_not_controller);
  EXPECT_EQ(created.topics[0].error_message, "This is not the correct controller for this cluster.");

  delete_topics_request del;
  del.topic_names = {"a", "b"};
  auto deleted = call<delete_topics_response>(20, 5, del);
  ASSERT_EQ(deleted.responses.size(), 2u);
  EXPECT_EQ(deleted.responses[1].error_code, err_not_controller);

  create_partitions_request cp;
  cp.topics.emplace_back().name = "a";
  EXPECT_EQ(call<create_partitions_response>(37, 3, cp).results.at(0).error_code, err_not_controller);

  incremental_alter_configs_request inc;
  auto& r = inc.resources.emplace_back();
  r.resource_type = 2;
  r.resource_name = "a";
  EXPECT_EQ(call<incremental_alter_configs_response>(44, 1, inc).responses.at(0).error_code,
            err_not_controller);
}

// --- DeleteTopics

TEST_F(admin_handlers_test, delete_topics_by_name_and_by_id) {
  create_topic("a", 1);
  create_topic("b", 1);
  const uuid b_id = cache.current()->find_topic("b")->id;
  delete_topics_request req;
  auto& by_name = req.topics.emplace_back();
  by_name.name = "a";
  req.topics.emplace_back().topic_id = b_id;
  auto resp = call<delete_topics_response>(20, 6, req);
  ASSERT_EQ(resp.responses.size(), 2u);
  for (const auto& r : resp.responses) EXPECT_EQ(r.error_code, err_none) << r.error_message.value_or("");
  EXPECT_EQ(cache.current()->find_topic("a"), nullptr);
  EXPECT_EQ(cache.current()->find_topic("b"), nullptr);

  // v5 by name: unknown topics are the controller's UNKNOWN_TOPIC_OR_PARTITION.
  delete_topics_request old;
  old.topic_names = {"missing"};
  auto missing = call<delete_topics_response>(20, 5, old);
  ASSERT_EQ(missing.responses.size(), 1u);
  EXPECT_EQ(missing.responses[0].name, "missing");
  EXPECT_EQ(missing.responses[0].error_code, err_unknown_topic);

  delete_topics_request by_unknown_id;
  by_unknown_id.topics.emplace_back().topic_id = uuid::random();
  EXPECT_EQ(call<delete_topics_response>(20, 6, by_unknown_id).responses.at(0).error_code,
            err_unknown_topic_id);
}

TEST_F(admin_handlers_test, delete_topics_answers_malformed_entries_as_kafka) {
  create_topic("a", 1);
  create_topic("c", 1);
  const uuid a_id = cache.current()->find_topic("a")->id;
  const uuid other = uuid::random();
  delete_topics_request req;
  req.topics.emplace_back();  // neither name nor id
  auto& both = req.topics.emplace_back();
  both.name = "x";
  both.topic_id = other;
  req.topics.emplace_back().name = "dup";
  req.topics.emplace_back().name = "dup";
  req.topics.emplace_back().topic_id = other;
  req.topics.emplace_back().topic_id = other;
  req.topics.emplace_back().name = "a";  // maps to an id also given
  req.topics.emplace_back().topic_id = a_id;
  req.topics.emplace_back().name = "c";
  auto resp = call<delete_topics_response>(20, 6, req);
  std::vector<std::string> messages;
  for (const auto& r : resp.responses) {
    if (r.name == std::optional<std::string>("c")) {
      EXPECT_EQ(r.error_code, err_none);
      continue;
    }
    EXPECT_EQ(r.error_code, err_invalid_request);
    messages.push_back(r.error_message.value_or(""));
  }
  std::sort(messages.begin(), messages.end());
  const std::vector<std::string> expected = {
      "Duplicate topic id.", "Duplicate topic name.", "Neither topic name nor id were specified.",
      "The provided topic name maps to an ID that was already supplied.",
      "You may not specify both topic name and topic id."};
  EXPECT_EQ(messages, expected);
  EXPECT_NE(cache.current()->find_topic("a"), nullptr);  // refused, not deleted
  EXPECT_EQ(cache.current()->find_topic("c"), nullptr);
}

TEST_F(admin_handlers_test, delete_topics_when_deletion_is_disabled) {
  create_topic("a", 1);
  load_config({"delete.topic.enable=false"});
  delete_topics_request req;
  req.topic_names = {"a"};
  // Before v3 clients do not know TOPIC_DELETION_DISABLED: Kafka answers INVALID_REQUEST.
  EXPECT_EQ(call<delete_topics_response>(20, 2, req).responses.at(0).error_code, err_invalid_request);
  EXPECT_EQ(call<delete_topics_response>(20, 5, req).responses.at(0).error_code, err_topic_deletion_disabled);
  EXPECT_NE(cache.current()->find_topic("a"), nullptr);
}

// --- CreatePartitions

// UpdateFeatures (kafka-features upgrade / downgrade) runs on the controller: the image the broker serves
// finalizes the new level once answered; --dry-run changes nothing; v0's AllowDowngrade is a downgrade.
TEST_F(admin_handlers_test, update_features_runs_on_the_controller) {
  auto request = [](int16_t level, int8_t type, bool allow_downgrade, bool validate_only) {
    protocol::update_features_request req;
    auto& u = req.feature_updates.emplace_back();
    u.feature = "transaction.version";
    u.max_version_level = level;
    u.upgrade_type = type;
    u.allow_downgrade = allow_downgrade;
    req.validate_only = validate_only;
    return req;
  };
  auto tv = [this] { return cache.current()->feature_level("transaction.version"); };
  ASSERT_EQ(tv(), 2);  // the bootstrap level; the test starts from 1
  ASSERT_EQ(call<protocol::update_features_response>(57, 2, request(1, 2, true, false)).error_code, err_none);
  ASSERT_EQ(tv(), 1);
  auto dry = call<protocol::update_features_response>(57, 1, request(2, 1, false, true));
  EXPECT_EQ(dry.error_code, err_none);
  EXPECT_EQ(tv(), 1);
  auto up = call<protocol::update_features_response>(57, 2, request(2, 1, false, false));
  EXPECT_EQ(up.error_code, err_none) << up.error_message.value_or("");
  EXPECT_TRUE(up.results.empty());
  EXPECT_EQ(tv(), 2);
  auto refused = call<protocol::update_features_response>(57, 0, request(0, 1, false, false));
  EXPECT_EQ(refused.error_code, 95);  // INVALID_UPDATE_VERSION: a downgrade without AllowDowngrade
  EXPECT_EQ(tv(), 2);
  auto down = call<protocol::update_features_response>(57, 0, request(0, 1, true, false));
  EXPECT_EQ(down.error_code, err_none) << down.error_message.value_or("");
  ASSERT_EQ(down.results.size(), 1u);
  EXPECT_EQ(down.results[0].feature, "transaction.version");
  EXPECT_EQ(cache.current()->finalized_features.count("transaction.version"), 0u);
}

TEST_F(admin_handlers_test, create_partitions_grows_topics_and_refuses_duplicates) {
  create_topic("grow", 1);
  create_partitions_request req;
  auto& t = req.topics.emplace_back();
  t.name = "grow";
  t.count = 4;
  t.assignments = std::nullopt;
  for (int i = 0; i < 2; ++i) {
    auto& d = req.topics.emplace_back();
    d.name = "twice";
    d.count = 2;
    d.assignments = std::nullopt;
  }
  req.timeout_ms = 5000;
  auto resp = call<create_partitions_response>(37, 3, req);
  ASSERT_EQ(resp.results.size(), 2u);
  std::map<std::string, create_partitions_response::create_partitions_topic_result> by_name;
  for (const auto& r : resp.results) by_name[r.name] = r;
  EXPECT_EQ(by_name["grow"].error_code, err_none) << by_name["grow"].error_message.value_or("");
  EXPECT_EQ(by_name["twice"].error_code, err_invalid_request);
  EXPECT_EQ(by_name["twice"].error_message, "Duplicate topic name.");
  EXPECT_EQ(cache.current()->find_topic("grow")->partitions.size(), 4u);

  // Not growing: the controller's INVALID_PARTITIONS.
  create_partitions_request shrink;
  auto& s = shrink.topics.emplace_back();
  s.name = "grow";
  s.count = 2;
  s.assignments = std::nullopt;
  EXPECT_EQ(call<create_partitions_response>(37, 0, shrink).results.at(0).error_code, err_invalid_partitions);
}

// --- IncrementalAlterConfigs / AlterConfigs

TEST_F(admin_handlers_test, incremental_alter_configs_preprocesses_as_a_kafka_broker) {
  create_topic("cfg", 1);
  incremental_alter_configs_request req;
  auto add = [&](int8_t type,
                 const std::string& name) -> incremental_alter_configs_request::alter_configs_resource& {
    auto& r = req.resources.emplace_back();
    r.resource_type = type;
    r.resource_name = name;
    return r;
  };
  auto set = [](incremental_alter_configs_request::alter_configs_resource& r, const std::string& key,
                std::optional<std::string> value, int8_t op = 0) {
    auto& c = r.configs.emplace_back();
    c.name = key;
    c.value = std::move(value);
    c.config_operation = op;
  };
  set(add(2, "cfg"), "retention.ms", "3600000");  // 0: applied
  set(add(2, "same"), "retention.ms", "1");       // 1, 2: resource twice
  set(add(2, "same"), "retention.ms", "2");
  auto& dup_keys = add(2, "dupkeys");  // 3
  set(dup_keys, "retention.ms", "1");
  set(dup_keys, "retention.ms", "2");
  set(add(2, "nulls"), "retention.ms", std::nullopt);  // 4: SET with null
  set(add(4, "2"), "log.retention.ms", "1000");        // 5: another broker
  set(add(4, "two"), "log.retention.ms", "1000");      // 6: not an id
  set(add(3, "x"), "a", "b");                          // 7: unknown type
  auto resp = call<incremental_alter_configs_response>(44, 1, req);
  ASSERT_EQ(resp.responses.size(), 8u);
  // Answers in request order.
  EXPECT_EQ(resp.responses[0].resource_name, "cfg");
  EXPECT_EQ(resp.responses[0].error_code, err_none) << resp.responses[0].error_message.value_or("");
  for (int i : {1, 2}) {
    EXPECT_EQ(resp.responses[i].error_code, err_invalid_request);
    EXPECT_EQ(resp.responses[i].error_message, "Each resource must appear at most once.");
  }
  EXPECT_EQ(resp.responses[3].error_message, "Error due to duplicate config keys");
  EXPECT_EQ(resp.responses[4].error_message, "Null value not supported for : retention.ms");
  EXPECT_EQ(resp.responses[5].error_message, "Unexpected broker id, expected 1, but received 2");
  EXPECT_EQ(resp.responses[6].error_message, "Node id must be an integer, but it is: two");
  EXPECT_EQ(resp.responses[7].error_code, err_invalid_request);
  EXPECT_EQ(resp.responses[7].error_message, "Unknown resource type 3");
  const auto* configs = cache.current()->find_configs(metadata::config_resource_type::topic, "cfg");
  ASSERT_NE(configs, nullptr);
  EXPECT_EQ(configs->at("retention.ms"), "3600000");

  // The override shows in DescribeConfigs as a dynamic topic config.
  auto described = describe_configs(2, "cfg", 4, std::vector<std::string>{"retention.ms"});
  ASSERT_EQ(described.results.size(), 1u);
  ASSERT_EQ(described.results[0].configs.size(), 1u);
  EXPECT_EQ(described.results[0].configs[0].value, "3600000");
  EXPECT_EQ(described.results[0].configs[0].config_source, src_topic);
}

TEST_F(admin_handlers_test, broker_loggers_are_described_and_altered_locally) {
  const std::string logger_name = "admin-test-logger";
  auto logger = subsystem_logger(logger_name);
  logger->set_level(spdlog::level::info);

  auto described = describe_configs(8, "1", 4, std::vector<std::string>{logger_name});
  ASSERT_EQ(described.results.size(), 1u);
  ASSERT_EQ(described.results[0].configs.size(), 1u);
  EXPECT_EQ(described.results[0].configs[0].value, "INFO");
  EXPECT_EQ(described.results[0].configs[0].config_source, src_logger);
  EXPECT_EQ(describe_configs(8, "2").results[0].error_code, err_invalid_request);

  incremental_alter_configs_request req;
  auto& r = req.resources.emplace_back();
  r.resource_type = 8;
  r.resource_name = "1";
  auto& c = r.configs.emplace_back();
  c.name = logger_name;
  c.value = "DEBUG";
  c.config_operation = 0;
  auto resp = call<incremental_alter_configs_response>(44, 1, req);
  EXPECT_EQ(resp.responses.at(0).error_code, err_none) << resp.responses.at(0).error_message.value_or("");
  EXPECT_EQ(logger->level(), spdlog::level::debug);

  c.value = "LOUD";
  resp = call<incremental_alter_configs_response>(44, 1, req);
  EXPECT_EQ(resp.responses.at(0).error_code, err_invalid_config);
  c.value = "INFO";
  c.config_operation = 2;  // APPEND
  resp = call<incremental_alter_configs_response>(44, 1, req);
  EXPECT_EQ(resp.responses.at(0).error_code, err_invalid_request);
  EXPECT_EQ(resp.responses.at(0).error_message,
            "APPEND operation is not allowed for the BROKER_LOGGER resource");
  c.name = "no-such-logger";
  c.config_operation = 0;
  EXPECT_EQ(call<incremental_alter_configs_response>(44, 1, req).responses.at(0).error_code,
            err_invalid_config);
  c.name = logger_name;
  c.config_operation = 1;  // DELETE: back to root's level
  c.value = std::nullopt;
  EXPECT_EQ(call<incremental_alter_configs_response>(44, 1, req).responses.at(0).error_code, err_none);
  EXPECT_EQ(logger->level(), spdlog::default_logger()->level());
}

TEST_F(admin_handlers_test, legacy_alter_configs_replaces_overrides) {
  create_topic("legacy", 1);
  alter_configs_request req;
  auto& r = req.resources.emplace_back();
  r.resource_type = 2;
  r.resource_name = "legacy";
  auto& c = r.configs.emplace_back();
  c.name = "cleanup.policy";
  c.value = "compact";
  auto& logger = req.resources.emplace_back();
  logger.resource_type = 8;  // not supported by the legacy form
  logger.resource_name = "1";
  auto resp = call<alter_configs_response>(33, 2, req);
  ASSERT_EQ(resp.responses.size(), 2u);
  EXPECT_EQ(resp.responses[0].error_code, err_none) << resp.responses[0].error_message.value_or("");
  EXPECT_EQ(resp.responses[1].error_code, err_invalid_request);
  EXPECT_EQ(resp.responses[1].error_message, "Unknown resource type 8");
  const auto* configs = cache.current()->find_configs(metadata::config_resource_type::topic, "legacy");
  ASSERT_NE(configs, nullptr);
  EXPECT_EQ(configs->at("cleanup.policy"), "compact");
}

// --- DescribeConfigs

TEST_F(admin_handlers_test, describe_topic_configs_with_synonyms_and_sources) {
  create_topic("t", 1);
  edit_image([](metadata::metadata_image& image) {
    image.configs[{metadata::config_resource_type::topic, "t"}]["min.insync.replicas"] = "2";
    image.configs[{metadata::config_resource_type::broker, ""}]["compression.type"] = "zstd";
  });
  auto resp = describe_configs(2, "t");
  ASSERT_EQ(resp.results.size(), 1u);
  const auto& result = resp.results[0];
  EXPECT_EQ(result.error_code, err_none);
  EXPECT_EQ(result.resource_type, 2);
  EXPECT_EQ(result.resource_name, "t");
  EXPECT_EQ(result.configs.size(), controller::topic_config_keys().size());

  // Topic override: DYNAMIC_TOPIC_CONFIG first, then the broker property's chain.
  const auto* isr = find_config(result, "min.insync.replicas");
  ASSERT_NE(isr, nullptr);
  EXPECT_EQ(isr->value, "2");
  EXPECT_EQ(isr->config_source, src_topic);
  ASSERT_EQ(isr->synonyms.size(), 2u);
  EXPECT_EQ(isr->synonyms[0].name, "min.insync.replicas");
  EXPECT_EQ(isr->synonyms[0].source, src_topic);
  EXPECT_EQ(isr->synonyms[1].value, "1");
  EXPECT_EQ(isr->synonyms[1].source, src_default);
  EXPECT_EQ(isr->config_type, 3);  // INT
  EXPECT_FALSE(isr->read_only);
  EXPECT_FALSE(isr->is_sensitive);
  EXPECT_TRUE(isr->documentation.has_value());

  // Static broker value.
  const auto* segment = find_config(result, "segment.bytes");
  ASSERT_NE(segment, nullptr);
  EXPECT_EQ(segment->value, "536870912");
  EXPECT_EQ(segment->config_source, src_static);
  ASSERT_EQ(segment->synonyms.size(), 2u);
  EXPECT_EQ(segment->synonyms[0].name, "log.segment.bytes");
  EXPECT_EQ(segment->synonyms[0].source, src_static);
  EXPECT_EQ(segment->synonyms[1].value, "1073741824");

  // Cluster-wide dynamic default.
  const auto* compression = find_config(result, "compression.type");
  ASSERT_NE(compression, nullptr);
  EXPECT_EQ(compression->value, "zstd");
  EXPECT_EQ(compression->config_source, src_dynamic_default);

  // Kafka's quirk: log.retention.ms is unset and its synonyms come first, so retention.ms is DEFAULT_CONFIG
  // with no synonyms (the value is still derived from log.retention.hours).
  const auto* retention = find_config(result, "retention.ms");
  ASSERT_NE(retention, nullptr);
  EXPECT_EQ(retention->value, "604800000");
  EXPECT_EQ(retention->config_source, src_default);
  EXPECT_TRUE(retention->synonyms.empty());

  // No topic-level synonym at all.
  const auto* throttled = find_config(result, "leader.replication.throttled.replicas");
  ASSERT_NE(throttled, nullptr);
  EXPECT_EQ(throttled->value, "");
  EXPECT_EQ(throttled->config_source, src_default);
}

TEST_F(admin_handlers_test, describe_topic_configs_filters_versions_and_errors) {
  create_topic("t", 1);
  // v1 (no documentation on the wire), synonyms off, unknown names ignored.
  auto resp =
      describe_configs(2, "t", 1, std::vector<std::string>{"retention.ms", "no.such.key"}, false, true);
  ASSERT_EQ(resp.results.at(0).configs.size(), 1u);
  EXPECT_EQ(resp.results[0].configs[0].name, "retention.ms");
  EXPECT_TRUE(resp.results[0].configs[0].synonyms.empty());
  // v4 without include_documentation: null documentation.
  resp = describe_configs(2, "t", 4, std::vector<std::string>{"retention.ms"}, true, false);
  EXPECT_FALSE(resp.results.at(0).configs.at(0).documentation.has_value());

  auto missing = describe_configs(2, "missing");
  EXPECT_EQ(missing.results.at(0).error_code, err_unknown_topic);
  EXPECT_TRUE(missing.results[0].configs.empty());
  auto invalid = describe_configs(2, "bad name!");
  EXPECT_EQ(invalid.results.at(0).error_code, err_invalid_topic);
  EXPECT_EQ(
      invalid.results[0].error_message,
      "Topic name is invalid: 'bad name!' contains one or more characters other than ASCII alphanumerics, "
      "'.', '_' and '-'");
}

TEST_F(admin_handlers_test, describe_broker_configs) {
  edit_image([](metadata::metadata_image& image) {
    image.configs[{metadata::config_resource_type::broker, ""}]["log.retention.ms"] = "86400000";
    image.configs[{metadata::config_resource_type::broker, "1"}]["message.max.bytes"] = "2000000";
  });
  auto resp = describe_configs(4, "1");
  const auto& result = resp.results.at(0);
  EXPECT_EQ(result.error_code, err_none);

  const auto* node_id = find_config(result, "node.id");
  ASSERT_NE(node_id, nullptr);
  EXPECT_EQ(node_id->value, "1");
  EXPECT_TRUE(node_id->read_only);
  EXPECT_EQ(node_id->config_source, src_static);

  const auto* max_bytes = find_config(result, "message.max.bytes");
  ASSERT_NE(max_bytes, nullptr);
  EXPECT_EQ(max_bytes->value, "2000000");
  EXPECT_FALSE(max_bytes->read_only);
  EXPECT_EQ(max_bytes->config_source, src_dynamic_broker);
  ASSERT_EQ(max_bytes->synonyms.size(), 2u);
  EXPECT_EQ(max_bytes->synonyms[1].source, src_default);

  // log.retention.hours: static in the file; the dynamic default of log.retention.ms is dropped from its
  // synonyms (it is listed before log.retention.hours' own entry).
  const auto* hours = find_config(result, "log.retention.hours");
  ASSERT_NE(hours, nullptr);
  EXPECT_EQ(hours->value, "168");
  EXPECT_EQ(hours->config_source, src_static);
  const auto* ms = find_config(result, "log.retention.ms");
  ASSERT_NE(ms, nullptr);
  EXPECT_EQ(ms->value, "86400000");
  EXPECT_EQ(ms->config_source, src_dynamic_default);
  ASSERT_EQ(ms->synonyms.size(), 3u);  // dynamic default ms, static hours, default hours
  EXPECT_EQ(ms->synonyms[1].name, "log.retention.hours");

  // An unset key with a null default.
  const auto* rack = find_config(result, "broker.rack");
  ASSERT_NE(rack, nullptr);
  EXPECT_FALSE(rack->value.has_value());
  EXPECT_EQ(rack->config_source, src_default);

  // The cluster-wide resource lists the dynamic defaults only.
  auto cluster = describe_configs(4, "");
  ASSERT_EQ(cluster.results.at(0).configs.size(), 1u);
  EXPECT_EQ(cluster.results[0].configs[0].name, "log.retention.ms");
  EXPECT_EQ(cluster.results[0].configs[0].config_source, src_dynamic_default);
  ASSERT_EQ(cluster.results[0].configs[0].synonyms.size(), 1u);

  auto other = describe_configs(4, "2");
  EXPECT_EQ(other.results.at(0).error_code, err_invalid_request);
  EXPECT_EQ(other.results[0].error_message,
            "Unexpected broker id, expected 1 or empty string, but received 2");
  EXPECT_EQ(describe_configs(4, "x").results.at(0).error_message,
            "Broker id must be an integer, but it is: x");
}

TEST_F(admin_handlers_test, describe_configs_with_an_unknown_resource_type_fails_the_request) {
  create_topic("t", 1);
  describe_configs_request req;
  auto& topic = req.resources.emplace_back();
  topic.resource_type = 2;
  topic.resource_name = "t";
  auto& bad = req.resources.emplace_back();
  bad.resource_type = 3;
  bad.resource_name = "x";
  auto resp = call<describe_configs_response>(32, 4, req);
  ASSERT_EQ(resp.results.size(), 2u);
  for (const auto& r : resp.results) {
    EXPECT_EQ(r.error_code, err_invalid_request);
    EXPECT_TRUE(r.configs.empty());
  }
}

TEST_F(admin_handlers_test, describe_group_and_client_metrics_configs) {
  edit_image([](metadata::metadata_image& image) {
    image.configs[{metadata::config_resource_type::group, "g"}]["consumer.session.timeout.ms"] = "60000";
    image.configs[{metadata::config_resource_type::client_metrics, "sub"}]["interval.ms"] = "1000";
  });
  auto group = describe_configs(32, "g");
  const auto* session = find_config(group.results.at(0), "consumer.session.timeout.ms");
  ASSERT_NE(session, nullptr);
  EXPECT_EQ(session->value, "60000");
  EXPECT_EQ(session->config_source, 8);  // GROUP_CONFIG
  const auto* heartbeat = find_config(group.results[0], "consumer.heartbeat.interval.ms");
  ASSERT_NE(heartbeat, nullptr);
  EXPECT_EQ(heartbeat->value, "5000");
  EXPECT_EQ(heartbeat->config_source, src_default);
  auto metrics = describe_configs(16, "sub");
  ASSERT_EQ(metrics.results.at(0).configs.size(), 1u);
  EXPECT_EQ(metrics.results[0].configs[0].config_source, 7);  // CLIENT_METRICS_CONFIG
  EXPECT_EQ(describe_configs(16, "").results.at(0).error_code, err_invalid_request);
}

// --- DescribeCluster

TEST_F(admin_handlers_test, describe_cluster_on_a_broker_listener) {
  describe_cluster_request req;
  req.include_cluster_authorized_operations = true;
  for (int16_t version : {int16_t{0}, int16_t{1}}) {
    auto resp = call<describe_cluster_response>(60, version, req);
    EXPECT_EQ(resp.error_code, err_none);
    EXPECT_EQ(resp.cluster_id, "MkU3OEVBNTcwNTJENDM2Qk");
    EXPECT_EQ(resp.controller_id, 1);
    ASSERT_EQ(resp.brokers.size(), 1u);
    EXPECT_EQ(resp.brokers[0].broker_id, 1);
    EXPECT_EQ(resp.brokers[0].host, "localhost");
    EXPECT_EQ(resp.brokers[0].port, 9092);
    EXPECT_NE(resp.cluster_authorized_operations, INT32_MIN);
    EXPECT_TRUE(resp.cluster_authorized_operations & (1 << 8));  // DESCRIBE
  }
  req.include_cluster_authorized_operations = false;
  EXPECT_EQ(call<describe_cluster_response>(60, 1, req).cluster_authorized_operations, INT32_MIN);

  req.endpoint_type = 2;  // CONTROLLER, sent to a broker listener
  auto mismatched = call<describe_cluster_response>(60, 1, req);
  EXPECT_EQ(mismatched.error_code, err_mismatched_endpoint_type);
  EXPECT_EQ(
      mismatched.error_message,
      "The request was sent to an endpoint of type BROKER, but we wanted an endpoint of type CONTROLLER");
  req.endpoint_type = 7;
  EXPECT_EQ(call<describe_cluster_response>(60, 1, req).error_code, err_unsupported_endpoint_type);
}

TEST_F(admin_handlers_test, describe_cluster_on_the_controller_listener_lists_the_quorum) {
  connection.listener_name = "CONTROLLER";
  describe_cluster_request req;
  req.endpoint_type = 2;
  auto resp = call<describe_cluster_response>(60, 1, req);
  EXPECT_EQ(resp.error_code, err_none);
  EXPECT_EQ(resp.endpoint_type, 2);
  ASSERT_EQ(resp.brokers.size(), 1u);
  EXPECT_EQ(resp.brokers[0].port, 9093);
  EXPECT_EQ(resp.controller_id, 1);
  // A v0 request means BROKER, which this listener is not.
  EXPECT_EQ(call<describe_cluster_response>(60, 0, describe_cluster_request{}).error_code,
            err_invalid_request);
}

TEST_F(admin_handlers_test, describe_cluster_names_a_live_broker_when_the_controller_is_not_one) {
  // Kafka's brokers name a live broker as the controller (it forwards controller-bound requests).
  edit_image([](metadata::metadata_image& image) { image.controller_id = 7; });
  const auto resp = call<describe_cluster_response>(60, 1, describe_cluster_request{});
  ASSERT_FALSE(resp.brokers.empty());
  EXPECT_NE(resp.controller_id, 7);
  EXPECT_EQ(resp.controller_id, resp.brokers.front().broker_id);
}

// --- DescribeTopicPartitions

TEST_F(admin_handlers_test, describe_topic_partitions_sorted_with_elr) {
  create_topic("zeta", 2);
  create_topic("alpha", 1);
  edit_image([](metadata::metadata_image& image) {
    auto& p = image.topics["zeta"].partitions[1];
    p.eligible_leader_replicas = {1};
    p.last_known_elr = {1};
  });
  describe_topic_partitions_request req;
  for (const char* name : {"zeta", "missing", "alpha", "zeta", "__consumer_offsets"})
    req.topics.emplace_back().name = name;
  auto resp = call<describe_topic_partitions_response>(75, 0, req);
  ASSERT_EQ(resp.topics.size(), 4u);
  EXPECT_EQ(resp.topics[0].name, "__consumer_offsets");
  EXPECT_EQ(resp.topics[0].error_code, err_unknown_topic);
  EXPECT_TRUE(resp.topics[0].is_internal);
  EXPECT_EQ(resp.topics[1].name, "alpha");
  EXPECT_EQ(resp.topics[1].error_code, err_none);
  EXPECT_FALSE(resp.topics[1].topic_id.is_zero());
  EXPECT_NE(resp.topics[1].topic_authorized_operations, INT32_MIN);
  EXPECT_EQ(resp.topics[2].name, "missing");
  EXPECT_EQ(resp.topics[2].error_code, err_unknown_topic);
  EXPECT_EQ(resp.topics[3].name, "zeta");
  ASSERT_EQ(resp.topics[3].partitions.size(), 2u);
  const auto& p1 = resp.topics[3].partitions[1];
  EXPECT_EQ(p1.partition_index, 1);
  EXPECT_EQ(p1.leader_id, 1);
  EXPECT_EQ(p1.replica_nodes, std::vector<int32_t>{1});
  EXPECT_EQ(p1.isr_nodes, std::vector<int32_t>{1});
  EXPECT_EQ(p1.eligible_leader_replicas, std::optional<std::vector<int32_t>>(std::vector<int32_t>{1}));
  EXPECT_EQ(p1.last_known_elr, std::optional<std::vector<int32_t>>(std::vector<int32_t>{1}));
  EXPECT_EQ(resp.topics[3].partitions[0].eligible_leader_replicas,
            std::optional<std::vector<int32_t>>(std::vector<int32_t>{}));
  EXPECT_TRUE(p1.offline_replicas.empty());
  EXPECT_FALSE(resp.next_cursor.has_value());
}

TEST_F(admin_handlers_test, describe_topic_partitions_pages_with_the_cursor) {
  create_topic("a", 3);
  create_topic("b", 2);
  create_topic("c", 1);
  describe_topic_partitions_request req;  // every topic
  req.response_partition_limit = 2;
  auto page = call<describe_topic_partitions_response>(75, 0, req);
  ASSERT_EQ(page.topics.size(), 1u);
  EXPECT_EQ(page.topics[0].name, "a");
  EXPECT_EQ(page.topics[0].partitions.size(), 2u);
  ASSERT_TRUE(page.next_cursor.has_value());
  EXPECT_EQ(page.next_cursor->topic_name, "a");
  EXPECT_EQ(page.next_cursor->partition_index, 2);

  req.cursor.emplace();
  req.cursor->topic_name = "a";
  req.cursor->partition_index = 2;
  page = call<describe_topic_partitions_response>(75, 0, req);
  ASSERT_EQ(page.topics.size(), 2u);
  EXPECT_EQ(page.topics[0].partitions.size(), 1u);
  EXPECT_EQ(page.topics[0].partitions[0].partition_index, 2);
  EXPECT_EQ(page.topics[1].name, "b");
  EXPECT_EQ(page.topics[1].partitions.size(), 1u);
  ASSERT_TRUE(page.next_cursor.has_value());
  EXPECT_EQ(page.next_cursor->topic_name, "b");
  EXPECT_EQ(page.next_cursor->partition_index, 1);

  // A page that ends exactly at a topic boundary points at the next topic's partition 0.
  req.cursor->topic_name = "b";
  req.cursor->partition_index = 0;
  page = call<describe_topic_partitions_response>(75, 0, req);
  ASSERT_EQ(page.topics.size(), 1u);
  ASSERT_TRUE(page.next_cursor.has_value());
  EXPECT_EQ(page.next_cursor->topic_name, "c");
  EXPECT_EQ(page.next_cursor->partition_index, 0);
}

TEST_F(admin_handlers_test, describe_topic_partitions_rejects_a_bad_cursor) {
  create_topic("a", 1);
  describe_topic_partitions_request req;
  req.topics.emplace_back().name = "a";
  req.cursor.emplace();
  req.cursor->topic_name = "other";
  auto resp = call<describe_topic_partitions_response>(75, 0, req);
  ASSERT_EQ(resp.topics.size(), 1u);
  EXPECT_EQ(resp.topics[0].error_code, err_invalid_request);
  req.cursor->topic_name = "a";
  req.cursor->partition_index = -1;
  EXPECT_EQ(call<describe_topic_partitions_response>(75, 0, req).topics.at(0).error_code,
            err_invalid_request);
}

// --- DescribeLogDirs

TEST_F(admin_handlers_test, describe_log_dirs_lists_dirs_and_partitions) {
  storage::log_manager_options options;
  options.dirs = {_root / "d1", _root / "d2"};
  options.clock_ms = [] { return int64_t{1'700'000'000'000}; };
  auto opened = storage::log_manager::open(std::move(options));
  ASSERT_TRUE(opened.ok()) << opened.error().message;
  logs = std::move(opened.value());
  replication::replica_manager replicas(*logs, {});
  services.replicas_by_shard = {&replicas};
  const uuid id = uuid::random();
  for (int32_t p = 0; p < 3; ++p) ASSERT_TRUE(logs->create({"logs", p}, id, {}).ok());
  auto* log = logs->get({"logs", 0});
  protocol::record_batch_builder builder;
  const std::string value = "hello";
  builder.add(1'700'000'000'000, std::nullopt,
              std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(value.data()), value.size()));
  auto bytes = builder.build();
  ASSERT_TRUE(log->append_as_leader(bytes, 0).ok());

  describe_log_dirs_request all;
  all.topics = std::nullopt;
  auto resp = call<describe_log_dirs_response>(35, 4, all);
  ASSERT_EQ(resp.results.size(), 2u);
  int partitions = 0;
  for (const auto& dir : resp.results) {
    EXPECT_EQ(dir.error_code, err_none);
    EXPECT_TRUE(fs::path(dir.log_dir).is_absolute());
    EXPECT_GT(dir.total_bytes, 0);
    EXPECT_GE(dir.usable_bytes, 0);
    for (const auto& t : dir.topics) {
      EXPECT_EQ(t.name, "logs");
      for (const auto& p : t.partitions) {
        ++partitions;
        EXPECT_EQ(p.offset_lag, 0);
        EXPECT_FALSE(p.is_future_key);
        if (p.partition_index == 0) {
          EXPECT_EQ(p.partition_size, log->size_bytes());
        }
      }
    }
  }
  EXPECT_EQ(partitions, 3);
  EXPECT_GT(log->size_bytes(), 0);

  // Only the partitions asked for; topics with none left are omitted.
  describe_log_dirs_request some;
  auto& t = some.topics->emplace_back();
  t.topic = "logs";
  t.partitions = {0, 7};
  resp = call<describe_log_dirs_response>(35, 1, some);
  int listed = 0;
  for (const auto& dir : resp.results) {
    for (const auto& topic : dir.topics) listed += static_cast<int>(topic.partitions.size());
  }
  EXPECT_EQ(listed, 1);

  logs->mark_offline(_root / "d2", "disk gone");
  resp = call<describe_log_dirs_response>(35, 4, all);
  ASSERT_EQ(resp.results.size(), 2u);
  EXPECT_EQ(resp.results[1].error_code, err_kafka_storage_error);
  EXPECT_TRUE(resp.results[1].topics.empty());
}

// --- InitProducerId

TEST_F(admin_handlers_test, init_producer_id_for_idempotent_producers) {
  init_producer_id_request req;
  req.transactional_id = std::nullopt;
  req.transaction_timeout_ms = -1;
  auto first = call<init_producer_id_response>(22, 4, req);
  EXPECT_EQ(first.error_code, err_none);
  EXPECT_GE(first.producer_id, 0);
  EXPECT_EQ(first.producer_epoch, 0);
  auto second = call<init_producer_id_response>(22, 0, req);
  EXPECT_EQ(second.producer_id, first.producer_id + 1);

  // KIP-360: an idempotent producer bumping its epoch gets a fresh id, epoch 0.
  req.producer_id = first.producer_id;
  req.producer_epoch = 3;
  auto bumped = call<init_producer_id_response>(22, 5, req);
  EXPECT_EQ(bumped.error_code, err_none);
  EXPECT_EQ(bumped.producer_id, second.producer_id + 1);
  EXPECT_EQ(bumped.producer_epoch, 0);

  // Exactly one of id and epoch set.
  req.producer_epoch = -1;
  auto invalid = call<init_producer_id_response>(22, 5, req);
  EXPECT_EQ(invalid.error_code, err_invalid_request);
  EXPECT_EQ(invalid.producer_id, -1);
  EXPECT_EQ(invalid.producer_epoch, -1);
}

// Without a transaction coordinator (the timeout checks are the coordinator's: transaction_coordinator_test).
TEST_F(admin_handlers_test, init_producer_id_with_a_transactional_id) {
  init_producer_id_request req;
  req.transactional_id = "txn";
  req.transaction_timeout_ms = 60000;
  EXPECT_EQ(call<init_producer_id_response>(22, 4, req).error_code, err_coordinator_not_available);
  req.transactional_id = "";
  EXPECT_EQ(call<init_producer_id_response>(22, 4, req).error_code, err_invalid_request);
}

TEST_F(admin_handlers_test, init_producer_id_without_a_block_source_is_retriable) {
  services.controller = nullptr;
  init_producer_id_request req;
  req.transactional_id = std::nullopt;
  EXPECT_EQ(call<init_producer_id_response>(22, 4, req).error_code, err_coordinator_load_in_progress);
}

TEST_F(admin_handlers_test, unsupported_versions_are_not_served) {
  // DescribeConfigs v0 was removed in Kafka 4.0: the dispatcher closes the connection.
  describe_configs_request req;
  std::vector<uint8_t> bytes;
  wire_writer w(bytes);
  request_header h{32, 0, 42, std::string("admin-test")};
  encode_request_header(w, h, request_header_version(false));
  req.encode(w, 1);
  broker_dispatcher dispatcher(services);
  EXPECT_EQ(dispatcher.dispatch_now(connection, bytes).what, net::dispatch_result::action::close);
}

// --- producer_id_allocator

TEST(producer_id_allocator, uses_blocks_in_order_and_refuses_overlaps) {
  producer_id_allocator allocator;
  std::vector<controller::producer_id_block> blocks = {{1, 0, 2}, {1, 10, 1}, {1, 5, 10}};
  size_t fetched = 0;
  auto source = [&]() -> result<controller::producer_id_block> { return blocks.at(fetched++); };
  EXPECT_EQ(allocator.next_id(source).value(), 0);
  EXPECT_EQ(allocator.next_id(source).value(), 1);
  EXPECT_EQ(allocator.next_id(source).value(), 10);
  EXPECT_EQ(fetched, 2u);
  auto overlapping = allocator.next_id(source);  // 5 is below the end of the previous block
  EXPECT_FALSE(overlapping.ok());
  auto failing = [] {
    return result<controller::producer_id_block>(status::error(error_code::stale_broker_epoch, "x"));
  };
  EXPECT_EQ(allocator.next_id(failing).error().code, error_code::stale_broker_epoch);
}

// --- Authorization (authorizer.class.name = StandardAuthorizer)

create_acls_request::acl_creation acl_creation(int8_t type, std::string name, int8_t pattern,
                                               std::string principal, int8_t op, int8_t permission) {
  create_acls_request::acl_creation c;
  c.resource_type = type;
  c.resource_name = std::move(name);
  c.resource_pattern_type = pattern;
  c.principal = std::move(principal);
  c.host = "*";
  c.operation = op;
  c.permission_type = permission;
  return c;
}

constexpr int16_t err_topic_authorization_failed = 29;
constexpr int16_t err_cluster_authorization_failed = 31;
constexpr int16_t err_security_disabled = 54;

TEST_F(admin_handlers_test, acl_apis_without_an_authorizer_are_security_disabled) {
  describe_acls_request d;
  d.resource_type_filter = 1;
  d.pattern_type_filter = 1;
  d.operation = 1;
  d.permission_type = 1;
  auto described = call<describe_acls_response>(29, 3, d);
  EXPECT_EQ(described.error_code, err_security_disabled);
  create_acls_request c;
  c.creations = {acl_creation(2, "t", 3, "User:a", 3, 3)};
  auto created = call<create_acls_response>(30, 3, c);
  ASSERT_EQ(created.results.size(), 1u);
  EXPECT_EQ(created.results[0].error_code, err_security_disabled);
  EXPECT_EQ(created.results[0].error_message, "No Authorizer is configured.");
}

TEST_F(admin_handlers_test, acls_are_created_described_enforced_and_deleted) {
  authorizer authz("User:admin", false);
  services.acl_authorizer = &authz;
  connection.peer = "127.0.0.1:40000";
  connection.principal_name = "admin";
  create_acls_request c;
  c.creations = {acl_creation(2, "app-", 4, "User:ANONYMOUS", 5, 3),        // CREATE prefixed app-
                 acl_creation(2, "app-x", 3, "User:ANONYMOUS", 8, 3),       // DESCRIBE app-x
                 acl_creation(4, "my-cluster", 3, "User:ANONYMOUS", 8, 3),  // not kafka-cluster
                 acl_creation(2, "", 3, "User:ANONYMOUS", 8, 3)};           // empty name
  auto created = call<create_acls_response>(30, 3, c);
  ASSERT_EQ(created.results.size(), 4u);
  EXPECT_EQ(created.results[0].error_code, err_none) << created.results[0].error_message.value_or("");
  EXPECT_EQ(created.results[1].error_code, err_none);
  EXPECT_EQ(created.results[2].error_code, err_invalid_request);
  EXPECT_EQ(created.results[2].error_message,
            "The only valid name for the CLUSTER resource is kafka-cluster");
  EXPECT_EQ(created.results[3].error_message, "Invalid empty resource name");
  EXPECT_EQ(cache.current()->acls.by_id.size(), 2u);

  describe_acls_request d;
  d.resource_type_filter = 2;
  d.resource_name_filter = "app-x";
  d.pattern_type_filter = 2;  // MATCH
  d.principal_filter = std::nullopt;
  d.host_filter = std::nullopt;
  d.operation = 1;
  d.permission_type = 1;
  auto described = call<describe_acls_response>(29, 3, d);
  EXPECT_EQ(described.error_code, err_none);
  ASSERT_EQ(described.resources.size(), 2u);  // the literal and the prefix

  // User:ANONYMOUS may create app-* topics and no others, may not manage ACLs, and sees only app-x.
  connection.principal_name = "ANONYMOUS";
  EXPECT_EQ(create_topic("app-x", 1).topics.at(0).error_code, err_none);
  EXPECT_EQ(create_topic("app-y", 1).topics.at(0).error_code, err_none);
  EXPECT_EQ(create_topic("other", 1).topics.at(0).error_code, err_topic_authorization_failed);
  metadata_request all;
  all.topics = std::nullopt;
  auto meta = call<metadata_response>(3, 12, all);
  ASSERT_EQ(meta.topics.size(), 1u);
  EXPECT_EQ(meta.topics[0].name, "app-x");
  metadata_request named;
  named.topics.emplace();
  named.topics->emplace_back().name = "app-y";
  named.allow_auto_topic_creation = false;
  meta = call<metadata_response>(3, 12, named);
  ASSERT_EQ(meta.topics.size(), 1u);
  EXPECT_EQ(meta.topics[0].error_code, err_topic_authorization_failed);
  auto refused = call<create_acls_response>(30, 3, c);
  EXPECT_EQ(refused.results.at(0).error_code, err_cluster_authorization_failed);
  EXPECT_EQ(call<describe_acls_response>(29, 3, d).error_code, err_cluster_authorization_failed);

  connection.principal_name = "admin";
  delete_acls_request del;
  auto& f = del.filters.emplace_back();
  f.resource_type_filter = 2;
  f.resource_name_filter = "app-";
  f.pattern_type_filter = 4;
  f.principal_filter = std::nullopt;
  f.host_filter = std::nullopt;
  f.operation = 1;
  f.permission_type = 1;
  auto deleted = call<delete_acls_response>(31, 3, del);
  ASSERT_EQ(deleted.filter_results.size(), 1u);
  EXPECT_EQ(deleted.filter_results[0].matching_acls.size(), 1u);
  EXPECT_EQ(cache.current()->acls.by_id.size(), 1u);
  connection.principal_name = "ANONYMOUS";
  EXPECT_EQ(create_topic("app-z", 1).topics.at(0).error_code, err_topic_authorization_failed);
}

}  // namespace
}  // namespace mala::broker
