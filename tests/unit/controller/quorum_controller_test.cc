// The active controller on the unit tests' stand-in metadata log, activated with the log's committed image:
// bootstrap, broker registration, CreateTopics, DeleteTopics, CreatePartitions, IncrementalAlterConfigs,
// AlterConfigs and AllocateProducerIds, each answered with Kafka 4.x's error codes and messages; every write
// is one batch of the records Kafka writes, published as a new image; validate_only and failed requests write
// nothing; a controller reopened and activated with the log's committed image has the same image.
#include "mala/controller/quorum_controller.h"
#include "support/active_controller.h"
#include "support/local_metadata_log.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "mala/metadata/metadata_delta.h"

namespace mala::controller {
namespace {

namespace fs = std::filesystem;
using metadata::versioned_metadata_record;
using batch = std::vector<versioned_metadata_record>;

// Sees every batch the controller appends and can make appends fail like a broken disk.
struct log_spy {
  std::vector<batch> batches;
  bool fail_appends = false;
};

class spy_log final : public metadata_log {
 public:
  spy_log(std::unique_ptr<metadata_log> inner, std::shared_ptr<log_spy> spy)
      : _inner(std::move(inner)), _spy(std::move(spy)) {}
  int64_t end_offset() const override { return _inner->end_offset(); }
  int64_t committed_offset() const override { return _inner->committed_offset(); }
  int32_t epoch() const override { return _inner->epoch(); }
  result<metadata_append_result> append(std::span<const versioned_metadata_record> records) override {
    if (_spy->fail_appends) return status::error(error_code::kafka_storage_error, "injected disk failure");
    auto r = _inner->append(records);
    if (r.ok()) _spy->batches.emplace_back(records.begin(), records.end());
    return r;
  }
  status replay(int64_t from_offset, const metadata_replay_callback& callback) const override {
    return _inner->replay(from_offset, callback);
  }

 private:
  std::unique_ptr<metadata_log> _inner;
  std::shared_ptr<log_spy> _spy;
};

template <typename T>
const T& record_as(const versioned_metadata_record& r) {
  const T* p = std::get_if<T>(&r.record);
  EXPECT_NE(p, nullptr) << "record type " << metadata::metadata_record_type(r.record);
  static const T empty{};
  return p ? *p : empty;
}

template <typename T>
bool holds(const versioned_metadata_record& r) {
  return std::holds_alternative<T>(r.record);
}

using creatable_topic = protocol::create_topics_request::creatable_topic;
using topic_config_list = std::vector<std::pair<std::string, std::optional<std::string>>>;

creatable_topic new_topic(const std::string& name, int32_t partitions = 1, int16_t rf = 1,
                          const topic_config_list& configs = {}) {
  creatable_topic t;
  t.name = name;
  t.num_partitions = partitions;
  t.replication_factor = rf;
  for (const auto& [k, v] : configs) {
    protocol::create_topics_request::creatable_topic_config c;
    c.name = k;
    c.value = v;
    t.configs.push_back(c);
  }
  return t;
}

creatable_topic manual_topic(const std::string& name, const std::vector<std::vector<int32_t>>& assignment) {
  creatable_topic t = new_topic(name, -1, -1);
  for (size_t p = 0; p < assignment.size(); ++p) {
    protocol::create_topics_request::creatable_replica_assignment a;
    a.partition_index = static_cast<int32_t>(p);
    a.broker_ids = assignment[p];
    t.assignments.push_back(a);
  }
  return t;
}

using incremental_op = std::tuple<std::string, int8_t, std::optional<std::string>>;
constexpr int8_t set_op = 0, delete_op = 1, append_op = 2, subtract_op = 3;
constexpr int8_t topic_type = 2, broker_type = 4;

class quorum_controller_test : public ::testing::Test {
 protected:
  void SetUp() override {
    _dir =
        fs::temp_directory_path() / ("mala-quorum-controller-test-" + std::to_string(std::random_device{}()));
    fs::create_directories(_dir);
  }
  void TearDown() override {
    _controller.reset();
    fs::remove_all(_dir);
  }

  controller_options options() {
    controller_options o;
    o.node_id = 1;
    o.cluster_id = "mala-test-cluster-id0";
    o.num_partitions = _num_partitions;
    o.default_replication_factor = 1;
    o.delete_topic_enable = _delete_topic_enable;
    o.placement_seed = 42;
    o.static_config = [this](std::string_view p) -> std::optional<std::string> {
      auto it = _static.find(std::string(p));
      if (it == _static.end()) return std::nullopt;
      return it->second;
    };
    return o;
  }

  void open() {
    auto log = local_metadata_log::open(_dir);
    ASSERT_TRUE(log.ok()) << log.error().message;
    _spy = std::make_shared<log_spy>();
    auto c = open_active_controller(std::make_unique<spy_log>(std::move(*log), _spy), options());
    ASSERT_TRUE(c.ok()) << c.error().message;
    _controller = std::move(*c);
    _published.clear();
    _controller->set_publisher(
        [this](const metadata::metadata_image_ptr& image) { _published.push_back(image); });
  }

  void reopen() {
    _controller.reset();
    open();
  }

  // Writes records straight to the log before the controller opens (state the controller API cannot make).
  void seed_log(const batch& records) {
    auto log = local_metadata_log::open(_dir);
    ASSERT_TRUE(log.ok());
    ASSERT_TRUE((*log)->append(records).ok());
  }

  const metadata::metadata_image& image() { return *_controller->image(); }
  int64_t end_offset() { return image().metadata_offset + 1; }

  metadata::broker_registration broker(int32_t id, std::optional<std::string> rack = std::nullopt,
                                       std::vector<uuid> dirs = {}) {
    metadata::broker_registration b;
    b.id = id;
    b.rack = std::move(rack);
    b.incarnation_id = uuid::random();
    b.endpoints.push_back({"PLAINTEXT", "localhost", static_cast<uint16_t>(9092 + id), "PLAINTEXT"});
    b.log_dirs = std::move(dirs);
    b.supported_features["metadata.version"] = {7, 33};
    b.supported_features["transaction.version"] = {0, 2};
    return b;
  }

  // Registers a broker and unfences it with a caught-up heartbeat.
  int64_t register_broker(int32_t id, std::optional<std::string> rack = std::nullopt,
                          std::vector<uuid> dirs = {}) {
    auto r = register_unfenced_broker(*_controller, broker(id, std::move(rack), std::move(dirs)));
    EXPECT_TRUE(r.ok()) << (r.ok() ? "" : r.error().message);
    return r.ok() ? *r : -1;
  }

  protocol::create_topics_response create(std::vector<creatable_topic> topics, bool validate_only = false,
                                          int16_t version = 7) {
    protocol::create_topics_request request;
    request.topics = std::move(topics);
    request.validate_only = validate_only;
    return _controller->create_topics(request, version);
  }

  protocol::create_topics_response::creatable_topic_result create_one(const creatable_topic& topic) {
    auto response = create({topic});
    EXPECT_EQ(response.topics.size(), 1u);
    return response.topics.empty() ? protocol::create_topics_response::creatable_topic_result{}
                                   : response.topics.front();
  }

  protocol::incremental_alter_configs_response incremental(int8_t type, const std::string& name,
                                                           const std::vector<incremental_op>& ops,
                                                           bool validate_only = false) {
    protocol::incremental_alter_configs_request request;
    protocol::incremental_alter_configs_request::alter_configs_resource resource;
    resource.resource_type = type;
    resource.resource_name = name;
    for (const auto& [k, op, v] : ops) {
      protocol::incremental_alter_configs_request::alterable_config c;
      c.name = k;
      c.config_operation = op;
      c.value = v;
      resource.configs.push_back(c);
    }
    request.resources.push_back(resource);
    request.validate_only = validate_only;
    return _controller->incremental_alter_configs(request, 1);
  }

  std::pair<int16_t, std::optional<std::string>> incremental_result(int8_t type, const std::string& name,
                                                                    const std::vector<incremental_op>& ops,
                                                                    bool validate_only = false) {
    auto response = incremental(type, name, ops, validate_only);
    EXPECT_EQ(response.responses.size(), 1u);
    if (response.responses.empty()) return {-100, std::nullopt};
    EXPECT_EQ(response.responses[0].resource_type, type);
    EXPECT_EQ(response.responses[0].resource_name, name);
    return {response.responses[0].error_code, response.responses[0].error_message};
  }

