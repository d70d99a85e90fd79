// The transaction messages' Kafka 4.4 versions (and Produce v12/v13), encoded from populated structs and
// compared with bytes written out by hand from the 4.4 JSON schemas (../shared/kafka-protocol-4.4/messages),
// field by field, then decoded back to the same struct. generated_messages_test.cc already round-trips every
// version of every message with random samples; these pin down what a new version adds and where it goes on
// the wire.
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "mala/protocol/messages/end_txn_response.h"
#include "mala/protocol/messages/list_transactions_request.h"
#include "mala/protocol/messages/produce_request.h"
#include "mala/protocol/messages/produce_response.h"
#include "mala/protocol/messages/write_txn_markers_request.h"
#include "mala/protocol/wire.h"

namespace mala::protocol {
namespace {

using bytes = std::vector<uint8_t>;

bytes concat(std::initializer_list<bytes> parts) {
  bytes out;
  for (const auto& p : parts) out.insert(out.end(), p.begin(), p.end());
  return out;
}

// Encodes `message` at `version` (body only), expects `expected`, and decodes the bytes back to `message`.
template <typename Message>
void expect_wire(const Message& message, int16_t version, const bytes& expected) {
  bytes out;
  wire_writer w(out);
  message.encode(w, version);
  EXPECT_EQ(out, expected) << "v" << version;
  EXPECT_EQ(message.encoded_size(version), expected.size()) << "v" << version;
  Message decoded;
  wire_reader r(expected);
  ASSERT_EQ(decoded.decode(r, version), decode_status::ok) << "v" << version;
  EXPECT_EQ(r.remaining(), 0u) << "v" << version;
  EXPECT_EQ(decoded, message) << "v" << version;
}

TEST(transaction_messages, end_txn_response_v5_carries_the_bumped_producer_id_and_epoch) {
  end_txn_response resp;
  resp.throttle_time_ms = 0;
  resp.error_code = 0;
  resp.producer_id = 0x0102030405060708;
  resp.producer_epoch = 7;
  const bytes common = {0, 0, 0, 0, /* ThrottleTimeMs */ 0, 0 /* ErrorCode */};
  // v5 (KIP-890 part 2): ProducerId int64, ProducerEpoch int16, then the empty tagged-field section.
  expect_wire(resp, 5, concat({common, {1, 2, 3, 4, 5, 6, 7, 8}, {0, 7}, {0}}));
  // v4: neither field exists; their values are not written (ignorable).
  bytes v4;
  wire_writer w(v4);
  resp.encode(w, 4);
  EXPECT_EQ(v4, concat({common, {0}}));
}

TEST(transaction_messages, write_txn_markers_request_v2_adds_transaction_version_per_marker) {
  write_txn_markers_request req;
  auto& marker = req.markers.emplace_back();
  marker.producer_id = 5;
  marker.producer_epoch = 1;
  marker.transaction_result = true;
  marker.topics.push_back({"t", {0, 2}});
  marker.coordinator_epoch = 3;
  marker.transaction_version = 2;
  const bytes head = {
      2,                            // Markers: compact array of 1
      0, 0,   0, 0, 0, 0, 0, 5,     // ProducerId
      0, 1,                         // ProducerEpoch
      1,                            // TransactionResult (commit)
      2,                            // Topics: compact array of 1
      2, 't',                       //   Name: compact string "t"
      3, 0,   0, 0, 0, 0, 0, 0, 2,  // PartitionIndexes: compact array [0, 2]
      0,                            //   topic tagged fields
      0, 0,   0, 3,                 // CoordinatorEpoch
  };
  expect_wire(req, 2, concat({head, {2 /* TransactionVersion */, 0 /* marker tags */, 0 /* tags */}}));
  marker.transaction_version = 0;  // v1 has no TransactionVersion: only its default round-trips
  expect_wire(req, 1, concat({head, {0, 0}}));
}

TEST(transaction_messages, list_transactions_request_v2_adds_a_transactional_id_pattern) {
  list_transactions_request req;
  req.state_filters = {"Ongoing"};
  req.producer_id_filters = {9};
  req.duration_filter = 1000;
  req.transactional_id_pattern = "tx-.*";
  const bytes head = {
      2, 8, 'O', 'n', 'g', 'o', 'i',  'n',  'g',  // StateFilters: compact array of one compact string
      2, 0, 0,   0,   0,   0,   0,    0,    9,    // ProducerIdFilters: compact array [9]
      0, 0, 0,   0,   0,   0,   0x03, 0xe8,       // DurationFilter 1000 (v1+)
  };
  expect_wire(req, 2, concat({head, {6, 't', 'x', '-', '.', '*'}, {0}}));
  req.transactional_id_pattern = std::nullopt;  // null: compact nullable string length 0
  expect_wire(req, 2, concat({head, {0}, {0}}));
  expect_wire(req, 1, concat({head, {0}}));
}

TEST(transaction_messages, produce_v12_is_v11_on_the_wire_and_v13_names_topics_by_id) {
  produce_request req;
  req.transactional_id = std::nullopt;
  req.acks = -1;
  req.timeout_ms = 30000;
  auto& topic = req.topic_data.emplace_back();
  topic.name = "t";
  topic.partition_data.push_back({0, records_view{}});
  const bytes head = {
      0,                       // TransactionalId: null compact nullable string
      0xff, 0xff,              // Acks -1
      0,    0,    0x75, 0x30,  // TimeoutMs 30000
      2,                       // TopicData: compact array of 1
  };
  const bytes partitions = {
      2,           // PartitionData: compact array of 1
      0, 0, 0, 0,  // Index 0
      0,           // Records: null compact nullable bytes
      0,           // partition tagged fields
      0,           // topic tagged fields
      0,           // tagged fields
  };
  bytes v11;
  wire_writer w11(v11);
  req.encode(w11, 11);
  EXPECT_EQ(v11, concat({head, {2, 't'}, partitions}));
  expect_wire(req, 12, v11);

  // v13: TopicId (16 bytes) where the name was; the name is not written.
  topic.name.clear();
  for (uint8_t i = 0; i < 16; ++i) topic.topic_id.bytes[i] = static_cast<uint8_t>(0xa0 + i);
  bytes id;
  for (uint8_t i = 0; i < 16; ++i) id.push_back(static_cast<uint8_t>(0xa0 + i));
  expect_wire(req, 13, concat({head, id, partitions}));

  produce_response resp;
  auto& answer = resp.responses.emplace_back();
  answer.topic_id = topic.topic_id;
  auto& part = answer.partition_responses.emplace_back();
  part.index = 0;
  part.error_code = 100;  // UNKNOWN_TOPIC_ID
  part.base_offset = -1;
  part.log_append_time_ms = -1;
  part.log_start_offset = -1;
  const bytes minus_one = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff};
  expect_wire(resp, 13,
              concat({{2},
                      id,
                      {2, 0, 0, 0, 0, 0, 100},  // PartitionResponses: 1; Index 0; ErrorCode 100
                      minus_one,
                      minus_one,
                      minus_one,     // BaseOffset, LogAppendTimeMs, LogStartOffset
                      {1, 0, 0},     // RecordErrors: empty; ErrorMessage: null; partition tags
                      {0},           // topic tags
                      {0, 0, 0, 0},  // ThrottleTimeMs
                      {0}}));        // tagged fields
}

}  // namespace
}  // namespace mala::protocol
