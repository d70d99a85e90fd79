#include "mala/storage/producer_state.h"

#include <algorithm>
#include <limits>
#include <system_error>

#include "big_endian.h"
#include "file_io.h"
#include "mala/common/crc32c.h"
#include "mala/common/logging.h"
#include "mala/storage/checkpoint_file.h"
#include "mala/storage/partition_log.h"
#include "mala/storage/segment_files.h"
#include "mala/storage/txn_marker.h"

namespace mala::storage {

namespace fs = std::filesystem;
namespace proto = mala::protocol;

namespace {

constexpr int32_t max_sequence = std::numeric_limits<int32_t>::max();

// Kafka's ProducerAppendInfo.inSequence: the next sequence follows the last one, wrapping after INT32_MAX.
bool in_sequence(int32_t last, int32_t next) {
  return static_cast<int64_t>(next) == static_cast<int64_t>(last) + 1 || (next == 0 && last == max_sequence);
}

// Kafka's ProducerStateEntry.maybeUpdateProducerEpoch: a new epoch starts a new sequence space, so the
// retained batches of the old one can no longer be duplicates.
void set_epoch(producer_state_entry& entry, int16_t epoch) {
  if (entry.producer_epoch != epoch) {
    entry.batches.clear();
    entry.producer_epoch = epoch;
  }
}

void add_batch(producer_state_entry& entry, const producer_batch_metadata& batch) {
  if (entry.batches.size() == producer_batches_retained) entry.batches.erase(entry.batches.begin());
  entry.batches.push_back(batch);
}

producer_batch_metadata metadata_of(const proto::record_batch_header& batch, int64_t first_offset) {
  return {.first_sequence = batch.base_sequence,
          .last_sequence = batch_last_sequence(batch),
          .first_offset = first_offset,
          .last_offset = first_offset + batch.last_offset_delta,
          .timestamp = batch.max_timestamp};
}

// ProducerStateEntry.findDuplicateBatch: same epoch and the exact sequence range of a retained batch.
std::optional<producer_batch_metadata> find_duplicate(const producer_state_entry& entry,
                                                      const proto::record_batch_header& batch) {
  if (batch.producer_epoch != entry.producer_epoch) return std::nullopt;
  const int32_t last = batch_last_sequence(batch);
  for (const auto& b : entry.batches) {
    if (b.first_sequence == batch.base_sequence && b.last_sequence == last) return b;
  }
  return std::nullopt;
}

std::string describe_batch(const proto::record_batch_header& batch) {
  return "producer " + std::to_string(batch.producer_id) + " epoch " + std::to_string(batch.producer_epoch) +
         " sequence " + std::to_string(batch.base_sequence) + "-" +
         std::to_string(batch_last_sequence(batch));
}

// The sequence ranges a duplicate may match, oldest first, with their offsets.
std::string describe_retained(const producer_state_entry& entry) {
  std::string out;
  for (const auto& b : entry.batches) {
    if (!out.empty()) out += ", ";
    out += std::to_string(b.first_sequence) + "-" + std::to_string(b.last_sequence) + "@" +
           std::to_string(b.first_offset);
  }
  return out.empty() ? "none" : out;
}

status corrupt(std::string what) {
  return status::error(error_code::corrupt_message, "producer snapshot: " + std::move(what));
}

}  // namespace

int32_t increment_sequence(int32_t sequence, int32_t increment) {
  if (sequence > max_sequence - increment) return increment - (max_sequence - sequence) - 1;
  return sequence + increment;
}

int32_t decrement_sequence(int32_t sequence, int32_t decrement) {
  if (sequence < decrement) return max_sequence - (decrement - sequence) + 1;
  return sequence - decrement;
}

int32_t batch_last_sequence(const proto::record_batch_header& batch) {
  if (batch.base_sequence == proto::no_sequence) return proto::no_sequence;
  return increment_sequence(batch.base_sequence, batch.last_offset_delta);
}

std::string encode_producer_snapshot(std::span<const producer_state_entry> entries) {
  std::string out;
  out.reserve(producer_snapshot_entries_offset + 4 + entries.size() * producer_snapshot_entry_size);
  detail::append_be<int16_t>(out, producer_snapshot_version);
  detail::append_be<uint32_t>(out, 0);  // CRC, filled in below
  detail::append_be<int32_t>(out, static_cast<int32_t>(entries.size()));
  for (const auto& e : entries) {
    // Kafka keeps only the last batch in a snapshot; the others come back from the log replay after it.
    const bool has_batch = !e.batches.empty();
    detail::append_be<int64_t>(out, e.producer_id);
    detail::append_be<int16_t>(out, e.producer_epoch);
    detail::append_be<int32_t>(out, e.last_sequence());
    detail::append_be<int64_t>(out, e.last_offset());
    detail::append_be<int32_t>(
        out,
        has_batch ? static_cast<int32_t>(e.batches.back().last_offset - e.batches.back().first_offset) : 0);
    detail::append_be<int64_t>(out, e.last_timestamp);
    detail::append_be<int32_t>(out, e.coordinator_epoch);
    detail::append_be<int64_t>(out, e.current_txn_first_offset.value_or(-1));
  }
  auto covered = std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(out.data()), out.size())
                     .subspan(producer_snapshot_entries_offset);
  const uint32_t crc = crc32c(covered);
  for (size_t i = 0; i < 4; ++i) {
    out[producer_snapshot_crc_offset + i] = static_cast<char>(static_cast<uint8_t>(crc >> (24 - 8 * i)));
  }
  return out;
}