  protocol::alter_configs_response legacy(int8_t type, const std::string& name,
                                          const topic_config_list& configs, bool validate_only = false) {
    protocol::alter_configs_request request;
    protocol::alter_configs_request::alter_configs_resource resource;
    resource.resource_type = type;
    resource.resource_name = name;
    for (const auto& [k, v] : configs) resource.configs.push_back({k, v});
    request.resources.push_back(resource);
    request.validate_only = validate_only;
    return _controller->alter_configs(request, 2);
  }

  const metadata::config_map* configs(int8_t type, const std::string& name) {
    return image().find_configs(static_cast<metadata::config_resource_type>(type), name);
  }
  std::optional<std::string> config_value(int8_t type, const std::string& name, const std::string& key) {
    const auto* c = configs(type, name);
    if (!c) return std::nullopt;
    auto it = c->find(key);
    if (it == c->end()) return std::nullopt;
    return it->second;
  }

  // Expects that nothing was written and nothing published since `batches` batches.
  void expect_no_write(size_t batches, int64_t offset) {
    EXPECT_EQ(_spy->batches.size(), batches);
    EXPECT_EQ(end_offset(), offset);
  }

  fs::path _dir;
  std::unique_ptr<quorum_controller> _controller;
  std::shared_ptr<log_spy> _spy;
  std::vector<metadata::metadata_image_ptr> _published;
  std::map<std::string, std::string> _static;
  int32_t _num_partitions = 1;
  bool _delete_topic_enable = true;
};

// --- Bootstrap and replay

TEST_F(quorum_controller_test, empty_log_is_bootstrapped_with_metadata_version) {
  open();
  ASSERT_EQ(_spy->batches.size(), 1u);
  ASSERT_EQ(_spy->batches[0].size(), 2u);
  const auto& f = record_as<protocol::feature_level_record>(_spy->batches[0][0]);
  EXPECT_EQ(f.name, "metadata.version");
  EXPECT_EQ(f.feature_level, bootstrap_metadata_version);
  EXPECT_EQ(bootstrap_metadata_version, 33);  // Kafka 4.4's default (IBP_4_4_IV2)
  EXPECT_EQ(_spy->batches[0][0].version, 0);
  const auto& tv = record_as<protocol::feature_level_record>(_spy->batches[0][1]);
  EXPECT_EQ(tv.name, "transaction.version");
  EXPECT_EQ(tv.feature_level, bootstrap_transaction_version);
  EXPECT_EQ(image().feature_level("metadata.version"), 33);
  EXPECT_EQ(image().feature_level("transaction.version"), bootstrap_transaction_version);
  EXPECT_EQ(image().metadata_offset, 1);
  EXPECT_EQ(image().metadata_epoch, 1);
  EXPECT_EQ(image().cluster_id, "mala-test-cluster-id0");
  EXPECT_EQ(image().controller_id, 1);
  EXPECT_TRUE(_published.empty());  // the activation's bootstrap came before set_publisher

  reopen();
  EXPECT_TRUE(_spy->batches.empty());  // a non-empty log is not bootstrapped again
  EXPECT_EQ(image().feature_level("metadata.version"), 33);
  EXPECT_EQ(image().metadata_offset, 1);
}

void expect_same_image(const metadata::metadata_image& a, const metadata::metadata_image& b) {
  EXPECT_EQ(a.cluster_id, b.cluster_id);
  EXPECT_EQ(a.controller_id, b.controller_id);
  EXPECT_EQ(a.finalized_features, b.finalized_features);
  EXPECT_EQ(a.next_producer_id, b.next_producer_id);
  EXPECT_EQ(a.metadata_offset, b.metadata_offset);
  EXPECT_EQ(a.metadata_epoch, b.metadata_epoch);
  EXPECT_EQ(a.configs, b.configs);
  ASSERT_EQ(a.brokers.size(), b.brokers.size());
  for (const auto& [id, x] : a.brokers) {
    const auto& y = b.brokers.at(id);
    EXPECT_EQ(x.epoch, y.epoch);
    EXPECT_EQ(x.fenced, y.fenced);
    EXPECT_EQ(x.rack, y.rack);
    EXPECT_EQ(x.incarnation_id, y.incarnation_id);
    EXPECT_EQ(x.log_dirs, y.log_dirs);
    EXPECT_EQ(x.supported_features, y.supported_features);
    ASSERT_EQ(x.endpoints.size(), y.endpoints.size());
    for (size_t i = 0; i < x.endpoints.size(); ++i) {
      EXPECT_EQ(x.endpoints[i].listener_name, y.endpoints[i].listener_name);
      EXPECT_EQ(x.endpoints[i].port, y.endpoints[i].port);
      EXPECT_EQ(x.endpoints[i].security_protocol, y.endpoints[i].security_protocol);
    }
  }
  ASSERT_EQ(a.topics.size(), b.topics.size());
  for (const auto& [name, x] : a.topics) {
    const auto& y = b.topics.at(name);
    EXPECT_EQ(x.id, y.id);
    EXPECT_EQ(x.internal, y.internal);
    ASSERT_EQ(x.partitions.size(), y.partitions.size());
    for (size_t p = 0; p < x.partitions.size(); ++p) {
      EXPECT_EQ(x.partitions[p].replicas, y.partitions[p].replicas);
      EXPECT_EQ(x.partitions[p].isr, y.partitions[p].isr);
      EXPECT_EQ(x.partitions[p].leader, y.partitions[p].leader);
      EXPECT_EQ(x.partitions[p].leader_epoch, y.partitions[p].leader_epoch);
      EXPECT_EQ(x.partitions[p].partition_epoch, y.partitions[p].partition_epoch);
      EXPECT_EQ(x.partitions[p].directories, y.partitions[p].directories);
    }
  }
}

TEST_F(quorum_controller_test, reopen_replays_to_the_same_image) {
  open();
  const uuid dir = uuid::random();
  const int64_t epoch = register_broker(1, "r1", {dir});
  register_broker(2);
  ASSERT_EQ(create_one(new_topic("orders", 3, 2, {{"retention.ms", "1000"}})).error_code, 0);
  ASSERT_EQ(create_one(new_topic("__consumer_offsets", 2, 1, {{"cleanup.policy", "compact"}})).error_code, 0);
  ASSERT_EQ(create_one(new_topic("gone", 1, 1)).error_code, 0);
  protocol::delete_topics_request del;
  del.topic_names = {"gone"};
  ASSERT_EQ(_controller->delete_topics(del, 5).responses.at(0).error_code, 0);
  ASSERT_EQ(incremental_result(broker_type, "", {{"log.retention.ms", set_op, "5000"}}).first, 0);
  ASSERT_TRUE(_controller->allocate_producer_ids(1, epoch).ok());
  const metadata::metadata_image_ptr before = _controller->image();

  reopen();
  expect_same_image(*before, image());
  EXPECT_TRUE(image().topics.at("__consumer_offsets").internal);
  EXPECT_FALSE(image().topics.at("orders").internal);
}

// --- UpdateFeatures

protocol::update_features_request feature_request(const std::string& name, int16_t level, int8_t upgrade_type,
                                                  bool validate_only = false) {
  protocol::update_features_request request;
  auto& u = request.feature_updates.emplace_back();
  u.feature = name;
  u.max_version_level = level;
  u.upgrade_type = upgrade_type;
  u.allow_downgrade = upgrade_type != 1;
  request.validate_only = validate_only;
  return request;
}

TEST_F(quorum_controller_test, update_features_writes_feature_levels_that_survive_a_reopen) {
  open();
  register_broker(1);
  // From level 1 (the bootstrap is at 2).
  ASSERT_EQ(_controller->update_features(feature_request("transaction.version", 1, 2), 1).error_code, 0);
  const size_t batches = _spy->batches.size();
  // --dry-run (ValidateOnly): answered as the real thing would be, nothing written.
  auto dry = _controller->update_features(feature_request("transaction.version", 2, 1, true), 1);
  EXPECT_EQ(dry.error_code, 0);
  EXPECT_EQ(_spy->batches.size(), batches);
  EXPECT_EQ(image().feature_level("transaction.version"), 1);
  auto dry_refused = _controller->update_features(feature_request("transaction.version", 3, 1, true), 1);
  EXPECT_EQ(dry_refused.error_code, 95);

  // v1: per-feature results with NONE.
  auto up = _controller->update_features(feature_request("transaction.version", 2, 1), 1);
  EXPECT_EQ(up.error_code, 0);
  EXPECT_EQ(up.error_message, std::nullopt);
  ASSERT_EQ(up.results.size(), 1u);
  EXPECT_EQ(up.results[0].feature, "transaction.version");
  EXPECT_EQ(up.results[0].error_code, 0);
  ASSERT_EQ(_spy->batches.size(), batches + 1);
  ASSERT_EQ(_spy->batches.back().size(), 1u);
  const auto& f = record_as<protocol::feature_level_record>(_spy->batches.back()[0]);
  EXPECT_EQ(f.name, "transaction.version");
  EXPECT_EQ(f.feature_level, 2);
  EXPECT_EQ(image().feature_level("transaction.version"), 2);
  EXPECT_EQ(_published.back(), _controller->image());

  // v2: no per-feature results. A downgrade to 0 removes the feature.
  auto down = _controller->update_features(feature_request("transaction.version", 0, 2), 2);
  EXPECT_EQ(down.error_code, 0);
  EXPECT_TRUE(down.results.empty());
  EXPECT_EQ(image().finalized_features.count("transaction.version"), 0u);
  reopen();
  EXPECT_EQ(image().finalized_features.count("transaction.version"), 0u);
  EXPECT_TRUE(_spy->batches.empty());  // not bootstrapped again

  // v0: AllowDowngrade is the downgrade type; without it a lower level is refused.
  ASSERT_EQ(_controller->update_features(feature_request("transaction.version", 2, 1), 0).error_code, 0);
  auto v0_refused = _controller->update_features(feature_request("transaction.version", 1, 1), 0);
  EXPECT_EQ(v0_refused.error_code, 95);
  ASSERT_EQ(_controller->update_features(feature_request("transaction.version", 1, 2), 0).error_code, 0);
  reopen();
  EXPECT_EQ(image().feature_level("transaction.version"), 1);
}

TEST_F(quorum_controller_test, a_refused_update_features_is_a_top_level_error_and_writes_nothing) {
  open();
  register_broker(1);
  const size_t batches = _spy->batches.size();
  auto refused = _controller->update_features(feature_request("group.version", 0, 2), 1);
  EXPECT_EQ(refused.error_code, 95);  // INVALID_UPDATE_VERSION
  EXPECT_EQ(refused.error_message,
            "The update failed for all features since the following feature had an error: Invalid update "
            "version 0 for feature group.version. Mala always has this feature on at level 1; it cannot be "
            "changed.");
  EXPECT_TRUE(refused.results.empty());
  EXPECT_EQ(_spy->batches.size(), batches);
  // A broker's write failure is the top-level error too.
  _spy->fail_appends = true;
  auto failed = _controller->update_features(feature_request("transaction.version", 1, 2), 1);
  EXPECT_EQ(failed.error_code, static_cast<int16_t>(error_code::kafka_storage_error));
  EXPECT_EQ(image().feature_level("transaction.version"), bootstrap_transaction_version);
}

// --- Broker registration

TEST_F(quorum_controller_test, register_broker_writes_the_registration_and_a_caught_up_heartbeat_unfences) {
  open();
  const uuid dir = uuid::random();
  auto reg = broker(1, "rack-a", {dir});
  const int64_t offset_before = end_offset();
  auto epoch = _controller->register_broker(reg);
  ASSERT_TRUE(epoch.ok()) << epoch.error().message;
  EXPECT_EQ(*epoch, offset_before);  // the broker epoch is the offset of its RegisterBrokerRecord

  ASSERT_EQ(_spy->batches.size(), 2u);
  const batch& b = _spy->batches[1];
  ASSERT_EQ(b.size(), 1u);
  EXPECT_EQ(b[0].version, 3);
  const auto& r = record_as<protocol::register_broker_record>(b[0]);
  EXPECT_EQ(r.broker_id, 1);
  EXPECT_EQ(r.broker_epoch, *epoch);
  EXPECT_EQ(r.incarnation_id, reg.incarnation_id);
  EXPECT_EQ(r.rack, std::optional<std::string>("rack-a"));
  EXPECT_TRUE(r.fenced);
  EXPECT_EQ(r.log_dirs, std::vector<uuid>{dir});
  ASSERT_EQ(r.end_points.size(), 1u);
  EXPECT_EQ(r.end_points[0].name, "PLAINTEXT");
  EXPECT_EQ(r.end_points[0].port, 9093);
  EXPECT_EQ(r.end_points[0].security_protocol, 0);
  ASSERT_EQ(r.features.size(), 2u);
  EXPECT_EQ(r.features[0].name, "metadata.version");
  EXPECT_EQ(r.features[1].name, "transaction.version");
  EXPECT_TRUE(image().brokers.at(1).fenced);
  ASSERT_EQ(_published.size(), 1u);
  EXPECT_EQ(_published[0], _controller->image());

  // Kafka 4.x unfences with BrokerRegistrationChangeRecord v0, Fenced = -1.
  ASSERT_TRUE(heartbeat_caught_up(*_controller, 1, *epoch));
  ASSERT_EQ(_spy->batches.size(), 3u);
  ASSERT_EQ(_spy->batches[2].size(), 1u);
  EXPECT_EQ(_spy->batches[2][0].version, 0);
  const auto& change = record_as<protocol::broker_registration_change_record>(_spy->batches[2][0]);
  EXPECT_EQ(change.broker_id, 1);
  EXPECT_EQ(change.broker_epoch, *epoch);
  EXPECT_EQ(change.fenced, -1);

  const auto& registered = image().brokers.at(1);
  EXPECT_FALSE(registered.fenced);
  EXPECT_EQ(registered.epoch, *epoch);
  EXPECT_EQ(registered.endpoints.at(0).security_protocol, "PLAINTEXT");
  ASSERT_EQ(_published.size(), 2u);
  EXPECT_EQ(_published[1], _controller->image());
}

TEST_F(quorum_controller_test, re_registration_keeps_or_renews_the_epoch) {
  open();
  auto reg = broker(1);
  auto first = register_unfenced_broker(*_controller, reg);
  ASSERT_TRUE(first.ok()) << first.error().message;
  // The same incarnation again: an amendment, same epoch, still unfenced, one record.
  auto again = _controller->register_broker(reg);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(*again, *first);
  EXPECT_EQ(_spy->batches.back().size(), 1u);
  EXPECT_FALSE(image().brokers.at(1).fenced);
  // A restart once the old session has expired: new incarnation, new epoch, fenced until it catches up.
  reg.incarnation_id = uuid::random();
  const int64_t offset = end_offset();
  auto restarted = _controller->register_broker(reg, -1, /*now_ms=*/9001);
  ASSERT_TRUE(restarted.ok()) << restarted.error().message;
  EXPECT_EQ(*restarted, offset);
  EXPECT_GT(*restarted, *first);
  EXPECT_EQ(image().brokers.at(1).epoch, *restarted);
  EXPECT_TRUE(image().brokers.at(1).fenced);
  EXPECT_TRUE(heartbeat_caught_up(*_controller, 1, *restarted, 9001));
  EXPECT_FALSE(image().brokers.at(1).fenced);
}

TEST_F(quorum_controller_test, registration_without_metadata_version_range_gets_this_binarys) {
  open();
  auto reg = broker(1);
  reg.supported_features.erase("metadata.version");
  ASSERT_TRUE(_controller->register_broker(reg).ok());
  EXPECT_EQ(image().brokers.at(1).supported_features.at("metadata.version"),
            (metadata::supported_feature{minimum_metadata_version, bootstrap_metadata_version}));
}

TEST_F(quorum_controller_test, registration_errors) {
  open();
  auto old = broker(1);
  old.supported_features["metadata.version"] = {1, 25};
  auto r = _controller->register_broker(old);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, error_code::unsupported_version);
  EXPECT_EQ(
      r.error().message,
      "Unable to register because the broker does not support finalized version 33 of metadata.version. The "
      "broker wants a version between 1 and 25, inclusive.");

