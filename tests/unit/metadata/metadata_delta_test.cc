// metadata_delta: replaying metadata log records onto an image with Kafka's semantics (TopicsDelta,
// ClusterDelta, ConfigurationsDelta, FeaturesDelta, ProducerIdsDelta, PartitionRegistration.merge).
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "mala/metadata/metadata_delta.h"

namespace mala::metadata {
namespace {

using ints = std::vector<int32_t>;

uuid make_uuid(uint8_t first) {
  uuid id;
  for (size_t i = 0; i < id.bytes.size(); ++i) id.bytes[i] = static_cast<uint8_t>(first + i);
  return id;
}

const uuid orders_id = make_uuid(10);

protocol::topic_record topic(const std::string& name, const uuid& id) {
  protocol::topic_record t;
  t.name = name;
  t.topic_id = id;
  return t;
}

protocol::partition_record partition(const uuid& topic_id, int32_t id, ints replicas, int32_t leader) {
  protocol::partition_record p;
  p.partition_id = id;
  p.topic_id = topic_id;
  p.replicas = replicas;
  p.isr = replicas;
  p.leader = leader;
  p.leader_epoch = 0;
  p.partition_epoch = 0;
  return p;
}

protocol::partition_change_record change(int32_t partition_id) {
  protocol::partition_change_record c;
  c.partition_id = partition_id;
  c.topic_id = orders_id;
  return c;
}

protocol::register_broker_record broker(int32_t id, int64_t epoch) {
  protocol::register_broker_record b;
  b.broker_id = id;
  b.broker_epoch = epoch;
  b.incarnation_id = make_uuid(static_cast<uint8_t>(100 + id));
  b.end_points.push_back({"PLAINTEXT", "host" + std::to_string(id), 9092, 0});
  b.end_points.push_back({"SECURE", "host" + std::to_string(id), 9093, 3});
  b.features.push_back({"metadata.version", 7, 25});
  b.rack = "rack-" + std::to_string(id);
  b.fenced = true;
  return b;
}

// An image with topic "orders" (two partitions on brokers 1-3, leader 1 and 2).
metadata_image_ptr orders_image() {
  metadata_delta delta(nullptr);
  EXPECT_TRUE(delta.apply(topic("orders", orders_id)).ok());
  EXPECT_TRUE(delta.apply(partition(orders_id, 0, {1, 2, 3}, 1)).ok());
  EXPECT_TRUE(delta.apply(partition(orders_id, 1, {2, 3, 1}, 2)).ok());
  return delta.build();
}

const partition_state& orders_partition(const metadata_image_ptr& image, int32_t p) {
  return image->find_topic("orders")->partitions.at(static_cast<size_t>(p));
}

TEST(metadata_delta, creates_topics_and_partitions) {
  auto image = orders_image();
  const topic_metadata* t = image->find_topic("orders");
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(t->id, orders_id);
  EXPECT_EQ(image->find_topic(orders_id), t);
  EXPECT_FALSE(t->internal);
  ASSERT_EQ(t->partitions.size(), 2u);
  EXPECT_EQ(t->partitions[1].partition, 1);
  EXPECT_EQ(t->partitions[1].leader, 2);
  EXPECT_EQ(t->partitions[1].replicas, (ints{2, 3, 1}));
  EXPECT_EQ(t->partitions[1].isr, (ints{2, 3, 1}));
  EXPECT_EQ(t->partitions[1].leader_recovery_state, leader_recovered);
  // No directories in the record: Kafka assumes MIGRATING for each replica.
  EXPECT_EQ(t->partitions[1].directories, std::vector<uuid>(3, directory_migrating));

  metadata_delta delta(image);
  ASSERT_TRUE(delta.apply(topic("__consumer_offsets", make_uuid(20))).ok());
  EXPECT_TRUE(delta.build()->find_topic("__consumer_offsets")->internal);
}

TEST(metadata_delta, refuses_inconsistent_topic_and_partition_records) {
  metadata_delta delta(orders_image());
  // A partition of an unknown topic, a gap in partition numbers, a bad leader recovery state.
  EXPECT_EQ(delta.apply(partition(make_uuid(99), 0, {1}, 1)).code, error_code::unknown_topic_id);
  EXPECT_EQ(delta.apply(partition(orders_id, 5, {1}, 1)).code, error_code::invalid_partitions);
  auto bad = partition(orders_id, 2, {1}, 1);
  bad.leader_recovery_state = 7;
  EXPECT_FALSE(delta.apply(bad).ok());
  bad = partition(orders_id, 2, {1, 2}, 1);
  bad.directories = {make_uuid(1)};
  EXPECT_EQ(delta.apply(bad).code, error_code::invalid_replica_assignment);
  // The same name with another id, or the same id under another name.
  EXPECT_EQ(delta.apply(topic("orders", make_uuid(50))).code, error_code::inconsistent_topic_id);
  EXPECT_EQ(delta.apply(topic("other", orders_id)).code, error_code::inconsistent_topic_id);
  // Changes to partitions that do not exist.
  EXPECT_EQ(delta.apply(change(2)).code, error_code::unknown_topic_or_partition);
  auto unknown = change(0);
  unknown.topic_id = make_uuid(99);
  EXPECT_EQ(delta.apply(unknown).code, error_code::unknown_topic_id);
  EXPECT_FALSE(delta.has_changes());
}

TEST(metadata_delta, partition_change_with_no_fields_only_bumps_partition_epoch) {
  auto base = orders_image();
  metadata_delta delta(base);
  ASSERT_TRUE(delta.apply(change(0)).ok());
  auto image = delta.build();
  const auto& before = orders_partition(base, 0);
  const auto& after = orders_partition(image, 0);
  EXPECT_EQ(after.leader, before.leader);
  EXPECT_EQ(after.leader_epoch, before.leader_epoch);
  EXPECT_EQ(after.isr, before.isr);
  EXPECT_EQ(after.replicas, before.replicas);
  EXPECT_EQ(after.partition_epoch, before.partition_epoch + 1);
}

TEST(metadata_delta, isr_shrink_and_expand_keep_the_leader_epoch) {
  metadata_delta delta(orders_image());
  auto shrink = change(0);
  shrink.isr = ints{1, 2};
  ASSERT_TRUE(delta.apply(shrink).ok());
  auto image = delta.build();
  EXPECT_EQ(orders_partition(image, 0).isr, (ints{1, 2}));
  EXPECT_EQ(orders_partition(image, 0).leader, 1);
  EXPECT_EQ(orders_partition(image, 0).leader_epoch, 0);
  EXPECT_EQ(orders_partition(image, 0).partition_epoch, 1);

  auto expand = change(0);
  expand.isr = ints{1, 2, 3};
  ASSERT_TRUE(delta.apply(expand).ok());
  image = delta.build();
  EXPECT_EQ(orders_partition(image, 0).isr, (ints{1, 2, 3}));
  EXPECT_EQ(orders_partition(image, 0).leader_epoch, 0);
  EXPECT_EQ(orders_partition(image, 0).partition_epoch, 2);
  // The other partition is untouched.
  EXPECT_EQ(orders_partition(image, 1).partition_epoch, 0);
}

TEST(metadata_delta, leader_changes_bump_the_leader_epoch) {
  metadata_delta delta(orders_image());
  auto elect = change(0);
  elect.leader = 2;
  elect.isr = ints{2, 3};
  ASSERT_TRUE(delta.apply(elect).ok());
  auto image = delta.build();
  EXPECT_EQ(orders_partition(image, 0).leader, 2);
  EXPECT_EQ(orders_partition(image, 0).leader_epoch, 1);
  EXPECT_EQ(orders_partition(image, 0).partition_epoch, 1);
  EXPECT_EQ(orders_partition(image, 0).isr, (ints{2, 3}));

  // The same leader written again still bumps the epoch: PartitionChangeBuilder writes Leader exactly when it
  // wants followers fenced (e.g. an ISR shrink on an older metadata.version).
  auto same = change(0);
  same.leader = 2;
  ASSERT_TRUE(delta.apply(same).ok());
  image = delta.build();
  EXPECT_EQ(orders_partition(image, 0).leader, 2);
  EXPECT_EQ(orders_partition(image, 0).leader_epoch, 2);

  // No leader (-1) is a change too; -2 (NO_LEADER_CHANGE, the default) is not.
  auto offline = change(0);
  offline.leader = no_leader;
  offline.isr = ints{};
  offline.leader_recovery_state = leader_recovering;
  ASSERT_TRUE(delta.apply(offline).ok());
  image = delta.build();
  EXPECT_EQ(orders_partition(image, 0).leader, -1);
  EXPECT_EQ(orders_partition(image, 0).leader_epoch, 3);
  EXPECT_TRUE(orders_partition(image, 0).isr.empty());
  EXPECT_EQ(orders_partition(image, 0).leader_recovery_state, leader_recovering);
  EXPECT_EQ(orders_partition(image, 0).partition_epoch, 3);

  auto elr = change(0);
  elr.eligible_leader_replicas = ints{3};
  elr.last_known_elr = ints{2};
  ASSERT_TRUE(delta.apply(elr).ok());
  image = delta.build();
  EXPECT_EQ(orders_partition(image, 0).leader_epoch, 3);
  EXPECT_EQ(orders_partition(image, 0).leader_recovery_state, leader_recovering);  // -1: unchanged
  EXPECT_EQ(orders_partition(image, 0).eligible_leader_replicas, (ints{3}));
  EXPECT_EQ(orders_partition(image, 0).last_known_elr, (ints{2}));
}

TEST(metadata_delta, reassignment_keeps_directories_of_staying_replicas) {
  metadata_delta delta(orders_image());
  auto assign = change(0);
  assign.directories = std::vector<uuid>{make_uuid(1), make_uuid(2), make_uuid(3)};
  ASSERT_TRUE(delta.apply(assign).ok());
  auto move = change(0);
  move.replicas = ints{3, 1, 4};
  move.adding_replicas = ints{4};
  move.removing_replicas = ints{2};
  ASSERT_TRUE(delta.apply(move).ok());
  auto image = delta.build();
  const auto& p = orders_partition(image, 0);
  EXPECT_EQ(p.replicas, (ints{3, 1, 4}));
  EXPECT_EQ(p.directories, (std::vector<uuid>{make_uuid(3), make_uuid(1), directory_unassigned}));
  EXPECT_EQ(p.adding_replicas, (ints{4}));
  EXPECT_EQ(p.removing_replicas, (ints{2}));
  EXPECT_EQ(p.partition_epoch, 2);
}

TEST(metadata_delta, remove_topic_drops_it_and_its_configs) {
  metadata_delta delta(orders_image());
  protocol::config_record c;
  c.resource_type = static_cast<int8_t>(config_resource_type::topic);
  c.resource_name = "orders";
  c.name = "cleanup.policy";
  c.value = "compact";
  ASSERT_TRUE(delta.apply(c).ok());
  ASSERT_NE(delta.build()->find_configs(config_resource_type::topic, "orders"), nullptr);

  protocol::remove_topic_record rm;
  rm.topic_id = orders_id;
  ASSERT_TRUE(delta.apply(rm).ok());
  auto image = delta.build();
  EXPECT_EQ(image->find_topic("orders"), nullptr);
  EXPECT_EQ(image->find_topic(orders_id), nullptr);
  EXPECT_EQ(image->find_configs(config_resource_type::topic, "orders"), nullptr);
  // Removing it again is an error; its partitions are gone too.
  EXPECT_EQ(delta.apply(rm).code, error_code::unknown_topic_id);
  EXPECT_EQ(delta.apply(change(0)).code, error_code::unknown_topic_id);
  // The name can be reused with a new id.
  ASSERT_TRUE(delta.apply(topic("orders", make_uuid(30))).ok());
  EXPECT_EQ(delta.build()->find_topic("orders")->id, make_uuid(30));
  EXPECT_TRUE(delta.build()->find_topic("orders")->partitions.empty());
}

TEST(metadata_delta, configs_set_and_delete) {
  metadata_delta delta(nullptr);
  auto set = [&](config_resource_type type, const std::string& resource, const std::string& name,
                 std::optional<std::string> value) {
    protocol::config_record c;
    c.resource_type = static_cast<int8_t>(type);
    c.resource_name = resource;
    c.name = name;
    c.value = std::move(value);
    return delta.apply(c);
  };
  ASSERT_TRUE(set(config_resource_type::topic, "orders", "retention.ms", "1000").ok());
  ASSERT_TRUE(set(config_resource_type::topic, "orders", "segment.bytes", "2048").ok());
  ASSERT_TRUE(set(config_resource_type::topic, "orders", "retention.ms", "5000").ok());
  ASSERT_TRUE(set(config_resource_type::broker, "", "log.retention.ms", "60000").ok());
  ASSERT_TRUE(set(config_resource_type::broker, "1", "log.cleaner.threads", "2").ok());
  auto image = delta.build();
  const config_map* orders = image->find_configs(config_resource_type::topic, "orders");
  ASSERT_NE(orders, nullptr);
  EXPECT_EQ(*orders, (config_map{{"retention.ms", "5000"}, {"segment.bytes", "2048"}}));
  EXPECT_EQ(image->find_configs(config_resource_type::broker, "")->at("log.retention.ms"), "60000");
  EXPECT_EQ(image->find_configs(config_resource_type::broker, "1")->at("log.cleaner.threads"), "2");
  EXPECT_EQ(image->find_configs(config_resource_type::broker, "orders"), nullptr);

  // A null value deletes; the last key gone removes the resource.
  ASSERT_TRUE(set(config_resource_type::topic, "orders", "retention.ms", std::nullopt).ok());
  ASSERT_TRUE(set(config_resource_type::topic, "orders", "not.set", std::nullopt).ok());
  image = delta.build();
  EXPECT_EQ(*image->find_configs(config_resource_type::topic, "orders"),
            (config_map{{"segment.bytes", "2048"}}));
  ASSERT_TRUE(set(config_resource_type::topic, "orders", "segment.bytes", std::nullopt).ok());
  EXPECT_EQ(delta.build()->find_configs(config_resource_type::topic, "orders"), nullptr);
}

TEST(metadata_delta, broker_register_fence_unfence_unregister) {
  metadata_delta delta(nullptr);
  ASSERT_TRUE(delta.apply(broker(1, 100)).ok());
  auto image = delta.build();
  const broker_registration& b = image->brokers.at(1);
  EXPECT_EQ(b.id, 1);
  EXPECT_EQ(b.epoch, 100);
  EXPECT_EQ(b.incarnation_id, make_uuid(101));
  EXPECT_TRUE(b.fenced);
  EXPECT_FALSE(image->broker_alive(1));
  EXPECT_EQ(b.rack, "rack-1");
  ASSERT_EQ(b.endpoints.size(), 2u);
  EXPECT_EQ(b.endpoint_for("PLAINTEXT")->host, "host1");
  EXPECT_EQ(b.endpoint_for("PLAINTEXT")->port, 9092);
  EXPECT_EQ(b.endpoint_for("PLAINTEXT")->security_protocol, "PLAINTEXT");
  EXPECT_EQ(b.endpoint_for("SECURE")->security_protocol, "SASL_SSL");
  EXPECT_EQ(b.supported_features.at("metadata.version"), (supported_feature{7, 25}));

  // Fencing changes must name the current registration's epoch.
  EXPECT_EQ(delta.apply(protocol::unfence_broker_record{1, 99}).code, error_code::stale_broker_epoch);
  EXPECT_EQ(delta.apply(protocol::unfence_broker_record{2, 100}).code, error_code::broker_not_available);
  ASSERT_TRUE(delta.apply(protocol::unfence_broker_record{1, 100}).ok());
  EXPECT_TRUE(delta.build()->broker_alive(1));
  ASSERT_TRUE(delta.apply(protocol::fence_broker_record{1, 100}).ok());
  EXPECT_FALSE(delta.build()->broker_alive(1));

  protocol::broker_registration_change_record brc;
  brc.broker_id = 1;
  brc.broker_epoch = 100;
  brc.fenced = fencing_change_unfence;
  ASSERT_TRUE(delta.apply(brc).ok());
  EXPECT_TRUE(delta.build()->broker_alive(1));
  brc.fenced = fencing_change_none;
  brc.in_controlled_shutdown = controlled_shutdown_change_in_controlled_shutdown;
  brc.log_dirs = {make_uuid(7)};
  ASSERT_TRUE(delta.apply(brc).ok());
  image = delta.build();
  EXPECT_TRUE(image->broker_alive(1));
  EXPECT_TRUE(image->brokers.at(1).in_controlled_shutdown);
  EXPECT_EQ(image->brokers.at(1).log_dirs, std::vector<uuid>{make_uuid(7)});
  brc.fenced = 5;
  EXPECT_FALSE(delta.apply(brc).ok());

  // A new registration (a restart) replaces the old one, and resets its state.
  ASSERT_TRUE(delta.apply(broker(1, 200)).ok());
  image = delta.build();
  EXPECT_EQ(image->brokers.at(1).epoch, 200);
  EXPECT_TRUE(image->brokers.at(1).fenced);
  EXPECT_FALSE(image->brokers.at(1).in_controlled_shutdown);
  EXPECT_EQ(delta.apply(protocol::unfence_broker_record{1, 100}).code, error_code::stale_broker_epoch);

  ASSERT_TRUE(delta.apply(protocol::unregister_broker_record{1, 200}).ok());
  EXPECT_TRUE(delta.build()->brokers.empty());
}

// The records Kafka 4.4 writes that came after the first ones Mala applied: controller registrations
// (KIP-919, KIP-1312), KIP-1066 cordoned log dirs, delegation tokens, ClearElrRecord (KIP-966), and the
// KIP-868 transaction markers, which change nothing but the offset.
TEST(metadata_delta, controllers_cordoned_dirs_tokens_and_markers) {
  metadata_delta delta(nullptr);
  protocol::register_controller_record c;
  c.controller_id = 3000;
  c.incarnation_id = make_uuid(30);
  c.end_points.push_back({"CONTROLLER", "ctl", 9093, 0});
  c.features.push_back({"kraft.version", 0, 1});
  ASSERT_TRUE(delta.apply(c).ok());
  auto image = delta.build();
  ASSERT_EQ(image->controllers.size(), 1u);
  const controller_registration& reg = image->controllers.at(3000);
  EXPECT_EQ(reg.incarnation_id, make_uuid(30));
  ASSERT_EQ(reg.endpoints.size(), 1u);
  EXPECT_EQ(reg.endpoints[0], (broker_endpoint{"CONTROLLER", "ctl", 9093, "PLAINTEXT"}));
  EXPECT_EQ(reg.supported_features.at("kraft.version"), (supported_feature{0, 1}));
  ASSERT_TRUE(delta.apply(protocol::unregister_controller_record{3000}).ok());
  EXPECT_TRUE(delta.build()->controllers.empty());

  // RegisterBrokerRecord v4 and BrokerRegistrationChangeRecord v3 carry the cordoned dirs; a change without
  // the field keeps them.
  auto b = broker(1, 100);
  b.cordoned_log_dirs = std::vector<uuid>{make_uuid(50)};
  ASSERT_TRUE(delta.apply(b).ok());
  EXPECT_EQ(delta.build()->brokers.at(1).cordoned_log_dirs, std::vector<uuid>{make_uuid(50)});
  protocol::broker_registration_change_record brc;
  brc.broker_id = 1;
  brc.broker_epoch = 100;
  ASSERT_TRUE(delta.apply(brc).ok());
  EXPECT_EQ(delta.build()->brokers.at(1).cordoned_log_dirs, std::vector<uuid>{make_uuid(50)});
  brc.cordoned_log_dirs = std::vector<uuid>{};
  ASSERT_TRUE(delta.apply(brc).ok());
  EXPECT_EQ(delta.build()->brokers.at(1).cordoned_log_dirs, std::vector<uuid>{});

  protocol::delegation_token_record token;
  token.owner = "User:alice";
  token.requester = "User:alice";
  token.renewers = {"User:bob"};
  token.max_timestamp = 5;
  token.token_id = "tok-1";
  ASSERT_TRUE(delta.apply(token).ok());
  EXPECT_EQ(delta.build()->delegation_tokens.at("tok-1").renewers, std::vector<std::string>{"User:bob"});
  protocol::remove_delegation_token_record remove_token;
  remove_token.token_id = "tok-1";
  ASSERT_TRUE(delta.apply(remove_token).ok());
  EXPECT_TRUE(delta.build()->delegation_tokens.empty());

  const auto before = delta.build();
  protocol::begin_transaction_record begin;
  begin.name = "Bootstrap records";
  ASSERT_TRUE(delta.apply(begin, 7, 1).ok());
  ASSERT_TRUE(delta.apply(protocol::end_transaction_record{}, 8, 1).ok());
  protocol::abort_transaction_record abort;
  abort.reason = "Controller failover";
  ASSERT_TRUE(delta.apply(abort, 9, 1).ok());
  auto after = delta.build();
  EXPECT_EQ(after->metadata_offset, 9);
  auto same = std::make_shared<metadata_image>(*after);
  same->metadata_offset = before->metadata_offset;
  same->metadata_epoch = before->metadata_epoch;
  EXPECT_EQ(*same, *before);
}

TEST(metadata_delta, clear_elr_empties_the_elr_of_one_topic_or_all) {
  metadata_delta delta(orders_image());
  const uuid audit_id = make_uuid(40);
  ASSERT_TRUE(delta.apply(topic("audit", audit_id)).ok());
  ASSERT_TRUE(delta.apply(partition(audit_id, 0, {1, 2, 3}, 1)).ok());
  for (const uuid& id : {orders_id, audit_id}) {
    auto c = change(0);
    c.topic_id = id;
    c.isr = ints{1};
    c.eligible_leader_replicas = ints{2};
    c.last_known_elr = ints{3};
    ASSERT_TRUE(delta.apply(c).ok());
  }
  auto image = delta.build();
  const int32_t orders_epoch = orders_partition(image, 0).partition_epoch;

  protocol::clear_elr_record clear;
  clear.topic_name = "orders";
  ASSERT_TRUE(delta.apply(clear).ok());
  image = delta.build();
  EXPECT_TRUE(orders_partition(image, 0).eligible_leader_replicas.empty());
  EXPECT_TRUE(orders_partition(image, 0).last_known_elr.empty());
  EXPECT_EQ(orders_partition(image, 0).partition_epoch, orders_epoch + 1);
  EXPECT_EQ(orders_partition(image, 0).isr, ints{1});
  EXPECT_EQ(image->find_topic("audit")->partitions.at(0).eligible_leader_replicas, ints{2});

  clear.topic_name = "missing";
  EXPECT_EQ(delta.apply(clear).code, error_code::unknown_topic_or_partition);
  clear.topic_name = "";
  ASSERT_TRUE(delta.apply(clear).ok());
  image = delta.build();
  EXPECT_TRUE(image->find_topic("audit")->partitions.at(0).eligible_leader_replicas.empty());
  EXPECT_TRUE(image->find_topic("audit")->partitions.at(0).last_known_elr.empty());
}

TEST(metadata_delta, features_producer_ids_and_offsets) {
  metadata_delta delta(nullptr);
  protocol::feature_level_record f;
  f.name = "metadata.version";
  f.feature_level = 21;
  ASSERT_TRUE(delta.apply(f, 5, 1).ok());
  f.name = "transaction.version";
  f.feature_level = 2;
  ASSERT_TRUE(delta.apply(f, 6, 1).ok());
  protocol::producer_ids_record pid;
  pid.broker_id = 1;
  pid.broker_epoch = 100;
  pid.next_producer_id = 1000;
  ASSERT_TRUE(delta.apply(pid, 7, 1).ok());
  auto image = delta.build();
  EXPECT_EQ(image->feature_level("metadata.version"), 21);
  EXPECT_EQ(image->feature_level("transaction.version"), 2);
  EXPECT_EQ(image->feature_level("group.version"), 0);
  EXPECT_EQ(image->next_producer_id, 1000);
  EXPECT_EQ(image->metadata_offset, 7);
  EXPECT_EQ(image->metadata_epoch, 1);

  // Level 0 disables a feature.
  f.feature_level = 0;
  ASSERT_TRUE(delta.apply(f, 8, 2).ok());
  pid.next_producer_id = 2000;
  ASSERT_TRUE(delta.apply(pid, 9, 2).ok());
  ASSERT_TRUE(delta.apply(protocol::no_op_record{}, 10, 2).ok());
  image = delta.build();
  EXPECT_EQ(image->finalized_features.count("transaction.version"), 0u);
  EXPECT_EQ(image->next_producer_id, 2000);
  EXPECT_EQ(image->metadata_offset, 10);
  EXPECT_EQ(image->metadata_epoch, 2);

  // A refused record does not move the offset.
  EXPECT_FALSE(delta.apply(protocol::fence_broker_record{9, 1}, 11, 2).ok());
  EXPECT_EQ(delta.build()->metadata_offset, 10);
}

TEST(metadata_delta, base_image_is_unchanged) {
  auto base = orders_image();
  const metadata_image copy = *base;
  metadata_delta delta(base);
  EXPECT_EQ(delta.build(), base);  // nothing applied: the same image
  auto elect = change(1);
  elect.leader = 3;
  ASSERT_TRUE(delta.apply(elect).ok());
  ASSERT_TRUE(delta.apply(broker(1, 1)).ok());
  protocol::remove_topic_record rm;
  rm.topic_id = orders_id;
  auto mid = delta.build();
  ASSERT_TRUE(delta.apply(rm).ok());
  auto image = delta.build();
  EXPECT_NE(image, base);
  EXPECT_EQ(image->find_topic("orders"), nullptr);
  // Neither the base nor an image built earlier sees later changes.
  ASSERT_NE(base->find_topic("orders"), nullptr);
  EXPECT_EQ(orders_partition(base, 1).leader, copy.topics.at("orders").partitions[1].leader);
  EXPECT_EQ(orders_partition(base, 1).leader_epoch, 0);
  EXPECT_TRUE(base->brokers.empty());
  EXPECT_EQ(base->topics.size(), copy.topics.size());
  ASSERT_NE(mid->find_topic("orders"), nullptr);
  EXPECT_EQ(orders_partition(mid, 1).leader, 3);
  EXPECT_EQ(orders_partition(mid, 1).leader_epoch, 1);
}

TEST(metadata_delta, replays_decoded_records) {
  // The log path end to end: encode, decode, apply.
  std::vector<std::vector<uint8_t>> log = {
      encode_metadata_record(broker(1, 10), 3),
      encode_metadata_record(topic("orders", orders_id), 0),
      encode_metadata_record(partition(orders_id, 0, {1}, 1), 2),
      encode_metadata_record(protocol::unfence_broker_record{1, 10}, 0),
  };
  metadata_delta delta(nullptr);
  int64_t offset = 0;
  for (const auto& bytes : log) {
    auto decoded = decode_metadata_record(bytes);
    ASSERT_TRUE(decoded.ok()) << decoded.error().message;
    ASSERT_TRUE(delta.apply(decoded->record, offset++, 1).ok());
  }
  auto image = delta.build();
  EXPECT_TRUE(image->broker_alive(1));
  EXPECT_EQ(orders_partition(image, 0).leader, 1);
  EXPECT_EQ(image->metadata_offset, 3);
}

}  // namespace
}  // namespace mala::metadata

