// Recovery of a directory that a crash left in the middle of a clean (Kafka's LogCleanerTest
// testRecoveryAfterCrash and LogLoader's swap handling): the plan restores the old segments or completes the
// new one, and never touches segments outside the swapped range.
#include "mala/storage/cleaning_recovery.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>

namespace mala::storage {
namespace {

// Segment files of bases 0, 100, 200 (old, the group being cleaned) and 300 (active).
std::vector<std::string> old_segments() {
  std::vector<std::string> out;
  for (const char* base :
       {"00000000000000000000", "00000000000000000100", "00000000000000000200", "00000000000000000300"}) {
    for (const char* suffix : {".log", ".index", ".timeindex"}) out.push_back(std::string(base) + suffix);
  }
  out.push_back("leader-epoch-checkpoint");
  return out;
}

std::vector<std::string> new_segment(const std::string& suffix) {
  return {"00000000000000000000.log" + suffix, "00000000000000000000.index" + suffix,
          "00000000000000000000.timeindex" + suffix};
}

// The cleaned segment at base 0 replaces offsets [0, 300).
std::optional<int64_t> next_offset(const std::string& name) {
  if (name == "00000000000000000000.log.swap") return 300;
  return std::nullopt;
}

std::vector<std::string> sorted(std::vector<std::string> v) {
  std::sort(v.begin(), v.end());
  return v;
}

// The directory after the plan.
std::vector<std::string> after_plan(std::vector<std::string> files, const swap_recovery_plan& plan) {
  for (const auto& r : plan.remove) files.erase(std::remove(files.begin(), files.end(), r), files.end());
  for (const auto& [from, to] : plan.renames) {
    files.erase(std::remove(files.begin(), files.end(), from), files.end());
    EXPECT_EQ(std::count(files.begin(), files.end(), to), 0) << to << " renamed over a file still there";
    files.push_back(to);
  }
  return sorted(files);
}

std::vector<std::string> cleaned_state() {
  // Offsets 0..299 in one segment at 0 (its indexes rebuilt when it loads), the active segment at 300.
  return sorted({"00000000000000000000.log", "00000000000000000300.log", "00000000000000000300.index",
                 "00000000000000000300.timeindex", "leader-epoch-checkpoint"});
}

TEST(cleaning_recovery, a_crash_before_the_swap_keeps_the_old_segments) {
  auto files = old_segments();
  for (auto& f : new_segment(".cleaned")) files.push_back(f);
  auto plan = plan_swap_recovery(files, next_offset);
  EXPECT_TRUE(plan.renames.empty());
  EXPECT_EQ(after_plan(files, plan), sorted(old_segments()));
}

TEST(cleaning_recovery, a_crash_after_the_swap_rename_completes_the_clean) {
  auto files = old_segments();
  for (auto& f : new_segment(".swap")) files.push_back(f);
  EXPECT_EQ(after_plan(files, plan_swap_recovery(files, next_offset)), cleaned_state());
}

TEST(cleaning_recovery, a_crash_after_the_old_segments_went_to_deleted_completes_the_clean) {
  std::vector<std::string> files;
  for (auto& f : old_segments()) {
    const bool replaced = !f.starts_with("00000000000000000300") && f != "leader-epoch-checkpoint";
    files.push_back(replaced ? f + ".deleted" : f);
  }
  for (auto& f : new_segment(".swap")) files.push_back(f);
  EXPECT_EQ(after_plan(files, plan_swap_recovery(files, next_offset)), cleaned_state());
  // Partly renamed: the .log already lost its .swap suffix, the indexes not yet.
  std::vector<std::string> partly = {"00000000000000000000.log",
                                     "00000000000000000000.index.swap",
                                     "00000000000000000000.timeindex.swap",
                                     "00000000000000000100.log.deleted",
                                     "00000000000000000300.log",
                                     "00000000000000000300.index",
                                     "00000000000000000300.timeindex",
                                     "leader-epoch-checkpoint"};
  // Index swaps go (rebuilt from the .log when it loads).
  EXPECT_EQ(after_plan(partly, plan_swap_recovery(partly, next_offset)), cleaned_state());
}

TEST(cleaning_recovery, a_crash_after_everything_but_the_deletion_removes_the_deleted_files) {
  auto files = cleaned_state();
  files.push_back("00000000000000000100.log.deleted");
  files.push_back("00000000000000000200.index.deleted");
  files.push_back("00000000000000000000.index");  // the new segment's index, already in place
  auto expected = cleaned_state();
  expected.push_back("00000000000000000000.index");
  EXPECT_EQ(after_plan(files, plan_swap_recovery(files, next_offset)), sorted(expected));
}

TEST(cleaning_recovery, swaps_of_a_group_still_being_prepared_go_with_its_cleaned_files) {
  // Two groups: [0, 200) already swapped, [200, 300) still .cleaned with a .swap index next to it.
  auto files = old_segments();
  files.push_back("00000000000000000000.log.swap");
  files.push_back("00000000000000000200.log.cleaned");
  files.push_back("00000000000000000200.index.swap");
  auto two = [](const std::string& name) -> std::optional<int64_t> {
    if (name == "00000000000000000000.log.swap") return 200;
    return std::nullopt;
  };
  auto after = after_plan(files, plan_swap_recovery(files, two));
  // Segment 0 replaced [0, 200): old 0 and 100 gone; 200 keeps its log (its indexes rebuilt, since an index
  // swap named them), 300 untouched; the half-prepared group's files gone.
  std::vector<std::string> expected = {"00000000000000000000.log",       "00000000000000000200.log",
                                       "00000000000000000300.log",       "00000000000000000300.index",
                                       "00000000000000000300.timeindex", "leader-epoch-checkpoint"};
  EXPECT_EQ(after, sorted(expected));
}

TEST(cleaning_recovery, an_unreadable_swap_leaves_the_old_segments) {
  auto files = old_segments();
  for (auto& f : new_segment(".swap")) files.push_back(f);
  auto plan = plan_swap_recovery(files, [](const std::string&) { return std::nullopt; });
  EXPECT_TRUE(plan.renames.empty());
  // Every old .log stays; the indexes of the swapped base go, as Kafka's loader drops them (rebuilt).
  auto expected = old_segments();
  std::erase(expected, "00000000000000000000.index");
  std::erase(expected, "00000000000000000000.timeindex");
  EXPECT_EQ(after_plan(files, plan), sorted(expected));
}

TEST(cleaning_recovery, a_clean_directory_needs_nothing) {
  auto plan = plan_swap_recovery(old_segments(), next_offset);
  EXPECT_TRUE(plan.remove.empty());
  EXPECT_TRUE(plan.renames.empty());
}

}  // namespace
}  // namespace mala::storage
