// Kafka record batch format v2 (magic 2): the unit that producers send, the log stores and Fetch returns.
// The same bytes travel from the produce request to the segment file to the fetch response, so this component
// works on spans in place: it validates framing and the CRC-32C, reads headers and records without copying,
// and stamps the fields the leader owns (base offset, partition leader epoch) without touching the CRC.
//
// Wire layout (big-endian), offsets in bytes:
//   0 baseOffset int64 | 8 batchLength int32 (bytes after this field) | 12 partitionLeaderEpoch int32 | 16
//   magic int8 17 crc uint32 (CRC-32C of bytes 21..end) | 21 attributes int16 | 23 lastOffsetDelta int32 | 27
//   baseTimestamp int64 35 maxTimestamp int64 | 43 producerId int64 | 51 producerEpoch int16 | 53
//   baseSequence int32 | 57 count int32 61 records (uncompressed), or the compressed form of the records.
// Record: length varint | attributes int8 | timestampDelta varlong | offsetDelta varint | key (varint length,
// -1 null) | value (same) | header count varint | headers: key (varint length string) | value (varint length,
// -1 null).
//
// Compressed batches (codec in attribute bits 0-2) are read by decompressing the records section into a
// caller-owned buffer (record_batch_view::records(buffer)) and reading records from there with the same
// reader; the codecs themselves are in compression.h.
//
// Everything here is a pure function of its arguments or a view over caller-owned bytes; nothing is shared. A
// view or reader is valid while the underlying bytes are, and is used by one thread at a time.
#pragma once

#include <cstddef>
#include <cstdint>
#include <iterator>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace mala::protocol {

namespace batch_layout {
inline constexpr size_t base_offset = 0;
inline constexpr size_t batch_length = 8;
inline constexpr size_t partition_leader_epoch = 12;
inline constexpr size_t magic = 16;
inline constexpr size_t crc = 17;
inline constexpr size_t attributes = 21;
inline constexpr size_t last_offset_delta = 23;
inline constexpr size_t base_timestamp = 27;
inline constexpr size_t max_timestamp = 35;
inline constexpr size_t producer_id = 43;
inline constexpr size_t producer_epoch = 51;
inline constexpr size_t base_sequence = 53;
inline constexpr size_t record_count = 57;
inline constexpr size_t records = 61;

// baseOffset + batchLength: the part of every log entry that batchLength does not count (Kafka's
// LOG_OVERHEAD).
inline constexpr size_t log_overhead = 12;
// The fixed v2 header; the smallest possible batch (no records).
inline constexpr size_t header_size = 61;
// A record is at least 7 bytes (length, attributes, timestampDelta, offsetDelta, key, value and header count,
// one byte each), which bounds the record count of an uncompressed batch by its size.
inline constexpr size_t min_record_size = 7;
}  // namespace batch_layout

inline constexpr int8_t current_magic = 2;

// Default bound on the decompressed records of one batch: far above what producers send (the Java producer's
// batch.size defaults to 16 KiB, message.max.bytes to about 1 MiB) yet small enough that a "decompression
// bomb" cannot exhaust memory.
inline constexpr size_t default_max_decompressed_bytes = size_t{64} << 20;

// Kafka's "absent" values (RecordBatch.NO_PRODUCER_ID, NO_TIMESTAMP, ...).
inline constexpr int64_t no_producer_id = -1;
inline constexpr int16_t no_producer_epoch = -1;
inline constexpr int32_t no_sequence = -1;
inline constexpr int32_t no_partition_leader_epoch = -1;
inline constexpr int64_t no_timestamp = -1;

// Attribute bits 0-2.
enum class compression_codec : uint8_t { none = 0, gzip = 1, snappy = 2, lz4 = 3, zstd = 4 };

// Attribute bit 3; LogAppendTime is set by the broker when the topic's message.timestamp.type says so.
enum class timestamp_type : uint8_t { create_time = 0, log_append_time = 1 };

