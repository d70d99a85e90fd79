#include "mala/storage/partition_log.h"

#include "file_io.h"
#include "partition_log_impl.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <limits>
#include <map>
#include <random>
#include <set>
#include <string>

#include "mala/common/logging.h"
#include "mala/protocol/record_batch.h"
#include "mala/storage/checkpoint_file.h"
#include "mala/storage/cleaning_recovery.h"
#include "mala/storage/record_validation.h"

namespace mala::storage {

namespace {

namespace fs = std::filesystem;
namespace proto = mala::protocol;

// One batch read back from a segment file.
struct stored_batch {
  proto::record_batch_header header;
  int64_t position = 0;
  std::vector<uint8_t> bytes;  // filled by read_batch_bytes
};

std::optional<proto::record_batch_header> read_header(const log_segment& segment, int64_t position) {
  auto bytes = segment.file()->read(position, static_cast<int32_t>(proto::batch_layout::header_size));
  if (!bytes || bytes->size() < proto::batch_layout::header_size) return std::nullopt;
  return proto::parse_batch_header(*bytes);
}

std::optional<std::vector<uint8_t>> read_batch_bytes(const log_segment& segment, int64_t position,
                                                     const proto::record_batch_header& header) {
  auto size = header.size_in_bytes();
  if (size > std::numeric_limits<int32_t>::max()) return std::nullopt;
  auto bytes = segment.file()->read(position, static_cast<int32_t>(size));
  if (!bytes || static_cast<int64_t>(bytes->size()) != size) return std::nullopt;
  return std::move(*bytes);
}

// The first record (offset, timestamp) of an uncompressed batch matching `pred`; for a compressed batch
// (whose records cannot be read here) the batch itself stands in: its max timestamp at `fallback_offset`.
template <typename Pred>
std::optional<std::pair<int64_t, int64_t>> first_record(std::span<const uint8_t> batch,
                                                        int64_t fallback_offset, Pred pred) {
  proto::record_batch_view view(batch, proto::crc_check::skip);
  if (!view.ok()) return std::nullopt;
  if (view.is_compressed()) return std::pair{fallback_offset, view.header().max_timestamp};
  auto reader = view.records();
  for (const auto& r : reader) {
    auto offset = view.offset_of(r);
    auto timestamp = view.timestamp_of(r);
    if (pred(offset, timestamp)) return std::pair{offset, timestamp};
  }
  return std::nullopt;
}

// What validation learned about one batch of a leader append.
struct batch_check {
  std::span<uint8_t> bytes;
  proto::record_batch_header header;
  int64_t offset_delta_of_max_timestamp = 0;
  bool fix_max_timestamp = false;
  int64_t record_max_timestamp = -1;
};

error_code code_for(proto::batch_status s) {
  switch (s) {
    case proto::batch_status::ok:
      return error_code::none;
    case proto::batch_status::negative_record_count:
    case proto::batch_status::malformed_record:
    case proto::batch_status::record_count_mismatch:
      return error_code::invalid_record;
    default:
      return error_code::corrupt_message;
  }
}

}  // namespace

// Kafka's LogSegment.largestTimestamp: the largest batch timestamp, or the file's modification time for a
// segment without timestamps, so that retention.ms still applies to it.
int64_t partition_log_parts::largest_timestamp(const log_segment& segment) {
  if (segment.max_timestamp() >= 0) return segment.max_timestamp();
  struct stat st {};
  if (::stat(segment.log_path().c_str(), &st) != 0) return -1;
  return static_cast<int64_t>(st.st_mtim.tv_sec) * 1000 + st.st_mtim.tv_nsec / 1'000'000;
}

// ---------------------------------------------------------------------------------------------------------------
// Opening and recovery (Kafka's LogLoader, without producer state and compaction swaps).

// The standby segment a crash left (partition_log_impl.h): unused, its files go; adopted by a roll whose
// renames had not run, its .log holds the head of the log from its first batch's base offset on, and takes
// that name (its indexes are rebuilt by the load, which finds them missing).
status partition_log::impl::recover_standby() {
  auto standby_path = [&](std::string_view suffix) {
    return segment_file_path(dir, 0, suffix).string() + std::string(standby_suffix);
  };
  const std::string log_file = standby_path(log_suffix);
  std::error_code ec;
  if (fs::exists(log_file, ec)) {
    std::optional<int64_t> base;
    const int fd = ::open(log_file.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
      uint8_t header[protocol::batch_layout::header_size];
      if (::pread(fd, header, sizeof header, 0) == static_cast<ssize_t>(sizeof header)) {
        if (auto parsed = protocol::parse_batch_header(std::span<const uint8_t>(header, sizeof header)))
          base = parsed->base_offset;
      }
      ::close(fd);
    }
    if (base && *base >= 0) {
      const auto target = segment_file_path(dir, *base, log_suffix);
      if (fs::exists(target, ec)) {
        return storage_error(tp, "a standby segment holds data from offset " + std::to_string(*base) +
                                     " and " + target.string() + " exists too");
      }
      subsystem_logger("storage")->warn("{}: the standby segment holds data from offset {}: renamed to {}",
                                        describe(tp), *base, target.string());
      if (::rename(log_file.c_str(), target.c_str()) != 0)
        return storage_error(tp, "cannot rename " + log_file + ": " + std::strerror(errno));
      const std::string txns = standby_path(txn_index_suffix);
      if (fs::exists(txns, ec)) {
        const auto txn_target = segment_file_path(dir, *base, txn_index_suffix);
        if (::rename(txns.c_str(), txn_target.c_str()) != 0)
          return storage_error(tp, "cannot rename " + txns + ": " + std::strerror(errno));
      }
    }
  }
  for (auto suffix : {log_suffix, offset_index_suffix, time_index_suffix, txn_index_suffix}) {
    std::error_code rm;
    fs::remove(standby_path(suffix), rm);
  }
  return status::success();
}

status partition_log::impl::load(const log_open_options& options) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return storage_error(tp, "cannot create " + dir + ": " + ec.message());