result<std::vector<producer_state_entry>> decode_producer_snapshot(std::span<const uint8_t> bytes) {
  if (bytes.size() < producer_snapshot_entries_offset + 4) return corrupt("too short");
  const auto version = detail::read_be<int16_t>(bytes, 0);
  if (version != producer_snapshot_version) return corrupt("unknown version " + std::to_string(version));
  const auto stored_crc = detail::read_be<uint32_t>(bytes, producer_snapshot_crc_offset);
  const auto computed_crc = crc32c(bytes.subspan(producer_snapshot_entries_offset));
  if (stored_crc != computed_crc) {
    return corrupt("CRC mismatch (stored " + std::to_string(stored_crc) + ", computed " +
                   std::to_string(computed_crc) + ")");
  }
  const auto count = detail::read_be<int32_t>(bytes, producer_snapshot_entries_offset);
  const size_t body = bytes.size() - producer_snapshot_entries_offset - 4;
  if (count < 0 || body != static_cast<size_t>(count) * producer_snapshot_entry_size) {
    return corrupt(std::to_string(count) + " entries do not fit " + std::to_string(body) + " bytes");
  }
  std::vector<producer_state_entry> out;
  out.reserve(static_cast<size_t>(count));
  size_t pos = producer_snapshot_entries_offset + 4;
  for (int32_t i = 0; i < count; ++i, pos += producer_snapshot_entry_size) {
    producer_state_entry e;
    e.producer_id = detail::read_be<int64_t>(bytes, pos);
    e.producer_epoch = detail::read_be<int16_t>(bytes, pos + 8);
    const auto last_sequence = detail::read_be<int32_t>(bytes, pos + 10);
    const auto last_offset = detail::read_be<int64_t>(bytes, pos + 14);
    const auto offset_delta = detail::read_be<int32_t>(bytes, pos + 22);
    e.last_timestamp = detail::read_be<int64_t>(bytes, pos + 26);
    e.coordinator_epoch = detail::read_be<int32_t>(bytes, pos + 34);
    const auto txn_first_offset = detail::read_be<int64_t>(bytes, pos + 38);
    if (txn_first_offset >= 0) e.current_txn_first_offset = txn_first_offset;
    if (last_offset >= 0) {
      e.batches.push_back({.first_sequence = decrement_sequence(last_sequence, offset_delta),
                           .last_sequence = last_sequence,
                           .first_offset = last_offset - offset_delta,
                           .last_offset = last_offset,
                           .timestamp = e.last_timestamp});
    }
    out.push_back(std::move(e));
  }
  return out;
}