  auto reserved = broker(1, std::nullopt, {metadata::directory_lost});
  EXPECT_EQ(_controller->register_broker(reserved).error().message, "Reserved directory ID in request");
  const uuid dir = uuid::random();
  auto dup = broker(1, std::nullopt, {dir, dir});
  EXPECT_EQ(_controller->register_broker(dup).error().code, error_code::invalid_registration);
  EXPECT_EQ(_controller->register_broker(dup).error().message, "Duplicate directory ID in request");
  register_broker(2, std::nullopt, {dir});
  auto taken = broker(1, std::nullopt, {dir});
  EXPECT_EQ(_controller->register_broker(taken).error().message,
            "Broker 2 is already registered with directory " + dir.to_string());
  EXPECT_FALSE(image().brokers.contains(1));
}

// --- CreateTopics

TEST_F(quorum_controller_test, create_topic_writes_topic_configs_and_partitions_in_one_batch) {
  open();
  const uuid dir = uuid::random();
  register_broker(1, std::nullopt, {dir});
  _published.clear();
  const size_t batches = _spy->batches.size();
  auto result =
      create_one(new_topic("orders", 3, -1, {{"cleanup.policy", "compact"}, {"retention.ms", "1000"}}));
  EXPECT_EQ(result.error_code, 0);
  EXPECT_EQ(result.error_message, std::nullopt);
  EXPECT_FALSE(result.topic_id.is_zero());
  EXPECT_EQ(result.num_partitions, 3);
  EXPECT_EQ(result.replication_factor, 1);
  EXPECT_EQ(result.topic_config_error_code, 0);
  ASSERT_TRUE(result.configs);
  EXPECT_TRUE(std::is_sorted(result.configs->begin(), result.configs->end(),
                             [](const auto& a, const auto& b) { return a.name < b.name; }));
  std::map<std::string, protocol::create_topics_response::creatable_topic_configs> by_name;
  for (const auto& c : *result.configs) by_name[c.name] = c;
  EXPECT_EQ(by_name.at("cleanup.policy").value, "compact");
  EXPECT_EQ(by_name.at("cleanup.policy").config_source, 1);  // DYNAMIC_TOPIC_CONFIG
  EXPECT_EQ(by_name.at("segment.bytes").value, "1073741824");
  EXPECT_EQ(by_name.at("segment.bytes").config_source, 5);  // DEFAULT_CONFIG
  EXPECT_FALSE(by_name.at("segment.bytes").read_only);
  EXPECT_FALSE(by_name.at("segment.bytes").is_sensitive);

  ASSERT_EQ(_spy->batches.size(), batches + 1);
  const batch& b = _spy->batches.back();
  ASSERT_EQ(b.size(), 6u);  // TopicRecord, 2 ConfigRecords, 3 PartitionRecords
  const auto& t = record_as<protocol::topic_record>(b[0]);
  EXPECT_EQ(t.name, "orders");
  EXPECT_EQ(t.topic_id, result.topic_id);
  EXPECT_EQ(record_as<protocol::config_record>(b[1]).name, "cleanup.policy");
  EXPECT_EQ(record_as<protocol::config_record>(b[2]).name, "retention.ms");
  EXPECT_EQ(record_as<protocol::config_record>(b[2]).resource_type, 2);
  for (int p = 0; p < 3; ++p) {
    const auto& pr = b[static_cast<size_t>(3 + p)];
    EXPECT_EQ(pr.version, 2);
    const auto& part = record_as<protocol::partition_record>(pr);
    EXPECT_EQ(part.partition_id, p);
    EXPECT_EQ(part.replicas, std::vector<int32_t>{1});
    EXPECT_EQ(part.isr, std::vector<int32_t>{1});
    EXPECT_EQ(part.leader, 1);
    EXPECT_EQ(part.leader_epoch, 0);
    EXPECT_EQ(part.partition_epoch, 0);
    EXPECT_EQ(part.directories, std::vector<uuid>{dir});
  }

  const auto* topic = image().find_topic("orders");
  ASSERT_NE(topic, nullptr);
  EXPECT_EQ(topic->id, result.topic_id);
  ASSERT_EQ(topic->partitions.size(), 3u);
  EXPECT_EQ(topic->partitions[2].leader, 1);
  EXPECT_EQ(config_value(topic_type, "orders", "retention.ms"), "1000");
  ASSERT_EQ(_published.size(), 1u);
  EXPECT_EQ(_published[0], _controller->image());
}

TEST_F(quorum_controller_test, create_topic_defaults_and_spread) {
  _num_partitions = 4;
  _static["log.retention.ms"] = "3600000";
  open();
  register_broker(1);
  register_broker(2);
  register_broker(3);
  auto result = create_one(new_topic("defaults", -1, -1));
  EXPECT_EQ(result.error_code, 0);
  EXPECT_EQ(result.num_partitions, 4);
  EXPECT_EQ(result.replication_factor, 1);
  for (const auto& c : *result.configs) {
    if (c.name == "retention.ms") {
      EXPECT_EQ(c.value, "3600000");
      EXPECT_EQ(c.config_source, 4);  // STATIC_BROKER_CONFIG
    }
  }
  auto spread = create_one(new_topic("spread", 6, 3));
  ASSERT_EQ(spread.error_code, 0);
  std::map<int32_t, int> leaders;
  for (const auto& p : image().find_topic("spread")->partitions) {
    EXPECT_EQ(p.replicas.size(), 3u);
    EXPECT_EQ(p.isr, p.replicas);
    EXPECT_EQ(p.leader, p.replicas.front());
    EXPECT_EQ(p.directories, std::vector<uuid>(3, metadata::directory_migrating));  // no log dirs registered
    ++leaders[p.leader];
  }
  EXPECT_EQ(leaders, (std::map<int32_t, int>{{1, 2}, {2, 2}, {3, 2}}));
}

TEST_F(quorum_controller_test, create_topic_name_errors) {
  open();
  register_broker(1);
  ASSERT_EQ(create_one(new_topic("a_b")).error_code, 0);
  struct bad {
    std::string name;
    std::string message;
  };
  const bad cases[] = {
      {"", "Topic name is invalid: the empty string is not allowed"},
      {".", "Topic name is invalid: '.' is not allowed"},
      {"..", "Topic name is invalid: '..' is not allowed"},
      {"has space",
       "Topic name is invalid: 'has space' contains one or more characters other than ASCII "
       "alphanumerics, '.', '_' and '-'"},
      {std::string(250, 'x'), "Topic name is invalid: the length of '" + std::string(250, 'x') +
                                  "' is longer than the max allowed length 249"},
      {"a.b", "Topic 'a.b' collides with existing topic: a_b"},
  };
  for (const auto& c : cases) {
    auto r = create_one(new_topic(c.name));
    EXPECT_EQ(r.error_code, 17) << c.name;  // INVALID_TOPIC_EXCEPTION
    EXPECT_EQ(r.error_message, c.message);
    EXPECT_TRUE(r.topic_id.is_zero());
    EXPECT_EQ(r.num_partitions, -1);
  }
  EXPECT_EQ(create_one(new_topic(std::string(249, 'y'))).error_code, 0);
  auto exists = create_one(new_topic("a_b"));
  EXPECT_EQ(exists.error_code, 36);  // TOPIC_ALREADY_EXISTS
  EXPECT_EQ(exists.error_message, "Topic 'a_b' already exists.");
}

TEST_F(quorum_controller_test, create_topics_request_level_errors) {
  open();
  register_broker(1);
  auto response =
      create({new_topic("dup"), new_topic("ok"), new_topic("dup"), new_topic("__cluster_metadata")});
  ASSERT_EQ(response.topics.size(), 3u);
  EXPECT_EQ(response.topics[0].name, "ok");
  EXPECT_EQ(response.topics[0].error_code, 0);
  EXPECT_EQ(response.topics[1].name, "dup");
  EXPECT_EQ(response.topics[1].error_code, 42);  // INVALID_REQUEST
  EXPECT_EQ(response.topics[1].error_message, "Duplicate topic name.");
  EXPECT_EQ(response.topics[2].name, "__cluster_metadata");
  EXPECT_EQ(response.topics[2].error_code, 42);
  EXPECT_EQ(response.topics[2].error_message, "Creation of internal topic __cluster_metadata is prohibited.");
  EXPECT_TRUE(image().topics.contains("ok"));
  EXPECT_FALSE(image().topics.contains("dup"));
}

TEST_F(quorum_controller_test, create_topic_count_errors) {
  open();
  register_broker(1);
  const int64_t offset = end_offset();
  const size_t batches = _spy->batches.size();
  auto rf0 = create_one(new_topic("t", 1, 0));
  EXPECT_EQ(rf0.error_code, 38);  // INVALID_REPLICATION_FACTOR
  EXPECT_EQ(rf0.error_message, "Replication factor must be larger than 0, or -1 to use the default value.");
  EXPECT_EQ(create_one(new_topic("t", 1, -2)).error_code, 38);
  auto p0 = create_one(new_topic("t", 0, 1));
  EXPECT_EQ(p0.error_code, 37);  // INVALID_PARTITIONS
  EXPECT_EQ(p0.error_message, "Number of partitions was set to an invalid non-positive value.");
  EXPECT_EQ(create_one(new_topic("t", -5, 1)).error_code, 37);
  auto rf3 = create_one(new_topic("t", 1, 3));
  EXPECT_EQ(rf3.error_code, 38);
  EXPECT_EQ(
      rf3.error_message,
      "Unable to replicate the partition 3 time(s): The target replication factor of 3 cannot be reached "
      "because only 1 broker(s) are registered or some brokers have all their log directories cordoned.");
  expect_no_write(batches, offset);
  EXPECT_TRUE(image().topics.empty());
}

TEST_F(quorum_controller_test, no_usable_broker) {
  open();
  auto r = create_one(new_topic("t", 1, 1));
  EXPECT_EQ(r.error_code, 38);
  EXPECT_EQ(r.error_message,
            "Unable to replicate the partition 1 time(s): All brokers are currently fenced, or have all "
            "their log directories cordoned.");
}

TEST_F(quorum_controller_test, fenced_brokers_do_not_count_as_live) {
  // Broker 2 registered but fenced, written to the log before the controller opens.
  protocol::feature_level_record f;
  f.name = "metadata.version";
  f.feature_level = 30;
  protocol::register_broker_record fenced;
  fenced.broker_id = 2;
  fenced.broker_epoch = 1;
  fenced.incarnation_id = uuid::random();
  fenced.fenced = true;
  seed_log({{f, 0}, {fenced, 3}});
  open();
  register_broker(1);
  auto rf2 = create_one(new_topic("t", 1, 2));
  EXPECT_EQ(rf2.error_code, 38);
  EXPECT_EQ(
      rf2.error_message,
      "Unable to replicate the partition 2 time(s): The target replication factor of 2 cannot be reached "
      "because only 1 broker(s) are registered or some brokers have all their log directories cordoned.");
  auto only_fenced = create_one(manual_topic("m", {{2}}));
  EXPECT_EQ(only_fenced.error_code, 39);  // INVALID_REPLICA_ASSIGNMENT
  EXPECT_EQ(
      only_fenced.error_message,
      "All brokers specified in the manual partition assignment for partition 0 are fenced or in controlled "
      "shutdown.");
  // A fenced replica is kept out of the ISR and the leadership.
  ASSERT_EQ(create_one(manual_topic("mixed", {{2, 1}})).error_code, 0);
  const auto& p = image().find_topic("mixed")->partitions.at(0);
  EXPECT_EQ(p.replicas, (std::vector<int32_t>{2, 1}));
  EXPECT_EQ(p.isr, std::vector<int32_t>{1});
  EXPECT_EQ(p.leader, 1);
}

TEST_F(quorum_controller_test, create_topic_config_errors_are_invalid_config) {
  open();
  register_broker(1);
  const int64_t offset = end_offset();
  const size_t batches = _spy->batches.size();
  auto null_value =
      create_one(new_topic("t", 1, 1, {{"retention.ms", std::nullopt}, {"segment.ms", std::nullopt}}));
  EXPECT_EQ(null_value.error_code, 40);  // INVALID_CONFIG
  EXPECT_EQ(null_value.error_message, "Null value not supported for topic configs: retention.ms,segment.ms");
  auto unknown = create_one(new_topic("t", 1, 1, {{"retention.hours", "1"}}));
  EXPECT_EQ(unknown.error_code, 40);
  EXPECT_EQ(unknown.error_message, "Unknown topic config name: retention.hours");
  auto bad = create_one(new_topic("t", 1, 1, {{"retention.ms", "abc"}}));
  EXPECT_EQ(bad.error_code, 40);
  EXPECT_EQ(bad.error_message, "Invalid value abc for configuration retention.ms: Not a number of type LONG");
  auto range = create_one(new_topic("t", 1, 1, {{"min.insync.replicas", "0"}}));
  EXPECT_EQ(range.error_code, 40);
  EXPECT_EQ(range.error_message,
            "Invalid value 0 for configuration min.insync.replicas: Value must be at least 1");
  expect_no_write(batches, offset);
}

TEST_F(quorum_controller_test, manual_assignments) {
  open();
  register_broker(1);
  register_broker(2);
  register_broker(3);
  auto ok = create_one(manual_topic("m", {{2, 1}, {3, 2}}));
  EXPECT_EQ(ok.error_code, 0);
  EXPECT_EQ(ok.num_partitions, 2);
  EXPECT_EQ(ok.replication_factor, 2);
  const auto* m = image().find_topic("m");
  ASSERT_NE(m, nullptr);
  EXPECT_EQ(m->partitions[0].replicas, (std::vector<int32_t>{2, 1}));
  EXPECT_EQ(m->partitions[0].leader, 2);
  EXPECT_EQ(m->partitions[1].isr, (std::vector<int32_t>{3, 2}));

  auto with_rf = manual_topic("x", {{1}});
  with_rf.replication_factor = 1;
  EXPECT_EQ(create_one(with_rf).error_message,
            "A manual partition assignment was specified, but replication factor was not set to -1.");
  auto with_count = manual_topic("x", {{1}});
  with_count.num_partitions = 1;
  EXPECT_EQ(create_one(with_count).error_code, 42);
  EXPECT_EQ(create_one(with_count).error_message,
            "A manual partition assignment was specified, but numPartitions was not set to -1.");

  struct bad {
    creatable_topic topic;
    std::string message;
  };
  auto twice = manual_topic("x", {{1}, {2}});
  twice.assignments[1].partition_index = 0;
  auto gap = manual_topic("x", {{1}, {2}});
  gap.assignments[1].partition_index = 2;
  const bad cases[] = {
      {twice, "Found multiple manual partition assignments for partition 0"},
      {gap, "partitions should be a consecutive 0-based integer sequence"},
      {manual_topic("x", {{}}), "The manual partition assignment includes an empty replica list."},
      {manual_topic("x", {{1, 9}}),
       "The manual partition assignment includes broker 9, but no such broker is registered."},
      {manual_topic("x", {{2, 2}}), "The manual partition assignment includes the broker 2 more than once."},
      {manual_topic("x", {{1}, {1, 2}}),
       "The manual partition assignment includes a partition with 2 replica(s), but this is not consistent "
       "with "
       "previous partitions, which have 1 replica(s)."},
  };
  for (const auto& c : cases) {
    auto r = create_one(c.topic);
    EXPECT_EQ(r.error_code, 39) << c.message;  // INVALID_REPLICA_ASSIGNMENT
    EXPECT_EQ(r.error_message, c.message);
  }
  EXPECT_FALSE(image().topics.contains("x"));
}

TEST_F(quorum_controller_test, create_topics_validate_only_writes_nothing) {
  open();
  register_broker(1);
  _published.clear();
  const int64_t offset = end_offset();
  const size_t batches = _spy->batches.size();
  auto response = create({new_topic("v", 2, 1, {{"retention.ms", "10"}}), new_topic("bad", 0, 1)},
                         /*validate_only=*/true);
  ASSERT_EQ(response.topics.size(), 2u);
  EXPECT_EQ(response.topics[0].error_code, 0);
  EXPECT_EQ(response.topics[0].num_partitions, 2);
  EXPECT_FALSE(response.topics[0].topic_id.is_zero());
  EXPECT_FALSE(response.topics[0].configs->empty());
  EXPECT_EQ(response.topics[1].error_code, 37);
  expect_no_write(batches, offset);
  EXPECT_TRUE(image().topics.empty());
  EXPECT_TRUE(_published.empty());
}

TEST_F(quorum_controller_test, oversized_operation_is_a_policy_violation) {
  open();
  register_broker(1);
  const size_t batches = _spy->batches.size();
  auto response = create({new_topic("small", 1, 1), new_topic("huge", 20000, 1)});
  ASSERT_EQ(response.topics.size(), 2u);
  for (const auto& t : response.topics) {
    EXPECT_EQ(t.error_code, 44);  // POLICY_VIOLATION
    EXPECT_EQ(t.error_message, "Unable to perform excessively large batch operation.");
  }
  EXPECT_EQ(_spy->batches.size(), batches);
  EXPECT_TRUE(image().topics.empty());
}

TEST_F(quorum_controller_test, storage_failure_answers_every_topic_and_changes_nothing) {
  open();
  register_broker(1);
  _published.clear();
  const auto before = _controller->image();
  _spy->fail_appends = true;
  auto response = create({new_topic("a"), new_topic("b", 0, 1)});
  ASSERT_EQ(response.topics.size(), 2u);
  for (const auto& t : response.topics) EXPECT_EQ(t.error_code, 56);  // KAFKA_STORAGE_ERROR
  EXPECT_EQ(_controller->image(), before);
  EXPECT_TRUE(_published.empty());
  _spy->fail_appends = false;
  EXPECT_EQ(create_one(new_topic("a")).error_code, 0);
}

// --- DeleteTopics

TEST_F(quorum_controller_test, delete_topics_by_name_and_by_id) {
  open();
  register_broker(1);
  ASSERT_EQ(create_one(new_topic("by-name", 2, 1, {{"retention.ms", "10"}})).error_code, 0);
  const uuid id = create_one(new_topic("by-id")).topic_id;
  _published.clear();

  protocol::delete_topics_request by_name;
  by_name.topic_names = {"by-name"};
  auto r1 = _controller->delete_topics(by_name, 5);
  ASSERT_EQ(r1.responses.size(), 1u);
  EXPECT_EQ(r1.responses[0].name, "by-name");
  EXPECT_EQ(r1.responses[0].error_code, 0);
  EXPECT_EQ(r1.responses[0].error_message, std::nullopt);
  EXPECT_FALSE(image().topics.contains("by-name"));
  EXPECT_EQ(configs(topic_type, "by-name"), nullptr);  // its configs went with it
  ASSERT_EQ(_spy->batches.back().size(), 1u);
  EXPECT_TRUE(holds<protocol::remove_topic_record>(_spy->batches.back()[0]));

  protocol::delete_topics_request by_id;
  protocol::delete_topics_request::delete_topic_state state;
  state.topic_id = id;
  by_id.topics.push_back(state);
  auto r2 = _controller->delete_topics(by_id, 6);
  ASSERT_EQ(r2.responses.size(), 1u);
  EXPECT_EQ(r2.responses[0].name, "by-id");
  EXPECT_EQ(r2.responses[0].topic_id, id);
  EXPECT_EQ(r2.responses[0].error_code, 0);
  EXPECT_TRUE(image().topics.empty());
  EXPECT_EQ(_published.size(), 2u);
}

TEST_F(quorum_controller_test, delete_topics_errors) {
  open();
  register_broker(1);
  const uuid id = create_one(new_topic("t")).topic_id;
  ASSERT_EQ(create_one(new_topic("u")).error_code, 0);
  const size_t batches = _spy->batches.size();

  protocol::delete_topics_request request;
  auto add = [&](std::optional<std::string> name, uuid topic_id) {
    protocol::delete_topics_request::delete_topic_state s;
    s.name = std::move(name);
    s.topic_id = topic_id;
    request.topics.push_back(s);
  };
  const uuid unknown_id = uuid::random();
  add("missing", uuid{});
  add(std::nullopt, unknown_id);
  add(std::nullopt, uuid{});
  add("both", id);
  add("dup", uuid{});
  add("dup", uuid{});
  add(std::nullopt, id);
  add("t", uuid{});  // maps to the id given just before
  auto response = _controller->delete_topics(request, 6);
  std::map<std::string, std::pair<int16_t, std::optional<std::string>>> by_key;
  for (const auto& r : response.responses) {
    by_key[r.name.value_or("<null>") + "/" + r.topic_id.to_string()] = {r.error_code, r.error_message};
  }
  const std::string zero = uuid{}.to_string();
  EXPECT_EQ(by_key["missing/" + zero],
            std::make_pair(int16_t{3},
                           std::optional<std::string>("This server does not host this topic-partition.")));
  EXPECT_EQ(
      by_key["<null>/" + unknown_id.to_string()],
      std::make_pair(int16_t{100}, std::optional<std::string>("This server does not host this topic ID.")));
  EXPECT_EQ(by_key["<null>/" + zero].second, "Neither topic name nor id were specified.");
  EXPECT_EQ(by_key["both/" + id.to_string()].second, "You may not specify both topic name and topic id.");
  EXPECT_EQ(by_key["t/" + id.to_string()].second,
            "The provided topic name maps to an ID that was already supplied.");
  EXPECT_EQ(by_key["dup/" + zero].second, "Duplicate topic name.");
  EXPECT_EQ(by_key["dup/" + zero].first, 42);
  EXPECT_EQ(response.responses.size(), 6u);  // the name mapping to a given id answers for both
  EXPECT_TRUE(image().topics.contains("t"));
  EXPECT_EQ(_spy->batches.size(), batches);

  protocol::delete_topics_request dup_ids;
  add(std::nullopt, id);
  dup_ids.topics = {request.topics.back(), request.topics.back()};
  auto dups = _controller->delete_topics(dup_ids, 6);
  ASSERT_EQ(dups.responses.size(), 1u);
  EXPECT_EQ(dups.responses[0].error_message, "Duplicate topic id.");
  EXPECT_EQ(dups.responses[0].name, std::nullopt);
}

TEST_F(quorum_controller_test, delete_topic_disabled) {
  _delete_topic_enable = false;
  open();
  register_broker(1);
  ASSERT_EQ(create_one(new_topic("t")).error_code, 0);
  protocol::delete_topics_request request;
  request.topic_names = {"t"};
  auto v5 = _controller->delete_topics(request, 5);
  ASSERT_EQ(v5.responses.size(), 1u);
  EXPECT_EQ(v5.responses[0].error_code, 73);  // TOPIC_DELETION_DISABLED
  auto v2 = _controller->delete_topics(request, 2);
  EXPECT_EQ(v2.responses.at(0).error_code, 42);
  EXPECT_EQ(v2.responses.at(0).error_message, "Topic deletion is disabled.");
  EXPECT_TRUE(image().topics.contains("t"));
}

// --- CreatePartitions

protocol::create_partitions_request grow(
    const std::string& name, int32_t count,
    std::optional<std::vector<std::vector<int32_t>>> assignments = std::nullopt, bool validate_only = false) {
  protocol::create_partitions_request request;
  protocol::create_partitions_request::create_partitions_topic t;
  t.name = name;
  t.count = count;
  if (assignments) {
    t.assignments.emplace();
    for (const auto& a : *assignments) t.assignments->push_back({a});
  } else {
    t.assignments.reset();
  }
  request.topics.push_back(t);
  request.validate_only = validate_only;
  return request;
}

TEST_F(quorum_controller_test, create_partitions_grows_the_topic) {
  open();
  register_broker(1);
  register_broker(2);
  ASSERT_EQ(create_one(new_topic("t", 1, 2)).error_code, 0);
  auto response = _controller->create_partitions(grow("t", 3), 3);
  ASSERT_EQ(response.results.size(), 1u);
  EXPECT_EQ(response.results[0].error_code, 0);
  EXPECT_EQ(response.results[0].error_message, std::nullopt);
  const auto& parts = image().find_topic("t")->partitions;
  ASSERT_EQ(parts.size(), 3u);
  for (const auto& p : parts) {
    EXPECT_EQ(p.replicas.size(), 2u);
    EXPECT_EQ(p.leader, p.replicas.front());
  }
  const batch& b = _spy->batches.back();
  ASSERT_EQ(b.size(), 2u);
  EXPECT_EQ(record_as<protocol::partition_record>(b[0]).partition_id, 1);
  EXPECT_EQ(record_as<protocol::partition_record>(b[1]).partition_id, 2);

  auto manual = _controller->create_partitions(grow("t", 4, std::vector<std::vector<int32_t>>{{2, 1}}), 3);
  EXPECT_EQ(manual.results.at(0).error_code, 0);
  EXPECT_EQ(image().find_topic("t")->partitions.at(3).replicas, (std::vector<int32_t>{2, 1}));
}

TEST_F(quorum_controller_test, create_partitions_errors) {
  open();
  register_broker(1);
  register_broker(2);
  ASSERT_EQ(create_one(new_topic("t", 2, 1)).error_code, 0);
  const size_t batches = _spy->batches.size();
  auto same = _controller->create_partitions(grow("t", 2), 3).results.at(0);
  EXPECT_EQ(same.error_code, 37);
  EXPECT_EQ(same.error_message, "Topic already has 2 partition(s).");
  auto fewer = _controller->create_partitions(grow("t", 1), 3).results.at(0);
  EXPECT_EQ(fewer.error_code, 37);
  EXPECT_EQ(fewer.error_message, "The topic t currently has 2 partition(s); 1 would not be an increase.");
  auto missing = _controller->create_partitions(grow("nope", 3), 3).results.at(0);
  EXPECT_EQ(missing.error_code, 3);
  EXPECT_EQ(missing.error_message, std::nullopt);
  auto count =
      _controller->create_partitions(grow("t", 4, std::vector<std::vector<int32_t>>{{1}}), 3).results.at(0);
  EXPECT_EQ(count.error_code, 39);
  EXPECT_EQ(count.error_message,
            "Attempted to add 2 additional partition(s), but only 1 assignment(s) were specified.");
  auto rf = _controller->create_partitions(grow("t", 3, std::vector<std::vector<int32_t>>{{1, 2}}), 3)
                .results.at(0);
  EXPECT_EQ(rf.error_code, 39);
  EXPECT_EQ(rf.error_message,
            "The manual partition assignment includes a partition with 2 replica(s), but this is not "
            "consistent with "
            "previous partitions, which have 1 replica(s).");
  auto unknown =
      _controller->create_partitions(grow("t", 3, std::vector<std::vector<int32_t>>{{7}}), 3).results.at(0);
  EXPECT_EQ(unknown.error_message,
            "The manual partition assignment includes broker 7, but no such broker is registered.");

  protocol::create_partitions_request dup = grow("t", 5);
  dup.topics.push_back(dup.topics[0]);
  auto dups = _controller->create_partitions(dup, 3);
  ASSERT_EQ(dups.results.size(), 1u);
  EXPECT_EQ(dups.results[0].error_code, 42);
  EXPECT_EQ(dups.results[0].error_message, "Duplicate topic name.");

  auto validate = _controller->create_partitions(grow("t", 5, std::nullopt, /*validate_only=*/true), 3);
  EXPECT_EQ(validate.results.at(0).error_code, 0);
  EXPECT_EQ(image().find_topic("t")->partitions.size(), 2u);
  EXPECT_EQ(_spy->batches.size(), batches);
}

// --- IncrementalAlterConfigs and AlterConfigs on topics

TEST_F(quorum_controller_test, incremental_topic_configs) {
  open();
  register_broker(1);
  ASSERT_EQ(create_one(new_topic("t")).error_code, 0);

  auto set = incremental_result(topic_type, "t",
                                {{"retention.ms", set_op, "1000"}, {"segment.ms", set_op, "60000"}});
  EXPECT_EQ(set.first, 0);
  EXPECT_EQ(set.second, std::nullopt);
  EXPECT_EQ(config_value(topic_type, "t", "retention.ms"), "1000");
  EXPECT_EQ(config_value(topic_type, "t", "segment.ms"), "60000");

  EXPECT_EQ(incremental_result(topic_type, "t", {{"retention.ms", delete_op, std::nullopt}}).first, 0);
  EXPECT_EQ(config_value(topic_type, "t", "retention.ms"), std::nullopt);

  // APPEND starts from the default ("delete"); SUBTRACT removes.
  EXPECT_EQ(incremental_result(topic_type, "t", {{"cleanup.policy", append_op, "compact"}}).first, 0);
  EXPECT_EQ(config_value(topic_type, "t", "cleanup.policy"), "delete,compact");
  EXPECT_EQ(incremental_result(topic_type, "t", {{"cleanup.policy", append_op, "compact"}}).first, 0);
  EXPECT_EQ(config_value(topic_type, "t", "cleanup.policy"), "delete,compact");
  EXPECT_EQ(incremental_result(topic_type, "t", {{"cleanup.policy", subtract_op, "delete"}}).first, 0);
  EXPECT_EQ(config_value(topic_type, "t", "cleanup.policy"), "compact");

  // Setting a value it already has writes nothing for a topic.
  const size_t batches = _spy->batches.size();
  EXPECT_EQ(incremental_result(topic_type, "t", {{"segment.ms", set_op, "60000"}}).first, 0);
  EXPECT_EQ(_spy->batches.size(), batches);
}

TEST_F(quorum_controller_test, incremental_topic_config_errors) {
  open();
  register_broker(1);
  ASSERT_EQ(create_one(new_topic("t")).error_code, 0);
  const size_t batches = _spy->batches.size();
  using result = std::pair<int16_t, std::optional<std::string>>;
  EXPECT_EQ(incremental_result(topic_type, "t", {{"retention.ms", append_op, "5"}}),
            result(40, "Can't APPEND to key retention.ms because its type is not LIST."));
  EXPECT_EQ(incremental_result(topic_type, "t", {{"retention.ms", subtract_op, "5"}}),
            result(40, "Can't SUBTRACT to key retention.ms because its type is not LIST."));
  EXPECT_EQ(incremental_result(topic_type, "t", {{"retention.ms", set_op, "abc"}}),
            result(40, "Invalid value abc for configuration retention.ms: Not a number of type LONG"));
  EXPECT_EQ(incremental_result(topic_type, "t", {{"no.such", set_op, "1"}}),
            result(40, "Unknown topic config name: no.such"));
  EXPECT_EQ(incremental_result(topic_type, "nope", {{"retention.ms", set_op, "1"}}),
            result(3, "The topic 'nope' does not exist."));
  EXPECT_EQ(incremental_result(topic_type, "nope", {{"retention.ms", set_op, "x"}}).first,
            40);  // config first
  EXPECT_EQ(incremental_result(topic_type, "", {{"retention.ms", set_op, "1"}}),
            result(42, "Default topic resources are not allowed."));
  EXPECT_EQ(incremental_result(topic_type, "bad name", {{"retention.ms", set_op, "1"}}).first, 17);
  EXPECT_EQ(incremental_result(topic_type, "t", {{"retention.ms", set_op, std::nullopt}}),
            result(42, "Null value not supported for : retention.ms"));
  EXPECT_EQ(
      incremental_result(topic_type, "t", {{"retention.ms", set_op, "1"}, {"retention.ms", set_op, "2"}}),
      result(42, "Error due to duplicate config keys"));
  EXPECT_EQ(incremental_result(topic_type, "t", {{"retention.ms", 9, "1"}}),
            result(42, "Unknown operations type 9"));
  EXPECT_EQ(incremental_result(32, "group", {{"x", set_op, "1"}}), result(42, "Unknown resource type 32"));
  EXPECT_EQ(_spy->batches.size(), batches);

  // Duplicate resources: both get the error, the other resources go through.
  protocol::incremental_alter_configs_request request;
  protocol::incremental_alter_configs_request::alter_configs_resource r;
  r.resource_type = topic_type;
  r.resource_name = "t";
  r.configs.push_back({"retention.ms", set_op, "5"});
  request.resources = {r, r};
  auto dup = _controller->incremental_alter_configs(request, 1);
  ASSERT_EQ(dup.responses.size(), 2u);
  for (const auto& x : dup.responses) {
    EXPECT_EQ(x.error_code, 42);
    EXPECT_EQ(x.error_message, "Each resource must appear at most once.");
  }

  EXPECT_EQ(
      incremental_result(topic_type, "t", {{"retention.ms", set_op, "5"}}, /*validate_only=*/true).first, 0);
  EXPECT_EQ(config_value(topic_type, "t", "retention.ms"), std::nullopt);
  EXPECT_EQ(_spy->batches.size(), batches);
}

TEST_F(quorum_controller_test, legacy_alter_configs_replaces_every_override) {
  open();
  register_broker(1);
  ASSERT_EQ(
      create_one(new_topic("t", 1, 1, {{"retention.ms", "10"}, {"cleanup.policy", "compact"}})).error_code,
      0);
  auto response = legacy(topic_type, "t", {{"segment.ms", "60000"}, {"cleanup.policy", "compact"}});
  ASSERT_EQ(response.responses.size(), 1u);
  EXPECT_EQ(response.responses[0].error_code, 0);
  EXPECT_EQ(response.responses[0].error_message, std::nullopt);
  EXPECT_EQ(*configs(topic_type, "t"),
            (metadata::config_map{{"cleanup.policy", "compact"}, {"segment.ms", "60000"}}));
  // Only the change and the implicit deletion were written (cleanup.policy kept its value).
  const batch& b = _spy->batches.back();
  ASSERT_EQ(b.size(), 2u);
  EXPECT_EQ(record_as<protocol::config_record>(b[0]).name, "segment.ms");
  EXPECT_EQ(record_as<protocol::config_record>(b[1]).name, "retention.ms");
  EXPECT_EQ(record_as<protocol::config_record>(b[1]).value, std::nullopt);

  const size_t batches = _spy->batches.size();
  EXPECT_EQ(legacy(topic_type, "nope", {{"segment.ms", "1"}}).responses.at(0).error_code, 3);
  EXPECT_EQ(legacy(topic_type, "t", {{"segment.ms", "0"}}).responses.at(0).error_code, 40);
  auto null_value = legacy(topic_type, "t", {{"segment.ms", std::nullopt}}).responses.at(0);
  EXPECT_EQ(null_value.error_code, 42);
  EXPECT_EQ(null_value.error_message, "Null value not supported for : segment.ms");
  EXPECT_EQ(legacy(topic_type, "t", {}, /*validate_only=*/true).responses.at(0).error_code, 0);
  EXPECT_EQ(_spy->batches.size(), batches);
  EXPECT_EQ(configs(topic_type, "t")->size(), 2u);

  EXPECT_EQ(legacy(topic_type, "t", {}).responses.at(0).error_code, 0);  // clears every override
  EXPECT_EQ(configs(topic_type, "t"), nullptr);
}

// --- Broker configs

TEST_F(quorum_controller_test, broker_configs_cluster_default_and_per_broker) {
  open();
  register_broker(1);
  EXPECT_EQ(incremental_result(broker_type, "", {{"log.retention.ms", set_op, "5000"}}).first, 0);
  EXPECT_EQ(config_value(broker_type, "", "log.retention.ms"), "5000");
  const batch& b = _spy->batches.back();
  ASSERT_EQ(b.size(), 1u);
  EXPECT_EQ(record_as<protocol::config_record>(b[0]).resource_type, 4);
  EXPECT_EQ(record_as<protocol::config_record>(b[0]).resource_name, "");

  // A broker value is written even when unchanged (KAFKA-14136).
  const size_t batches = _spy->batches.size();
  EXPECT_EQ(incremental_result(broker_type, "", {{"log.retention.ms", set_op, "5000"}}).first, 0);
  EXPECT_EQ(_spy->batches.size(), batches + 1);

  EXPECT_EQ(incremental_result(broker_type, "1", {{"num.io.threads", set_op, "16"}}).first, 0);
  EXPECT_EQ(config_value(broker_type, "1", "num.io.threads"), "16");
  EXPECT_EQ(incremental_result(broker_type, "1", {{"log.cleanup.policy", append_op, "compact"}}).first, 0);
  EXPECT_EQ(config_value(broker_type, "1", "log.cleanup.policy"), "delete,compact");
  EXPECT_EQ(incremental_result(broker_type, "1", {{"num.io.threads", delete_op, std::nullopt}}).first, 0);
  EXPECT_EQ(config_value(broker_type, "1", "num.io.threads"), std::nullopt);

  // Topic configs resolve through the new broker defaults.
  ASSERT_EQ(create_one(new_topic("t")).error_code, 0);
  auto effective = resolve_topic_configs(image(), "t", 1, nullptr);
  for (const auto& e : effective) {
    if (e.key->name == "retention.ms") {
      EXPECT_EQ(e.value, "5000");
      EXPECT_EQ(e.source, config_source_id::dynamic_default_broker_config);
    }
  }

  // Legacy AlterConfigs on a broker replaces its overrides.
  EXPECT_EQ(legacy(broker_type, "1", {{"num.replica.fetchers", "2"}}).responses.at(0).error_code, 0);
  EXPECT_EQ(*configs(broker_type, "1"), (metadata::config_map{{"num.replica.fetchers", "2"}}));
}

TEST_F(quorum_controller_test, broker_defaults_of_topic_configs_missing_from_the_node_key_table_are_dynamic) {
  open();
  register_broker(1);
  using result = std::pair<int16_t, std::optional<std::string>>;
  EXPECT_EQ(incremental_result(broker_type, "", {{"log.message.timestamp.before.max.ms", set_op, "60000"}}),
            result(0, std::nullopt));
  EXPECT_EQ(incremental_result(broker_type, "1", {{"log.roll.jitter.ms", set_op, "1000"}}),
            result(0, std::nullopt));
  EXPECT_EQ(incremental_result(broker_type, "", {{"log.message.timestamp.after.max.ms", set_op, "-1"}}),
            result(42,
                   "Invalid value -1 for configuration log.message.timestamp.after.max.ms: Value must be at "
                   "least 0"));
  ASSERT_EQ(create_one(new_topic("t")).error_code, 0);
  int found = 0;
  for (const auto& e : resolve_topic_configs(image(), "t", 1, nullptr)) {
    if (e.key->name == "message.timestamp.before.max.ms") {
      ++found;
      EXPECT_EQ(e.value, "60000");
      EXPECT_EQ(e.source, config_source_id::dynamic_default_broker_config);
    }
    if (e.key->name == "segment.jitter.ms") {
      ++found;
      EXPECT_EQ(e.value, "1000");
      EXPECT_EQ(e.source, config_source_id::dynamic_broker_config);
    }
  }
  EXPECT_EQ(found, 2);
}

TEST_F(quorum_controller_test, broker_config_errors) {
  _static["num.io.threads"] = "8";
  open();
  register_broker(1);
  const size_t batches = _spy->batches.size();
  using result = std::pair<int16_t, std::optional<std::string>>;
  EXPECT_EQ(incremental_result(broker_type, "", {{"log.dirs", set_op, "/x"}}),
            result(42, "Cannot update these configs dynamically: Set(log.dirs)"));
  EXPECT_EQ(
      incremental_result(broker_type, "", {{"no.such.thing", set_op, "1"}, {"broker.rack", set_op, "r"}}),
      result(42, "Cannot update these configs dynamically: Set(broker.rack, no.such.thing)"));
  EXPECT_EQ(incremental_result(broker_type, "1", {{"num.io.threads", set_op, "abc"}}),
            result(42, "Invalid value abc for configuration num.io.threads: Not a number of type INT"));
  EXPECT_EQ(
      incremental_result(broker_type, "1", {{"log.segment.bytes", set_op, "10"}}),
      result(42, "Invalid value 10 for configuration log.segment.bytes: Value must be at least 1048576"));
  EXPECT_EQ(incremental_result(broker_type, "1", {{"num.io.threads", set_op, "17"}}),
            result(42,
                   "Dynamic thread count update validation failed for num.io.threads=17, value should not be "
                   "greater than double the current value 8"));
  EXPECT_EQ(
      incremental_result(broker_type, "", {{"num.io.threads", set_op, "3"}}),
      result(42,
             "Dynamic thread count update validation failed for num.io.threads=3, value should be at least "
             "half the current value 8"));
  EXPECT_EQ(incremental_result(broker_type, "", {{"num.io.threads", set_op, "0"}}).first, 42);
  // Another node's id is that node's business (it checked the name before forwarding): validated only.
  EXPECT_EQ(incremental_result(broker_type, "7", {{"num.io.threads", set_op, "8"}}, /*validate_only=*/true),
            result(0, std::nullopt));
  EXPECT_EQ(incremental_result(broker_type, "x", {{"num.io.threads", set_op, "8"}}),
            result(42, "Node id must be an integer, but it is: x"));
  EXPECT_EQ(incremental_result(broker_type, "", {{"num.io.threads", append_op, "8"}}),
            result(40, "Config value append is not allowed for config key: num.io.threads"));
  auto legacy_bad = legacy(broker_type, "", {{"log.dirs", "/x"}}).responses.at(0);
  EXPECT_EQ(legacy_bad.error_code, 42);
  EXPECT_EQ(legacy_bad.error_message, "Cannot update these configs dynamically: Set(log.dirs)");
  EXPECT_EQ(
      incremental_result(broker_type, "", {{"num.io.threads", set_op, "12"}}, /*validate_only=*/true).first,
      0);
  EXPECT_EQ(_spy->batches.size(), batches);
}

// --- AllocateProducerIds

TEST_F(quorum_controller_test, allocate_producer_ids_hands_out_consecutive_blocks) {
  open();
  const int64_t epoch = register_broker(1);
  auto first = _controller->allocate_producer_ids(1, epoch);
  ASSERT_TRUE(first.ok()) << first.error().message;
  EXPECT_EQ(first->assigned_broker_id, 1);
  EXPECT_EQ(first->first_id, 0);
  EXPECT_EQ(first->size, 1000);
  const auto& record = record_as<protocol::producer_ids_record>(_spy->batches.back().at(0));
  EXPECT_EQ(record.broker_id, 1);
  EXPECT_EQ(record.broker_epoch, epoch);
  EXPECT_EQ(record.next_producer_id, 1000);
  EXPECT_EQ(image().next_producer_id, 1000);

  auto second = _controller->allocate_producer_ids(1, epoch);
  ASSERT_TRUE(second.ok());
  EXPECT_EQ(second->first_id, 1000);
  reopen();
  auto third = _controller->allocate_producer_ids(1, epoch);
  ASSERT_TRUE(third.ok());
  EXPECT_EQ(third->first_id, 2000);
}

TEST_F(quorum_controller_test, allocate_producer_ids_checks_the_broker_epoch) {
  open();
  const int64_t epoch = register_broker(1);
  auto stale = _controller->allocate_producer_ids(1, epoch + 100);
  ASSERT_FALSE(stale.ok());
  EXPECT_EQ(stale.error().code, error_code::stale_broker_epoch);
  EXPECT_EQ(stale.error().message, "Expected broker epoch " + std::to_string(epoch) +
                                       ", but got broker epoch " + std::to_string(epoch + 100));
  auto unknown = _controller->allocate_producer_ids(9, 1);
  ASSERT_FALSE(unknown.ok());
  EXPECT_EQ(unknown.error().code, error_code::stale_broker_epoch);
  EXPECT_EQ(unknown.error().message, "No broker registration found for broker id 9");
  EXPECT_EQ(image().next_producer_id, 0);
}

}  // namespace
}  // namespace mala::controller