  if (options.topic_id) {
    auto existing = read_partition_metadata(dir);
    if (!existing) return storage_error(tp, existing.error().message);
    if (existing->has_value()) {
      if (**existing != *options.topic_id) {
        return status::error(error_code::inconsistent_topic_id,
                             describe(tp) + ": " + dir + "/partition.metadata has topic id " +
                                 (*existing)->to_string() + ", expected " + options.topic_id->to_string());
      }
    } else if (auto st = write_partition_metadata(dir, *options.topic_id); !st.ok()) {
      return storage_error(tp, st.message);
    }
  }

  if (auto st = recover_standby(); !st.ok()) return st;

  // First pass: files a crash left behind. Segments renamed for deletion and half-written checkpoint temp
  // files go; a clean interrupted by the crash is rolled back or completed (cleaning_recovery.h). Index
  // files without their .log go too (Kafka's orphaned index check).
  std::vector<std::string> names;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    if (it->is_regular_file()) names.push_back(it->path().filename().string());
  }
  if (ec) return storage_error(tp, "cannot list " + dir + ": " + ec.message());
  if (auto st = recover_interrupted_clean(names); !st.ok()) return st;
  std::set<int64_t> bases;
  std::vector<fs::path> index_files;
  for (const auto& name : names) {
    if (name.ends_with(".tmp")) {
      std::error_code rm;
      fs::remove(fs::path(dir) / name, rm);
      continue;
    }
    if (auto base = parse_segment_base_offset(name, log_suffix)) {
      bases.insert(*base);
    } else if (parse_segment_base_offset(name, offset_index_suffix) ||
               parse_segment_base_offset(name, time_index_suffix) ||
               parse_segment_base_offset(name, txn_index_suffix)) {
      index_files.push_back(fs::path(dir) / name);
    }
  }
  for (const auto& path : index_files) {
    auto name = path.filename().string();
    auto base = parse_segment_base_offset(name, offset_index_suffix);
    if (!base) base = parse_segment_base_offset(name, time_index_suffix);
    if (!base) base = parse_segment_base_offset(name, txn_index_suffix);
    if (base && !bases.contains(*base)) {
      subsystem_logger("storage")->warn("{}: deleting orphaned index file {}", describe(tp), path.string());
      std::error_code rm;
      fs::remove(path, rm);
    }
  }

  auto loaded_epochs = leader_epoch_cache::load(dir);
  if (!loaded_epochs) return storage_error(tp, loaded_epochs.error().message);
  epochs = std::move(*loaded_epochs);

  // Second pass: open every segment. A missing or corrupt index is rebuilt by rescanning its segment,
  // whatever the shutdown was.
  std::map<int64_t, segment_recovery> recovered_at_open;  // by base offset
  for (auto base : bases) {
    auto segment = log_segment::open(dir, base, config, false, clock);
    if (!segment)
      return storage_error(tp,
                           "cannot open segment " + offset_file_stem(base) + ": " + segment.error().message);
    bool missing_index = (*segment)->index_files_created();
    auto& seg = *segment;
    bool corrupt_index = false;
    if (!missing_index) {
      if (auto check = seg->check_indexes(); !check.ok()) {
        corrupt_index = true;
        subsystem_logger("storage")->warn("{}: corrupt index for segment {} ({}); rebuilding", describe(tp),
                                          base, check.message);
      }
    }
    if (missing_index || corrupt_index) {
      auto recovered = seg->recover();
      if (!recovered)
        return storage_error(
            tp, "cannot recover segment " + offset_file_stem(base) + ": " + recovered.error().message);
      report.indexes_rebuilt++;
      report.truncated_bytes += recovered->truncated_bytes;
      recovered_at_open[base] = std::move(*recovered);
    }
    segments.emplace(base, std::move(seg));
  }

  // Third pass, after an unclean shutdown only: rescan every segment from the one holding the recovery point.
  // Data after a torn or corrupt batch cannot be trusted, so the first truncating recovery deletes every
  // later segment (Kafka's recoverLog).
  if (!options.clean_shutdown && !segments.empty()) {
    report.scanned = true;
    auto from = floor_segment(options.recovery_point);
    if (from == segments.end()) from = segments.begin();
    for (auto it = segments.begin(); it != segments.end(); ++it) {
      if (it->first < from->first) continue;
      segment_recovery scanned;
      if (auto done = recovered_at_open.find(it->first); done != recovered_at_open.end()) {
        scanned = std::move(done->second);  // already rescanned for its index
      } else {
        auto recovered = it->second->recover();
        if (!recovered) {
          return storage_error(
              tp, "cannot recover segment " + offset_file_stem(it->first) + ": " + recovered.error().message);
        }
        scanned = std::move(*recovered);
        report.truncated_bytes += scanned.truncated_bytes;
      }
      const int64_t cut = scanned.truncated_bytes;
      report.segments_scanned++;
      // The epoch checkpoint is written without an fsync (leader_epoch_cache::assign): the batches say which
      // epochs the recovered data holds (Kafka's LogSegment.recover).
      for (const auto& e : scanned.epoch_starts) {
        const auto latest = epochs.latest_epoch();
        if (latest && e.epoch <= *latest) continue;
        if (auto st = epochs.assign(e.epoch, e.start_offset); !st.ok()) return storage_error(tp, st.message);
      }
      if (cut > 0) {
        subsystem_logger("storage")->warn(
            "{}: corruption in segment {}: cut {} bytes, log now ends at offset {}", describe(tp), it->first,
            cut, it->second->next_offset());
        for (auto later = std::next(it); later != segments.end();) {
          report.truncated_bytes += later->second->size();
          if (auto st = later->second->delete_files(); !st.ok()) return storage_error(tp, st.message);
          later = segments.erase(later);
        }
        break;
      }
    }
  }

  int64_t checkpointed_start = options.log_start_offset.value_or(0);
  // Kafka's deleteSegmentsIfLogStartGreaterThanLogEnd: segment files deleted behind the broker's back leave a
  // log ending before its start; it restarts empty at the checkpointed start.
  if (!segments.empty() && active().next_offset() < checkpointed_start) {
    subsystem_logger("storage")->warn(
        "{}: log end offset {} is below log start offset {}; deleting all segments", describe(tp),
        active().next_offset(), checkpointed_start);
    for (auto& [base, segment] : segments) {
      if (auto st = segment->delete_files(); !st.ok()) return storage_error(tp, st.message);
    }
    segments.clear();
    if (auto st = epochs.clear(); !st.ok()) return storage_error(tp, st.message);
  }
  if (segments.empty()) {
    auto segment = create_segment(checkpointed_start);
    if (!segment) return segment.error();
    segments.emplace(checkpointed_start, std::move(*segment));
  } else {
    // The active segment's indexes take appends again (they were trimmed by the last roll or close).
    active_indexes_sized_by_open = true;
    auto& last = active();
    if (auto st = last.offsets().resize(config.segment_index_bytes); !st.ok())
      return storage_error(tp, st.message);
    if (auto st = last.times().resize(config.segment_index_bytes); !st.ok())
      return storage_error(tp, st.message);
  }

  log_end_offset = active().next_offset();
  log_start_offset = std::max(checkpointed_start, segments.begin()->first);
  // Only a clean shutdown proves everything was flushed; otherwise the recovery point never moves ahead here.
  recovery_point = options.clean_shutdown ? log_end_offset : std::min(options.recovery_point, log_end_offset);
  flush_pending_offset = recovery_point;
  last_flush_ms = clock();
  new_jitter();

  // The checkpoint is written before the data it describes, so after a crash it can be ahead of the log.
  if (auto st = epochs.truncate_from_end(log_end_offset); !st.ok()) return storage_error(tp, st.message);
  if (auto st = epochs.truncate_from_start(log_start_offset); !st.ok()) return storage_error(tp, st.message);
  return status::success();
}

