#include "mala/coordinator/transaction_records.h"

#include <map>
#include <utility>
#include <vector>

#include "mala/protocol/messages/transaction_log_key.h"
#include "mala/protocol/messages/transaction_log_value.h"
#include "mala/protocol/versioned_message.h"
#include "mala/protocol/wire.h"

namespace mala::coordinator {

namespace {

// CoordinatorRecordType.TRANSACTION_LOG: the key's leading int16.
constexpr int16_t transaction_log_key_type = 0;

std::vector<uint8_t> encode_key(const std::string& transactional_id) {
  protocol::transaction_log_key key;
  key.transactional_id = transactional_id;
  return protocol::encode_versioned(key, transaction_log_key_type);
}

}  // namespace

coordinator_record transaction_log_record(const std::string& transactional_id,
                                          const transaction_transition& t, int16_t value_version) {
  protocol::transaction_log_value v;
  v.producer_id = t.producer_id;
  v.producer_epoch = t.producer_epoch;
  v.transaction_timeout_ms = t.timeout_ms;
  v.transaction_status = static_cast<int8_t>(t.state);
  v.transaction_last_update_timestamp_ms = t.last_update_timestamp_ms;
  v.transaction_start_timestamp_ms = t.start_timestamp_ms;
  if (t.state == transaction_state::empty) {
    v.transaction_partitions.reset();
  } else {
    std::vector<protocol::transaction_log_value::partitions_schema> topics;
    for (const auto& p : t.partitions) {
      if (topics.empty() || topics.back().topic != p.topic) {
        topics.emplace_back();
        topics.back().topic = p.topic;
      }
      topics.back().partition_ids.push_back(p.partition);
    }
    v.transaction_partitions = std::move(topics);
  }
  if (value_version >= 1) {
    v.previous_producer_id = t.prev_producer_id;
    v.next_producer_id = t.next_producer_id;
    v.client_transaction_version = t.client_transaction_version;
  }
  return {encode_key(transactional_id), protocol::encode_versioned(v, value_version)};
}

coordinator_record transaction_log_tombstone(const std::string& transactional_id) {
  return {encode_key(transactional_id), std::nullopt};
}

result<transaction_log_entry> decode_transaction_log_record(std::span<const uint8_t> key,
                                                            std::optional<std::span<const uint8_t>> value) {
  protocol::wire_reader kr(key);
  const int16_t key_type = kr.read_int16();
  if (!kr.ok()) return status::error(error_code::corrupt_message, "record key shorter than its type");
  if (key_type != transaction_log_key_type) {
    return status::error(error_code::unsupported_version,
                         "record key type " + std::to_string(key_type) + " is not a transaction log key");
  }
  protocol::transaction_log_key k;
  if (k.decode(kr, 0) != protocol::decode_status::ok || !kr.ok() || kr.remaining() != 0) {
    return status::error(error_code::corrupt_message, "TransactionLogKey does not parse");
  }
  transaction_log_entry entry{std::move(k.transactional_id), std::nullopt};
  if (!value) return entry;
  protocol::wire_reader vr(*value);
  const int16_t version = vr.read_int16();
  if (!vr.ok()) return status::error(error_code::corrupt_message, "record value shorter than its version");
  if (version < protocol::transaction_log_value::min_version ||
      version > protocol::transaction_log_value::max_version) {
    return status::error(error_code::unsupported_version,
                         "TransactionLogValue version " + std::to_string(version) + " is not known");
  }
  protocol::transaction_log_value v;
  if (v.decode(vr, version) != protocol::decode_status::ok || !vr.ok()) {
    return status::error(error_code::corrupt_message, "TransactionLogValue does not parse");
  }
  auto state = transaction_state_from_status(v.transaction_status);
  if (!state || *state == transaction_state::prepare_epoch_fence) {
    return status::error(error_code::corrupt_message,
                         "unknown transaction status " + std::to_string(v.transaction_status));
  }
  transaction_transition t;
  t.producer_id = v.producer_id;
  t.prev_producer_id = v.previous_producer_id;
  t.next_producer_id = v.next_producer_id;
  t.producer_epoch = v.producer_epoch;
  t.timeout_ms = v.transaction_timeout_ms;
  t.state = *state;
  if (t.state != transaction_state::empty && v.transaction_partitions) {
    for (const auto& topic : *v.transaction_partitions) {
      for (int32_t p : topic.partition_ids) t.partitions.insert({topic.topic, p});
    }
  }
  t.last_update_timestamp_ms = v.transaction_last_update_timestamp_ms;
  t.start_timestamp_ms = v.transaction_start_timestamp_ms;
  t.client_transaction_version = v.client_transaction_version;
  entry.value = std::move(t);
  return entry;
}

}  // namespace mala::coordinator
