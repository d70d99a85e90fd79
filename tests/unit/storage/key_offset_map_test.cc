// The cleaner's dedupe map: latest offsets by key, the capacity bound (load factor of the slots) that ends a
// cleaning round, updates of known keys once full, and clear().
#include "mala/storage/key_offset_map.h"

#include <gtest/gtest.h>

#include <string>

namespace mala::storage {
namespace {

std::span<const uint8_t> key(const std::string& s) {
  return {reinterpret_cast<const uint8_t*>(s.data()), s.size()};
}

TEST(key_offset_map, keeps_the_latest_offset_of_each_key) {
  key_offset_map map(1 << 20);
  EXPECT_EQ(map.get(key("a")), -1);
  EXPECT_TRUE(map.put(key("a"), 0));
  EXPECT_TRUE(map.put(key("b"), 1));
  EXPECT_TRUE(map.put(key("a"), 2));
  EXPECT_EQ(map.get(key("a")), 2);
  EXPECT_EQ(map.get(key("b")), 1);
  EXPECT_EQ(map.get(key("c")), -1);
  EXPECT_EQ(map.get(key("")), -1);
  EXPECT_TRUE(map.put(key(""), 3));  // an empty key is a key
  EXPECT_EQ(map.get(key("")), 3);
  EXPECT_EQ(map.size(), 3u);
  EXPECT_EQ(map.latest_offset(), 3);
  map.set_latest_offset(9);
  EXPECT_EQ(map.latest_offset(), 9);
}

TEST(key_offset_map, takes_keys_up_to_the_load_factor_of_its_slots) {
  key_offset_map map(10 * key_offset_map::bytes_per_entry, 0.9);
  EXPECT_EQ(map.slots(), 10u);
  EXPECT_EQ(map.capacity(), 9u);
  for (int i = 0; i < 9; ++i) EXPECT_TRUE(map.put(key("k" + std::to_string(i)), i)) << i;
  EXPECT_TRUE(map.full());
  EXPECT_FALSE(map.put(key("new"), 9));
  EXPECT_EQ(map.get(key("new")), -1);
  EXPECT_EQ(map.latest_offset(), 8);    // the refused put changed nothing
  EXPECT_TRUE(map.put(key("k3"), 10));  // a known key still moves
  EXPECT_EQ(map.get(key("k3")), 10);
  for (int i = 0; i < 9; ++i) {
    if (i != 3) {
      EXPECT_EQ(map.get(key("k" + std::to_string(i))), i);
    }
  }
  EXPECT_NEAR(map.utilization(), 0.9, 1e-9);
}

TEST(key_offset_map, a_tiny_map_takes_one_key) {
  key_offset_map map(1, 0.5);
  EXPECT_EQ(map.slots(), 1u);
  EXPECT_EQ(map.capacity(), 1u);
  EXPECT_TRUE(map.put(key("x"), 4));
  EXPECT_FALSE(map.put(key("y"), 5));
  EXPECT_EQ(map.get(key("x")), 4);
  EXPECT_EQ(map.get(key("y")), -1);  // the probe ends after every slot
}

TEST(key_offset_map, clear_empties_it_for_the_next_round) {
  key_offset_map map(1 << 16);
  for (int i = 0; i < 1000; ++i) ASSERT_TRUE(map.put(key(std::to_string(i)), i));
  map.clear();
  EXPECT_EQ(map.size(), 0u);
  EXPECT_EQ(map.latest_offset(), -1);
  for (int i = 0; i < 1000; ++i) EXPECT_EQ(map.get(key(std::to_string(i))), -1);
  EXPECT_TRUE(map.put(key("7"), 70));
  EXPECT_EQ(map.get(key("7")), 70);
}

TEST(key_offset_map, many_keys_near_capacity_are_all_found) {
  key_offset_map map(200'000 * key_offset_map::bytes_per_entry);
  const size_t n = map.capacity();
  for (size_t i = 0; i < n; ++i)
    ASSERT_TRUE(map.put(key("key-" + std::to_string(i)), static_cast<int64_t>(i)));
  EXPECT_TRUE(map.full());
  for (size_t i = 0; i < n; i += 97)
    EXPECT_EQ(map.get(key("key-" + std::to_string(i))), static_cast<int64_t>(i));
  EXPECT_EQ(map.get(key("absent")), -1);
}

}  // namespace
}  // namespace mala::storage