namespace {

// The offset after the last whole batch of the segment file at `path` (its base offset when it holds none),
// by hopping over batch headers; nullopt when it cannot be opened or read, or is not named as a segment.
std::optional<int64_t> next_offset_of_segment(const fs::path& path, int64_t base_offset) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return std::nullopt;
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    ::close(fd);
    return std::nullopt;
  }
  int64_t next = base_offset;
  int64_t position = 0;
  uint8_t header[protocol::batch_layout::header_size];
  while (position + static_cast<int64_t>(sizeof header) <= st.st_size) {
    const ssize_t got = ::pread(fd, header, sizeof header, position);
    if (got != static_cast<ssize_t>(sizeof header)) break;
    auto h = protocol::parse_batch_header({header, sizeof header});
    if (!h || h->batch_length < 0) break;
    const int64_t end = position + h->size_in_bytes();
    if (end > st.st_size) break;  // a torn last batch: the load's recovery cuts it
    next = std::max(next, h->next_offset());
    position = end;
  }
  ::close(fd);
  return next;
}

}  // namespace

status partition_log::impl::recover_interrupted_clean(std::vector<std::string>& names) {
  const auto plan = plan_swap_recovery(names, [&](const std::string& swap_name) -> std::optional<int64_t> {
    const std::string stem = swap_name.substr(0, swap_name.size() - swap_suffix.size());
    auto base = parse_segment_base_offset(stem, log_suffix);
    if (!base) return std::nullopt;
    return next_offset_of_segment(fs::path(dir) / swap_name, *base);
  });
  for (const auto& name : plan.remove) {
    std::error_code rm;
    fs::remove(fs::path(dir) / name, rm);
    if (rm) return storage_error(tp, "cannot delete " + name + ": " + rm.message());
  }
  for (const auto& [from, to] : plan.renames) {
    subsystem_logger("storage")->info("{}: completing an interrupted clean: {} -> {}", describe(tp), from,
                                      to);
    if (::rename((fs::path(dir) / from).c_str(), (fs::path(dir) / to).c_str()) != 0)
      return detail::io_error("cannot rename", fs::path(dir) / from, errno);
  }
  if (plan.renames.empty() && plan.remove.empty()) return status::success();
  std::erase_if(names, [&](const std::string& n) {
    return std::find(plan.remove.begin(), plan.remove.end(), n) != plan.remove.end();
  });
  for (const auto& [from, to] : plan.renames) std::replace(names.begin(), names.end(), from, to);
  // A completed swap is made durable before the load goes on (removals need not be: a later load redoes
  // them).
  if (!plan.renames.empty()) {
    if (auto st = detail::fsync_dir(dir); !st.ok()) return storage_error(tp, st.message);
  }
  return status::success();
}

result<std::unique_ptr<partition_log>> partition_log::open(const std::filesystem::path& dir,
                                                           topic_partition tp, const log_config& config,
                                                           log_open_options options) {
  std::unique_ptr<partition_log> log(new partition_log());
  log->_impl = std::make_unique<impl>();
  auto& m = *log->_impl;
  m.dir = dir.string();
  m.tp = std::move(tp);
  m.config = config;
  m.clock = options.clock_ms ? options.clock_ms : std::function<int64_t()>(system_clock_ms);
  m.worker = options.worker;
  if (auto st = m.load(options); !st.ok()) return st;
  if (m.report.scanned || m.report.indexes_rebuilt > 0) {
    subsystem_logger("storage")->info(
        "{}: recovered log: {} segment(s) scanned, {} index(es) rebuilt, {} bytes cut; offsets {}..{}",
        describe(m.tp), m.report.segments_scanned, m.report.indexes_rebuilt, m.report.truncated_bytes,
        m.log_start_offset, m.log_end_offset);
  }
  return log;
}

partition_log::~partition_log() = default;