namespace mala::metadata {
namespace {

// Images share every topic and config a record batch did not change (persistent maps), and find a topic by id
// through the index the delta keeps with the topics.
TEST(metadata_delta, images_share_what_they_did_not_change_and_find_topics_by_id) {
  metadata_delta delta(nullptr);
  std::vector<uuid> ids;
  for (uint8_t t = 0; t < 200; ++t) {
    ids.push_back(make_uuid(static_cast<uint8_t>(t + 1)));
    ids.back().bytes[15] = 0xEE;  // make_uuid(n) overlaps make_uuid(n + 1) otherwise only by a shift
    ASSERT_TRUE(delta.apply(topic("t" + std::to_string(t), ids.back())).ok());
    ASSERT_TRUE(delta.apply(partition(ids.back(), 0, {1}, 1)).ok());
  }
  protocol::config_record config;
  config.resource_type = static_cast<int8_t>(config_resource_type::topic);
  config.resource_name = "t7";
  config.name = "retention.ms";
  config.value = "1000";
  ASSERT_TRUE(delta.apply(config).ok());
  const metadata_image_ptr first = delta.build();
  for (uint8_t t = 0; t < 200; ++t) {
    const topic_metadata* found = first->find_topic(ids[t]);
    ASSERT_NE(found, nullptr);
    EXPECT_EQ(found->name, "t" + std::to_string(t));
  }
  EXPECT_EQ(first->find_topic(make_uuid(250)), nullptr);

  // One partition of one topic changes: the next image shares the rest (the same objects), and the first
  // image is untouched.
  metadata_delta next(first);
  protocol::partition_change_record c;
  c.topic_id = ids[42];
  c.partition_id = 0;
  c.leader = 2;
  ASSERT_TRUE(next.apply(c).ok());
  const metadata_image_ptr second = next.build();
  EXPECT_EQ(second->find_topic(ids[42])->partitions[0].leader, 2);
  EXPECT_EQ(first->find_topic(ids[42])->partitions[0].leader, 1);
  EXPECT_EQ(second->find_topic(ids[43]), first->find_topic(ids[43]));
  EXPECT_TRUE(second->configs.shares_with(first->configs));
  EXPECT_TRUE(second->topic_ids.names.shares_with(first->topic_ids.names));

  // A removed topic is no longer found by id; a re-created one is found under its new id only.
  metadata_delta third(second);
  protocol::remove_topic_record removal;
  removal.topic_id = ids[7];
  ASSERT_TRUE(third.apply(removal).ok());
  const uuid recreated = make_uuid(251);
  ASSERT_TRUE(third.apply(topic("t7", recreated)).ok());
  const metadata_image_ptr after = third.build();
  EXPECT_EQ(after->find_topic(ids[7]), nullptr);
  ASSERT_NE(after->find_topic(recreated), nullptr);
  EXPECT_EQ(after->find_topic(recreated)->name, "t7");
  EXPECT_EQ(after->find_configs(config_resource_type::topic, "t7"), nullptr);  // deleted with the topic
  EXPECT_NE(second->find_configs(config_resource_type::topic, "t7"), nullptr);

  // An image built by hand, without the index, is searched.
  metadata_image by_hand;
  by_hand.topics["manual"].id = make_uuid(77);
  by_hand.topics["manual"].name = "manual";
  ASSERT_NE(by_hand.find_topic(make_uuid(77)), nullptr);
  EXPECT_EQ(by_hand.find_topic(make_uuid(77))->name, "manual");
}

}  // namespace
}  // namespace mala::metadata