fs::path producer_snapshot_path(const fs::path& dir, int64_t offset) {
  return segment_file_path(dir, offset, producer_snapshot_suffix);
}

status scan_log_batches(const partition_log& log, int64_t from, int64_t to, const log_batch_visitor& visit) {
  constexpr int32_t chunk_bytes = 1 << 20;
  int64_t next = from;
  while (next < to) {
    auto read = log.read(next, chunk_bytes, to, true);
    if (!read) return read.error();
    if (!read->data) break;
    const auto& slice = *read->data;
    auto bytes = slice.file->read(slice.position, slice.size);
    if (!bytes) return bytes.error();
    proto::batch_splitter splitter(*bytes);
    const int64_t before = next;
    while (auto batch = splitter.next()) {
      auto header = proto::parse_batch_header(*batch);
      if (!header) break;
      if (header->base_offset >= to) return status::success();
      if (header->next_offset() <= next) continue;
      visit(*batch);
      next = header->next_offset();
    }
    if (next == before) {
      return status::error(
          error_code::kafka_storage_error,
          "no batch to replay at offset " + std::to_string(next) + " in " + log.dir().string());
    }
  }
  return status::success();
}

result<std::unique_ptr<producer_state_manager>> producer_state_manager::open(const fs::path& dir,
                                                                             producer_state_config config) {
  std::unique_ptr<producer_state_manager> m(new producer_state_manager(dir, config));
  std::error_code ec;
  if (!fs::exists(dir, ec)) return m;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    if (!it->is_regular_file()) continue;
    if (auto offset = parse_segment_base_offset(it->path().filename().string(), producer_snapshot_suffix)) {
      m->_snapshots.emplace(*offset, it->path());
    }
  }
  if (ec) {
    return status::error(error_code::kafka_storage_error,
                         "cannot list " + dir.string() + ": " + ec.message());
  }
  return m;
}

result<producer_check_outcome> producer_state_manager::check(const proto::record_batch_header& batch,
                                                             bool log_never_written) const {
  return check(std::span<const proto::record_batch_header>(&batch, 1), log_never_written);
}