const topic_partition& partition_log::partition() const {
  return _impl->tp;
}
std::filesystem::path partition_log::dir() const {
  return _impl->dir;
}
const log_config& partition_log::config() const {
  return _impl->config;
}
void partition_log::update_config(const log_config& config) {
  auto& m = *_impl;
  const bool roll_time_changed =
      config.segment_ms != m.config.segment_ms || config.segment_jitter_ms != m.config.segment_jitter_ms;
  const bool index_size_changed = config.segment_index_bytes != m.config.segment_index_bytes;
  m.config = config;
  // Every segment, not only the active one: a truncation can make an older segment active again.
  for (auto& [base, segment] : m.segments) segment->update_config(config);
  if (std::exchange(m.active_indexes_sized_by_open, false) && index_size_changed && !m.segments.empty()) {
    auto& last = m.active();
    auto resized = last.offsets().resize(config.segment_index_bytes);
    if (resized.ok()) resized = last.times().resize(config.segment_index_bytes);
    if (!resized.ok()) {
      // The indexes keep their size (they still serve and take entries); the next roll applies the value.
      subsystem_logger("storage")->warn("{}: cannot resize the active segment's indexes to {} bytes: {}",
                                        describe(m.tp), config.segment_index_bytes, resized.message);
    }
  }
  // The jitter is drawn again only when its bounds moved: a retention change must not move the next roll.
  if (roll_time_changed) m.new_jitter();
}
const log_recovery_report& partition_log::recovery_report() const {
  return _impl->report;
}
void partition_log::set_roll_listener(std::function<std::optional<fs::path>(int64_t)> listener) {
  _impl->roll_listener = std::move(listener);
}
void partition_log::set_failure_listener(std::function<void(const status& error)> listener) {
  _impl->failure_listener = std::move(listener);
}
status partition_log::handle_io_error(const status& error) {
  return _impl->fail(error);
}
void partition_log::release_descriptors() {
  auto& m = *_impl;
  for (auto& [base, segment] : m.segments) (void)segment->release_descriptor();
  for (auto& pending : m.pending_deletes) (void)pending.segment->release_descriptor();
}

void partition_log::mark_offline(const std::string& reason) {
  auto& m = *_impl;
  if (m.offline()) return;
  m.failure = storage_error(m.tp, "log is offline: " + reason);
}
bool partition_log::is_offline() const {
  return _impl->offline();
}
const status& partition_log::offline_error() const {
  return _impl->failure;
}
int64_t partition_log::log_start_offset() const {
  return _impl->log_start_offset;
}
int64_t partition_log::log_end_offset() const {
  return _impl->log_end_offset;
}
int64_t partition_log::recovery_point() const {
  return _impl->recovery_point;
}
int64_t partition_log::size_bytes() const {
  return _impl->size_bytes();
}
size_t partition_log::segment_count() const {
  return _impl->segments.size();
}
const std::shared_ptr<file_worker>& partition_log::worker() const {
  return _impl->worker;
}
int64_t partition_log::standby_rolls() const {
  return _impl->standbys_adopted;
}
leader_epoch_cache& partition_log::epochs() {
  return _impl->epochs;
}

// ---------------------------------------------------------------------------------------------------------------
// Appends.

