#include "mala/storage/log_cleaner.h"

#include <fcntl.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <limits>

#include "file_io.h"
#include "mala/protocol/record_batch.h"
#include "mala/storage/cleaned_transactions.h"
#include "mala/storage/txn_marker.h"

namespace mala::storage {
namespace {

namespace layout = protocol::batch_layout;

constexpr int64_t min_read_bytes = 4096;

status corrupt(const cleaning_snapshot& s, int64_t base, int64_t position, const std::string& what) {
  return status::error(error_code::corrupt_message, s.tp.topic + "-" + std::to_string(s.tp.partition) +
                                                        ": segment " + offset_file_stem(base) + " at byte " +
                                                        std::to_string(position) + ": " + what);
}

// Whole batches of one closed segment, read in chunks of about a megabyte (a larger batch in one read).
class batch_reader {
 public:
  // `buffer`: the round's read buffer, kept from one segment to the next.
  batch_reader(const cleaning_snapshot& snapshot, const cleaning_segment& segment, const cleaning_controls& c,
               std::vector<uint8_t>& buffer)
      : _snapshot(snapshot), _segment(segment), _controls(c), _chunk(buffer) {}

  // The next batch, an empty span at the end, or an error.
  result<std::span<const uint8_t>> next() {
    if (_position >= _segment.size_bytes) return std::span<const uint8_t>{};
    if (_offset + layout::log_overhead > _chunk_size || !whole_batch_buffered()) {
      if (auto st = fill(); !st.ok()) return st;
    }
    if (_offset + layout::log_overhead > _chunk_size)
      return corrupt(_snapshot, _segment.base_offset, _position, "batch header cut short");
    const int64_t size = batch_size_at(_offset);
    if (size < static_cast<int64_t>(layout::header_size) || _offset + size > _chunk_size)
      return corrupt(_snapshot, _segment.base_offset, _position, "batch size out of bounds");
    std::span<const uint8_t> batch(_chunk.data() + _offset, static_cast<size_t>(size));
    _offset += static_cast<size_t>(size);
    _position += size;
    return batch;
  }
  int64_t position() const { return _position; }

