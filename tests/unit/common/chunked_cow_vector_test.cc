#include "mala/common/chunked_cow_vector.h"

#include <algorithm>
#include <numeric>
#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace mala {
namespace {

using small_chunks = chunked_cow_vector<std::string, 4>;

small_chunks numbered(size_t n) {
  small_chunks v;
  for (size_t i = 0; i < n; ++i) v.push_back(std::to_string(i));
  return v;
}

TEST(chunked_cow_vector, reads_like_a_vector) {
  const small_chunks v = numbered(10);
  ASSERT_EQ(v.size(), 10u);
  EXPECT_FALSE(v.empty());
  EXPECT_EQ(v[0], "0");
  EXPECT_EQ(v[4], "4");
  EXPECT_EQ(v.back(), "9");
  EXPECT_EQ(v.at(9), "9");
  EXPECT_THROW((void)v.at(10), std::out_of_range);
  std::vector<std::string> seen(v.begin(), v.end());
  EXPECT_EQ(seen, v.to_vector());
  EXPECT_EQ(seen.size(), 10u);
  EXPECT_EQ(std::find(v.begin(), v.end(), "7") - v.begin(), 7);
  EXPECT_EQ(std::count_if(v.begin(), v.end(), [](const auto& s) { return s.size() == 1; }), 10);
  EXPECT_TRUE(small_chunks{}.empty());
  EXPECT_EQ(small_chunks({"a", "b"}), small_chunks(std::vector<std::string>{"a", "b"}));
}

TEST(chunked_cow_vector, a_copy_shares_until_written_and_a_write_touches_only_its_copy) {
  const small_chunks original = numbered(10);
  small_chunks copy = original;
  EXPECT_TRUE(copy.shares_with(original));
  const std::string* before = &original[5];

  copy[5] = "five";
  EXPECT_FALSE(copy.shares_with(original));
  EXPECT_EQ(original[5], "5");
  EXPECT_EQ(&original[5], before);  // the original was not moved or copied
  EXPECT_EQ(copy[5], "five");
  // Only the chunk holding element 5 (elements 4..7) was copied; the others are still shared.
  EXPECT_EQ(&std::as_const(copy)[0], &original[0]);
  EXPECT_EQ(&std::as_const(copy)[8], &original[8]);
  EXPECT_NE(&std::as_const(copy)[4], &original[4]);
  EXPECT_NE(copy, original);
  copy[5] = "5";
  EXPECT_EQ(copy, original);  // equal by value, though not shared
  EXPECT_FALSE(copy.shares_with(original));
}

TEST(chunked_cow_vector, growing_and_shrinking_a_copy_leaves_the_original_alone) {
  const small_chunks original = numbered(6);
  small_chunks grown = original;
  grown.push_back("6");
  grown.emplace_back("7");
  grown.push_back("8");
  EXPECT_EQ(original.size(), 6u);
  EXPECT_EQ(grown.size(), 9u);
  EXPECT_EQ(grown.to_vector(), numbered(9).to_vector());

  small_chunks shrunk = grown;
  shrunk.resize(3);
  EXPECT_EQ(shrunk.to_vector(), numbered(3).to_vector());
  EXPECT_EQ(grown.size(), 9u);
  shrunk.resize(5);
  EXPECT_EQ(shrunk[4], "");
  shrunk.clear();
  EXPECT_TRUE(shrunk.empty());
  EXPECT_EQ(grown.to_vector(), numbered(9).to_vector());
  EXPECT_EQ(original.to_vector(), numbered(6).to_vector());
}

TEST(chunked_cow_vector, many_generations_each_see_their_own_state) {
  // As metadata images: each generation copies the last and changes one element.
  std::vector<chunked_cow_vector<int>> generations;
  chunked_cow_vector<int> v;
  for (int i = 0; i < 1000; ++i) v.push_back(i);
  generations.push_back(v);
  for (int g = 1; g <= 200; ++g) {
    chunked_cow_vector<int> next = generations.back();
    next[static_cast<size_t>(g * 7 % 1000)] += 1000 * g;
    generations.push_back(std::move(next));
  }
  for (int g = 0; g <= 200; ++g) {
    long long expected = 1000LL * 999 / 2;
    for (int h = 1; h <= g; ++h) expected += 1000LL * h;
    const auto& gen = generations[static_cast<size_t>(g)];
    EXPECT_EQ(std::accumulate(gen.begin(), gen.end(), 0LL), expected) << "generation " << g;
  }
}

}  // namespace
}  // namespace mala
