#include "mala/controller/raft_metadata_log.h"

#include <algorithm>
#include <string>
#include <vector>

namespace mala::controller {

int64_t raft_metadata_log::end_offset() const {
  return _node.log().end_offset();
}

int64_t raft_metadata_log::committed_offset() const {
  return _node.state().high_watermark() - 1;
}

int32_t raft_metadata_log::epoch() const {
  return _node.state().epoch();
}

result<metadata_append_result> raft_metadata_log::append(
    std::span<const metadata::versioned_metadata_record> records) {
  if (records.empty()) return status::error(error_code::invalid_request, "empty metadata log append");
  if (_node.state().current_role() != raft::role::leader) {
    return status::error(error_code::not_controller, "this node is not the active controller");
  }
  std::vector<std::vector<uint8_t>> values;
  values.reserve(records.size());
  size_t bytes = 0;
  for (const auto& r : records) {
    values.push_back(metadata::encode_metadata_record(r.record, r.version));
    bytes += values.back().size();
  }
  if (bytes > static_cast<size_t>(max_metadata_batch_bytes)) {
    return status::error(error_code::record_list_too_large, "metadata batch too large");
  }
  auto appended = _node.append(values);
  if (!appended.ok()) {
    if (appended.error().code == error_code::not_leader_or_follower)
      return status::error(error_code::not_controller, appended.error().message);
    return appended.error();
  }
  if (auto st = _node.log().failure(); !st.ok()) {
    return status::error(error_code::kafka_storage_error, "metadata log write failed: " + st.message);
  }
  return metadata_append_result{appended->first_offset, appended->last_offset, appended->epoch};
}

status raft_metadata_log::replay(int64_t from_offset, const metadata_replay_callback& callback) const {
  auto replayed = replay_range(from_offset, _node.state().high_watermark(), callback);
  return replayed.ok() ? status::success() : replayed.error();
}

int16_t raft_metadata_log::kraft_version() const {
  return _node.kraft_version();
}

status raft_metadata_log::upgrade_kraft_version(int32_t epoch, int16_t version, bool validate_only) {
  auto upgraded = _node.upgrade_kraft_version(epoch, version, validate_only);
  if (!upgraded.ok() && upgraded.code == error_code::not_leader_or_follower)
    return status::error(error_code::not_controller, upgraded.message);
  return upgraded;
}

namespace {

enum class transaction_marker { none, begin, end, abort };

transaction_marker marker_of(const metadata::metadata_record& record) {
  if (std::holds_alternative<protocol::begin_transaction_record>(record)) return transaction_marker::begin;
  if (std::holds_alternative<protocol::end_transaction_record>(record)) return transaction_marker::end;
  if (std::holds_alternative<protocol::abort_transaction_record>(record)) return transaction_marker::abort;
  return transaction_marker::none;
}

}  // namespace

result<raft_metadata_log::replay_position> raft_metadata_log::replay_range(
    int64_t from_offset, int64_t to_offset, const metadata_replay_callback& callback) const {
  const auto& log = _node.log();
  if (from_offset < log.start_offset() && from_offset < to_offset) {
    // The entries are gone (a snapshot covers them): the caller must load the snapshot first.
    return status::error(error_code::offset_out_of_range, "metadata log starts at " +
                                                              std::to_string(log.start_offset()) +
                                                              ", asked for " + std::to_string(from_offset));
  }
  // Records are held back until their write's last entry is read, so that a write is applied whole or not
  // at all (Kafka's atomic controller batches), and within a metadata transaction until its end.
  struct pending_record {
    metadata::versioned_metadata_record record;
    int64_t offset;
    int32_t epoch;
  };
  std::vector<pending_record> pending;
  int64_t next = from_offset;
  int64_t write_start = from_offset;
  // Where the open transaction's records start in `pending`; no_transaction when none is open. The records
  // of a write before its BeginTransactionRecord wait with the transaction (Kafka begins one with a write).
  constexpr size_t no_transaction = static_cast<size_t>(-1);
  size_t transaction_start = no_transaction;
  const int64_t end = std::min(to_offset, log.end_offset());
  while (next < end) {
    auto entries = log.read(next, static_cast<size_t>(std::min<int64_t>(end - next, 512)));
    if (entries.empty()) {
      return status::error(error_code::corrupt_message,
                           "metadata log read made no progress at offset " + std::to_string(next));
    }
    for (auto& e : entries) {
      if (e.offset >= end) break;
      next = e.offset + 1;
      if (e.type == raft::entry_type::data) {
        auto decoded = metadata::decode_metadata_record(e.payload);
        if (!decoded.ok()) {
          return status::error(
              decoded.error().code,
              "metadata log record at offset " + std::to_string(e.offset) + ": " + decoded.error().message);
        }
        switch (marker_of(decoded->record)) {
          case transaction_marker::begin:
            // Kafka's OffsetControlManager refuses a Begin inside a transaction; so does this replay.
            if (transaction_start != no_transaction) {
              return status::error(error_code::corrupt_message,
                                   "metadata log record at offset " + std::to_string(e.offset) +
                                       ": BeginTransactionRecord inside a metadata transaction");
            }
            transaction_start = pending.size();
            break;
          case transaction_marker::end:
          case transaction_marker::abort:
            if (transaction_start == no_transaction) {
              return status::error(error_code::corrupt_message,
                                   "metadata log record at offset " + std::to_string(e.offset) +
                                       ": transaction end outside a metadata transaction");
            }
            // An aborted transaction's records are dropped; the marker itself is delivered (it moves the
            // offset).
            if (marker_of(decoded->record) == transaction_marker::abort) {
              pending.resize(transaction_start);
            }
            transaction_start = no_transaction;
            break;
          case transaction_marker::none:
            break;
        }
        pending.push_back(pending_record{std::move(*decoded), e.offset, e.epoch});
      }
      if (!e.batch_end || transaction_start != no_transaction) continue;
      for (const pending_record& p : pending) {
        if (auto st = callback(p.record, p.offset, p.epoch); !st.ok()) return st;
      }
      pending.clear();
      write_start = next;
    }
  }
  // Inside a transaction nothing from its first write on was delivered: the next replay starts there.
  return replay_position{write_start, transaction_start != no_transaction && next >= end};
}

}  // namespace mala::controller
