// The committed offsets on their own (offset_manager over a coordinator_runtime with a fake record writer):
// commits visible once committed, OffsetDelete's refusal of subscribed topics, and the one deletion path
// (offset_deletion + write_deletion) that OffsetDelete, DeleteGroups and the retention check share.
#include <gtest/gtest.h>

#include <optional>
#include <set>
#include <string>
#include <vector>

#include "coordinator_runtime.h"
#include "coordinator_test_util.h"
#include "offset_manager.h"

namespace mala::coordinator {
namespace {

namespace proto = mala::protocol;

constexpr int64_t start_ms = 1'700'000'000'000;

using testing::fake_writer;

class offset_manager_test : public ::testing::Test {
 protected:
  void SetUp() override {
    config.offsets_topic_num_partitions = 1;
    config.offsets_retention_ms = 1000;
    runtime.begin_loading(0);
    runtime.mark_active(0);
  }

  static proto::offset_commit_request commit_request(const std::string& group, const std::string& topic,
                                                     std::vector<int32_t> partitions, int64_t offset,
                                                     int64_t retention_ms = -1) {
    proto::offset_commit_request r;
    r.group_id = group;
    r.retention_time_ms = retention_ms;
    auto& t = r.topics.emplace_back();
    t.name = topic;
    for (int32_t p : partitions) {
      auto& rp = t.partitions.emplace_back();
      rp.partition_index = p;
      rp.committed_offset = offset;
    }
    return r;
  }

  // Commits `offset` for each partition of `topic` and completes the write.
  proto::offset_commit_response commit(const std::string& group, const std::string& topic,
                                       std::vector<int32_t> partitions, int64_t offset,
                                       int64_t retention_ms = -1) {
    std::optional<proto::offset_commit_response> out;
    offsets.commit(
        commit_request(group, topic, std::move(partitions), offset, retention_ms), [] {},
        [&out](proto::offset_commit_response resp) { out = std::move(resp); });
    writer.complete_all();
    EXPECT_TRUE(out);
    return out.value_or(proto::offset_commit_response{});
  }

  proto::offset_delete_request delete_request(const std::string& group, const std::string& topic,
                                              std::vector<int32_t> partitions) {
    proto::offset_delete_request r;
    r.group_id = group;
    auto& t = r.topics.emplace_back();
    t.name = topic;
    for (int32_t p : partitions) t.partitions.push_back({p});
    return r;
  }

  size_t tombstones_written() const {
    size_t n = 0;
    for (const auto& [p, r] : writer.committed) n += r.value ? 0 : 1;
    return n;
  }