result<producer_check_outcome> producer_state_manager::check(
    std::span<const proto::record_batch_header> batches, bool log_never_written, append_origin origin,
    const txn_verification* verification) const {
  const bool client = origin == append_origin::client;
  // Kafka's ProducerAppendInfo per producer of the request: the state the earlier batches would leave, plus
  // the epoch of the state before the request (a producer without one may start at any sequence).
  struct pending {
    int16_t epoch_before;
    producer_state_entry entry;
  };
  std::vector<pending> work;
  for (const auto& batch : batches) {
    if (batch.producer_id == proto::no_producer_id) continue;
    const producer_state_entry* current = find(batch.producer_id);
    if (current && client) {
      if (auto duplicate = find_duplicate(*current, batch)) return producer_check_outcome{duplicate};
    }
    auto it = std::find_if(work.begin(), work.end(),
                           [&](const pending& p) { return p.entry.producer_id == batch.producer_id; });
    if (it == work.end()) {
      producer_state_entry start;
      start.producer_id = batch.producer_id;
      if (current) start = *current;
      work.push_back({start.producer_epoch, std::move(start)});
      it = std::prev(work.end());
    }
    auto& entry = it->entry;

    if (batch.producer_epoch < entry.producer_epoch) {
      return status::error(error_code::invalid_producer_epoch,
                           describe_batch(batch) + ": epoch is older than the current epoch " +
                               std::to_string(entry.producer_epoch));
    }
    if (batch.is_control()) {
      // A marker only fences (its coordinator epoch is checked with transactions); it ends the transaction.
      set_epoch(entry, batch.producer_epoch);
      entry.current_txn_first_offset.reset();
      continue;
    }
    const bool unknown_before = it->epoch_before == proto::no_producer_epoch;
    if (client) {
      // ProducerAppendInfo.checkSequence: while a verification is pending, a batch above the lowest sequence
      // it verified is out of order, so that a higher batch cannot be written ahead of a lower one whose
      // verification failed with a retriable error (the client's OutOfOrderSequence loop).
      if (const auto* pending_verification = find_verification(batch.producer_id);
          pending_verification && batch.base_sequence > pending_verification->lowest_sequence) {
        return status::error(error_code::out_of_order_sequence_number,
                             describe_batch(batch) + ": above the lowest sequence being verified, " +
                                 std::to_string(pending_verification->lowest_sequence));
      }
    }
    if (!client) {
      // No sequence rules for the coordinator's writes.
    } else if (unknown_before && log_never_written && entry.batches.empty() && batch.base_sequence != 0) {
      return status::error(error_code::out_of_order_sequence_number,
                           describe_batch(batch) +
                               ": the first batch of a producer on a partition that never held a record must "
                               "start at sequence 0");
    } else if (batch.producer_epoch != entry.producer_epoch) {
      if (batch.base_sequence != 0 && entry.producer_epoch != proto::no_producer_epoch) {
        return status::error(error_code::out_of_order_sequence_number,
                             describe_batch(batch) +
                                 ": a new epoch must start at sequence 0 (current epoch " +
                                 std::to_string(entry.producer_epoch) + ")");
      }
    } else if (!unknown_before && !in_sequence(entry.last_sequence(), batch.base_sequence)) {
      return status::error(error_code::out_of_order_sequence_number,
                           describe_batch(batch) + ": expected sequence after " +
                               std::to_string(entry.last_sequence()) + " (retained batches " +
                               describe_retained(entry) + ")");
    }
    if (entry.current_txn_first_offset && !batch.is_transactional()) {
      return status::error(error_code::invalid_txn_state,
                           describe_batch(batch) + ": non-transactional batch inside an open transaction");
    }
    // An open transaction counts only at the batch's epoch (UnifiedLog.hasOngoingTransaction): under
    // transactions v2 the next transaction's first batch comes with the bumped epoch and may reach the
    // partition before the previous transaction's marker.
    const bool ongoing_at_epoch =
        entry.current_txn_first_offset && entry.producer_epoch == batch.producer_epoch;
    if (verification && batch.is_transactional() && !ongoing_at_epoch) {
      // KIP-890: only a verified batch opens a transaction (UnifiedLog.batchMissingRequiredVerification).
      const auto* stored = find_verification(batch.producer_id);
      if (verification->guard == 0 || !stored || stored->guard != verification->guard) {
        return status::error(error_code::invalid_txn_state,
                             describe_batch(batch) + ": Record was not part of an ongoing transaction");
      }
    }
    // Offsets are not assigned yet and do not matter for the checks of the batches after this one.
    set_epoch(entry, batch.producer_epoch);
    add_batch(entry, metadata_of(batch, 0));
    if (batch.is_transactional() && !entry.current_txn_first_offset) entry.current_txn_first_offset = 0;
  }
  return producer_check_outcome{};
}

result<producer_check_outcome> producer_state_manager::check_records(
    std::span<const uint8_t> records, bool log_never_written, append_origin origin,
    const txn_verification* verification) const {
  std::vector<proto::record_batch_header> headers;
  proto::batch_splitter splitter(records);
  while (auto batch = splitter.next()) {
    auto header = proto::parse_batch_header(*batch);
    if (!header) break;
    headers.push_back(*header);
  }
  if (!splitter.ok()) {
    return status::error(error_code::corrupt_message,
                         "malformed record set: " + std::string(proto::batch_status_name(splitter.status())));
  }
  return check(headers, log_never_written, origin, verification);
}

