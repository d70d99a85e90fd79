// Shared by the storage crash and corruption tests: a deterministic record generator (every key, value,
// timestamp and batch size is a function of the offset, so a checker that only has the files on disk can tell
// whether a batch is exactly what was appended) and checkers that walk a partition log both through the
// partition_log API and file by file (segments, offset and time indexes in Kafka's byte format).
//
// Header-only; used by one thread at a time.
#pragma once

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "mala/protocol/record_batch.h"
#include "mala/storage/partition_log.h"
#include "mala/storage/segment_files.h"

namespace mala::storage::crash_test {

namespace fs = std::filesystem;
namespace proto = mala::protocol;

inline constexpr int64_t base_timestamp_ms = 1'700'000'000'000;

inline uint64_t mix(uint64_t x) {  // splitmix64 finaliser
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

// Records in the batch that starts at `base` (1..40), so batch sizes vary from ~100 bytes to ~25 KiB.
inline int32_t records_in_batch(int64_t base) {
  return 1 + static_cast<int32_t>(mix(static_cast<uint64_t>(base) * 7 + 1) % 40);
}
inline std::string key_of(int64_t offset) {
  return "key-" + std::to_string(offset);
}
inline std::vector<uint8_t> value_of(int64_t offset) {
  uint64_t h = mix(static_cast<uint64_t>(offset));
  std::vector<uint8_t> v(h % 600);
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<uint8_t>(mix(h + i) & 0xff);
  return v;
}
// Increasing with the offset, so the time index of a log made from these batches is easy to predict.
inline int64_t timestamp_of(int64_t offset) {
  return base_timestamp_ms + offset;
}

// The uncompressed batch holding offsets base .. base + records_in_batch(base) - 1 (base offset field set to
// `base` too, though a leader append restamps it to the log end offset, which is the same thing).
inline std::vector<uint8_t> make_batch(int64_t base) {
  proto::record_batch_builder builder;
  builder.base_offset(base);
  int32_t n = records_in_batch(base);
  for (int32_t i = 0; i < n; ++i) {
    int64_t o = base + i;
    std::string k = key_of(o);
    auto v = value_of(o);
    builder.add(timestamp_of(o),
                std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(k.data()), k.size()),
                std::span<const uint8_t>(v));
  }
  return builder.build();
}

// Checks one batch against the generator: valid framing and CRC, its records exactly the generated ones.
// Returns an empty string when it matches, else what is wrong.
inline std::string check_batch(std::span<const uint8_t> batch) {
  proto::record_batch_view view(batch);
  if (!view.ok())
    return std::string("invalid batch: ") + std::string(proto::batch_status_name(view.status()));
  auto rs = view.check_records();
  if (rs != proto::batch_status::ok)
    return std::string("bad records: ") + std::string(proto::batch_status_name(rs));
  int64_t base = view.base_offset();
  if (view.record_count() != records_in_batch(base))
    return "batch at " + std::to_string(base) + " has " + std::to_string(view.record_count()) +
           " records, generator made " + std::to_string(records_in_batch(base));
  if (view.last_offset() != base + records_in_batch(base) - 1)
    return "batch at " + std::to_string(base) + " has last offset " + std::to_string(view.last_offset());
  auto reader = view.records();
  for (auto it = reader.begin(); it != reader.end(); ++it) {
    int64_t o = view.offset_of(*it);
    std::string k = key_of(o);
    auto v = value_of(o);
    if (!it->key || !std::equal(it->key->begin(), it->key->end(), k.begin(), k.end()))
      return "key mismatch at offset " + std::to_string(o);
    if (!it->value || !std::equal(it->value->begin(), it->value->end(), v.begin(), v.end()))
      return "value mismatch at offset " + std::to_string(o);
    if (view.timestamp_of(*it) != timestamp_of(o)) return "timestamp mismatch at offset " + std::to_string(o);
  }
  return {};
}

struct log_check {
  std::vector<std::string> errors;
  int64_t start_offset = -1;  // first offset found
  int64_t end_offset = -1;    // next offset after the last batch found
  int64_t batches = 0;
  int64_t segments = 0;
  int64_t offset_index_entries = 0;
  int64_t time_index_entries = 0;
  bool ok() const { return errors.empty(); }
  std::string describe() const {
    std::string s;
    for (size_t i = 0; i < errors.size() && i < 10; ++i) s += "  " + errors[i] + "\n";
    if (errors.size() > 10) s += "  ... " + std::to_string(errors.size() - 10) + " more\n";
    return s;
  }
};

inline std::vector<uint8_t> read_whole_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

inline uint32_t be32(const uint8_t* p) {
  return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | uint32_t{p[3]};
}
inline int64_t be64(const uint8_t* p) {
  return static_cast<int64_t>((uint64_t{be32(p)} << 32) | be32(p + 4));
}

// Walks every segment of the partition directory on disk: batches valid and generated, offsets contiguous
// across segments, every offset index entry pointing at a batch start whose batch holds that offset, offset
// index entries increasing, time index timestamps increasing and offsets non-decreasing inside the segment.
// Index files may be preallocated (trailing zero entries are ignored, as Kafka does for an untrimmed index).
inline log_check check_files(const fs::path& dir) {
  log_check c;
  std::map<int64_t, fs::path> logs;
  for (const auto& e : fs::directory_iterator(dir)) {
    if (auto base = parse_segment_base_offset(e.path().filename().string(), log_suffix))
      logs[*base] = e.path();
  }
  int64_t expected = -1;
  for (const auto& [base, path] : logs) {
    ++c.segments;
    std::string seg = path.filename().string();
    auto data = read_whole_file(path);
    std::map<int64_t, std::pair<int64_t, int64_t>> by_position;  // position -> (base, last)
    proto::batch_splitter splitter(data);
    int64_t seg_next = base;
    size_t position = 0;
    while (auto batch = splitter.next()) {
      auto err = check_batch(*batch);
      auto header = proto::parse_batch_header(*batch);
      if (!err.empty()) {
        c.errors.push_back(seg + " @" + std::to_string(position) + ": " + err);
        break;
      }
      if (expected >= 0 && header->base_offset != expected)
        c.errors.push_back(seg + ": batch at position " + std::to_string(position) + " has base offset " +
                           std::to_string(header->base_offset) + ", expected " + std::to_string(expected));
      if (c.start_offset < 0) c.start_offset = header->base_offset;
      expected = header->next_offset();
      seg_next = expected;
      by_position[static_cast<int64_t>(position)] = {header->base_offset, header->last_offset()};
      position += batch->size();
      ++c.batches;
    }
    if (!splitter.ok())
      c.errors.push_back(seg + ": " + std::string(proto::batch_status_name(splitter.status())) +
                         " at position " + std::to_string(splitter.position()));
    if (!by_position.empty() && by_position.begin()->second.first != base)
      c.errors.push_back(seg + ": first batch offset " + std::to_string(by_position.begin()->second.first) +
                         " differs from the file name");

    // Offset index: (relative offset, position) pairs.
    auto index = read_whole_file(dir / (offset_file_stem(base) + std::string(offset_index_suffix)));
    if (index.size() % offset_index_entry_size != 0)
      c.errors.push_back(seg + ": .index size " + std::to_string(index.size()) + " not a multiple of 8");
    int64_t last_rel = -1;
    for (size_t i = 0; i + offset_index_entry_size <= index.size(); i += offset_index_entry_size) {
      uint32_t rel = be32(&index[i]);
      uint32_t pos = be32(&index[i + 4]);
      // Preallocated tail; (0, 0) is a real first entry only when the segment has a batch at position 0.
      if (rel == 0 && pos == 0 && (i > 0 || by_position.empty())) break;
      ++c.offset_index_entries;
      int64_t off = base + rel;
      auto it = by_position.find(pos);
      if (it == by_position.end()) {
        c.errors.push_back(seg + ": .index entry " + std::to_string(i / 8) + " (offset " +
                           std::to_string(off) + ", position " + std::to_string(pos) +
                           ") is not a batch start");
      } else if (off < it->second.first || off > it->second.second) {
        c.errors.push_back(seg + ": .index entry " + std::to_string(i / 8) + " offset " +
                           std::to_string(off) + " is not in the batch at position " + std::to_string(pos) +
                           " (" + std::to_string(it->second.first) + ".." +
                           std::to_string(it->second.second) + ")");
      }
      if (static_cast<int64_t>(rel) <= last_rel && i > 0)
        c.errors.push_back(seg + ": .index offsets not increasing at entry " + std::to_string(i / 8));
      last_rel = rel;
    }

    // Time index: (timestamp, relative offset); Kafka writes the max timestamp so far and its batch's last
    // offset, so timestamps strictly increase and offsets never decrease.
    auto times = read_whole_file(dir / (offset_file_stem(base) + std::string(time_index_suffix)));
    if (times.size() % time_index_entry_size != 0)
      c.errors.push_back(seg + ": .timeindex size " + std::to_string(times.size()) + " not a multiple of 12");
    int64_t last_ts = -1;
    int64_t last_off = -1;
    for (size_t i = 0; i + time_index_entry_size <= times.size(); i += time_index_entry_size) {
      int64_t ts = be64(&times[i]);
      uint32_t rel = be32(&times[i + 8]);
      if (ts == 0 && rel == 0) break;  // preallocated tail
      ++c.time_index_entries;
      int64_t off = base + rel;
      if (ts <= last_ts)
        c.errors.push_back(seg + ": .timeindex timestamps not increasing at entry " + std::to_string(i / 12));
      if (off < last_off)
        c.errors.push_back(seg + ": .timeindex offsets decreasing at entry " + std::to_string(i / 12));
      if (off < base || off >= std::max(seg_next, base + 1))
        c.errors.push_back(seg + ": .timeindex entry " + std::to_string(i / 12) + " offset " +
                           std::to_string(off) + " outside the segment's data");
      else if (ts > timestamp_of(off))
        c.errors.push_back(seg + ": .timeindex entry " + std::to_string(i / 12) + " timestamp " +
                           std::to_string(ts) + " beyond the max timestamp at its offset");
      last_ts = ts;
      last_off = off;
    }
  }
  c.end_offset = expected;
  return c;
}

// Reads the whole log through partition_log::read in chunks (as Fetch does) and checks every batch served:
// CRC valid, generated content, offsets contiguous from the log start offset to the log end offset.
inline log_check check_reads(const partition_log& log, int32_t max_bytes = 64 * 1024) {
  log_check c;
  int64_t next = log.log_start_offset();
  c.start_offset = next;
  const int64_t end = log.log_end_offset();
  while (next < end) {
    auto r = log.read(next, max_bytes, end, true);
    if (!r.ok()) {
      c.errors.push_back("read(" + std::to_string(next) + ") failed: " + r.error().message);
      break;
    }
    if (!r->data || r->data->size == 0) {
      c.errors.push_back("read(" + std::to_string(next) + ") returned nothing before the log end offset " +
                         std::to_string(end));
      break;
    }
    auto bytes = r->data->file->read(r->data->position, r->data->size);
    if (!bytes.ok() || static_cast<int32_t>(bytes->size()) != r->data->size) {
      c.errors.push_back("pread of slice at " + std::to_string(next) + " failed");
      break;
    }
    proto::batch_splitter splitter(*bytes);
    bool progressed = false;
    while (auto batch = splitter.next()) {
      auto err = check_batch(*batch);
      if (!err.empty()) {
        c.errors.push_back("read(" + std::to_string(next) + ") served a bad batch: " + err);
        return c;
      }
      auto header = proto::parse_batch_header(*batch);
      if (header->base_offset > next || header->last_offset() < next) {
        c.errors.push_back("read(" + std::to_string(next) + ") served batch " +
                           std::to_string(header->base_offset) + ".." +
                           std::to_string(header->last_offset()));
        return c;
      }
      next = header->next_offset();
      progressed = true;
      ++c.batches;
    }
    if (!splitter.ok()) {
      c.errors.push_back("read slice ends with a partial batch at " + std::to_string(next));
      break;
    }
    if (!progressed) break;
  }
  c.end_offset = next;
  if (c.ok() && next != end)
    c.errors.push_back("reads ended at " + std::to_string(next) + ", log end offset " + std::to_string(end));
  return c;
}

}  // namespace mala::storage::crash_test
