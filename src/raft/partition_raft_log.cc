#include "mala/raft/partition_raft_log.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <optional>
#include <string>
#include <system_error>
#include <utility>

#include "mala/common/assert.h"
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

// Reads up to this many bytes per partition_log read (at least one batch whatever its size).
constexpr int32_t read_chunk_bytes = 1024 * 1024;

namespace fs = std::filesystem;

// Kafka's Snapshots.java: SUFFIX, PARTIAL_SUFFIX, DELETE_SUFFIX and the widths of the two numbers.
constexpr std::string_view snapshot_suffix = ".checkpoint";
constexpr std::string_view partial_suffix = ".part";
constexpr std::string_view deleted_suffix = ".deleted";
constexpr size_t offset_digits = 20;
constexpr size_t epoch_digits = 10;

status snapshot_io_error(std::string_view what, const fs::path& path, int err) {
  return status::error(error_code::kafka_storage_error,
                       std::string(what) + " " + path.string() + ": " + std::strerror(err));
}

// The digits of a snapshot file name as a number; nullopt unless all are decimal digits and it fits.
std::optional<int64_t> parse_digits(std::string_view digits, int64_t max) {
  int64_t value = 0;
  for (char c : digits) {
    if (c < '0' || c > '9') return std::nullopt;
    const int d = c - '0';
    if (value > (max - d) / 10) return std::nullopt;
    value = value * 10 + d;
  }
  return value;
}

bool write_all(int fd, std::span<const uint8_t> data) {
  while (!data.empty()) {
    const ssize_t n = ::write(fd, data.data(), data.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    data = data.subspan(static_cast<size_t>(n));
  }
  return true;
}

status fsync_dir(const fs::path& dir) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return snapshot_io_error("cannot open", dir, errno);
  const int rc = ::fsync(fd);
  const int err = errno;
  ::close(fd);
  if (rc != 0) return snapshot_io_error("cannot fsync", dir, err);
  return status::success();
}

}  // namespace

std::string snapshot_file_name(offset_and_epoch id) {
  char name[64];
  std::snprintf(name, sizeof name, "%020lld-%010d", static_cast<long long>(id.offset), id.epoch);
  return std::string(name) + std::string(snapshot_suffix);
}

std::optional<snapshot_file> parse_snapshot_file_name(std::string_view name) {
  snapshot_file out;
  if (name.ends_with(partial_suffix)) {
    out.partial = true;
    name.remove_suffix(partial_suffix.size());
  } else if (name.ends_with(deleted_suffix)) {
    out.deleted = true;
    name.remove_suffix(deleted_suffix.size());
  }
  if (!name.ends_with(snapshot_suffix)) return std::nullopt;
  name.remove_suffix(snapshot_suffix.size());
  if (name.size() != offset_digits + 1 + epoch_digits || name[offset_digits] != '-') return std::nullopt;
  auto offset = parse_digits(name.substr(0, offset_digits), std::numeric_limits<int64_t>::max());
  auto epoch = parse_digits(name.substr(offset_digits + 1), std::numeric_limits<int32_t>::max());
  if (!offset || !epoch) return std::nullopt;
  out.id = {*offset, static_cast<int32_t>(*epoch)};
  return out;
}

result<std::unique_ptr<partition_raft_log>> partition_raft_log::open(
    const std::filesystem::path& metadata_log_dir, partition_raft_log_options options) {
  auto log =
      storage::open_metadata_partition(metadata_log_dir, options.clock_ms, options.segments, options.worker);
  if (!log.ok()) return log.error();
  auto raft_log = std::make_unique<partition_raft_log>(std::move(*log), std::move(options));
  if (!raft_log->failure().ok()) return raft_log->failure();
  return raft_log;
}

partition_raft_log::partition_raft_log(std::unique_ptr<storage::partition_log> log,
                                       partition_raft_log_options options)
    : _log(std::move(log)),
      _clock_ms(options.clock_ms ? std::move(options.clock_ms) : std::function<int64_t()>(system_clock_ms)) {
  if (auto st = recover_snapshots(); !st.ok()) fail(st);
}

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