namespace batch_attributes {
inline constexpr int16_t compression_mask = 0x07;
inline constexpr int16_t log_append_time = 0x08;
inline constexpr int16_t transactional = 0x10;
inline constexpr int16_t control = 0x20;
// KIP-534: baseTimestamp holds the delete horizon of tombstones and transaction markers after compaction.
inline constexpr int16_t delete_horizon = 0x40;
}  // namespace batch_attributes

struct record_batch_header {
  int64_t base_offset = 0;
  int32_t batch_length = 0;
  int32_t partition_leader_epoch = no_partition_leader_epoch;
  int8_t magic = current_magic;
  uint32_t crc = 0;
  int16_t attributes = 0;
  int32_t last_offset_delta = 0;
  int64_t base_timestamp = no_timestamp;
  int64_t max_timestamp = no_timestamp;
  int64_t producer_id = no_producer_id;
  int16_t producer_epoch = no_producer_epoch;
  int32_t base_sequence = no_sequence;
  int32_t record_count = 0;

  // Bytes of the whole batch, log overhead included.
  int64_t size_in_bytes() const { return static_cast<int64_t>(batch_length) + batch_layout::log_overhead; }
  // Raw codec bits; values 5-7 are not a codec (see validate_batch).
  uint8_t compression_bits() const {
    return static_cast<uint8_t>(attributes & batch_attributes::compression_mask);
  }
  compression_codec compression() const { return static_cast<compression_codec>(compression_bits()); }
  timestamp_type timestamp_kind() const {
    return (attributes & batch_attributes::log_append_time) ? timestamp_type::log_append_time
                                                            : timestamp_type::create_time;
  }
  bool is_transactional() const { return (attributes & batch_attributes::transactional) != 0; }
  bool is_control() const { return (attributes & batch_attributes::control) != 0; }
  bool has_delete_horizon() const { return (attributes & batch_attributes::delete_horizon) != 0; }
  int64_t last_offset() const { return base_offset + last_offset_delta; }
  int64_t next_offset() const { return last_offset() + 1; }
};

// Reads the 61 header bytes; nullopt if fewer are given. Checks nothing else (see validate_batch).
std::optional<record_batch_header> parse_batch_header(std::span<const uint8_t> data);

enum class batch_status : uint8_t {
  ok,
  too_short,              // fewer bytes than a v2 header, or a batchLength smaller than the header
  length_mismatch,        // batchLength + 12 differs from the bytes given for this batch
  partial_batch,          // a trailing batch cut short (fetch responses may end so; produce requests may not)
  bad_magic,              // not message format v2
  crc_mismatch,           // CRC-32C of attributes..end differs from the crc field
  negative_record_count,  // count < 0
  unknown_compression,    // codec bits 5-7
  compressed,             // records are compressed; reading them needs decompression (records(buffer))
  malformed_record,       // bad varint, impossible length, record body size mismatch, null header key
  record_count_mismatch,  // count disagrees with the bytes: too many to fit, or bytes left after the last
                          // record
  decompression_failed,   // the compressed records are malformed or truncated
  decompressed_too_large,  // the records decompress to more than the caller's bound
};

std::string_view batch_status_name(batch_status status);

enum class crc_check : uint8_t { verify, skip };

// Checks that `batch` is exactly one well-formed v2 batch header-wise: size, magic, CRC (unless skipped),
// count and codec. Never reads outside `batch`. Records are checked by record_batch_view::check_records().
batch_status validate_batch(std::span<const uint8_t> batch, crc_check crc = crc_check::verify);

// CRC-32C the crc field should hold (bytes 21..end); 0 for a span shorter than the header.
uint32_t compute_batch_crc(std::span<const uint8_t> batch);

// One header of a record. The key is a string in Kafka (never null); the value may be null.
struct record_header_view {
  std::string_view key;
  std::optional<std::span<const uint8_t>> value;
};

// The headers of one record, already validated when the record was read, so iterating cannot fail.
class record_header_range {
 public:
  class iterator {
   public:
    using iterator_category = std::input_iterator_tag;
    using value_type = record_header_view;
    using difference_type = std::ptrdiff_t;
    using pointer = const record_header_view*;
    using reference = const record_header_view&;

