// Replica placement: every partition gets distinct replicas, leaders and replicas spread evenly, followers
// shift so that a leader does not always get the same followers, racks are covered before any rack repeats,
// the seed alone decides the result, and impossible requests fail with Kafka's errors.
#include "mala/controller/replica_placement.h"

#include <gtest/gtest.h>

#include <map>
#include <set>
#include <string>

namespace mala::controller {
namespace {

std::vector<placement_broker> brokers(std::initializer_list<int32_t> ids) {
  std::vector<placement_broker> out;
  for (int32_t id : ids) out.push_back({id, std::nullopt});
  return out;
}

std::vector<std::vector<int32_t>> place_ok(const std::vector<placement_broker>& b, int32_t partitions,
                                           int32_t rf, uint64_t seed = 7) {
  auto r = place_replicas(b, partitions, rf, seed);
  EXPECT_TRUE(r.ok()) << (r.ok() ? "" : r.error().message);
  return r.ok() ? *r : std::vector<std::vector<int32_t>>{};
}

void expect_distinct_replicas(const std::vector<std::vector<int32_t>>& placement, size_t rf) {
  for (const auto& replicas : placement) {
    EXPECT_EQ(replicas.size(), rf);
    EXPECT_EQ(std::set<int32_t>(replicas.begin(), replicas.end()).size(), replicas.size());
  }
}

TEST(replica_placement, single_broker) {
  auto p = place_ok(brokers({5}), 4, 1);
  ASSERT_EQ(p.size(), 4u);
  for (const auto& r : p) EXPECT_EQ(r, std::vector<int32_t>{5});
}

TEST(replica_placement, leaders_and_replicas_spread_evenly) {
  for (uint64_t seed : {1u, 2u, 3u, 99u}) {
    auto p = place_ok(brokers({1, 2, 3}), 6, 3, seed);
    ASSERT_EQ(p.size(), 6u);
    expect_distinct_replicas(p, 3);
    std::map<int32_t, int> leaders;
    for (const auto& r : p) ++leaders[r.front()];
    EXPECT_EQ(leaders, (std::map<int32_t, int>{{1, 2}, {2, 2}, {3, 2}})) << "seed " << seed;
  }
  auto p = place_ok(brokers({10, 20, 30, 40}), 8, 2);
  std::map<int32_t, int> replicas;
  for (const auto& r : p)
    for (int32_t b : r) ++replicas[b];
  EXPECT_EQ(replicas, (std::map<int32_t, int>{{10, 4}, {20, 4}, {30, 4}, {40, 4}}));
}

TEST(replica_placement, followers_shift_after_every_broker_led_once) {
  auto p = place_ok(brokers({1, 2, 3, 4}), 8, 2);
  ASSERT_EQ(p.size(), 8u);
  for (size_t i = 0; i < 4; ++i) {
    EXPECT_EQ(p[i].front(), p[i + 4].front());  // the same leader a round later...
    EXPECT_NE(p[i][1], p[i + 4][1]);            // ...with another follower
  }
}

TEST(replica_placement, the_seed_decides) {
  auto a = place_ok(brokers({1, 2, 3, 4, 5}), 10, 3, 42);
  auto b = place_ok(brokers({5, 4, 3, 2, 1}), 10, 3, 42);  // input order does not matter
  EXPECT_EQ(a, b);
  bool differs = false;
  for (uint64_t seed = 1; seed < 10 && !differs; ++seed)
    differs = place_ok(brokers({1, 2, 3, 4, 5}), 10, 3, seed) != a;
  EXPECT_TRUE(differs);
}

TEST(replica_placement, every_rack_before_any_rack_twice) {
  std::vector<placement_broker> b{{1, "a"}, {2, "a"}, {3, "b"}, {4, "b"}, {5, "c"}, {6, "c"}};
  std::map<int32_t, std::string> rack_of;
  for (const auto& x : b) rack_of[x.id] = *x.rack;
  for (uint64_t seed : {1u, 5u, 11u}) {
    auto p = place_ok(b, 12, 3, seed);
    expect_distinct_replicas(p, 3);
    std::map<int32_t, int> leaders;
    for (const auto& r : p) {
      std::set<std::string> racks;
      for (int32_t id : r) racks.insert(rack_of[id]);
      EXPECT_EQ(racks.size(), 3u);
      ++leaders[r.front()];
    }
    for (const auto& [id, n] : leaders) EXPECT_EQ(n, 2) << "broker " << id << " seed " << seed;
  }
  // More replicas than racks: each rack first once, then the rest.
  for (const auto& r : place_ok(b, 6, 4)) {
    std::map<std::string, int> per_rack;
    for (int32_t id : r) ++per_rack[rack_of[id]];
    EXPECT_EQ(per_rack.size(), 3u);
  }
}

TEST(replica_placement, uneven_racks_still_cover_every_rack) {
  std::vector<placement_broker> b{{1, "a"}, {2, "a"}, {3, "a"}, {4, "b"}};
  for (const auto& r : place_ok(b, 8, 2)) {
    ASSERT_EQ(r.size(), 2u);
    EXPECT_TRUE(r[0] == 4 || r[1] == 4)
        << r[0] << "," << r[1];  // the only broker of rack b in every partition
  }
  auto full = place_ok(b, 4, 4);
  expect_distinct_replicas(full, 4);
}

TEST(replica_placement, brokers_without_rack_form_their_own_rack) {
  std::vector<placement_broker> b{{1, std::nullopt}, {2, std::nullopt}, {3, "x"}};
  for (const auto& r : place_ok(b, 6, 2)) {
    EXPECT_TRUE(r[0] == 3 || r[1] == 3);
  }
}

TEST(replica_placement, a_broker_listed_twice_counts_once) {
  auto p = place_replicas(brokers({1, 1}), 1, 2, 1);
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.error().code, error_code::invalid_replication_factor);
}

TEST(replica_placement, kafka_errors) {
  auto zero_rf = place_replicas(brokers({1}), 1, 0, 1);
  ASSERT_FALSE(zero_rf.ok());
  EXPECT_EQ(zero_rf.error().code, error_code::invalid_replication_factor);
  EXPECT_EQ(zero_rf.error().message,
            "Invalid replication factor 0: the replication factor must be positive.");

  auto none = place_replicas({}, 1, 1, 1);
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.error().code, error_code::invalid_replication_factor);
  EXPECT_EQ(none.error().message,
            "All brokers are currently fenced, or have all their log directories cordoned.");

  auto too_few = place_replicas(brokers({1, 2, 3}), 1, 4, 1);
  ASSERT_FALSE(too_few.ok());
  EXPECT_EQ(too_few.error().code, error_code::invalid_replication_factor);
  EXPECT_EQ(too_few.error().message,
            "The target replication factor of 4 cannot be reached because only 3 broker(s) are registered or "
            "some brokers have all their log directories cordoned.");

  auto no_partitions = place_replicas(brokers({1}), 0, 1, 1);
  ASSERT_FALSE(no_partitions.ok());
  EXPECT_EQ(no_partitions.error().code, error_code::invalid_partitions);
}

}  // namespace
}  // namespace mala::controller