result<append_result> partition_log::impl::append(std::span<uint8_t> leader_records,
                                                  std::span<const uint8_t> follower_records,
                                                  std::optional<int32_t> leader_epoch,
                                                  proto::record_batch_header* parsed) {
  const bool as_leader = leader_epoch.has_value();
  std::span<const uint8_t> all = as_leader ? std::span<const uint8_t>(leader_records) : follower_records;
  append_result out;
  if (offline()) return failure;
  if (closed) return storage_error(tp, "append to a closed log");
  if (all.empty()) return out;
  // Kafka refuses a request larger than a whole segment: it could never be appended (RecordBatchTooLarge).
  if (all.size() > static_cast<size_t>(config.segment_bytes)) {
    return status::error(error_code::record_list_too_large, describe(tp) + ": " + std::to_string(all.size()) +
                                                                " bytes exceed segment.bytes " +
                                                                std::to_string(config.segment_bytes));
  }

  // Validate every batch before anything is stamped or written: a request is appended whole or not at all.
  const int64_t now = clock();
  std::vector<batch_check> checks;
  proto::batch_splitter splitter(all);
  int64_t expected_offset = log_end_offset;
  while (auto batch = splitter.next()) {
    auto offset_in_request = static_cast<size_t>(batch->data() - all.data());
    batch_check check;
    if (as_leader) check.bytes = leader_records.subspan(offset_in_request, batch->size());
    auto st = proto::validate_batch(*batch);
    if (st != proto::batch_status::ok) {
      return status::error(code_for(st), describe(tp) + ": batch at byte " +
                                             std::to_string(offset_in_request) +
                                             " is invalid: " + std::string(proto::batch_status_name(st)));
    }
    check.header = parsed && checks.empty() ? *parsed : *proto::parse_batch_header(*batch);
    const auto& h = check.header;
    // Replicas skip max.message.bytes (Kafka's ignoreRecordSize): the leader accepted the batch, possibly
    // under an older limit, and a follower that refused it could never catch up.
    if (as_leader && h.size_in_bytes() > config.max_message_bytes) {
      return status::error(error_code::message_too_large, describe(tp) + ": batch of " +
                                                              std::to_string(h.size_in_bytes()) +
                                                              " bytes exceeds max.message.bytes " +
                                                              std::to_string(config.max_message_bytes));
    }
    if (h.last_offset_delta < 0) {
      return status::error(error_code::invalid_record, describe(tp) + ": negative lastOffsetDelta " +
                                                           std::to_string(h.last_offset_delta));
    }
    if (as_leader) {
      bool needs_record_check = true;
      // Kafka's LogValidator: the header's record count must agree with lastOffsetDelta, and every record of
      // an uncompressed batch must be readable with consecutive offset deltas. maxTimestamp is corrected to
      // the largest record timestamp (CreateTime), as Kafka does.
      if (h.compression() == proto::compression_codec::none) {
        if (h.record_count != h.last_offset_delta + 1 || h.record_count <= 0) {
          return status::error(error_code::invalid_record,
                               describe(tp) + ": record count " + std::to_string(h.record_count) +
                                   " does not match lastOffsetDelta " + std::to_string(h.last_offset_delta));
        }
        // One pass over the records (framing, offset deltas, timestamps, null keys) without record views.
        const auto scan = proto::scan_records(batch->subspan(proto::batch_layout::header_size),
                                              h.record_count, h.base_timestamp);
        if (!scan.consecutive_offset_deltas) {
          return status::error(error_code::invalid_record, describe(tp) + ": record offset delta " +
                                                               std::to_string(scan.first_wrong_offset_delta) +
                                                               ", expected " +
                                                               std::to_string(scan.first_wrong_index));
        }
        if (scan.status != proto::batch_status::ok || scan.records != h.record_count) {
          auto why = scan.status != proto::batch_status::ok ? scan.status
                                                            : proto::batch_status::record_count_mismatch;
          return status::error(error_code::invalid_record, describe(tp) + ": invalid record in batch: " +
                                                               std::string(proto::batch_status_name(why)));
        }
        const bool log_append_kind = h.timestamp_kind() == proto::timestamp_type::log_append_time;
        const int64_t max_ts = log_append_kind ? h.max_timestamp : scan.max_timestamp;
        check.offset_delta_of_max_timestamp = log_append_kind ? 0 : scan.offset_delta_of_max_timestamp;
        check.record_max_timestamp = max_ts;
        check.fix_max_timestamp = !log_append_kind && max_ts != h.max_timestamp;
        needs_record_check = record_contents_need_check(h, scan, config, now);
      } else {
        check.offset_delta_of_max_timestamp = h.last_offset_delta;
      }
      // Keys on compacted topics, timestamp bounds (message.timestamp.before/after.max.ms): the per-record
      // pass, only when the scan says something may be wrong (it lists the records at fault).
      if (auto failure = needs_record_check ? validate_record_contents(*batch, config, now) : std::nullopt) {
        std::string detail = failure->message;
        if (!failure->record_errors.empty()) detail += ": " + failure->record_errors.front().message;
        return status::error(failure->code, describe(tp) + ": batch at byte " +
                                                std::to_string(offset_in_request) + ": " + detail);
      }
    } else {
      // Replicated batches keep their offsets, which must continue the log without overlap.
      // The first must start exactly at the log end offset; later ones may leave gaps (compacted leaders).
      bool in_order = checks.empty() ? h.base_offset == expected_offset : h.base_offset >= expected_offset;
      if (!in_order) {
        return status::error(error_code::unknown_server_error,
                             describe(tp) + ": replicated batch at offset " + std::to_string(h.base_offset) +
                                 (checks.empty() ? " does not start at the log end offset "
                                                 : " is out of order after offset ") +
                                 std::to_string(expected_offset));
      }
      expected_offset = h.next_offset();
    }
    checks.push_back(check);
  }
  if (!splitter.ok()) {
    return status::error(error_code::corrupt_message,
                         describe(tp) + ": malformed record set at byte " +
                             std::to_string(splitter.position()) + ": " +
                             std::string(proto::batch_status_name(splitter.status())));
  }
  if (checks.empty()) return out;

  // Stamp the leader-owned fields. Base offset and leader epoch are outside the CRC; LogAppendTime and a
  // corrected maxTimestamp are inside it, so those rewrite the CRC.
  if (as_leader) {
    int64_t next = log_end_offset;
    for (auto& c : checks) {
      proto::stamp_base_offset(c.bytes, next);
      proto::stamp_partition_leader_epoch(c.bytes, *leader_epoch);
      c.header.base_offset = next;
      c.header.partition_leader_epoch = *leader_epoch;
      if (config.log_append_time) {
        proto::stamp_log_append_time(c.bytes, now);
        c.offset_delta_of_max_timestamp =
            0;  // every record carries the append time; the first one is the max
        c.header = *proto::parse_batch_header(c.bytes);
      } else if (c.fix_max_timestamp) {
        auto ts = static_cast<uint64_t>(c.record_max_timestamp);
        for (size_t i = 0; i < 8; ++i) {
          c.bytes[proto::batch_layout::max_timestamp + i] = static_cast<uint8_t>(ts >> (56 - 8 * i));
        }
        proto::rewrite_batch_crc(c.bytes);
        c.header = *proto::parse_batch_header(c.bytes);
      }
      next = c.header.next_offset();
    }
    if (parsed) *parsed = checks.front().header;
  }

  const int64_t first_offset = checks.front().header.base_offset;
  const int64_t last_offset = checks.back().header.last_offset();
  int64_t set_max_timestamp = -1;
  for (const auto& c : checks) set_max_timestamp = std::max(set_max_timestamp, c.header.max_timestamp);
  // Roll first when the active segment cannot take this request (size, age, full index, relative offsets).
  auto& current = active();
  if (current.size() > 0 && current.should_roll(static_cast<int32_t>(all.size()), now, last_offset,
                                                rolling_jitter_ms, set_max_timestamp)) {
    if (auto st = roll(first_offset); !st.ok()) return fail_on_io_error(st);
    if (roll_listener) {
      if (auto written = roll_listener(first_offset)) files_to_sync.push_back(std::move(*written));
    }
  }

  // The epoch cache is written before the data (as Kafka does), so after a crash it may be ahead of the log
  // but never behind; loading truncates it to the log end offset.
  if (as_leader) {
    auto latest = epochs.latest_epoch();
    if (*leader_epoch >= 0 && (!latest || *leader_epoch > *latest)) {
      if (auto st = epochs.assign(*leader_epoch, first_offset); !st.ok()) return fail(st);
    }
  } else {
    for (const auto& c : checks) {
      if (c.header.partition_leader_epoch >= 0) {
        if (auto st = epochs.assign(c.header.partition_leader_epoch, c.header.base_offset); !st.ok()) {
          return fail(st);
        }
      }
    }
  }

  auto& segment = active();
  const int64_t end_before = log_end_offset;
  const int64_t size_before = segment.size();
  size_t position = 0;
  for (const auto& c : checks) {
    const auto& h = c.header;
    auto bytes = all.subspan(position, static_cast<size_t>(h.size_in_bytes()));
    position += bytes.size();
    appended_batch info{h.base_offset, h.last_offset(), h.max_timestamp, h.last_offset()};
    if (auto st = segment.append(bytes, info); !st.ok()) {
      // A request is appended whole or not at all: the batches of it already written are cut again (the
      // failed one cut itself), and the log end offset stays where it was. Then the log goes offline (Kafka
      // takes the dir offline on any IOException); if the cut failed too, the next start's recovery does it.
      if (segment.size() > size_before) {
        if (auto cut = segment.truncate_to(end_before); !cut) {
          subsystem_logger("storage")->error("{}: cannot cut a failed append back to offset {}: {}",
                                             describe(tp), end_before, cut.error().message);
        }
      }
      log_end_offset = end_before;
      return fail(status::error(error_code::kafka_storage_error, "append failed: " + st.message));
    }
    log_end_offset = h.next_offset();
    if (out.batches == 0 || h.max_timestamp > out.max_timestamp) {
      out.max_timestamp = h.max_timestamp;
      out.offset_of_max_timestamp = h.base_offset + c.offset_delta_of_max_timestamp;
    }
    out.batches++;
    out.bytes += static_cast<int64_t>(bytes.size());
  }
  out.first_offset = first_offset;
  out.last_offset = last_offset;
  if (as_leader && config.log_append_time) out.log_append_time = now;
  last_append_ms = clock();
  ask_for_standby_if_near(false, set_max_timestamp);
  if (worker) {
    for (auto& job : segment.index_reservations_ahead()) worker->post(std::move(job));
  }
  return out;
}