    iterator() = default;
    const record_header_view& operator*() const { return _current; }
    const record_header_view* operator->() const { return &_current; }
    iterator& operator++();
    iterator operator++(int) {
      iterator copy = *this;
      ++*this;
      return copy;
    }
    friend bool operator==(const iterator& a, const iterator& b) { return a._remaining == b._remaining; }

   private:
    friend class record_header_range;
    iterator(std::span<const uint8_t> data, int32_t count);
    void load();
    std::span<const uint8_t> _data;
    size_t _pos = 0;
    int32_t _remaining = 0;
    record_header_view _current;
  };

  record_header_range() = default;
  record_header_range(std::span<const uint8_t> data, int32_t count) : _data(data), _count(count) {}

  int32_t size() const { return _count; }
  bool empty() const { return _count == 0; }
  // The encoded headers (after the count), for copying them elsewhere verbatim.
  std::span<const uint8_t> bytes() const { return _data; }
  iterator begin() const { return {_data, _count}; }
  iterator end() const { return {}; }

 private:
  std::span<const uint8_t> _data;
  int32_t _count = 0;
};

// One record of an uncompressed batch; every span points into the batch.
struct record_view {
  int8_t attributes = 0;
  int64_t timestamp_delta = 0;
  int32_t offset_delta = 0;
  std::optional<std::span<const uint8_t>> key;
  std::optional<std::span<const uint8_t>> value;
  record_header_range headers;
  std::span<const uint8_t> encoded;  // the whole record, length prefix included
};

// Reads the records of an uncompressed batch one at a time. Stops at the first malformed record; status()
// then says why. Counts and lengths are checked against the bytes left before use, so a hostile batch cannot
// make it read out of bounds or loop for long.
class record_reader {
 public:
  record_reader(std::span<const uint8_t> records, int32_t count, batch_status initial = batch_status::ok);

  // The next record; nullopt at the end (status() ok) or on an error.
  std::optional<record_view> next();
  batch_status status() const { return _status; }
  bool ok() const { return _status == batch_status::ok; }
  // Records not yet read.
  int32_t remaining() const { return _remaining; }

  // Range-for support; the loop ends at the last record or the first error (check status() afterwards).
  class iterator {
   public:
    using iterator_category = std::input_iterator_tag;
    using value_type = record_view;
    using difference_type = std::ptrdiff_t;

    const record_view& operator*() const { return *_current; }
    const record_view* operator->() const { return &*_current; }
    iterator& operator++() {
      _current = _reader->next();
      return *this;
    }
    friend bool operator==(const iterator& it, std::default_sentinel_t) { return !it._current.has_value(); }

   private:
    friend class record_reader;
    explicit iterator(record_reader* reader) : _reader(reader), _current(reader->next()) {}
    record_reader* _reader;
    std::optional<record_view> _current;
  };
  iterator begin() { return iterator(this); }
  std::default_sentinel_t end() { return {}; }

 private:
  std::span<const uint8_t> _data;
  size_t _pos = 0;
  int32_t _remaining = 0;
  batch_status _status = batch_status::ok;
};

// What a leader needs to know of an uncompressed batch's records, read in one pass without building record
// views (the produce path's per-record cost): the same framing rules as record_reader (a malformed record or
// a count that does not match the bytes fails with the same status), plus whether the offset deltas run 0, 1,
// 2,
// ..., the smallest and largest CreateTime timestamp (base_timestamp + delta, as
// record_batch_view::timestamp_of computes it) and the first record holding the largest, and whether a record
// has a null key.
struct record_scan {
  batch_status status = batch_status::ok;
  int32_t records = 0;
  bool consecutive_offset_deltas = true;
  int32_t first_wrong_offset_delta = 0;  // when not consecutive: the first delta that broke the run...
  int32_t first_wrong_index = 0;         // ... and where (the delta expected there)
  int64_t min_timestamp = 0;
  int64_t max_timestamp = 0;
  int32_t offset_delta_of_max_timestamp = 0;  // index of the first record with max_timestamp
  bool null_key = false;
};
record_scan scan_records(std::span<const uint8_t> records, int32_t count, int64_t base_timestamp);

