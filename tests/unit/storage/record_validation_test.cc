// LogValidator's record-level rules: timestamp bounds, LogAppendTime set by a producer, keys on compacted
// topics, the client-only batch rules, and their effect on partition_log appends.
#include "mala/storage/record_validation.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "mala/storage/partition_log.h"

namespace mala::storage {
namespace {

namespace proto = mala::protocol;
constexpr int64_t now_ms = 1'700'000'000'000;
constexpr int64_t hour_ms = 3'600'000;

std::span<const uint8_t> bytes_of(const std::string& s) {
  return {reinterpret_cast<const uint8_t*>(s.data()), s.size()};
}

// One record per timestamp; keys when `keyed`.
std::vector<uint8_t> batch(std::vector<int64_t> timestamps, bool keyed = true) {
  proto::record_batch_builder b;
  const std::string key = "k", value = "v";
  for (int64_t ts : timestamps) {
    b.add(ts, keyed ? std::optional(bytes_of(key)) : std::nullopt, std::optional(bytes_of(value)));
  }
  return b.build();
}

TEST(record_validation_test, timestamps_within_the_bounds_pass) {
  log_config config;  // Kafka 4.x defaults: no bound in the past, one hour ahead
  EXPECT_FALSE(validate_record_contents(batch({now_ms, now_ms - 10 * 365 * 24 * hour_ms, now_ms + hour_ms}),
                                        config, now_ms));
  // -1 means "no timestamp" and is never checked.
  EXPECT_FALSE(validate_record_contents(batch({proto::no_timestamp}), config, now_ms));
}

TEST(record_validation_test, timestamps_outside_the_bounds_are_record_errors) {
  log_config config;
  config.message_timestamp_before_max_ms = 1000;
  auto failure = validate_record_contents(batch({now_ms, now_ms + hour_ms + 1, now_ms - 1001, now_ms - 1000}),
                                          config, now_ms);
  ASSERT_TRUE(failure);
  EXPECT_EQ(failure->code, error_code::invalid_timestamp);
  EXPECT_EQ(failure->message, "One or more records have been rejected due to invalid timestamp");
  ASSERT_EQ(failure->record_errors.size(), 2u);
  EXPECT_EQ(failure->record_errors[0].batch_index, 1);
  EXPECT_EQ(failure->record_errors[1].batch_index, 2);
  EXPECT_EQ(failure->record_errors[0].message,
            "Timestamp " + std::to_string(now_ms + hour_ms + 1) +
                " of message with offset 1 is out of range. The timestamp should be within [" +
                std::to_string(now_ms - 1000) + ", " + std::to_string(now_ms + hour_ms) + "]");
}

TEST(record_validation_test, extreme_timestamps_do_not_overflow) {
  log_config config;
  config.message_timestamp_after_max_ms = std::numeric_limits<int64_t>::max();
  EXPECT_FALSE(validate_record_contents(batch({std::numeric_limits<int64_t>::max()}), config, now_ms));
  config.message_timestamp_before_max_ms = 0;
  auto failure = validate_record_contents(batch({std::numeric_limits<int64_t>::min() + 1}), config, now_ms);
  ASSERT_TRUE(failure);
  EXPECT_EQ(failure->code, error_code::invalid_timestamp);
}

TEST(record_validation_test, log_append_time_topics_skip_bounds_but_refuse_the_attribute) {
  log_config config;
  config.log_append_time = true;
  EXPECT_FALSE(validate_record_contents(batch({now_ms + 100 * hour_ms}), config, now_ms));

  proto::record_batch_builder b;
  b.log_append_time();
  const std::string v = "v";
  b.add(now_ms, std::nullopt, std::optional(bytes_of(v)));
  auto bytes = b.build();
  // On a CreateTime topic only the record timestamps are checked (Kafka then rewrites the type); on a
  // LogAppendTime topic the attribute itself is refused.
  config.log_append_time = false;
  EXPECT_FALSE(validate_record_contents(bytes, config, now_ms));
  config.log_append_time = true;
  auto failure = validate_record_contents(bytes, config, now_ms);
  ASSERT_TRUE(failure);
  EXPECT_EQ(failure->code, error_code::invalid_timestamp);
}

TEST(record_validation_test, compacted_topics_need_keys) {
  log_config config;
  config.cleanup = cleanup_policy::compact;
  EXPECT_FALSE(validate_record_contents(batch({now_ms, now_ms}), config, now_ms));
  auto failure = validate_record_contents(batch({now_ms, now_ms}, /*keyed=*/false), config, now_ms);
  ASSERT_TRUE(failure);
  EXPECT_EQ(failure->code, error_code::invalid_record);
  EXPECT_EQ(failure->record_errors.size(), 2u);
  EXPECT_NE(failure->message.find("2 record errors"), std::string::npos);
  config.cleanup = cleanup_policy::delete_segments;
  EXPECT_FALSE(validate_record_contents(batch({now_ms}, false), config, now_ms));
}

TEST(record_validation_test, compressed_batches_are_checked_by_their_header) {
  log_config config;
  proto::record_batch_builder b;
  b.compression(proto::compression_codec::gzip).max_timestamp(now_ms + 2 * hour_ms);
  const std::string v = "opaque";
  b.add(now_ms, std::nullopt, std::optional(bytes_of(v)));
  auto failure = validate_record_contents(b.build(), config, now_ms);
  ASSERT_TRUE(failure);
  EXPECT_EQ(failure->code, error_code::invalid_timestamp);
  ASSERT_EQ(failure->record_errors.size(), 1u);
  EXPECT_EQ(failure->record_errors[0].batch_index, 0);
}

TEST(record_validation_test, client_batch_rules) {
  auto header = [](proto::record_batch_builder b) { return *proto::parse_batch_header(b.build()); };
  const std::string v = "v";
  proto::record_batch_builder ok;
  ok.producer(7, 0, 0).add(now_ms, std::nullopt, std::optional(bytes_of(v)));
  EXPECT_TRUE(validate_client_batch(header(ok)).ok());

  proto::record_batch_builder control = ok;
  control.control();
  EXPECT_EQ(validate_client_batch(header(control)).code, error_code::invalid_record);

  proto::record_batch_builder no_sequence;
  no_sequence.producer(7, 0, proto::no_sequence).add(now_ms, std::nullopt, std::optional(bytes_of(v)));
  EXPECT_EQ(validate_client_batch(header(no_sequence)).code, error_code::invalid_record);

  proto::record_batch_builder bad_delta = ok;
  bad_delta.last_offset_delta(3);
  EXPECT_EQ(validate_client_batch(header(bad_delta)).code, error_code::invalid_record);
}

// orders-0 in a fresh temporary directory, its clock at now_ms; the directory goes with it.
struct temp_log {
  std::filesystem::path root = std::filesystem::temp_directory_path() /
                               ("mala-record-validation-test-" + std::to_string(std::random_device{}()));
  result<std::unique_ptr<partition_log>> log = open();
  ~temp_log() {
    if (log.ok()) log->reset();
    std::filesystem::remove_all(root);
  }
  result<std::unique_ptr<partition_log>> open() {
    log_open_options o;
    o.clock_ms = [] { return now_ms; };
    return partition_log::open(root / "orders-0", {"orders", 0}, log_config{}, std::move(o));
  }
};

TEST(record_validation_test, produced_records_are_one_client_batch) {
  auto good = batch({now_ms, now_ms + 1});
  auto checked = validate_produced_records(good);
  ASSERT_TRUE(checked.ok()) << checked.error().message;
  EXPECT_EQ(checked->bytes.data(), good.data());
  EXPECT_EQ(checked->bytes.size(), good.size());
  EXPECT_EQ(checked->header.record_count, 2);
  EXPECT_EQ(checked->header.crc, proto::parse_batch_header(good)->crc);

  std::vector<uint8_t> none;
  EXPECT_EQ(validate_produced_records(none).error().code, error_code::invalid_record);
  std::vector<uint8_t> two = good;
  two.insert(two.end(), good.begin(), good.end());
  EXPECT_EQ(validate_produced_records(two).error().code, error_code::invalid_record);
  std::vector<uint8_t> short_size = good;
  short_size[11] = 10;  // batchLength below a header's
  short_size[10] = short_size[9] = short_size[8] = 0;
  EXPECT_EQ(validate_produced_records(short_size).error().code, error_code::corrupt_message);
  std::vector<uint8_t> old_magic = good;
  old_magic[proto::batch_layout::magic] = 1;
  EXPECT_EQ(validate_produced_records(old_magic).error().code, error_code::invalid_record);
  proto::record_batch_builder control;
  const std::string v = "v";
  control.control().add(now_ms, std::nullopt, std::optional(bytes_of(v)));
  auto control_bytes = control.build();
  EXPECT_EQ(validate_produced_records(control_bytes).error().code, error_code::invalid_record);
}

TEST(record_validation_test, a_produced_batch_is_stamped_with_its_header) {
  temp_log t;
  ASSERT_TRUE(t.log.ok()) << t.log.error().message;
  auto& log = t.log;
  auto first = batch({now_ms});
  ASSERT_TRUE((*log)->append_as_leader(first, 3).ok());
  auto second = batch({now_ms, now_ms + 5});
  auto produced = validate_produced_records(second);
  ASSERT_TRUE(produced.ok());
  auto appended = (*log)->append_as_leader(*produced, 4);
  ASSERT_TRUE(appended.ok()) << appended.error().message;
  EXPECT_EQ(appended->first_offset, 1);
  EXPECT_EQ(appended->last_offset, 2);
  const auto stamped = *proto::parse_batch_header(second);
  EXPECT_EQ(stamped.base_offset, 1);
  EXPECT_EQ(stamped.partition_leader_epoch, 4);
  EXPECT_EQ(produced->header.base_offset, stamped.base_offset);
  EXPECT_EQ(produced->header.partition_leader_epoch, stamped.partition_leader_epoch);
  EXPECT_EQ(produced->header.max_timestamp, stamped.max_timestamp);
  EXPECT_EQ(produced->header.crc, stamped.crc);
  ASSERT_TRUE((*log)->close().ok());
}

TEST(record_validation_test, partition_log_refuses_the_whole_append) {
  temp_log t;
  ASSERT_TRUE(t.log.ok()) << t.log.error().message;
  auto& log = t.log;
  auto good = batch({now_ms});
  auto bad = batch({now_ms + 2 * hour_ms});
  std::vector<uint8_t> both = good;
  both.insert(both.end(), bad.begin(), bad.end());
  auto appended = (*log)->append_as_leader(both, 0);
  ASSERT_FALSE(appended.ok());
  EXPECT_EQ(appended.error().code, error_code::invalid_timestamp);
  EXPECT_EQ((*log)->log_end_offset(), 0);
  // Replicas do not re-check what their leader accepted.
  proto::stamp_base_offset(bad, 0);
  EXPECT_TRUE((*log)->append_as_follower(bad).ok());
  ASSERT_TRUE((*log)->close().ok());
}

TEST(record_validation_test, roll_listener_sees_the_new_segment_base_offset) {
  auto root = std::filesystem::temp_directory_path() /
              ("mala-record-validation-test-" + std::to_string(std::random_device{}()));
  {
    log_config config;
    config.segment_bytes = 200;
    log_open_options o;
    o.clock_ms = [] { return now_ms; };
    auto log = partition_log::open(root / "orders-0", {"orders", 0}, config, std::move(o));
    ASSERT_TRUE(log.ok()) << log.error().message;
    std::vector<int64_t> rolls;
    (*log)->set_roll_listener([&](int64_t base) -> std::optional<std::filesystem::path> {
      rolls.push_back(base);
      return std::nullopt;
    });
    for (int i = 0; i < 6; ++i) {
      auto b = batch({now_ms, now_ms});
      ASSERT_TRUE((*log)->append_as_leader(b, 0).ok());
    }
    ASSERT_FALSE(rolls.empty());
    EXPECT_EQ(rolls.size() + 1, (*log)->segment_count());
    for (int64_t base : rolls) EXPECT_EQ(base % 2, 0);
    ASSERT_TRUE((*log)->close().ok());
  }
  std::filesystem::remove_all(root);
}

}  // namespace
}  // namespace mala::storage
