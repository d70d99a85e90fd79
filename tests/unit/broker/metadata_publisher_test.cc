// metadata_publisher and config changes: a new image that changes only configs (a topic's ConfigRecord, a
// dynamic broker default for the cluster or for this node) reaches the replicas already hosted, which then
// roll, validate and retain by the new values. Real log manager and replica manager in a temp dir; images
// built by hand.
#include "mala/broker/metadata_publisher.h"

#include <gtest/gtest.h>

#include <asio/post.hpp>
#include <chrono>
#include <filesystem>
#include <future>
#include <random>
#include <thread>

#include "mala/common/current_shard.h"
#include "mala/net/shard_pool.h"
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

// Issue 20: an image costs its changes. The publisher compares each image with the published one (topics
// and runs of 64 partitions the images share are skipped whole), so what it applies and removes must be
// exactly what changed: a replica in a shared run that did not change keeps its state, one that changed in
// the middle of a large topic gets the new one, and replicas that moved away or whose topic went are removed.
metadata::topic_metadata make_topic(const std::string& name, int32_t partitions,
                                    const std::vector<int32_t>& replicas) {
  metadata::topic_metadata topic;
  topic.name = name;
  topic.id = uuid::random();
  for (int32_t i = 0; i < partitions; ++i) {
    metadata::partition_state p;
    p.partition = i;
    p.leader = replicas.front();
    p.leader_epoch = 1;
    p.partition_epoch = 1;
    p.replicas = replicas;
    p.isr = replicas;
    topic.partitions.push_back(p);
  }
  return topic;
}

TEST_F(metadata_publisher_test, only_what_changed_is_applied_and_removed) {
  _image.topics["big"] = make_topic("big", 300, {self, 2});
  _image.topics["other"] = make_topic("other", 3, {2, 3});  // not hosted here
  publish();
  ASSERT_EQ(_replicas->size(), 301u);
  const uuid big_id = _image.topics["big"].id;

  // One partition in the middle of a large topic (its copy shares every other run of partitions).
  {
    auto& p = _image.topics["big"].partitions[130];
    p.leader = 2;
    p.leader_epoch = 2;
    p.partition_epoch = 2;
  }
  publish();
  EXPECT_EQ(_replicas->get({"big", 130})->leader_epoch(), 2);
  EXPECT_FALSE(_replicas->get({"big", 130})->is_leader());
  EXPECT_EQ(_replicas->get({"big", 129})->leader_epoch(), 1);
  EXPECT_TRUE(_replicas->get({"big", 129})->is_leader());

  // A replica moved off this node, another topic's change that does not concern it.
  {
    auto& p = _image.topics["big"].partitions[5];
    p.replicas = {2, 3};
    p.isr = {2, 3};
    p.leader = 2;
    p.partition_epoch = 3;
    _image.topics["other"].partitions[0].leader_epoch = 7;
  }
  publish();
  EXPECT_EQ(_replicas->get({"big", 5}), nullptr);
  EXPECT_FALSE(_logs->get({"big", 5}));
  EXPECT_EQ(_replicas->size(), 300u);

  // Deleted and re-created under the same name in one image: the old replicas (and logs) go first.
  _image.topics["big"] = make_topic("big", 2, {self});
  const uuid new_id = _image.topics["big"].id;
  ASSERT_NE(new_id, big_id);
  publish();
  EXPECT_EQ(_replicas->size(), 3u);  // orders-0, big-0, big-1
  ASSERT_NE(_replicas->get({"big", 1}), nullptr);
  EXPECT_EQ(_replicas->get({"big", 1})->topic_id(), new_id);
  EXPECT_EQ(_replicas->get({"big", 2}), nullptr);
  EXPECT_FALSE(_logs->get({"big", 200}));

  // Deleted.
  _image.topics.erase("big");
  publish();
  EXPECT_EQ(_replicas->size(), 1u);
  EXPECT_NE(_replicas->get({"orders", 0}), nullptr);
}