status producer_state_manager::check_marker(const txn_marker_request& marker) const {
  const producer_state_entry* entry = find(marker.producer_id);
  if (!entry) return status::success();
  const std::string what = "marker of producer " + std::to_string(marker.producer_id) + " epoch " +
                           std::to_string(marker.producer_epoch) + " coordinator epoch " +
                           std::to_string(marker.coordinator_epoch);
  // Kafka's ProducerAppendInfo.checkProducerEpoch for a coordinator's marker.
  const bool epoch_bumped = marker.transaction_version >= 2;
  if (marker.producer_epoch < entry->producer_epoch ||
      (epoch_bumped && marker.producer_epoch == entry->producer_epoch && entry->current_txn_first_offset)) {
    return status::error(error_code::invalid_producer_epoch,
                         what + ": the producer's epoch is " + std::to_string(entry->producer_epoch) +
                             (epoch_bumped ? " (transactions v2 markers carry a bumped epoch)" : ""));
  }
  if (marker.coordinator_epoch < entry->coordinator_epoch) {
    return status::error(error_code::transaction_coordinator_fenced,
                         what + ": the producer's last marker came from coordinator epoch " +
                             std::to_string(entry->coordinator_epoch));
  }
  return status::success();
}

void producer_state_manager::apply_data_batch(const proto::record_batch_header& batch, int64_t first_offset) {
  auto [it, inserted] = _producers.try_emplace(batch.producer_id);
  auto& entry = it->second;
  if (inserted) entry.producer_id = batch.producer_id;
  // Replicated and replayed batches are not checked: an older epoch here is taken as it is (Kafka logs it).
  set_epoch(entry, batch.producer_epoch);
  add_batch(entry, metadata_of(batch, first_offset));
  entry.last_timestamp = batch.max_timestamp;
  if (batch.is_transactional()) _verifications.erase(batch.producer_id);
  if (batch.is_transactional() && !entry.current_txn_first_offset) {
    entry.current_txn_first_offset = first_offset;
    _ongoing_txns.emplace(first_offset, batch.producer_id);
  }
}

uint64_t producer_state_manager::create_verification_guard(int64_t producer_id, int32_t base_sequence,
                                                           int16_t epoch, int64_t now_ms) {
  if (has_ongoing_txn(producer_id, epoch)) return 0;
  auto [it, inserted] = _verifications.try_emplace(producer_id);
  auto& v = it->second;
  if (inserted) {
    v = {.guard = _next_guard++, .lowest_sequence = base_sequence, .epoch = epoch, .timestamp_ms = now_ms};
    return v.guard;
  }
  // VerificationStateEntry.maybeUpdateLowestSequenceAndEpoch.
  if (epoch > v.epoch) {
    v.epoch = epoch;
    v.lowest_sequence = base_sequence;
  } else if (epoch == v.epoch && base_sequence < v.lowest_sequence) {
    v.lowest_sequence = base_sequence;
  }
  return v.guard;
}

const verification_state_entry* producer_state_manager::find_verification(int64_t producer_id) const {
  auto it = _verifications.find(producer_id);
  return it == _verifications.end() ? nullptr : &it->second;
}

bool producer_state_manager::has_ongoing_txn(int64_t producer_id, int16_t epoch) const {
  const auto* entry = find(producer_id);
  return entry && entry->current_txn_first_offset && entry->producer_epoch == epoch;
}

bool producer_state_manager::has_older_ongoing_txn(int64_t producer_id, int16_t epoch) const {
  const auto* entry = find(producer_id);
  return entry && entry->current_txn_first_offset && entry->producer_epoch < epoch;
}