// A validated batch over caller-owned bytes. Construction runs validate_batch; when status() is not ok the
// header accessors return what could be parsed (or defaults) and records() reads nothing.
class record_batch_view {
 public:
  explicit record_batch_view(std::span<const uint8_t> batch, crc_check crc = crc_check::verify);

  batch_status status() const { return _status; }
  bool ok() const { return _status == batch_status::ok; }

  const record_batch_header& header() const { return _header; }
  std::span<const uint8_t> bytes() const { return _data; }
  // Everything after the header: the records, or their compressed form.
  std::span<const uint8_t> records_bytes() const;

  int64_t base_offset() const { return _header.base_offset; }
  int64_t last_offset() const { return _header.last_offset(); }
  int32_t record_count() const { return _header.record_count; }
  compression_codec compression() const { return _header.compression(); }
  bool is_compressed() const { return _header.compression() != compression_codec::none; }
  bool is_transactional() const { return _header.is_transactional(); }
  bool is_control() const { return _header.is_control(); }
  timestamp_type timestamp_kind() const { return _header.timestamp_kind(); }

  // Absolute offset and timestamp of a record of this batch. With LogAppendTime every record carries the
  // batch's maxTimestamp (Kafka ignores the record deltas then).
  int64_t offset_of(const record_view& r) const { return _header.base_offset + r.offset_delta; }
  int64_t timestamp_of(const record_view& r) const;

  // The records of an uncompressed batch. For a compressed batch the reader reports `compressed`, for an
  // invalid batch the validation status, and reads nothing (for callers that refuse to decompress).
  record_reader records() const;
  // Reads every record: ok, or the first problem (including `compressed`).
  batch_status check_records() const;

  // The records of any batch. An uncompressed batch is read in place and `buffer` is left alone; a compressed
  // one is decompressed into `buffer` (cleared first; at most max_decompressed_bytes, else the reader reports
  // decompressed_too_large, or decompression_failed for bad compressed data) and read from there, the record
  // count checked against the header as for an uncompressed batch. The returned reader and its record views
  // point into `buffer` (or the batch) and are valid while it is unchanged.
  record_reader records(std::vector<uint8_t>& buffer,
                        size_t max_decompressed_bytes = default_max_decompressed_bytes) const;
  // Reads every record of any batch, decompressing into `buffer` as records(buffer) does.
  batch_status check_records(std::vector<uint8_t>& buffer,
                             size_t max_decompressed_bytes = default_max_decompressed_bytes) const;

 private:
  std::span<const uint8_t> _data;
  record_batch_header _header;
  batch_status _status;
};

// Splits concatenated batches (a produce request's records field, a fetch response, a segment) into one span
// per batch using only the log overhead. A trailing batch cut short ends the walk with partial_batch; a
// batchLength too small for a header with too_short. Batches themselves are not validated.
class batch_splitter {
 public:
  explicit batch_splitter(std::span<const uint8_t> data) : _data(data) {}

  // The next whole batch, or nullopt at the end (status() ok) or on an error.
  std::optional<std::span<const uint8_t>> next();
  batch_status status() const { return _status; }
  bool ok() const { return _status == batch_status::ok; }
  // Bytes consumed so far by whole batches.
  size_t position() const { return _pos; }

 private:
  std::span<const uint8_t> _data;
  size_t _pos = 0;
  batch_status _status = batch_status::ok;
};

// In-place stamping by the partition leader. Neither field is covered by the CRC, so the crc field stays
// valid. Return false (and change nothing) when the span is shorter than a batch header.
bool stamp_base_offset(std::span<uint8_t> batch, int64_t base_offset);
bool stamp_partition_leader_epoch(std::span<uint8_t> batch, int32_t epoch);