TEST_F(metadata_publisher_test, a_replica_that_failed_to_apply_is_tried_again_with_the_next_image) {
  // A log of another topic id under the name blocks the replica (INCONSISTENT_TOPIC_ID).
  ASSERT_TRUE(_logs->create({"blocked", 0}, uuid::random(), storage::log_config{}).ok());
  _image.topics["blocked"] = make_topic("blocked", 1, {self});
  publish();
  EXPECT_EQ(_replicas->get({"blocked", 0}), nullptr);

  // The stale log goes; an image that changes nothing of the topic applies it.
  ASSERT_TRUE(_logs->remove({"blocked", 0}).ok());
  set(config_resource_type::topic, "orders", "retention.ms", "1234");
  ASSERT_NE(_replicas->get({"blocked", 0}), nullptr);
  EXPECT_EQ(_replicas->get({"blocked", 0})->topic_id(), _image.topics["blocked"].id);
  EXPECT_EQ(log_config().retention_ms, 1234);
}

// Issue 20: no shard is held by a large image. An image naming 1,200 replicas without logs is not
// applied on the home shard: publish() returns at once, the publisher's thread creates the logs, then every
// shard applies the latest image a slice at a time and the home shard publishes it; a client never sees a
// partition that is not hosted yet. A small image without new logs is applied before publish() returns; one
// with new logs has them created off the shards as well.
TEST(metadata_publisher_shards_test, missing_logs_are_created_off_the_shards_before_the_image_is_published) {
  const fs::path root =
      fs::temp_directory_path() / ("mala-publisher-shards-test-" + std::to_string(std::random_device{}()));
  storage::log_manager_options o;
  o.dirs = {root / "data"};
  o.clock_ms = [] { return now_ms; };
  auto opened = storage::log_manager::open(std::move(o));
  ASSERT_TRUE(opened.ok()) << opened.error().message;
  auto logs = std::move(*opened);
  net::shard_pool shards(2);
  std::vector<std::unique_ptr<replication::replica_manager>> replicas;
  for (int shard = 0; shard < 2; ++shard) {
    replication::replica_manager_options r;
    r.local_replica_id = self;
    r.clock_ms = [] { return now_ms; };
    r.shard = shard;
    replicas.push_back(std::make_unique<replication::replica_manager>(*logs, r));
  }
  const replication::replica_placement placement(2);
  metadata::metadata_cache cache;
  cache.publish(std::make_shared<const metadata::metadata_image>());
  auto publisher = std::make_unique<metadata_publisher>(
      self, std::vector<replication::replica_manager*>{replicas[0].get(), replicas[1].get()}, placement,
      &shards, cache, [](std::string_view) -> std::optional<std::string> { return std::nullopt; },
      logs.get());
  std::vector<metadata::metadata_image_ptr> published;  // on shard 0
  publisher->set_published_listener(
      [&](const metadata::metadata_image_ptr& image) { published.push_back(image); });
  shards.start();

  constexpr int32_t partitions = 1200;  // more than the shards create themselves, 600 per shard
  const uuid topic_id = uuid::random();
  // Every partition at `epoch`, partition 0 at `first_epoch` when given.
  auto image_with_epoch = [&](int32_t epoch, std::optional<int32_t> first_epoch = std::nullopt) {
    metadata::metadata_image image;
    image.brokers[self].id = self;
    metadata::topic_metadata topic;
    topic.name = "many";
    topic.id = topic_id;
    for (int32_t i = 0; i < partitions; ++i) {
      metadata::partition_state p;
      p.partition = i;
      p.leader = self;
      p.leader_epoch = i == 0 && first_epoch ? *first_epoch : epoch;
      p.partition_epoch = p.leader_epoch;
      p.replicas = {self};
      p.isr = {self};
      topic.partitions.push_back(p);
    }
    image.topics["many"] = topic;
    image.metadata_offset = epoch;
    return std::make_shared<const metadata::metadata_image>(std::move(image));
  };
  // Publishes on shard 0 (the home shard); returns whether the cache had the image when publish() returned.
  auto publish_on_home = [&](const metadata::metadata_image_ptr& image) {
    std::promise<bool> done;
    asio::post(shards.context(0), [&] {
      publisher->publish(image);
      done.set_value(cache.current() == image);
    });
    return done.get_future().get();
  };
  auto wait_published = [&](const metadata::metadata_image_ptr& image) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (cache.current() != image && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    return cache.current() == image;
  };
  // Every partition hosted by the manager of its shard, checked on that shard.
  auto hosted_on_their_shards = [&] {
    std::atomic<int> hosted{0};
    shards.run_on_each_and_wait([&](size_t shard) {
      for (int32_t i = 0; i < partitions; ++i) {
        if (placement.shard_of("many", i) != shard) continue;
        auto* p = replicas[shard]->get({"many", i});
        if (p && p->is_leader() &&
            p->leader_epoch() == cache.current()->topics.at("many").partitions[i].leader_epoch)
          ++hosted;
      }
    });
    return hosted.load();
  };

  auto first = image_with_epoch(1);
  EXPECT_FALSE(publish_on_home(first));  // 1,200 logs to create: not on the shards
  ASSERT_TRUE(wait_published(first));
  EXPECT_EQ(logs->partitions().size(), static_cast<size_t>(partitions));
  EXPECT_EQ(hosted_on_their_shards(), partitions);

  // Every log exists, every replica changes: applied on the shards a slice at a time, published when all
  // are done.
  auto second = image_with_epoch(2);
  EXPECT_FALSE(publish_on_home(second));
  ASSERT_TRUE(wait_published(second));
  EXPECT_EQ(hosted_on_their_shards(), partitions);
  // Images that arrive while one is applied are coalesced: the latest is published.
  // (fourth never is: fifth replaced it before third was done).
  auto third = image_with_epoch(3);
  auto fourth = image_with_epoch(4);
  auto fifth = image_with_epoch(5);
  {
    std::promise<void> done;
    asio::post(shards.context(0), [&] {
      publisher->publish(third);
      publisher->publish(fourth);
      publisher->publish(fifth);
      done.set_value();
    });
    done.get_future().get();
  }
  ASSERT_TRUE(wait_published(fifth));
  EXPECT_EQ(hosted_on_their_shards(), partitions);

  // One replica changes: applied at once.
  auto sixth = image_with_epoch(5, 6);
  EXPECT_TRUE(publish_on_home(sixth));
  EXPECT_EQ(hosted_on_their_shards(), partitions);

  // A small image with new logs: created off the shards too. Meanwhile this node's controller answers
  // nothing past the published image (answer_gate), so a CreateTopics is answered once they are hosted.
  auto seventh = [&] {
    auto image = std::make_shared<metadata::metadata_image>(*sixth);
    metadata::topic_metadata topic;
    topic.name = "few";
    topic.id = uuid::random();
    for (int32_t i = 0; i < 3; ++i) {
      metadata::partition_state p;
      p.partition = i;
      p.leader = self;
      p.leader_epoch = 0;
      p.replicas = {self};
      p.isr = {self};
      topic.partitions.push_back(p);
    }
    image->topics["few"] = topic;
    image->metadata_offset = 7;
    return metadata::metadata_image_ptr(std::move(image));
  }();
  {
    std::promise<std::pair<bool, int64_t>> done;
    asio::post(shards.context(0), [&] {
      publisher->publish(seventh);
      done.set_value({cache.current() == seventh, publisher->answer_gate()});
    });
    const auto [published_at_once, gate] = done.get_future().get();
    EXPECT_FALSE(published_at_once);
    EXPECT_EQ(gate, sixth->metadata_offset + 1);
  }
  ASSERT_TRUE(wait_published(seventh));
  EXPECT_NE(logs->get({"few", 2}), nullptr);
  std::promise<int64_t> gate_after;
  asio::post(shards.context(0), [&] { gate_after.set_value(publisher->answer_gate()); });
  EXPECT_EQ(gate_after.get_future().get(), INT64_MAX);

  std::promise<std::vector<metadata::metadata_image_ptr>> seen;
  asio::post(shards.context(0), [&] { seen.set_value(published); });
  EXPECT_EQ(seen.get_future().get(),
            (std::vector<metadata::metadata_image_ptr>{first, second, third, fifth, sixth, seventh}));

  publisher->stop();
  shards.stop();
  shards.join();
  publisher.reset();
  replicas.clear();
  logs.reset();
  fs::remove_all(root);
}

}  // namespace
}  // namespace mala::broker