  group_coordinator_config config;
  fake_writer writer;
  int64_t now = start_ms;
  coordinator_runtime runtime{config, writer, [this] { return now; }};
  offset_manager offsets{runtime};
};

TEST_F(offset_manager_test, a_commit_is_visible_once_its_write_completes) {
  bool applied_hook_ran = false;
  std::optional<proto::offset_commit_response> answer;
  offsets.commit(
      commit_request("g", "events", {0}, 7), [&] { applied_hook_ran = true; },
      [&](auto resp) { answer = std::move(resp); });
  EXPECT_EQ(offsets.find("g", "events", 0), nullptr);
  writer.complete_all();
  ASSERT_TRUE(answer);
  EXPECT_TRUE(applied_hook_ran);
  ASSERT_NE(offsets.find("g", "events", 0), nullptr);
  EXPECT_EQ(offsets.find("g", "events", 0)->offset, 7);
  EXPECT_EQ(offsets.find("g", "events", 0)->commit_timestamp_ms, start_ms);
}

TEST_F(offset_manager_test, a_failed_commit_changes_nothing_and_answers_the_client_error) {
  std::optional<proto::offset_commit_response> answer;
  offsets.commit(
      commit_request("g", "events", {0}, 7), [] {}, [&](auto resp) { answer = std::move(resp); });
  writer.complete_all(error_code::not_enough_replicas);
  ASSERT_TRUE(answer);
  EXPECT_EQ(answer->topics[0].partitions[0].error_code, to_wire(error_code::coordinator_not_available));
  EXPECT_FALSE(offsets.has_offsets("g"));
}

TEST_F(offset_manager_test, offset_delete_keeps_subscribed_topics_and_deletes_the_others) {
  commit("g", "kept", {0}, 5);
  commit("g", "gone", {0, 1}, 5);
  std::optional<proto::offset_delete_response> answer;
  const auto subscribed = [](const std::string& topic) { return topic == "kept"; };
  offsets.delete_offsets(delete_request("g", "kept", {0}), subscribed,
                         [&](auto r) { answer = std::move(r); });
  ASSERT_TRUE(answer);  // nothing to delete: answered without a write
  EXPECT_TRUE(writer.pending.empty());
  EXPECT_EQ(answer->topics[0].partitions[0].error_code, to_wire(error_code::group_subscribed_to_topic));

  answer.reset();
  // Partition 7 has no offset: answered NONE, no tombstone.
  offsets.delete_offsets(delete_request("g", "gone", {0, 7}), subscribed,
                         [&](auto r) { answer = std::move(r); });
  EXPECT_FALSE(answer);
  EXPECT_NE(offsets.find("g", "gone", 0), nullptr);  // gone only once the tombstone is committed
  writer.complete_all();
  ASSERT_TRUE(answer);
  EXPECT_EQ(answer->topics[0].partitions[0].error_code, to_wire(error_code::none));
  EXPECT_EQ(answer->topics[0].partitions[1].error_code, to_wire(error_code::none));
  EXPECT_EQ(tombstones_written(), 1u);
  EXPECT_EQ(offsets.find("g", "gone", 0), nullptr);
  EXPECT_NE(offsets.find("g", "gone", 1), nullptr);
  EXPECT_NE(offsets.find("g", "kept", 0), nullptr);
}

TEST_F(offset_manager_test, a_failed_offset_delete_keeps_the_offsets) {
  commit("g", "events", {0}, 5);
  std::optional<proto::offset_delete_response> answer;
  offsets.delete_offsets(
      delete_request("g", "events", {0}), [](const std::string&) { return false; },
      [&](auto r) { answer = std::move(r); });
  writer.complete_all(error_code::not_leader_or_follower);
  ASSERT_TRUE(answer);
  EXPECT_EQ(answer->error_code, to_wire(error_code::not_coordinator));
  EXPECT_NE(offsets.find("g", "events", 0), nullptr);
}

TEST_F(offset_manager_test, select_all_deletes_every_offset_of_the_group_with_the_callers_records) {
  commit("g", "a", {0, 1}, 5);
  commit("g", "b", {0}, 5);
  commit("other", "a", {0}, 5);
  offset_deletion deletion = offsets.select_all("g");
  EXPECT_EQ(deletion.offsets.size(), 3u);
  deletion.records.push_back(group_metadata_tombstone("g"));
  std::optional<error_code> result;
  offsets.write_deletion(0, std::move(deletion), [&](error_code e) { result = e; });
  ASSERT_EQ(writer.pending.size(), 1u);
  EXPECT_EQ(writer.pending.front().records.size(), 4u);
  EXPECT_TRUE(offsets.has_offsets("g"));
  writer.complete_all();
  EXPECT_EQ(result, error_code::none);
  EXPECT_FALSE(offsets.has_offsets("g"));
  EXPECT_NE(offsets.find("other", "a", 0), nullptr);
}

TEST_F(offset_manager_test, a_deletion_of_a_partition_that_moved_away_forgets_nothing) {
  commit("g", "a", {0}, 5);
  std::optional<error_code> result;
  offsets.write_deletion(0, offsets.select_all("g"), [&](error_code e) { result = e; });
  runtime.forget(0);
  runtime.begin_loading(0);
  writer.complete_all();
  EXPECT_EQ(result, error_code::not_leader_or_follower);
  EXPECT_TRUE(offsets.has_offsets("g"));
}

TEST_F(offset_manager_test, select_expired_follows_the_retention_and_skips_subscribed_topics) {
  commit("g", "old", {0, 1}, 5);
  commit("g", "subscribed", {0}, 5);
  now += 500;
  commit("g", "own_expiry", {0}, 5, /*retention_ms=*/100'000);  // OffsetCommit v2-v4 retention time
  commit("g", "recent", {0}, 5);
  now += 600;  // 1100 ms after the first commits, 600 after the others
  const auto subscribed = [](const std::string& topic) { return topic == "subscribed"; };
  const auto from_commit = [](const committed_offset& c) { return c.commit_timestamp_ms; };
  offset_deletion expired = offsets.select_expired("g", subscribed, from_commit, now);
  std::set<std::string> topics;
  for (const auto& k : expired.offsets) topics.insert(k.topic + "-" + std::to_string(k.partition));
  EXPECT_EQ(topics, (std::set<std::string>{"old-0", "old-1"}));
  EXPECT_EQ(expired.records.size(), 2u);
  EXPECT_LT(expired.offsets.size(), offsets.count("g"));

  // A base further back (a group empty since then) expires the recent commit too, not the own expiry.
  offset_deletion from_base = offsets.select_expired(
      "g", subscribed, [](const committed_offset&) { return start_ms - 10'000; }, now);
  EXPECT_EQ(from_base.offsets.size(), 3u);
  now += 100'000;
  EXPECT_EQ(offsets.select_expired("g", subscribed, from_commit, now).offsets.size(), 4u);
}

TEST_F(offset_manager_test, deletions_of_several_groups_go_in_one_batch) {
  commit("g1", "a", {0}, 5);
  commit("g2", "a", {0}, 5);
  offset_deletion batch = offsets.select_all("g1");
  batch.records.push_back(group_metadata_tombstone("g1"));
  offset_deletion second = offsets.select_all("g2");
  second.records.push_back(group_metadata_tombstone("g2"));
  batch.add(std::move(second));
  ASSERT_EQ(batch.records.size(), 4u);
  EXPECT_EQ(batch.records[1].key, group_metadata_tombstone("g1").key);
  EXPECT_EQ(batch.records[3].key, group_metadata_tombstone("g2").key);
  offsets.write_deletion(0, std::move(batch), [](error_code) {});
  writer.complete_all();
  EXPECT_FALSE(offsets.has_offsets("g1"));
  EXPECT_FALSE(offsets.has_offsets("g2"));
}

TEST_F(offset_manager_test, replay_applies_commits_and_tombstones_and_unload_forgets_them) {
  offset_commit_entry commit_entry;
  commit_entry.key.group = "g";
  commit_entry.key.topic = "events";
  commit_entry.key.partition = 2;
  commit_entry.value = proto::offset_commit_value{};
  commit_entry.value->offset = 11;
  commit_entry.value->commit_timestamp = start_ms;
  commit_entry.value_version = offset_commit_value_version;
  offsets.replay(commit_entry, 42);
  ASSERT_NE(offsets.find("g", "events", 2), nullptr);
  EXPECT_EQ(offsets.find("g", "events", 2)->record_offset, 42);
  offset_commit_entry tombstone = commit_entry;
  tombstone.value.reset();
  offsets.replay(tombstone, 43);
  EXPECT_FALSE(offsets.has_offsets("g"));
  offsets.replay(commit_entry, 44);
  offsets.forget_partition(0);
  EXPECT_FALSE(offsets.has_offsets("g"));
}

}  // namespace
}  // namespace mala::coordinator