result<append_result> partition_log::append_as_leader(std::span<uint8_t> records, int32_t leader_epoch) {
  return _impl->append(records, {}, leader_epoch);
}

result<append_result> partition_log::append_as_leader(produced_batch& batch, int32_t leader_epoch) {
  return _impl->append(batch.bytes, {}, leader_epoch, &batch.header);
}

result<append_result> partition_log::append_as_follower(std::span<const uint8_t> records) {
  return _impl->append({}, records, std::nullopt);
}

// ---------------------------------------------------------------------------------------------------------------
// Reads.

result<read_result> partition_log::read(int64_t start_offset, int32_t max_bytes, int64_t max_offset,
                                        bool min_one_batch) const {
  const auto& m = *_impl;
  // Nothing of an offline log is served: its files may end in a batch whose write failed half-way.
  if (m.offline()) return m.failure;
  read_result out;
  out.log_start_offset = m.log_start_offset;
  out.log_end_offset = m.log_end_offset;
  if (start_offset < m.log_start_offset || start_offset > m.log_end_offset) {
    return status::error(error_code::offset_out_of_range,
                         describe(m.tp) + ": offset " + std::to_string(start_offset) + " is outside " +
                             std::to_string(m.log_start_offset) + ".." + std::to_string(m.log_end_offset));
  }
  if (start_offset == m.log_end_offset || start_offset >= max_offset) return out;
  auto it = m.floor_segment(start_offset);
  if (it == m.segments.end()) it = m.segments.begin();
  // A segment may hold nothing at or after the offset (the rest of it was never written or was truncated):
  // the next segment continues the log.
  for (; it != m.segments.end() && it->first < max_offset; ++it) {
    auto slice = it->second->read(start_offset, max_bytes, max_offset, it->second->size(), min_one_batch);
    if (slice) {
      if (slice->size > 0) out.data = std::move(*slice);
      return out;
    }
  }
  return out;
}

// ---------------------------------------------------------------------------------------------------------------
// Aborted transactions (.txnindex).

status partition_log::append_aborted_txn(const aborted_txn& txn) {
  auto& m = *_impl;
  if (m.offline()) return m.failure;
  auto it = m.floor_segment(txn.last_offset);
  if (it == m.segments.end()) {
    return status::error(
        error_code::unknown_server_error,
        describe(m.tp) + ": no segment holds the marker at offset " + std::to_string(txn.last_offset));
  }
  // In memory at once; the file is written off the shard (the worker, or a thread that needs the files
  // first) and synced with the data by the next flush, like a roll's producer snapshot.
  status error;
  auto work = it->second->append_aborted_txn_later(txn, error);
  if (!error.ok()) return m.fail_on_io_error(error);
  if (!work) return status::success();
  // An entry added to a job not started yet (aborts between two runs of the worker) is already posted.
  if (!m.txn_index_writes.empty() && m.txn_index_writes.back().work == work) return status::success();
  if (m.worker) {
    m.worker->post([work] { work->run(); });
  } else if (auto st = work->finish(); !st.ok()) {
    return m.fail_on_io_error(st);
  }
  m.txn_index_writes.push_back({it->second->txn_index_path(), std::move(work)});
  return status::success();
}

status partition_log::truncate_aborted_txns(int64_t offset) {
  auto& m = *_impl;
  if (m.offline()) return m.failure;
  // Entries end at their marker, which lies in the segment holding the entry: only segments that reach
  // `offset` can hold one to drop.
  auto it = m.floor_segment(offset);
  if (it == m.segments.end()) it = m.segments.begin();
  for (; it != m.segments.end(); ++it) {
    if (auto st = it->second->txns().truncate_to(offset); !st.ok()) return m.fail_on_io_error(st);
  }
  return status::success();
}

result<std::vector<aborted_txn>> partition_log::collect_aborted_transactions(int64_t fetch_offset,
                                                                             int64_t upper_bound) const {
  const auto& m = *_impl;
  if (m.offline()) return m.failure;
  std::vector<aborted_txn> out;
  auto it = m.floor_segment(fetch_offset);
  if (it == m.segments.end()) it = m.segments.begin();
  // Kafka's LocalLog.collectAbortedTransactions: from the segment holding the fetch offset on, until an entry
  // shows that no later one can overlap the range (its LSO is at or past the upper bound). A later segment
  // may hold the abort of a transaction that started inside the range, so the walk is not cut at the bound.
  for (; it != m.segments.end(); ++it) {
    auto complete = it->second->collect_aborted_txns(fetch_offset, upper_bound, out);
    if (!complete) return storage_error(m.tp, complete.error().message);
    if (*complete) break;
  }
  return out;
}