std::optional<completed_txn> producer_state_manager::complete_txn(producer_state_entry& entry,
                                                                  int64_t marker_offset, bool aborted) {
  if (!entry.current_txn_first_offset) return std::nullopt;
  completed_txn done{.producer_id = entry.producer_id,
                     .first_offset = *entry.current_txn_first_offset,
                     .last_offset = marker_offset,
                     .aborted = aborted,
                     .last_stable_offset = marker_offset + 1};
  // Kafka's lastStableOffset(completedTxn): the earliest transaction still open by another producer.
  for (const auto& [first, producer] : _ongoing_txns) {
    if (producer != entry.producer_id) {
      done.last_stable_offset = first;
      break;
    }
  }
  _ongoing_txns.erase(done.first_offset);
  _unreplicated_txns.insert_or_assign(done.first_offset, done);
  entry.current_txn_first_offset.reset();
  return done;
}

std::optional<completed_txn> producer_state_manager::apply_batch(std::span<const uint8_t> batch) {
  auto header = proto::parse_batch_header(batch);
  if (!header) return std::nullopt;
  std::optional<completed_txn> completed;
  if (header->producer_id != proto::no_producer_id) {
    if (!header->is_control()) {
      apply_data_batch(*header, header->base_offset);
    } else if (auto marker = decode_txn_marker_batch(batch)) {
      auto [it, inserted] = _producers.try_emplace(header->producer_id);
      auto& entry = it->second;
      if (inserted) entry.producer_id = header->producer_id;
      set_epoch(entry, header->producer_epoch);
      entry.coordinator_epoch = marker->coordinator_epoch;
      _verifications.erase(header->producer_id);
      completed = complete_txn(entry, header->base_offset, !marker->is_commit());
      entry.last_timestamp = marker->timestamp;
    }
  }
  _map_end_offset = header->next_offset();
  return completed;
}

std::vector<completed_txn> producer_state_manager::on_append(std::span<const uint8_t> records) {
  std::vector<completed_txn> completed;
  proto::batch_splitter splitter(records);
  while (auto batch = splitter.next()) {
    if (auto done = apply_batch(*batch)) completed.push_back(*done);
  }
  return completed;
}

std::optional<int64_t> producer_state_manager::first_unstable_offset() const {
  std::optional<int64_t> first;
  if (!_ongoing_txns.empty()) first = _ongoing_txns.begin()->first;
  if (!_unreplicated_txns.empty()) {
    const int64_t unreplicated = _unreplicated_txns.begin()->first;
    first = first ? std::min(*first, unreplicated) : unreplicated;
  }
  return first;
}

void producer_state_manager::on_high_watermark_updated(int64_t high_watermark) {
  std::erase_if(_unreplicated_txns,
                [&](const auto& item) { return item.second.last_offset < high_watermark; });
}

void producer_state_manager::update(const proto::record_batch_header& batch, int64_t first_offset) {
  if (batch.producer_id != proto::no_producer_id && !batch.is_control())
    apply_data_batch(batch, first_offset);
  _map_end_offset = first_offset + batch.last_offset_delta + 1;
}

status producer_state_manager::reload(partition_log& log, int64_t now_ms) {
  const aborted_txn_rebuild rebuild{
      .truncate_from = [&log](int64_t offset) { return log.truncate_aborted_txns(offset); },
      .append =
          [&log](const completed_txn& txn) {
            return log.append_aborted_txn({.producer_id = txn.producer_id,
                                           .first_offset = txn.first_offset,
                                           .last_offset = txn.last_offset,
                                           .last_stable_offset = txn.last_stable_offset});
          },
  };
  return reload(
      log.log_start_offset(), log.log_end_offset(),
      [&log](int64_t from, int64_t to, const log_batch_visitor& visit) {
        return scan_log_batches(log, from, to, visit);
      },
      now_ms, &rebuild);
}