 private:
  int64_t batch_size_at(size_t at) const { return batch_size_in(_chunk.data() + at); }
  static int64_t batch_size_in(const uint8_t* batch) {
    const uint8_t* p = batch + layout::log_overhead - 4;
    const int32_t length = static_cast<int32_t>((uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) |
                                                (uint32_t{p[2]} << 8) | uint32_t{p[3]});
    return int64_t{length} + layout::log_overhead;
  }
  bool whole_batch_buffered() const {
    return _offset + layout::log_overhead <= _chunk_size && _offset + batch_size_at(_offset) <= _chunk_size;
  }
  // Reads from _position: a chunk, or the whole batch there when it is larger, into the round's buffer (not
  // a new zero-filled vector per chunk).
  status fill() {
    int64_t want =
        std::min(std::max(_controls.read_buffer_bytes, min_read_bytes), _segment.size_bytes - _position);
    if (want >= static_cast<int64_t>(layout::log_overhead)) {
      std::array<uint8_t, layout::log_overhead> head{};
      const int64_t got = detail::pread_full(_segment.file->fd(), head.data(), head.size(), _position);
      if (got < 0) return detail::io_error("cannot read", _segment.file->path(), errno);
      if (got == static_cast<int64_t>(head.size())) {
        const int64_t size = batch_size_in(head.data());
        if (size > want && size <= _segment.size_bytes - _position) want = size;
      }
    }
    if (want > std::numeric_limits<int32_t>::max())
      return corrupt(_snapshot, _segment.base_offset, _position, "batch larger than 2 GiB");
    if (_chunk.size() < static_cast<size_t>(want)) _chunk.resize(static_cast<size_t>(want));
    const int64_t got =
        detail::pread_full(_segment.file->fd(), _chunk.data(), static_cast<size_t>(want), _position);
    if (got < 0) return detail::io_error("cannot read", _segment.file->path(), errno);
    _chunk_size = static_cast<size_t>(got);
    _offset = 0;
    if (_controls.throttle) _controls.throttle(got);
    return status::success();
  }
  const cleaning_snapshot& _snapshot;
  const cleaning_segment& _segment;
  const cleaning_controls& _controls;
  std::vector<uint8_t>& _chunk;  // its first _chunk_size bytes were read; grows, never shrinks
  size_t _chunk_size = 0;
  size_t _offset = 0;
  int64_t _position = 0;
};

bool stopped(const cleaning_controls& c) {
  return c.stop && c.stop->load(std::memory_order_relaxed);
}

status stopped_error() {
  return status::error(error_code::request_timed_out, "the cleaner is stopping");
}

// The snapshot's aborted transactions overlapping [from, to).
std::vector<aborted_txn> aborted_between(const cleaning_snapshot& s, int64_t from, int64_t to) {
  std::vector<aborted_txn> out;
  for (const aborted_txn& txn : s.aborted_txns) {
    if (txn.last_offset >= from && txn.first_offset < to) out.push_back(txn);
  }
  return out;
}

// Feeds one batch to the tracker: true when it is aborted data or a marker that may go.
bool discardable(cleaned_transactions& txns, const protocol::record_batch_header& h,
                 std::span<const uint8_t> batch) {
  if (!h.is_control()) return txns.on_data_batch(h);
  return txns.on_control_batch(h, decode_txn_marker_batch(batch));
}

// Whether the batch is its producer's last in the log: the data batch at the producer's last offset, or a
// marker of the current epoch of a producer whose last entry is a marker.
bool producers_last_batch(const cleaning_snapshot& s, const protocol::record_batch_header& h) {
  if (h.producer_id < 0) return false;
  if (h.is_control()) {
    auto it = std::lower_bound(s.producers_ending_with_marker.begin(), s.producers_ending_with_marker.end(),
                               h.producer_id,
                               [](const producer_marker_epoch& p, int64_t id) { return p.producer_id < id; });
    if (it != s.producers_ending_with_marker.end() && it->producer_id == h.producer_id)
      return it->producer_epoch == h.producer_epoch;
  }
  return std::binary_search(s.producer_last_offsets.begin(), s.producer_last_offsets.end(), h.last_offset());
}

// Kafka's buildOffsetMap: the latest offset of every key from the first dirty offset on, until the map is
// full or the first uncleanable offset is reached. Batches of aborted transactions and markers add no key.
status build_key_map(const cleaning_snapshot& s, key_offset_map& map, filter_buffers& buffers,
                     std::vector<uint8_t>& read_buffer, const cleaning_controls& controls,
                     cleaning_stats& stats) {
  map.clear();
  const int64_t start = s.range.first_dirty_offset;
  cleaned_transactions txns(aborted_between(s, start, s.range.first_uncleanable_offset));
  map.set_latest_offset(start - 1);
  for (size_t i = 0; i < s.segments.size(); ++i) {
    const cleaning_segment& segment = s.segments[i];
    const int64_t segment_end =
        i + 1 < s.segments.size() ? s.segments[i + 1].base_offset : s.range.first_uncleanable_offset;
    if (segment_end <= start) continue;
    batch_reader reader(s, segment, controls, read_buffer);
    for (;;) {
      if (stopped(controls)) return stopped_error();
      const int64_t position = reader.position();
      auto batch = reader.next();
      if (!batch) return batch.error();
      if (batch->empty()) break;
      stats.map_bytes_read += static_cast<int64_t>(batch->size());
      protocol::record_batch_view view(*batch);
      if (!view.ok()) return corrupt(s, segment.base_offset, position, "invalid batch");
      const auto& h = view.header();
      if (h.last_offset() < start) continue;
      if (!discardable(txns, h, *batch) && !h.is_control()) {
        auto records = view.records(buffers.decompressed);
        while (auto r = records.next()) {
          const int64_t offset = h.base_offset + r->offset_delta;
          if (offset < start || !r->key) continue;
          if (!map.put(*r->key, offset)) {
            map.set_latest_offset(offset - 1);
            return status::success();
          }
        }
        if (!records.ok()) return corrupt(s, segment.base_offset, position, "invalid records");
      }
      map.set_latest_offset(std::max(map.latest_offset(), h.last_offset()));
    }
    // Offsets up to the next segment hold no record: they count as covered.
    map.set_latest_offset(std::max(map.latest_offset(), segment_end - 1));
  }
  return status::success();
}

// Starts the write-back of a cleaned segment's pages every few MiB (sync_file_range, which does not wait),
// so that the fsync at the group's end finds little left: a 100 MiB group's pages written back in one burst
// take the CPU (block submissions, the journal commit) from the shards and the producers for tens of
// milliseconds at once.
class cleaned_write_behind {
 public:
  void wrote(const log_segment& out) {
    const int64_t end = out.size();
    if (end - _started < step) return;
    if (auto file = out.file_if_open(); file && file->fd() >= 0)
      (void)::sync_file_range(file->fd(), _started, end - _started, SYNC_FILE_RANGE_WRITE);
    _started = end;
  }