std::optional<offset_for_timestamp> partition_log::find_offset_by_timestamp(int64_t timestamp,
                                                                            int64_t max_offset) const {
  const auto& m = *_impl;
  if (m.offline()) return std::nullopt;
  auto batch_epoch = [&](int32_t ple, int64_t offset) -> std::optional<int32_t> {
    if (ple >= 0) return ple;
    return m.epochs.epoch_for_offset(offset);
  };

  if (timestamp == earliest_timestamp || timestamp == earliest_local_timestamp) {
    // No tiered storage: the earliest local offset is the log start offset. The first cached epoch applies
    // only if it starts at or before the log start (Kafka's check).
    offset_for_timestamp out{-1, m.log_start_offset, std::nullopt};
    if (!m.epochs.entries().empty() && m.epochs.entries().front().start_offset <= m.log_start_offset) {
      out.leader_epoch = m.epochs.entries().front().epoch;
    }
    return out;
  }
  if (timestamp == latest_timestamp) {
    // max_offset is the high watermark (or last stable offset) for consumers, the log end offset for
    // replicas.
    return offset_for_timestamp{-1, std::min(max_offset, m.log_end_offset), m.epochs.latest_epoch()};
  }
  if (timestamp == max_timestamp_query) {
    const log_segment* best = nullptr;
    for (const auto& [base, segment] : m.segments) {
      if (segment->size() > 0 && (!best || segment->max_timestamp() > best->max_timestamp()))
        best = segment.get();
    }
    if (!best) return std::nullopt;
    auto located = best->find_batch(best->offset_of_max_timestamp());
    if (!located) return std::nullopt;
    for (int64_t pos = located->position; pos < best->size();) {
      auto header = read_header(*best, pos);
      if (!header) return std::nullopt;
      if (header->max_timestamp == best->max_timestamp()) {
        auto bytes = read_batch_bytes(*best, pos, *header);
        if (!bytes) return std::nullopt;
        auto target = header->max_timestamp;
        auto hit =
            first_record(*bytes, header->last_offset(), [&](int64_t, int64_t ts) { return ts == target; });
        if (!hit || hit->first >= max_offset) return std::nullopt;
        return offset_for_timestamp{target, hit->first,
                                    batch_epoch(header->partition_leader_epoch, hit->first)};
      }
      pos += header->size_in_bytes();
    }
    return std::nullopt;
  }
  if (timestamp < 0) return std::nullopt;

  // Kafka's searchOffsetInLocalLog: the first segment whose largest timestamp reaches the target, then, from
  // the time index's hint, the first record at or after the log start offset with a timestamp >= the target.
  for (const auto& [base, segment] : m.segments) {
    if (segment->size() == 0 || segment->max_timestamp() < timestamp) continue;
    auto hint = segment->find_offset_by_timestamp(timestamp);
    int64_t from_offset = std::max(hint ? hint->offset : base, m.log_start_offset.load());
    auto located = segment->find_batch(from_offset);
    if (!located) continue;
    for (int64_t pos = located->position; pos < segment->size();) {
      auto header = read_header(*segment, pos);
      if (!header) return std::nullopt;
      if (header->max_timestamp >= timestamp && header->last_offset() >= m.log_start_offset) {
        auto bytes = read_batch_bytes(*segment, pos, *header);
        if (!bytes) return std::nullopt;
        auto hit = first_record(
            *bytes, std::max(header->base_offset, m.log_start_offset.load()),
            [&](int64_t offset, int64_t ts) { return ts >= timestamp && offset >= m.log_start_offset; });
        if (hit) {
          if (hit->first >= max_offset) return std::nullopt;
          return offset_for_timestamp{hit->second, hit->first,
                                      batch_epoch(header->partition_leader_epoch, hit->first)};
        }
      }
      pos += header->size_in_bytes();
    }
  }
  return std::nullopt;
}

// ---------------------------------------------------------------------------------------------------------------
// Flushing and closing.

bool partition_log::impl::fail_on_failed_sync() {
  // A background fsync handed out earlier failed: the data it covered may never reach the disk. Only
  // handed-out work can fail unseen, so a log that never had any (flush.messages / flush.ms unbounded; the
  // check runs every second for every log) skips the walk over its unflushed segments.
  if (!flush_work_handed_out) return false;
  auto failed = failed_sync();
  if (!failed) return false;
  (void)fail(*failed);
  return true;
}

std::vector<std::shared_ptr<const segment_file>> partition_log::impl::hand_out_unflushed(int64_t now_ms) {
  auto& m = *this;
  std::vector<std::shared_ptr<const segment_file>> files;
  const int64_t flushed = std::max(m.recovery_point.load(), m.flush_pending_offset);
  if (m.log_end_offset > flushed) {
    auto it = m.floor_segment(flushed);
    if (it == m.segments.end()) it = m.segments.begin();
    for (; it != m.segments.end(); ++it) {
      // The renames and trims the worker did for these segments: a failed one takes the log offline.
      if (auto st = it->second->collect_deferred(); !st.ok()) {
        (void)m.fail(storage_error(m.tp, st.message));
        return {};
      }
      files.push_back(it->second->file());
    }
  }
  for (auto& path : m.files_to_sync) files.push_back(segment_file::by_path(std::move(path)));
  m.files_to_sync.clear();
  for (auto& w : m.txn_index_writes) {
    auto path = w.path;
    files.push_back(segment_file::by_writer(std::move(path), [w = std::move(w)]() -> status {
      if (auto st = w.work->finish(); !st.ok()) return st;
      return segment_file::by_path(w.path)->sync();
    }));
  }
  m.txn_index_writes.clear();
  // The leader-epoch checkpoint, if the epochs changed, is written and synced by the same job as the data
  // it describes, off the shard; until that job completes the recovery point stays below that data, so a
  // crash in between rebuilds the epochs by the recovery scan.
  if (auto pending = m.epochs.take_pending_write()) {
    auto path = pending->path();
    files.push_back(
        segment_file::by_writer(std::move(path), [write = std::move(*pending)] { return write.run(); }));
    m.dir_sync_pending = true;
  }
  if (auto epochs_path = m.epochs.take_unsynced()) {
    files.push_back(segment_file::by_path(std::move(*epochs_path)));
    m.dir_sync_pending = true;
  }
  if (m.dir_sync_pending) {
    m.dir_sync_handed_out = segment_file::by_path(m.dir);
    files.push_back(m.dir_sync_handed_out);
    m.dir_sync_pending = false;
  }
  m.flush_pending_offset = m.log_end_offset;
  m.last_flush_ms = now_ms;
  if (!files.empty()) m.flush_work_handed_out = true;
  return files;
}

