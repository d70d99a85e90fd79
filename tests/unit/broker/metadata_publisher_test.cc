// metadata_publisher and config changes: a new image that changes only configs (a topic's ConfigRecord, a
// dynamic broker default for the cluster or for this node) reaches the replicas already hosted, which then
// roll, validate and retain by the new values. Real log manager and replica manager in a temp dir; images
// built by hand.
#include "mala/broker/metadata_publisher.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <random>

#include "mala/protocol/record_batch.h"
#include "mala/storage/log_manager.h"

namespace mala::broker {
namespace {

namespace fs = std::filesystem;
using metadata::config_resource_type;

constexpr int32_t self = 1;
constexpr int64_t now_ms = 1'700'000'000'000;

std::vector<uint8_t> make_batch(size_t value_size = 100) {
  protocol::record_batch_builder builder;
  std::string value(value_size, 'v');
  builder.add(now_ms, std::nullopt,
              std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(value.data()), value.size()));
  return builder.build();
}

class metadata_publisher_test : public ::testing::Test {
 protected:
  void SetUp() override {
    _root = fs::temp_directory_path() / ("mala-publisher-test-" + std::to_string(std::random_device{}()));
    storage::log_manager_options o;
    o.dirs = {_root / "data"};
    o.clock_ms = [] { return now_ms; };
    auto opened = storage::log_manager::open(std::move(o));
    ASSERT_TRUE(opened.ok()) << opened.error().message;
    _logs = std::move(*opened);
    replication::replica_manager_options r;
    r.local_replica_id = self;
    r.clock_ms = [] { return now_ms; };
    _replicas = std::make_unique<replication::replica_manager>(*_logs, r);
    // The node's configuration file sets log.segment.bytes (a static broker config).
    _publisher = std::make_unique<metadata_publisher>(
        self, std::vector<replication::replica_manager*>{_replicas.get()}, replication::replica_placement(),
        /*shards=*/nullptr, _cache, [](std::string_view property) -> std::optional<std::string> {
          if (property == "log.segment.bytes") return "536870912";
          return std::nullopt;
        });

    _image.brokers[self].id = self;
    metadata::topic_metadata topic;
    topic.name = "orders";
    topic.id = uuid::random();
    metadata::partition_state p;
    p.partition = 0;
    p.leader = self;
    p.leader_epoch = 1;
    p.partition_epoch = 1;
    p.replicas = {self, 2, 3};
    p.isr = {self, 2, 3};
    topic.partitions.push_back(p);
    _image.topics["orders"] = topic;
    publish();
  }
  void TearDown() override {
    _replicas.reset();
    _logs.reset();
    fs::remove_all(_root);
  }

  void publish() { _publisher->publish(std::make_shared<const metadata::metadata_image>(_image)); }
  void set(config_resource_type type, const std::string& name, const std::string& key,
           const std::string& value) {
    _image.configs[{type, name}][key] = value;
    publish();
  }
  void remove(config_resource_type type, const std::string& name, const std::string& key) {
    _image.configs[{type, name}].erase(key);
    if (_image.configs[{type, name}].empty()) _image.configs.erase({type, name});
    publish();
  }

  replication::partition& partition() {
    auto* p = _replicas->get({"orders", 0});
    EXPECT_NE(p, nullptr);
    return *p;
  }
  const storage::log_config& log_config() { return partition().log().config(); }

