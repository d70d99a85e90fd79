// Shared fixture of the replication tests: a real storage::log_manager in a temporary directory, a fixed
// clock, and record batches built with the protocol's batch builder.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "mala/protocol/record_batch.h"
#include "mala/storage/log_manager.h"

namespace mala::replication::testing {

inline constexpr int64_t start_ms = 1'700'000'000'000;

// A batch of `records` records with timestamps ts, ts+1, ...
inline std::vector<uint8_t> make_batch(int records, int64_t ts = start_ms) {
  protocol::record_batch_builder builder;
  std::string value = "value";
  for (int r = 0; r < records; ++r) {
    builder.add(ts + r, std::nullopt,
                std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(value.data()), value.size()));
  }
  return builder.build();
}

class log_dir_fixture : public ::testing::Test {
 protected:
  void SetUp() override {
    _root = std::filesystem::temp_directory_path() /
            ("mala-replication-test-" + std::to_string(std::random_device{}()));
    std::filesystem::create_directories(_root);
    storage::log_manager_options o;
    o.dirs = {_root / "data"};
    o.clock_ms = [this] { return _now; };
    auto opened = storage::log_manager::open(std::move(o));
    ASSERT_TRUE(opened.ok()) << opened.error().message;
    _logs = std::move(*opened);
  }
  void TearDown() override {
    _logs.reset();
    std::filesystem::remove_all(_root);
  }

  std::filesystem::path _root;
  int64_t _now = start_ms;
  std::unique_ptr<storage::log_manager> _logs;
};

}  // namespace mala::replication::testing