std::vector<std::shared_ptr<const segment_file>> partition_log::flush_work(int64_t now_ms) {
  auto& m = *_impl;
  if (m.offline() || m.closed || m.fail_on_failed_sync()) return {};
  const int64_t flushed = std::max(m.recovery_point.load(), m.flush_pending_offset);
  if (m.log_end_offset <= flushed) return {};
  // A roll makes a flush due whatever flush.* says: Kafka's roll schedules one ("flush-log") so that the
  // recovery point follows the rolled segments and the new segment's name and producer snapshot get synced.
  const bool due = m.dir_sync_pending || m.log_end_offset - flushed >= m.config.flush_messages ||
                   now_ms - m.last_flush_ms >= m.config.flush_ms;
  if (!due) return {};
  return m.hand_out_unflushed(now_ms);
}

result<partition_log::sync_work> partition_log::sync_all_work(int64_t now_ms) {
  auto& m = *_impl;
  if (m.offline()) return m.failure;
  if (m.closed) return storage_error(m.tp, "the log is closed");
  if (m.fail_on_failed_sync()) return m.failure;
  auto files = m.hand_out_unflushed(now_ms);
  if (m.offline()) return m.failure;  // the epoch checkpoint could not be written
  return sync_work{std::move(files), m.log_end_offset};
}

void partition_log::mark_failed(const status& error) {
  (void)_impl->fail(error);
}

uint64_t partition_log::flush_token() const {
  return _impl->flush_token;
}

void partition_log::mark_flushed_if_current(int64_t offset, uint64_t token) {
  if (token == _impl->flush_token) mark_flushed(offset);
}

void partition_log::mark_flushed(int64_t offset) {
  auto& m = *_impl;
  if (m.offline()) return;
  offset = std::min(offset, m.log_end_offset);
  if (offset > m.recovery_point) m.recovery_point = offset;
}

status partition_log::impl::flush_segments(file_sync sync) {
  // With file_sync::later the caller makes it all durable at once (a clean shutdown's syncfs), before it
  // checkpoints the recovery point this moves.
  for (auto& w : txn_index_writes) {
    if (auto st = w.work->finish(); !st.ok()) return storage_error(tp, "flush failed: " + st.message);
    files_to_sync.push_back(std::move(w.path));
  }
  txn_index_writes.clear();
  if (sync == file_sync::later) {
    if (auto st = epochs.write(file_sync::later); !st.ok()) return storage_error(tp, st.message);
    files_to_sync.clear();
    dir_sync_pending = false;
    recovery_point = log_end_offset;
    flush_pending_offset = log_end_offset;
    last_flush_ms = clock();
    return status::success();
  }
  // The epoch checkpoint may have changed without data (a new epoch, a truncation): synced either way.
  if (auto st = epochs.sync(); !st.ok()) return storage_error(tp, st.message);
  // Everything up to the log end offset is already durable: nothing to sync (Kafka's flush skips this case
  // too).
  if (recovery_point >= log_end_offset && !dir_sync_pending) return status::success();
  auto it = floor_segment(recovery_point);
  if (it == segments.end()) it = segments.begin();
  for (; it != segments.end(); ++it) {
    if (auto st = it->second->flush(); !st.ok()) return storage_error(tp, "flush failed: " + st.message);
  }
  for (auto& path : files_to_sync) {
    if (auto st = segment_file::by_path(std::move(path))->sync(); !st.ok())
      return storage_error(tp, "flush failed: " + st.message);
  }
  files_to_sync.clear();
  if (auto st = detail::fsync_dir(dir); !st.ok()) return storage_error(tp, st.message);
  dir_sync_pending = false;
  recovery_point = log_end_offset;
  flush_pending_offset = log_end_offset;
  last_flush_ms = clock();
  return status::success();
}

status partition_log::flush() {
  auto& m = *_impl;
  if (m.offline()) return m.failure;
  if (auto st = m.flush_segments(); !st.ok()) return m.fail(st);
  return status::success();
}

status partition_log::close(file_sync sync) {
  auto& m = *_impl;
  if (m.closed) return m.failure;
  m.closed = true;
  m.discard_standby();
  // An offline log touches no file again: only its descriptors and mappings go, with the segments.
  if (m.offline()) return m.failure;
  // The log manager closes logs while it iterates them (shutdown, a dir going offline): a failure here is
  // returned to it, never sent to the listener.
  auto st = m.flush_segments(sync);
  if (!st.ok()) {
    m.failure = st;
    return st;
  }
  for (auto& [base, segment] : m.segments) {
    auto closed = segment->close();
    if (!closed.ok() && st.ok()) st = storage_error(m.tp, "close failed: " + closed.message);
  }
  return st;
}

status partition_log::delete_all() {
  auto& m = *_impl;
  m.discard_standby();
  m.pending_deletes.clear();
  m.segments.clear();
  m.closed = true;
  std::error_code ec;
  fs::remove_all(m.dir, ec);
  if (ec) return storage_error(m.tp, "cannot delete " + m.dir + ": " + ec.message());
  return status::success();
}

}  // namespace mala::storage