 private:
  static constexpr int64_t step = 4 << 20;
  int64_t _started = 0;  // bytes whose write-back was started
};

// Rewrites segments [begin, end) of the snapshot into one new .cleaned segment, with the .txnindex entries of
// the aborts whose markers stay.
result<std::unique_ptr<log_segment>> clean_group(const cleaning_snapshot& s, size_t begin, size_t end,
                                                 const compaction_round& round, filter_buffers& buffers,
                                                 std::vector<uint8_t>& read_buffer,
                                                 const cleaning_controls& controls, cleaning_stats& stats) {
  const int64_t base = s.segments[begin].base_offset;
  const int64_t group_end =
      end < s.segments.size() ? s.segments[end].base_offset : s.range.first_uncleanable_offset;
  auto opened = log_segment::open(s.dir, base, s.config, /*create=*/true, {}, cleaned_suffix);
  if (!opened) return opened.error();
  std::unique_ptr<log_segment> out = std::move(*opened);
  cleaned_write_behind write_behind;
  cleaned_transactions txns(aborted_between(s, base, group_end));
  size_t retained_aborts = 0;
  std::vector<uint8_t> kept;
  for (size_t i = begin; i < end; ++i) {
    const cleaning_segment& segment = s.segments[i];
    batch_reader reader(s, segment, controls, read_buffer);
    for (;;) {
      if (stopped(controls)) {
        (void)out->delete_files();
        return stopped_error();
      }
      const int64_t position = reader.position();
      auto batch = reader.next();
      if (!batch) {
        (void)out->delete_files();
        return batch.error();
      }
      if (batch->empty()) break;
      stats.bytes_read += static_cast<int64_t>(batch->size());
      auto header = protocol::parse_batch_header(*batch);
      batch_facts facts;
      if (header) {
        facts.producers_last_batch = producers_last_batch(s, *header);
        facts.discardable = discardable(txns, *header, *batch);
      }
      kept.clear();
      const filtered_batch outcome = filter_batch(*batch, round, facts, kept, buffers);
      if (outcome.outcome == batch_outcome::corrupt) {
        (void)out->delete_files();
        return corrupt(s, segment.base_offset, position, "invalid batch");
      }
      // An ABORT marker that stays keeps its transaction listed for read_committed readers.
      for (; retained_aborts < txns.retained_aborts().size(); ++retained_aborts) {
        if (auto st = out->txns().append(txns.retained_aborts()[retained_aborts]); !st.ok()) {
          (void)out->delete_files();
          return st;
        }
      }
      stats.records_removed += outcome.records_removed;
      if (outcome.outcome == batch_outcome::removed) {
        ++stats.batches_removed;
        continue;
      }
      const protocol::record_batch_view written(kept, protocol::crc_check::skip);
      const auto& h = written.header();
      appended_batch info{h.base_offset, h.last_offset(), h.max_timestamp, h.last_offset()};
      if (auto st = out->append(kept, info); !st.ok()) {
        (void)out->delete_files();
        return st;
      }
      stats.bytes_written += static_cast<int64_t>(kept.size());
      write_behind.wrote(*out);
      if (controls.throttle) controls.throttle(static_cast<int64_t>(kept.size()));
    }
  }
  status st = out->on_roll();
  if (st.ok()) st = out->flush();
  if (st.ok()) st = out->release_descriptor();
  if (!st.ok()) {
    (void)out->delete_files();
    return st;
  }
  return out;
}

}  // namespace

status prepare_snapshot_files(cleaning_snapshot& s) {
  for (auto& work : s.pending_file_work) {
    if (auto st = work->finish(); !st.ok()) return st;
  }
  s.pending_file_work.clear();
  for (auto& segment : s.segments) {
    if (segment.file) continue;
    auto opened = segment_file::open_for_reading(segment.path);
    if (!opened) return opened.error();
    segment.file = std::move(*opened);
  }
  // Kafka's collectAbortedTxns from the log start: until an entry shows that no later segment can hold one
  // overlapping the range (its last stable offset is at or past the range's end).
  const int64_t from = s.log_start_offset;
  const int64_t to = s.range.first_uncleanable_offset;
  for (const auto& index : s.txn_indexes) {
    auto entries = index.read();
    // Retried after the backoff (not "uncleanable"): as when the shard read them, a .txnindex that cannot be
    // read now only skips this round.
    if (!entries) {
      return status::error(error_code::kafka_storage_error,
                           "the aborted transactions cannot be read: " + entries.error().message);
    }
    if (collect_aborted_txns(*entries, from, to, s.aborted_txns)) break;
  }
  s.txn_indexes.clear();
  return status::success();
}

result<cleaned_log> clean_log(cleaning_snapshot& s, int64_t now_ms, key_offset_map& map,
                              filter_buffers& buffers, const cleaning_controls& controls) {
  if (auto st = prepare_snapshot_files(s); !st.ok()) return st;
  cleaned_log cleaned;
  std::vector<uint8_t> read_buffer;
  if (auto st = build_key_map(s, map, buffers, read_buffer, controls, cleaned.stats); !st.ok()) return st;
  cleaned.stats.keys = map.size();
  const int64_t end = map.latest_offset() + 1;
  if (end <= s.range.first_dirty_offset) {
    return status::error(error_code::invalid_config,
                         "log.cleaner.dedupe.buffer.size holds too few keys to clean " + s.tp.topic + "-" +
                             std::to_string(s.tp.partition));
  }
  cleaned.next_dirty_offset = end;

  // Kafka's cleanSegments over log.logSegments(0, endOffset): every segment starting below the map's end.
  size_t count = 0;
  while (count < s.segments.size() && s.segments[count].base_offset < end) ++count;
  std::vector<segment_summary> summaries(s.summaries.begin(),
                                         s.summaries.begin() + static_cast<std::ptrdiff_t>(count));
  const int64_t bound =
      count < s.segments.size() ? s.segments[count].base_offset : s.range.first_uncleanable_offset;
  const compaction_round round{&map, now_ms, s.config.delete_retention_ms, end};
  for (const segment_group& g :
       group_segments(summaries, s.config.segment_bytes, s.config.segment_index_bytes, bound)) {
    auto segment = clean_group(s, g.begin, g.end, round, buffers, read_buffer, controls, cleaned.stats);
    if (!segment) {
      discard_cleaned(cleaned);
      return segment.error();
    }
    cleaned_group group;
    group.segment = std::move(*segment);
    for (size_t i = g.begin; i < g.end; ++i) {
      group.replaced_bases.push_back(s.segments[i].base_offset);
      group.replaced_sizes.push_back(s.segments[i].size_bytes);
    }
    cleaned.groups.push_back(std::move(group));
  }
  return cleaned;
}

void discard_cleaned(cleaned_log& cleaned) {
  for (auto& g : cleaned.groups) {
    if (g.segment) (void)g.segment->delete_files();
  }
  cleaned.groups.clear();
}

}  // namespace mala::storage