std::filesystem::path partition_raft_log::dir() const {
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

int32_t partition_raft_log::log_last_epoch() const {
  // The latest cache entry that starts below the log end (an epoch assigned without a batch written under it
  // says nothing about the log).
  const auto& entries = _log->epochs().entries();
  const int64_t end = end_offset();
  for (auto it = entries.rbegin(); it != entries.rend(); ++it) {
    if (it->start_offset < end) return it->epoch;
  }
  return 0;
}

std::optional<offset_and_epoch> partition_raft_log::snapshot_at_start() const {
  const int64_t start = start_offset();
  for (auto it = _snapshots.rbegin(); it != _snapshots.rend(); ++it) {
    if (it->offset == start) return *it;
  }
  return std::nullopt;
}

int32_t partition_raft_log::last_fetched_epoch() const {
  // KafkaMetadataLog.lastFetchedEpoch: the epoch of the last entry, or, when the log holds none because a
  // snapshot ends where the log does (after install_snapshot, or delete_before up to the end), the
  // snapshot's epoch.
  if (const int32_t epoch = log_last_epoch(); epoch != 0) return epoch;
  if (auto latest = latest_snapshot(); latest && latest->offset == end_offset()) return latest->epoch;
  return 0;
}

offset_and_epoch partition_raft_log::end_offset_for_epoch(int32_t epoch) const {
  const auto& entries = _log->epochs().entries();
  const int64_t end = end_offset();
  // Kafka's KafkaMetadataLog.endOffsetForEpoch over the cache: no epoch at or below the requested one is
  // (start offset, 0); at or above the latest one the log end; otherwise the cache's endOffsetFor, whose end
  // is the start of the next larger epoch. When the entries before the log start are gone, an epoch older
  // than the log's first one ends where the snapshot at the log start does, and that snapshot's id is the
  // answer (the follower then fetches the snapshot).
  const int32_t latest = log_last_epoch();
  if (entries.empty() || latest == 0) {
    if (auto latest_snap = latest_snapshot(); latest_snap && latest_snap->offset == end) return *latest_snap;
    return {start_offset(), 0};
  }
  if (epoch < entries.front().epoch) {
    if (auto snap = snapshot_at_start(); snap && start_offset() > 0) return *snap;
    return {start_offset(), 0};
  }
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
        log_entry entry{offset,
                        epoch,
                        entry_type::data,
                        {},
                        /*batch_end=*/offset + 1 == batch.header().next_offset()};
        if (batch.is_control()) {
          const auto type = record.key ? storage::control_record_type(*record.key) : std::nullopt;
          const auto kind = type ? entry_type_of_control_record(*type) : std::nullopt;
          if (!kind) {
            corrupt(offset, "control record of an unsupported type");
            return out;
          }
          entry.type = *kind;
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
  // One batch per write (a run of entries ending with batch_end, all of one epoch); the batches of a run of
  // one epoch go to the partition log in one write.
  const int64_t now = _clock_ms();
  int64_t expected = end_offset();
  int32_t last_epoch = last_fetched_epoch();
  size_t i = 0;
  while (i < entries.size()) {
    const int32_t epoch = entries[i].epoch;
    std::vector<uint8_t> run;
    while (i < entries.size() && entries[i].epoch == epoch) {
      const bool control = entries[i].type != entry_type::data;
      std::vector<std::array<uint8_t, 4>> keys;  // each control record's key, kept for the batch build
      keys.reserve(entries.size() - i);
      std::vector<storage::metadata_batch_record> records;
      const int64_t first = entries[i].offset;
      for (; i < entries.size() && entries[i].epoch == epoch; ++i) {
        const log_entry& e = entries[i];
        MALA_ASSERT(e.offset == expected, "append at offset {} does not continue the log at {}", e.offset,
                    expected);
        MALA_ASSERT(e.epoch >= last_epoch, "append epoch {} goes back from {}", e.epoch, last_epoch);
        MALA_ASSERT((e.type != entry_type::data) == control,
                    "the write at {} mixes control and data entries (offset {})", first, e.offset);
        std::optional<std::span<const uint8_t>> key;
        if (control) key = keys.emplace_back(storage::control_record_key(control_record_type_of(e.type)));
        records.push_back(storage::metadata_batch_record{key, e.payload});
        ++expected;
        last_epoch = e.epoch;
        if (e.batch_end) {
          ++i;
          break;
        }
      }
      auto batch = storage::build_metadata_batch(records, now, control);
      // Only a write over the Raft batch limit fails here; the leader refuses those before appending.
      MALA_ASSERT(batch.ok(), "the write at {} ({} records) does not fit a metadata batch", first,
                  records.size());
      run.insert(run.end(), batch->begin(), batch->end());
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
  MALA_ASSERT(offset >= start_offset(), "truncation to {} below the log start {}", offset, start_offset());
  if (offset >= end_offset()) return;
  if (auto st = _log->truncate_to(offset); !st.ok()) fail(st);
}

status partition_raft_log::flush() {
  if (!_failure.ok()) return _failure;
  if (auto st = _log->flush(); !st.ok()) fail(st);
  return _failure;
}

result<storage::partition_log::sync_work> partition_raft_log::flush_work() {
  if (!_failure.ok()) return _failure;
  auto work = _log->sync_all_work(_clock_ms());
  if (!work.ok()) {
    fail(work.error());
    return _failure;
  }
  return std::move(*work);
}

void partition_raft_log::mark_flushed(int64_t end_offset) {
  if (_failure.ok()) _log->mark_flushed(end_offset);
}

}  // namespace mala::raft

namespace mala::raft {

// ---------------------------------------------------------------------------------------------------------------
// Snapshots (KIP-630; Kafka's KafkaMetadataLog and FileRawSnapshotWriter/Reader).

void partition_raft_log::remove_snapshot_file_later(fs::path path) const {
  if (!_run_file_work) return remove_snapshot_file(path);
  _run_file_work([path = std::move(path)] { remove_snapshot_file(path); });
}

void partition_raft_log::remove_snapshot_file(const fs::path& path) {
  std::error_code ec;
  fs::remove(path, ec);
  if (ec) {
    subsystem_logger("raft")->warn("{}: cannot delete snapshot file: {}", path.string(), ec.message());
  } else {
    subsystem_logger("raft")->info("{}: deleted snapshot file", path.string());
  }
}

status partition_raft_log::recover_snapshots() {
  const fs::path& dir = _log->dir();
  std::error_code ec;
  std::vector<offset_and_epoch> found;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    auto parsed = parse_snapshot_file_name(name);
    if (!parsed) {
      if (name.find(snapshot_suffix) != std::string::npos) {
        subsystem_logger("raft")->warn("{}: ignoring {}: not a snapshot file name", dir.string(), name);
      }
      continue;
    }
    if (parsed->partial || parsed->deleted) {
      // A write interrupted by a crash, or a deletion that did not finish.
      remove_snapshot_file(it->path());
      continue;
    }
    std::error_code type_ec;
    if (!it->is_regular_file(type_ec)) {
      subsystem_logger("raft")->warn("{}: ignoring {}: not a regular file", dir.string(), name);
      continue;
    }
    found.push_back(parsed->id);
  }
  if (ec) return snapshot_io_error("cannot list", dir, ec.value());
  std::sort(found.begin(), found.end());
  found.erase(std::unique(found.begin(), found.end()), found.end());
  _snapshots = std::move(found);

  // KafkaMetadataLog.truncateToLatestSnapshot: a follower that crashed after storing a snapshot fetched from
  // the leader and before emptying its log has a log that ends before the snapshot, or entries of an older
  // epoch only; the log restarts at the snapshot's end.
  if (auto latest = latest_snapshot()) {
    const int32_t log_epoch = log_last_epoch();
    const bool log_empty = start_offset() == end_offset();
    const bool behind = latest->offset > end_offset() || (!log_empty && latest->epoch > log_epoch);
    if (behind) {
      subsystem_logger("raft")->info(
          "{}: log [{}, {}) at epoch {} is behind snapshot {}-{}: restarting at {}", dir.string(),
          start_offset(), end_offset(), log_epoch, latest->offset, latest->epoch, latest->offset);
      if (auto st = _log->truncate_fully_and_start_at(latest->offset); !st.ok()) return st;
      if (auto st = _log->flush(); !st.ok()) return st;
    }
  }
  // KafkaMetadataLog.recoverSnapshots: entries before the log start exist only in a snapshot.
  if (start_offset() > 0) {
    auto latest = latest_snapshot();
    if (!latest || latest->offset < start_offset()) {
      return status::error(error_code::corrupt_message, dir.string() + ": the log starts at " +
                                                            std::to_string(start_offset()) +
                                                            " but no snapshot covers the entries before it");
    }
  }
  prune_snapshots();
  return status::success();
}

void partition_raft_log::prune_snapshots() {
  if (_snapshots.size() <= 1) return;
  // Kafka keeps every snapshot at or above the log start and removes them as the log start moves; keeping the
  // newest and the one before it (while the log still holds its offset, so a follower fetching from there
  // can still be served entries or it) is enough here.
  std::vector<offset_and_epoch> kept;
  const offset_and_epoch newest = _snapshots.back();
  const offset_and_epoch previous = _snapshots[_snapshots.size() - 2];
  for (const auto& id : _snapshots) {
    const bool keep = id == newest || (id == previous && id.offset >= start_offset());
    if (keep) {
      kept.push_back(id);
    } else {
      remove_snapshot_file_later(_log->dir() / snapshot_file_name(id));
    }
  }
  _snapshots = std::move(kept);
}

std::optional<offset_and_epoch> partition_raft_log::latest_snapshot() const {
  if (_snapshots.empty()) return std::nullopt;
  return _snapshots.back();
}

std::optional<std::vector<uint8_t>> partition_raft_log::read_snapshot(offset_and_epoch id) const {
  auto whole = read_snapshot_chunk(id, 0, std::numeric_limits<int64_t>::max());
  if (!whole) return std::nullopt;
  return std::move(whole->bytes);
}

std::optional<snapshot_chunk> partition_raft_log::read_snapshot_chunk(offset_and_epoch id, int64_t position,
                                                                      int64_t max_bytes) const {
  if (std::find(_snapshots.begin(), _snapshots.end(), id) == _snapshots.end()) return std::nullopt;
  const fs::path path = _log->dir() / snapshot_file_name(id);
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    subsystem_logger("raft")->error("{}", snapshot_io_error("cannot open", path, errno).message);
    return std::nullopt;
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    subsystem_logger("raft")->error("{}", snapshot_io_error("cannot stat", path, errno).message);
    ::close(fd);
    return std::nullopt;
  }
  snapshot_chunk chunk;
  chunk.size = static_cast<int64_t>(st.st_size);
  if (position >= 0 && position < chunk.size && max_bytes > 0) {
    chunk.bytes.resize(static_cast<size_t>(std::min(max_bytes, chunk.size - position)));
    size_t done = 0;
    while (done < chunk.bytes.size()) {
      const ssize_t n = ::pread(fd, chunk.bytes.data() + done, chunk.bytes.size() - done,
                                static_cast<off_t>(position + static_cast<int64_t>(done)));
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        subsystem_logger("raft")->error("{}",
                                        snapshot_io_error("cannot read", path, n < 0 ? errno : EIO).message);
        ::close(fd);
        return std::nullopt;
      }
      done += static_cast<size_t>(n);
    }
  }
  ::close(fd);
  return chunk;
}

status partition_raft_log::write_snapshot_file(offset_and_epoch id, std::span<const uint8_t> payload) const {
  return write_snapshot_file_in(_log->dir(), id, payload);
}

status partition_raft_log::write_snapshot_file_in(const fs::path& dir, offset_and_epoch id,
                                                  std::span<const uint8_t> payload) {
  const fs::path path = dir / snapshot_file_name(id);
  fs::path part = path;
  part += partial_suffix;
  const int fd = ::open(part.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return snapshot_io_error("cannot create", part, errno);
  const bool written = write_all(fd, payload) && ::fsync(fd) == 0;
  const int err = errno;
  ::close(fd);
  if (!written) {
    ::unlink(part.c_str());
    return snapshot_io_error("cannot write", part, err);
  }
  if (::rename(part.c_str(), path.c_str()) != 0) {
    const int rename_err = errno;
    ::unlink(part.c_str());
    return snapshot_io_error("cannot rename " + part.string() + " to", path, rename_err);
  }
  return fsync_dir(dir);
}

partition_raft_log::new_snapshot partition_raft_log::check_new_snapshot(offset_and_epoch id) const {
  if (!_failure.ok()) return new_snapshot::refused;
  auto refuse = [&](std::string_view why) {
    subsystem_logger("raft")->error("{}: refusing snapshot {}-{}: {}", _log->dir().string(), id.offset,
                                    id.epoch, why);
    return new_snapshot::refused;
  };
  if (id.offset < start_offset() || id.offset > end_offset()) return refuse("outside the log");
  // KafkaMetadataLog.createNewSnapshot validates the id against the log: the epoch is the one of the entry
  // before the snapshot's end, when the log holds it.
  if (id.offset > start_offset()) {
    const auto epoch = _log->epochs().epoch_for_offset(id.offset - 1);
    if (epoch && *epoch != id.epoch)
      return refuse("the entry before its end has epoch " + std::to_string(*epoch));
  }
  if (std::find(_snapshots.begin(), _snapshots.end(), id) != _snapshots.end()) return new_snapshot::held;
  if (auto latest = latest_snapshot(); latest && *latest > id)
    return refuse("older than the latest snapshot");
  return new_snapshot::allowed;
}

bool partition_raft_log::write_snapshot(offset_and_epoch id, std::span<const uint8_t> payload) {
  switch (check_new_snapshot(id)) {
    case new_snapshot::refused:
      return false;
    case new_snapshot::held:
      return true;
    case new_snapshot::allowed:
      break;
  }
  if (auto st = write_snapshot_file(id, payload); !st.ok()) {
    subsystem_logger("raft")->error("{}: cannot write snapshot: {}", _log->dir().string(), st.message);
    return false;
  }
  _snapshots.push_back(id);
  prune_snapshots();
  return true;
}

bool partition_raft_log::adopt_snapshot_file(offset_and_epoch id) {
  switch (check_new_snapshot(id)) {
    case new_snapshot::refused:
      remove_snapshot_file_later(_log->dir() / snapshot_file_name(id));
      return false;
    case new_snapshot::held:
      return true;
    case new_snapshot::allowed:
      break;
  }
  _snapshots.push_back(id);
  prune_snapshots();
  return true;
}

void partition_raft_log::delete_before(int64_t offset) {
  if (!_failure.ok()) return;
  const auto latest = latest_snapshot();
  MALA_ASSERT(latest && offset <= latest->offset, "delete_before {} past the latest snapshot {}", offset,
              latest ? latest->offset : -1);
  offset = std::min(offset, end_offset());
  if (offset > start_offset()) {
    if (auto st = _log->increment_log_start_offset(offset, end_offset()); !st.ok()) {
      fail(st);
      return;
    }
  }
  // Whole segments below the new start go (the metadata log has no time or size retention: this is the
  // "log start offset" rule of retention only; Kafka's KafkaMetadataLog.deleteBeforeSnapshot).
  const int64_t now = _clock_ms();
  auto removed = _log->apply_retention(now, end_offset());
  if (!removed.ok()) {
    fail(_log->handle_io_error(removed.error()));
    return;
  }
  _log->delete_expired_files(now);
  prune_snapshots();
}

bool partition_raft_log::install_snapshot(offset_and_epoch id, std::span<const uint8_t> payload) {
  if (!_failure.ok()) return false;
  // The snapshot first: a crash after it leaves a log behind the snapshot, which open() empties.
  if (auto st = write_snapshot_file(id, payload); !st.ok()) {
    subsystem_logger("raft")->error("{}: cannot install snapshot: {}", _log->dir().string(), st.message);
    return false;
  }
  if (auto st = _log->truncate_fully_and_start_at(id.offset); !st.ok()) {
    fail(st);
    return false;
  }
  if (auto st = _log->flush(); !st.ok()) {
    fail(st);
    return false;
  }
  // Every other snapshot describes a log that is gone (KafkaMetadataLog.forgetSnapshotsBefore).
  for (const auto& other : _snapshots) {
    if (other != id) remove_snapshot_file_later(_log->dir() / snapshot_file_name(other));
  }
  _snapshots = {id};
  _log->delete_expired_files(_clock_ms());
  return true;
}

bool partition_raft_log::install_stored_snapshot(offset_and_epoch id) {
  if (!_failure.ok()) return false;
  // The snapshot file is durable (the glue synced it before calling): from here on a crash leaves a log
  // behind the snapshot, which open() restarts at it, so neither the truncation nor the new empty segment
  // is synced here; the next flush syncs them with the entries that follow.
  if (auto st = _log->truncate_fully_and_start_at(id.offset); !st.ok()) {
    fail(st);
    return false;
  }
  for (const auto& other : _snapshots) {
    if (other != id) remove_snapshot_file_later(_log->dir() / snapshot_file_name(other));
  }
  _snapshots = {id};
  _log->delete_expired_files(_clock_ms());
  return true;
}

}  // namespace mala::raft
