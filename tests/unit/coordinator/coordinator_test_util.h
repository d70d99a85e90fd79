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
    std::optional<transactional_producer> producer;
    std::optional<txn_marker_write> marker;
    append_callback done;
  };
  // What the log holds, in offset order: a record (of a transactional batch when producer_id is set) or a
  // marker.
  struct log_entry {
    int32_t partition;
    int64_t offset;
    std::optional<coordinator_record> record;
    int64_t producer_id = -1;
    std::optional<txn_marker_write> marker;
  };
  std::deque<pending_write> pending;
  std::vector<std::pair<int32_t, coordinator_record>> committed;
  std::vector<log_entry> log;
  int64_t next_offset = 0;

  void append(int32_t partition, std::vector<coordinator_record> records,
              std::optional<transactional_producer> producer, append_callback done) override {
    pending.push_back({partition, std::move(records), producer, std::nullopt, std::move(done)});
  }
  void append_marker(int32_t partition, const txn_marker_write& marker, append_callback done) override {
    pending.push_back({partition, {}, std::nullopt, marker, std::move(done)});
  }
  // Completes the writes in order (and those they cause), as the log's high watermark would.
  void complete_all(error_code e = error_code::none) {
    while (!pending.empty()) complete_next(e);
  }
  // Completes the oldest write only.
  void complete_next(error_code e = error_code::none) {
    auto w = std::move(pending.front());
    pending.pop_front();
    if (e != error_code::none) return w.done(e, -1);
    const int64_t first = next_offset;
    if (w.marker) {
      log.push_back({w.partition, next_offset++, std::nullopt, -1, w.marker});
    }
    for (auto& r : w.records) {
      log.push_back({w.partition, next_offset++, r, w.producer ? w.producer->producer_id : -1, std::nullopt});
      committed.emplace_back(w.partition, std::move(r));
    }
    w.done(e, first);
  }
};

// Replays every record and marker `writer` committed into partition 0 of `into` (which must be loading it).
inline void replay_committed(const fake_writer& writer, group_coordinator& into) {
  for (const auto& entry : writer.log) {
    if (entry.marker) {
      ASSERT_TRUE(into.replay_marker(0, entry.marker->producer_id, entry.marker->commit).ok());
      continue;
    }
    std::optional<std::span<const uint8_t>> value;
    if (entry.record->value) value = std::span<const uint8_t>(*entry.record->value);
    ASSERT_TRUE(into.replay(0, entry.offset, entry.record->key, value, entry.producer_id).ok());
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