  fs::path _root;
  std::unique_ptr<storage::log_manager> _logs;
  std::unique_ptr<replication::replica_manager> _replicas;
  metadata::metadata_cache _cache;
  std::unique_ptr<metadata_publisher> _publisher;
  metadata::metadata_image _image;
};

TEST_F(metadata_publisher_test, every_topic_config_reaches_the_hosted_log) {
  ASSERT_EQ(log_config().segment_bytes, 536870912);  // the static broker config
  auto batch = make_batch();
  ASSERT_TRUE(partition().append(batch, 1).ok());

  const std::pair<const char*, const char*> changes[] = {
      {"segment.bytes", "1048576"},
      {"segment.ms", "60000"},
      {"segment.jitter.ms", "10"},
      {"segment.index.bytes", "4096"},
      {"index.interval.bytes", "100"},
      {"max.message.bytes", "5000"},
      {"message.timestamp.type", "LogAppendTime"},
      {"message.timestamp.before.max.ms", "1000"},
      {"message.timestamp.after.max.ms", "2000"},
      {"retention.ms", "3000"},
      {"retention.bytes", "4000"},
      {"file.delete.delay.ms", "5"},
      {"flush.messages", "6"},
      {"flush.ms", "7"},
      {"cleanup.policy", "compact,delete"},
      {"delete.retention.ms", "8"},
  };
  for (const auto& [key, value] : changes) set(config_resource_type::topic, "orders", key, value);
  const auto& c = log_config();
  EXPECT_EQ(c.segment_bytes, 1048576);
  EXPECT_EQ(c.segment_ms, 60000);
  EXPECT_EQ(c.segment_jitter_ms, 10);
  EXPECT_EQ(c.segment_index_bytes, 4096);
  EXPECT_EQ(c.index_interval_bytes, 100);
  EXPECT_EQ(c.max_message_bytes, 5000);
  EXPECT_TRUE(c.log_append_time);
  EXPECT_EQ(c.message_timestamp_before_max_ms, 1000);
  EXPECT_EQ(c.message_timestamp_after_max_ms, 2000);
  EXPECT_EQ(c.retention_ms, 3000);
  EXPECT_EQ(c.retention_bytes, 4000);
  EXPECT_EQ(c.file_delete_delay_ms, 5);
  EXPECT_EQ(c.flush_messages, 6);
  EXPECT_EQ(c.flush_ms, 7);
  EXPECT_EQ(c.cleanup, storage::cleanup_policy::compact_and_delete);
  EXPECT_EQ(c.delete_retention_ms, 8);

  set(config_resource_type::topic, "orders", "min.insync.replicas", "3");
  EXPECT_EQ(partition().min_insync_replicas(), 3);
  remove(config_resource_type::topic, "orders", "min.insync.replicas");
  EXPECT_EQ(partition().min_insync_replicas(), 1);
}

TEST_F(metadata_publisher_test, a_lowered_segment_bytes_rolls_the_existing_active_segment) {
  for (int i = 0; i < 3; ++i) {
    auto batch = make_batch(1000);
    ASSERT_TRUE(partition().append(batch, 1).ok());
  }
  ASSERT_EQ(partition().log().segment_count(), 1u);
  // Below Kafka's minimum for segment.bytes (the controller validates; the publisher takes what it is given),
  // so that a test needs kilobytes, not megabytes.
  set(config_resource_type::topic, "orders", "segment.bytes", "2500");
  for (int i = 0; i < 4; ++i) {
    auto batch = make_batch(1000);
    ASSERT_TRUE(partition().append(batch, 1).ok());
  }
  EXPECT_EQ(partition().log().segment_count(), 3u);  // [0-2] [3-4] [5-6]
}

TEST_F(metadata_publisher_test, dynamic_broker_defaults_reach_topics_without_an_override) {
  // Cluster-wide default (kafka-configs --entity-type brokers --entity-default).
  set(config_resource_type::broker, "", "log.segment.bytes", "2097152");
  set(config_resource_type::broker, "", "log.retention.ms", "1000");
  set(config_resource_type::broker, "", "message.max.bytes", "3000");
  set(config_resource_type::broker, "", "log.message.timestamp.type", "LogAppendTime");
  set(config_resource_type::broker, "", "min.insync.replicas", "2");
  EXPECT_EQ(log_config().segment_bytes, 2097152);
  EXPECT_EQ(log_config().retention_ms, 1000);
  EXPECT_EQ(log_config().max_message_bytes, 3000);
  EXPECT_TRUE(log_config().log_append_time);
  EXPECT_EQ(partition().min_insync_replicas(), 2);

  // This node's own value wins over the cluster default, a topic override over both.
  set(config_resource_type::broker, std::to_string(self), "log.segment.bytes", "3145728");
  EXPECT_EQ(log_config().segment_bytes, 3145728);
  set(config_resource_type::broker, "2", "log.segment.bytes", "9999999");  // another node's: no effect here
  EXPECT_EQ(log_config().segment_bytes, 3145728);
  set(config_resource_type::topic, "orders", "segment.bytes", "1048576");
  EXPECT_EQ(log_config().segment_bytes, 1048576);

  // Removed one by one: back to the static config of the node.
  remove(config_resource_type::topic, "orders", "segment.bytes");
  remove(config_resource_type::broker, std::to_string(self), "log.segment.bytes");
  EXPECT_EQ(log_config().segment_bytes, 2097152);
  remove(config_resource_type::broker, "", "log.segment.bytes");
  EXPECT_EQ(log_config().segment_bytes, 536870912);
  remove(config_resource_type::broker, "", "min.insync.replicas");
  EXPECT_EQ(partition().min_insync_replicas(), 1);
}

}  // namespace
}  // namespace mala::broker