status producer_state_manager::reload(int64_t log_start_offset, int64_t log_end_offset,
                                      const log_batch_scanner& scan, int64_t now_ms,
                                      const aborted_txn_rebuild* rebuild) {
  // Kafka's truncateAndReload: a snapshot above the log end describes batches that are gone; one at or below
  // the log start offset describes producers whose batches retention may have deleted.
  std::vector<int64_t> out_of_range;
  for (const auto& [offset, path] : _snapshots) {
    if (offset > log_end_offset || offset <= log_start_offset) out_of_range.push_back(offset);
  }
  for (int64_t offset : out_of_range) delete_snapshot(offset);

  if (log_end_offset == _map_end_offset) {
    on_log_start_offset_incremented(log_start_offset);
    return status::success();
  }

  _producers.clear();
  _ongoing_txns.clear();
  _unreplicated_txns.clear();
  _map_end_offset = log_start_offset;
  _last_snapshot_offset = log_start_offset;
  while (!_snapshots.empty()) {
    const auto [offset, path] = *_snapshots.rbegin();
    auto contents = detail::read_file_if_exists(path);
    if (!contents) return contents.error();
    if (!*contents) {
      // Gone, or not written yet by the file worker: deleted after that write, so that no file the state
      // does not list is left to a later start.
      delete_snapshot(offset);
      continue;
    }
    const auto& text = **contents;
    auto entries = decode_producer_snapshot(
        std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(text.data()), text.size()));
    if (!entries) {
      subsystem_logger("storage")->warn("deleting unreadable producer snapshot {}: {}", path.string(),
                                        entries.error().message);
      delete_snapshot(offset);
      continue;
    }
    for (auto& entry : *entries) {
      if (expired(entry, now_ms)) continue;
      // Kafka's loadFromSnapshot: an open transaction in the snapshot is open at its offset.
      if (entry.current_txn_first_offset)
        _ongoing_txns.emplace(*entry.current_txn_first_offset, entry.producer_id);
      _producers.insert_or_assign(entry.producer_id, std::move(entry));
    }
    _map_end_offset = offset;
    _last_snapshot_offset = offset;
    break;
  }

  const int64_t replay_from = _map_end_offset;
  // The aborted-transaction entries from here on are rebuilt by the replay (Kafka's LogSegment.recover
  // rebuilds a recovered segment's .txnindex the same way), so a crash that lost some leaves none missing.
  if (rebuild && log_end_offset > replay_from) {
    if (auto st = rebuild->truncate_from(replay_from); !st.ok()) return st;
  }
  if (log_end_offset > replay_from) {
    status index_error;
    auto st = scan(replay_from, log_end_offset, [&](std::span<const uint8_t> b) {
      auto done = apply_batch(b);
      if (done && done->aborted && rebuild && index_error.ok()) index_error = rebuild->append(*done);
    });
    if (!st.ok()) return st;
    if (!index_error.ok()) return index_error;
  }
  subsystem_logger("storage")->debug(
      "{}: producer state of {} producers loaded up to offset {} (replayed from {})", _dir, _producers.size(),
      log_end_offset, replay_from);
  auto written = take_snapshot(log_end_offset);
  return written.ok() ? status::success() : written.error();
}

status producer_state_manager::truncate_fully_and_start_at(int64_t offset) {
  _producers.clear();
  _ongoing_txns.clear();
  _unreplicated_txns.clear();
  while (!_snapshots.empty()) delete_snapshot(_snapshots.begin()->first);
  _map_end_offset = offset;
  _last_snapshot_offset = 0;
  return status::success();
}

void producer_state_manager::on_log_start_offset_incremented(int64_t log_start_offset) {
  on_high_watermark_updated(log_start_offset);
  _map_end_offset = std::max(_map_end_offset, log_start_offset);
  _last_snapshot_offset = latest_snapshot_offset().value_or(log_start_offset);
}

