#include "mala/common/persistent_map.h"

#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

namespace mala {
namespace {

template <typename K, typename V>
void expect_same(const persistent_map<K, V>& got, const std::map<K, V>& want) {
  ASSERT_EQ(got.size(), want.size());
  auto w = want.begin();
  for (const auto& [k, v] : got) {
    ASSERT_NE(w, want.end());
    EXPECT_EQ(k, w->first);
    EXPECT_EQ(v, w->second);
    ++w;
  }
  EXPECT_EQ(w, want.end());
}

TEST(persistent_map_test, behaves_as_std_map_and_copies_keep_what_they_had) {
  std::mt19937 rng(7);
  persistent_map<int, std::string> map;
  std::map<int, std::string> model;
  // Snapshots taken along the way must never change, whatever happens to the map after.
  std::vector<std::pair<persistent_map<int, std::string>, std::map<int, std::string>>> snapshots;
  for (int step = 0; step < 20000; ++step) {
    const int key = static_cast<int>(rng() % 500);
    switch (rng() % 5) {
      case 0:
      case 1:
        map[key] = "v" + std::to_string(step);
        model[key] = "v" + std::to_string(step);
        break;
      case 2:
        EXPECT_EQ(map.erase(key), model.erase(key));
        break;
      case 3: {
        const auto [it, inserted] = map.try_emplace(key, "t" + std::to_string(step));
        const bool model_inserted = model.try_emplace(key, "t" + std::to_string(step)).second;
        EXPECT_EQ(inserted, model_inserted);
        EXPECT_EQ(it->first, key);
        EXPECT_EQ(it->second, model.at(key));
        break;
      }
      default: {
        auto it = map.find(key);
        auto m = model.find(key);
        ASSERT_EQ(it == map.end(), m == model.end());
        // The iterator find gives goes on in key order.
        for (int i = 0; i < 3 && it != map.end(); ++i, ++it, ++m) {
          ASSERT_NE(m, model.end());
          EXPECT_EQ(it->first, m->first);
        }
        break;
      }
    }
    if (step % 997 == 0) snapshots.emplace_back(map, model);
  }
  expect_same(map, model);
  for (const auto& [snapshot, at_the_time] : snapshots) expect_same(snapshot, at_the_time);
  EXPECT_EQ(map.contains(model.begin()->first), true);
  EXPECT_EQ(map.at(model.begin()->first), model.begin()->second);
  EXPECT_THROW((void)map.at(-1), std::out_of_range);
  EXPECT_EQ(map.get(-1), nullptr);
}

TEST(persistent_map_test, a_change_to_a_copy_copies_only_the_way_to_it) {
  persistent_map<int, std::vector<int>> map;
  for (int i = 0; i < 10000; ++i) map[i] = {i};
  persistent_map<int, std::vector<int>> copy = map;
  EXPECT_TRUE(copy.shares_with(map));
  EXPECT_TRUE(copy == map);
  copy[5000].push_back(1);
  EXPECT_FALSE(copy.shares_with(map));
  EXPECT_EQ(map.at(5000), std::vector<int>{5000});
  EXPECT_EQ(copy.at(5000), (std::vector<int>{5000, 1}));
  EXPECT_FALSE(copy == map);
  // Every value but those on the way to the changed one (the tree's height) is the very same object in both.
  size_t shared = 0;
  auto a = map.begin();
  for (auto b = copy.begin(); b != copy.end(); ++a, ++b) shared += &a->second == &b->second ? 1 : 0;
  EXPECT_GE(shared, 10000u - static_cast<size_t>(copy.tree_height()));
  EXPECT_LT(shared, 10000u);
  copy.erase(5000);
  EXPECT_TRUE(map.contains(5000));
  EXPECT_EQ(copy.size(), 9999u);
  EXPECT_EQ(map.size(), 10000u);
}

TEST(persistent_map_test, stays_balanced) {
  // Keys in order are the worst case of an unbalanced tree; an AVL tree of n keys is at most 1.44 log2 n
  // deep.
  const auto avl_bound = [](size_t n) { return 1.4405 * std::log2(static_cast<double>(n) + 2); };
  persistent_map<int, int> map;
  for (int i = 0; i < 1 << 16; ++i) {
    map[i] = i;
    if ((i & (i + 1)) == 0) {
      EXPECT_LE(map.tree_height(), avl_bound(map.size())) << i;
    }
  }
  EXPECT_LE(map.tree_height(), avl_bound(map.size()));
  const persistent_map<int, int> before_erasing = map;
  for (int i = 0; i < 1 << 15; ++i) map.erase(i * 2);
  EXPECT_EQ(map.size(), size_t{1} << 15);
  EXPECT_LE(map.tree_height(), avl_bound(map.size()));
  EXPECT_EQ(before_erasing.size(), size_t{1} << 16);
  EXPECT_EQ(before_erasing.tree_height(), 17);
  int expected = 1;
  for (const auto& [k, v] : map) {
    EXPECT_EQ(k, expected);
    expected += 2;
  }
  persistent_map<std::string, int> names{{"b", 2}, {"a", 1}};
  EXPECT_EQ(names.begin()->first, "a");
  EXPECT_EQ(names.insert_or_assign("a", 3).second, false);
  EXPECT_EQ(names.at("a"), 3);
  EXPECT_EQ(names.emplace("c", 4).second, true);
  EXPECT_EQ(names.emplace("c", 5).second, false);
  EXPECT_EQ(names.at("c"), 4);
  names.clear();
  EXPECT_TRUE(names.empty());
  EXPECT_EQ(names.begin(), names.end());
}

TEST(persistent_map_test, for_each_difference_visits_what_changed_and_skips_what_is_shared) {
  std::mt19937 rng(11);
  persistent_map<int, int> before;
  for (int i = 0; i < 5000; i += 2) before[i] = i;
  for (int round = 0; round < 50; ++round) {
    persistent_map<int, int> after = before;
    std::map<int, std::pair<const int*, const int*>> visited;
    std::set<int> changed;  // keys added, removed or set
    const int changes = 1 + static_cast<int>(rng() % (round < 25 ? 3 : 200));
    for (int c = 0; c < changes; ++c) {
      const int key = static_cast<int>(rng() % 5000);
      changed.insert(key);
      if (rng() % 3 == 0) {
        after.erase(key);
      } else {
        after[key] = -key;
      }
    }
    persistent_map<int, int>::for_each_difference(
        before, after, [&](int key, const int* was, const int* now) {
          EXPECT_TRUE(visited.emplace(key, std::make_pair(was, now)).second) << "visited twice: " << key;
        });
    // Every key whose presence or value differs is visited, with what each map holds; every key not visited
    // is the same object in both.
    int last = -1;
    for (const auto& [key, values] : visited) {
      EXPECT_GT(key, last);
      last = key;
      EXPECT_EQ(values.first, before.get(key));
      EXPECT_EQ(values.second, after.get(key));
    }
    for (int key : changed) {
      const int* was = before.get(key);
      const int* now = after.get(key);
      if ((was == nullptr) != (now == nullptr) || (was && *was != *now)) {
        EXPECT_TRUE(visited.count(key)) << key;
      }
    }
    for (const auto& [key, value] : after) {
      if (!visited.count(key)) {
        EXPECT_EQ(&value, before.get(key)) << key;
      }
    }
    for (const auto& [key, value] : before) {
      if (!visited.count(key)) {
        EXPECT_TRUE(after.contains(key)) << key;
      }
    }
    // A few changes visit a few keys, not the 2,500 of the map.
    if (changes <= 3) {
      EXPECT_LE(visited.size(), 80u) << changes;
    }
    before = after;
  }
}

}  // namespace
}  // namespace mala
