#include "mala/raft/partition_raft_log.h"

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <utility>

#include "mala/common/logging.h"
#include "mala/protocol/record_batch.h"
#include "mala/storage/metadata_partition.h"

namespace mala::raft {

namespace {

int64_t system_clock_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

[[noreturn]] void log_misuse(const char* what, long long a, long long b) {
  // As in memory_raft_log: the replica only appends what continues the log and never truncates below the log
  // start; anything else is a bug in the caller, and writing on would corrupt the log.
  std::fprintf(stderr, "partition_raft_log: %s (%lld, %lld)\n", what, a, b);
  std::abort();
}

// Reads up to this many bytes per partition_log read (at least one batch whatever its size).
constexpr int32_t read_chunk_bytes = 1024 * 1024;

}  // namespace

result<std::unique_ptr<partition_raft_log>> partition_raft_log::open(
    const std::filesystem::path& metadata_log_dir, partition_raft_log_options options) {
  auto log = storage::open_metadata_partition(metadata_log_dir, options.clock_ms);
  if (!log.ok()) return log.error();
  return std::make_unique<partition_raft_log>(std::move(*log), std::move(options));
}

partition_raft_log::partition_raft_log(std::unique_ptr<storage::partition_log> log,
                                       partition_raft_log_options options)
    : _log(std::move(log)),
      _clock_ms(options.clock_ms ? std::move(options.clock_ms) : std::function<int64_t()>(system_clock_ms)) {}

partition_raft_log::~partition_raft_log() {
  (void)close();
}

status partition_raft_log::close() {
  if (_closed) return _failure;
  _closed = true;
  auto st = _log->close();
  if (!st.ok() && _failure.ok()) _failure = st;
  return st;
}

const std::filesystem::path& partition_raft_log::dir() const {
  return _log->dir();
}

void partition_raft_log::fail(const status& error) const {
  if (!_failure.ok()) return;
  _failure = error;
  subsystem_logger("raft")->error("{}: metadata log failed, the node must stop: {}", _log->dir().string(),
                                  error.message);
}

int64_t partition_raft_log::start_offset() const {
  return _log->log_start_offset();
}

int64_t partition_raft_log::end_offset() const {
  return _log->log_end_offset();
}

int32_t partition_raft_log::last_fetched_epoch() const {
  // The epoch of the last entry: the latest cache entry that starts below the log end (an epoch assigned
  // without a batch written under it says nothing about the log).
  const auto& entries = _log->epochs().entries();
  const int64_t end = end_offset();
  for (auto it = entries.rbegin(); it != entries.rend(); ++it) {
    if (it->start_offset < end) return it->epoch;
  }
  return 0;
}

offset_and_epoch partition_raft_log::end_offset_for_epoch(int32_t epoch) const {
  const auto& entries = _log->epochs().entries();
  const int64_t end = end_offset();
  // Kafka's KafkaMetadataLog.endOffsetForEpoch over the cache: no epoch at or below the requested one is
  // (start offset, 0); at or above the latest one the log end; otherwise the cache's endOffsetFor, whose end
  // is the start of the next larger epoch.
  const int32_t latest = last_fetched_epoch();
  if (entries.empty() || latest == 0 || epoch < entries.front().epoch) return {start_offset(), 0};
  if (epoch >= latest) return {end, latest};
  const storage::epoch_end_offset found = _log->epochs().end_offset_for_epoch(epoch, end);
  return {found.end_offset, found.epoch};
}

std::vector<log_entry> partition_raft_log::read(int64_t from_offset, size_t max_entries) const {
  std::vector<log_entry> out;
  if (!_failure.ok() || max_entries == 0) return out;
  const int64_t end = end_offset();
  if (from_offset < start_offset() || from_offset >= end) return out;
  int64_t next = from_offset;
  std::vector<uint8_t> decompressed;
  auto corrupt = [&](int64_t offset, std::string_view why) {
    fail(status::error(error_code::corrupt_message,
                       "metadata log batch at offset " + std::to_string(offset) + ": " + std::string(why)));
  };
  while (next < end && out.size() < max_entries) {
    auto read = _log->read(next, read_chunk_bytes, end, /*min_one_batch=*/true);
    if (!read.ok()) {
      fail(read.error());
      return out;
    }
    if (!read->data) break;
    auto bytes = read->data->file->read(read->data->position, read->data->size);
    if (!bytes.ok()) {
      fail(_log->handle_io_error(bytes.error()));
      return out;
    }
    protocol::batch_splitter splitter(*bytes);
    const int64_t before = next;
    while (auto span = splitter.next()) {
      protocol::record_batch_view batch(*span);
      if (!batch.ok()) {
        corrupt(batch.base_offset(), protocol::batch_status_name(batch.status()));
        return out;
      }
      const int32_t epoch = batch.header().partition_leader_epoch;
      auto reader = batch.records(decompressed);
      for (const auto& record : reader) {
        const int64_t offset = batch.offset_of(record);
        if (offset < next) continue;
        log_entry entry{offset, epoch, entry_type::data, {}};
        if (batch.is_control()) {
          const auto type = record.key ? storage::control_record_type(*record.key) : std::nullopt;
          if (type != leader_change_control_type) {
            corrupt(offset, "control record of an unsupported type");
            return out;
          }
          entry.type = entry_type::leader_change;
        }
        if (record.value) entry.payload.assign(record.value->begin(), record.value->end());
        out.push_back(std::move(entry));
        next = offset + 1;
        if (out.size() == max_entries) return out;
      }
      if (!reader.ok()) {
        corrupt(batch.base_offset(), protocol::batch_status_name(reader.status()));
        return out;
      }
      next = std::max(next, batch.header().next_offset());
    }
    if (!splitter.ok()) {
      corrupt(next, protocol::batch_status_name(splitter.status()));
      return out;
    }
    if (next <= before) {
      corrupt(next, "read made no progress");
      return out;
    }
  }
  return out;
}

void partition_raft_log::append(std::span<const log_entry> entries) {
  if (!_failure.ok() || entries.empty()) return;
  // One batch per entry; a run of entries of one epoch goes to the partition log in one write.
  const int64_t now = _clock_ms();
  const auto key = storage::control_record_key(leader_change_control_type);
  int64_t expected = end_offset();
  int32_t last_epoch = last_fetched_epoch();
  size_t i = 0;
  while (i < entries.size()) {
    const int32_t epoch = entries[i].epoch;
    std::vector<uint8_t> run;
    for (; i < entries.size() && entries[i].epoch == epoch; ++i) {
      const log_entry& e = entries[i];
      if (e.offset != expected) log_misuse("append offset does not continue the log", e.offset, expected);
      if (e.epoch < last_epoch) log_misuse("append epoch goes backwards", e.epoch, last_epoch);
      const bool control = e.type == entry_type::leader_change;
      const storage::metadata_batch_record record{
          control ? std::optional<std::span<const uint8_t>>(key) : std::nullopt, e.payload};
      auto batch = storage::build_metadata_batch(std::span(&record, 1), now, control);
      if (!batch.ok()) {
        // Only an entry over the Raft batch limit gets here; the leader refuses those before appending.
        log_misuse("entry does not fit a metadata batch", e.offset, static_cast<long long>(e.payload.size()));
      }
      run.insert(run.end(), batch->begin(), batch->end());
      ++expected;
      last_epoch = e.epoch;
    }
    auto appended = storage::append_metadata_batches(*_log, run, epoch);
    if (!appended.ok()) {
      fail(appended.error());
      return;
    }
  }
}

void partition_raft_log::truncate_to(int64_t offset) {
  if (!_failure.ok()) return;
  if (offset < start_offset()) log_misuse("truncation below the log start", offset, start_offset());
  if (offset >= end_offset()) return;
  if (auto st = _log->truncate_to(offset); !st.ok()) fail(st);
}

status partition_raft_log::flush() {
  if (!_failure.ok()) return _failure;
  if (auto st = _log->flush(); !st.ok()) fail(st);
  return _failure;
}

}  // namespace mala::raft