// message.timestamp.type=LogAppendTime: sets the timestamp-type bit and maxTimestamp to the broker's time.
// Both are CRC-covered, so the CRC is recomputed. False for a span shorter than a header.
bool stamp_log_append_time(std::span<uint8_t> batch, int64_t timestamp_ms);

// Rewrites the crc field from the current contents (after an in-place change to covered bytes).
bool rewrite_batch_crc(std::span<uint8_t> batch);

// One header of a record to build. Non-owning: the bytes must outlive the add() call only.
struct record_header_input {
  std::string_view key;
  std::optional<std::span<const uint8_t>> value;
};

// One record to build. Non-owning like record_header_input.
struct record_input {
  int64_t timestamp = 0;
  std::optional<std::span<const uint8_t>> key;
  std::optional<std::span<const uint8_t>> value;
  std::span<const record_header_input> headers;
  std::optional<int32_t> offset_delta;  // defaults to the record's position in the batch
};

// Builds a v2 batch with a correct CRC: for tests, and for the batches the broker writes itself (transaction
// markers, coordinator records, recompression for compression.type). Records are copied in add(); build() can
// be called repeatedly. With compression(codec) the serialized records are compressed as producers do and the
// codec bits are set; the header (count, offsets, timestamps) stays uncompressed.
// baseTimestamp defaults to the first record's timestamp and maxTimestamp to the largest record timestamp, as
// Kafka producers set them; lastOffsetDelta to the last record's offsetDelta.
class record_batch_builder {
 public:
  record_batch_builder& base_offset(int64_t v) {
    _header.base_offset = v;
    return *this;
  }
  record_batch_builder& partition_leader_epoch(int32_t v) {
    _header.partition_leader_epoch = v;
    return *this;
  }
  record_batch_builder& producer(int64_t id, int16_t epoch, int32_t base_sequence) {
    _header.producer_id = id;
    _header.producer_epoch = epoch;
    _header.base_sequence = base_sequence;
    return *this;
  }
  record_batch_builder& transactional(bool on = true) {
    return set_attribute(batch_attributes::transactional, on);
  }
  record_batch_builder& control(bool on = true) { return set_attribute(batch_attributes::control, on); }
  record_batch_builder& log_append_time(bool on = true) {
    return set_attribute(batch_attributes::log_append_time, on);
  }
  record_batch_builder& base_timestamp(int64_t v) {
    _base_timestamp = v;
    return *this;
  }
  record_batch_builder& max_timestamp(int64_t v) {
    _max_timestamp = v;
    return *this;
  }
  record_batch_builder& last_offset_delta(int32_t v) {
    _last_offset_delta = v;
    return *this;
  }
  record_batch_builder& compression(compression_codec codec) {
    _header.attributes = static_cast<int16_t>((_header.attributes & ~batch_attributes::compression_mask) |
                                              static_cast<int16_t>(codec));
    return *this;
  }

  record_batch_builder& add(const record_input& record);
  record_batch_builder& add(int64_t timestamp, std::optional<std::span<const uint8_t>> key,
                            std::optional<std::span<const uint8_t>> value,
                            std::span<const record_header_input> headers = {});

  int32_t record_count() const { return static_cast<int32_t>(_records.size()); }
  std::vector<uint8_t> build() const;

 private:
  struct owned_header {
    std::string key;
    std::optional<std::vector<uint8_t>> value;
  };
  struct owned_record {
    int64_t timestamp = 0;
    std::optional<std::vector<uint8_t>> key;
    std::optional<std::vector<uint8_t>> value;
    std::vector<owned_header> headers;
    int32_t offset_delta = 0;
  };
  record_batch_builder& set_attribute(int16_t bit, bool on) {
    _header.attributes = static_cast<int16_t>(on ? (_header.attributes | bit) : (_header.attributes & ~bit));
    return *this;
  }

  record_batch_header _header;
  std::optional<int64_t> _base_timestamp;
  std::optional<int64_t> _max_timestamp;
  std::optional<int32_t> _last_offset_delta;
  std::vector<owned_record> _records;
};

}  // namespace mala::protocol