status producer_state_manager::move_to(const fs::path& dir) {
  auto listed = open(dir, _config);
  if (!listed) return listed.error();
  _dir = dir.string();
  _snapshots = std::move((*listed)->_snapshots);
  _last_snapshot_offset = latest_snapshot_offset().value_or(0);
  return status::success();
}

result<std::optional<std::filesystem::path>> producer_state_manager::take_snapshot(int64_t offset,
                                                                                   file_sync sync) {
  // Kafka's roll: the new segment's base offset may be ahead of the state's end (it equals the log end
  // offset).
  _map_end_offset = offset;
  if (offset <= _last_snapshot_offset) return std::optional<std::filesystem::path>{};

  std::vector<producer_state_entry> entries;
  entries.reserve(_producers.size());
  for (const auto& [id, entry] : _producers) entries.push_back(entry);
  std::sort(entries.begin(), entries.end(), [](const producer_state_entry& a, const producer_state_entry& b) {
    return a.producer_id < b.producer_id;
  });
  const auto path = producer_snapshot_path(_dir, offset);
  if (_worker && sync == file_sync::later) {
    _worker->post([path, contents = encode_producer_snapshot(entries)] {
      std::error_code ec;
      if (!fs::exists(path.parent_path(), ec)) return;  // the log was removed meanwhile
      if (auto st = write_file_atomically(path, contents, file_sync::later); !st.ok()) {
        subsystem_logger("storage")->warn("cannot write producer snapshot {}: {}", path.string(), st.message);
      }
    });
  } else if (auto st = write_file_atomically(path, encode_producer_snapshot(entries), sync); !st.ok()) {
    return st;
  }
  _snapshots[offset] = path;
  _last_snapshot_offset = offset;
  while (_snapshots.size() > producer_snapshots_retained) delete_snapshot(_snapshots.begin()->first);
  return std::optional<std::filesystem::path>{path};
}

size_t producer_state_manager::remove_expired_producers(int64_t now_ms) {
  std::erase_if(_verifications, [&](const auto& item) {
    return now_ms - item.second.timestamp_ms >= _config.producer_id_expiration_ms;
  });
  return std::erase_if(_producers, [&](const auto& item) { return expired(item.second, now_ms); });
}

bool producer_state_manager::expired(const producer_state_entry& entry, int64_t now_ms) const {
  // An open transaction keeps its producer (the coordinator aborts it after transaction.timeout.ms).
  return !entry.current_txn_first_offset &&
         now_ms - entry.last_timestamp >= _config.producer_id_expiration_ms;
}

const producer_state_entry* producer_state_manager::find(int64_t producer_id) const {
  auto it = _producers.find(producer_id);
  return it == _producers.end() ? nullptr : &it->second;
}

std::vector<int64_t> producer_state_manager::snapshot_offsets() const {
  std::vector<int64_t> out;
  out.reserve(_snapshots.size());
  for (const auto& [offset, path] : _snapshots) out.push_back(offset);
  return out;
}

std::optional<int64_t> producer_state_manager::latest_snapshot_offset() const {
  if (_snapshots.empty()) return std::nullopt;
  return _snapshots.rbegin()->first;
}

void producer_state_manager::delete_snapshot(int64_t offset) {
  auto it = _snapshots.find(offset);
  if (it == _snapshots.end()) return;
  if (_worker) {
    // After the write of the file, if that is still queued.
    _worker->post([path = it->second] {
      std::error_code ec;
      fs::remove(path, ec);
      if (ec)
        subsystem_logger("storage")->warn("cannot delete producer snapshot {}: {}", path.string(),
                                          ec.message());
    });
    _snapshots.erase(it);
    return;
  }
  std::error_code ec;
  fs::remove(it->second, ec);
  if (ec)
    subsystem_logger("storage")->warn("cannot delete producer snapshot {}: {}", it->second.string(),
                                      ec.message());
  _snapshots.erase(it);
}

}  // namespace mala::storage
