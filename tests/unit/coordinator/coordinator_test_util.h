// Test doubles shared by the coordinator tests: a record writer that completes writes when told to, and the
// replay of what it committed into another coordinator (a restart).
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <deque>
#include <functional>
#include <optional>
#include <span>
#include <utility>
#include <vector>

#include "mala/coordinator/group_coordinator.h"

namespace mala::coordinator::testing {

struct fake_writer : record_writer {
  struct pending_write {
    int32_t partition;
    std::vector<coordinator_record> records;
    std::function<void(error_code)> done;
  };
  std::deque<pending_write> pending;
  std::vector<std::pair<int32_t, coordinator_record>> committed;

  void append(int32_t partition, std::vector<coordinator_record> records,
              std::function<void(error_code)> done) override {
    pending.push_back({partition, std::move(records), std::move(done)});
  }
  // Completes the writes in order (and those they cause), as the log's high watermark would.
  void complete_all(error_code e = error_code::none) {
    while (!pending.empty()) {
      auto w = std::move(pending.front());
      pending.pop_front();
      if (e == error_code::none) {
        for (auto& r : w.records) committed.emplace_back(w.partition, std::move(r));
      }
      w.done(e);
    }
  }
};

// Replays every record `writer` committed into partition 0 of `into` (which must be loading it).
inline void replay_committed(const fake_writer& writer, group_coordinator& into) {
  int64_t offset = 0;
  for (const auto& [p, r] : writer.committed) {
    std::optional<std::span<const uint8_t>> value;
    if (r.value) value = std::span<const uint8_t>(*r.value);
    ASSERT_TRUE(into.replay(0, offset++, r.key, value).ok());
  }
}

// A coordinator restarted from what `writer` committed: partition 0 loaded from those records (a restart).
struct replayed_coordinator {
  fake_writer writer;
  group_coordinator coordinator;
  replayed_coordinator(const group_coordinator_config& config, std::function<int64_t()> clock,
                       const topic_catalog& catalog, const fake_writer& committed)
      : coordinator(config, writer, std::move(clock)) {
    coordinator.set_topics(catalog);
    coordinator.begin_loading(0);
    replay_committed(committed, coordinator);
    coordinator.complete_loading(0);
  }
};

}  // namespace mala::coordinator::testing
