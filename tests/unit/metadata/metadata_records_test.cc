// The metadata record envelope (Kafka's MetadataRecordSerde): every record type round trips at every version,
// golden bytes written by hand from the TopicRecord / PartitionRecord schemas, and malformed input is
// refused.
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "mala/metadata/metadata_records.h"

namespace mala::metadata {
namespace {

uuid make_uuid(uint8_t first) {
  uuid id;
  for (size_t i = 0; i < id.bytes.size(); ++i) id.bytes[i] = static_cast<uint8_t>(first + i);
  return id;
}

// One populated instance of every record metadata_record holds.
std::vector<metadata_record> samples() {
  std::vector<metadata_record> out;
  protocol::register_broker_record rb;
  rb.broker_id = 3;
  rb.is_migrating_zk_broker = false;
  rb.incarnation_id = make_uuid(1);
  rb.broker_epoch = 42;
  rb.end_points.push_back({"PLAINTEXT", "localhost", 9092, 0});
  rb.features.push_back({"metadata.version", 1, 25});
  rb.rack = "r1";
  rb.fenced = true;
  rb.log_dirs = {make_uuid(50)};
  rb.cordoned_log_dirs = std::vector<uuid>{make_uuid(51)};
  out.push_back(rb);
  out.push_back(protocol::unregister_broker_record{3, 42});
  protocol::topic_record t;
  t.name = "orders";
  t.topic_id = make_uuid(10);
  out.push_back(t);
  protocol::partition_record p;
  p.partition_id = 0;
  p.topic_id = make_uuid(10);
  p.replicas = {1, 2, 3};
  p.isr = {1, 2};
  p.leader = 1;
  p.leader_epoch = 4;
  p.partition_epoch = 9;
  p.directories = {make_uuid(60), make_uuid(61), make_uuid(62)};
  p.eligible_leader_replicas = std::vector<int32_t>{3};
  out.push_back(p);
  protocol::config_record c;
  c.resource_type = 2;
  c.resource_name = "orders";
  c.name = "retention.ms";
  c.value = "1000";
  out.push_back(c);
  protocol::partition_change_record pc;
  pc.partition_id = 0;
  pc.topic_id = make_uuid(10);
  pc.isr = std::vector<int32_t>{1};
  pc.leader = 2;
  out.push_back(pc);
  out.push_back(protocol::fence_broker_record{3, 42});
  out.push_back(protocol::unfence_broker_record{3, 42});
  protocol::remove_topic_record rt;
  rt.topic_id = make_uuid(10);
  out.push_back(rt);
  protocol::feature_level_record f;
  f.name = "metadata.version";
  f.feature_level = 21;
  out.push_back(f);
  protocol::producer_ids_record pid;
  pid.broker_id = 1;
  pid.broker_epoch = 42;
  pid.next_producer_id = 2000;
  out.push_back(pid);
  protocol::broker_registration_change_record brc;
  brc.broker_id = 3;
  brc.broker_epoch = 42;
  brc.fenced = -1;
  brc.in_controlled_shutdown = 1;
  brc.log_dirs = {make_uuid(70)};
  brc.cordoned_log_dirs = std::vector<uuid>{};
  out.push_back(brc);
  out.push_back(protocol::no_op_record{});
  protocol::user_scram_credential_record scram;
  scram.name = "alice";
  scram.mechanism = 1;
  scram.salt = {1, 2, 3};
  scram.stored_key = {4, 5};
  scram.server_key = {6};
  scram.iterations = 8192;
  out.push_back(scram);
  protocol::remove_user_scram_credential_record remove_scram;
  remove_scram.name = "alice";
  remove_scram.mechanism = 1;
  out.push_back(remove_scram);
  protocol::access_control_entry_record acl;
  acl.id = make_uuid(80);
  acl.resource_type = 2;
  acl.resource_name = "orders";
  acl.pattern_type = 4;
  acl.principal = "User:alice";
  acl.host = "*";
  acl.operation = 3;
  acl.permission_type = 3;
  out.push_back(acl);
  protocol::remove_access_control_entry_record remove_acl;
  remove_acl.id = make_uuid(80);
  out.push_back(remove_acl);
  protocol::client_quota_record quota;
  quota.entity.push_back({"user", "alice"});
  quota.entity.push_back({"client-id", std::nullopt});
  quota.key = "producer_byte_rate";
  quota.value = 1048576;
  out.push_back(quota);
  protocol::register_controller_record controller;
  controller.controller_id = 3000;
  controller.incarnation_id = make_uuid(90);
  controller.end_points.push_back({"CONTROLLER", "ctl", 9093, 0});
  controller.features.push_back({"kraft.version", 0, 1});
  out.push_back(controller);
  out.push_back(protocol::unregister_controller_record{3000});
  protocol::begin_transaction_record begin;
  begin.name = "Bootstrap records";
  out.push_back(begin);
  out.push_back(protocol::end_transaction_record{});
  protocol::abort_transaction_record abort;
  abort.reason = "Controller failover";
  out.push_back(abort);
  protocol::delegation_token_record token;
  token.owner = "User:alice";
  token.requester = "User:alice";
  token.renewers = {"User:bob"};
  token.issue_timestamp = 1;
  token.max_timestamp = 3;
  token.expiration_timestamp = 2;
  token.token_id = "tok-1";
  out.push_back(token);
  protocol::remove_delegation_token_record remove_token;
  remove_token.token_id = "tok-1";
  out.push_back(remove_token);
  out.push_back(protocol::zk_migration_state_record{0});
  protocol::clear_elr_record clear_elr;
  clear_elr.topic_name = "orders";
  out.push_back(clear_elr);
  return out;
}

TEST(metadata_records, every_type_round_trips_at_every_version) {
  const auto records = samples();
  ASSERT_EQ(records.size(), std::variant_size_v<metadata_record>);
  for (const auto& record : records) {
    const int16_t type = metadata_record_type(record);
    EXPECT_TRUE(is_known_metadata_record_type(type));
    for (int16_t v = metadata_record_min_version(record); v <= metadata_record_max_version(record); ++v) {
      const auto bytes = encode_metadata_record(record, v);
      ASSERT_GE(bytes.size(), 4u);
      EXPECT_EQ(bytes[0], 1) << "frame version";
      EXPECT_EQ(bytes[1], type);
      EXPECT_EQ(bytes[2], v);
      auto header = peek_metadata_record_header(bytes);
      ASSERT_TRUE(header.ok());
      EXPECT_EQ(header->type, type);
      EXPECT_EQ(header->version, v);
      auto decoded = decode_metadata_record(bytes);
      ASSERT_TRUE(decoded.ok()) << "type " << type << " v" << v << ": " << decoded.error().message;
      EXPECT_EQ(decoded->version, v);
      EXPECT_EQ(metadata_record_type(decoded->record), type);
      EXPECT_EQ(encode_metadata_record(decoded->record, v), bytes) << "type " << type << " v" << v;
      // Fields that exist at the newest version survive exactly.
      if (v == metadata_record_max_version(record)) {
        EXPECT_TRUE(decoded->record == record) << "type " << type;
      }
      // Every strict prefix is refused, never read past.
      for (size_t len = 0; len < bytes.size(); ++len) {
        EXPECT_FALSE(decode_metadata_record(std::span(bytes.data(), len)).ok())
            << "type " << type << " len " << len;
      }
    }
  }
}

TEST(metadata_records, topic_record_golden_bytes) {
  protocol::topic_record t;
  t.name = "foo";
  t.topic_id = make_uuid(0xa0);
  const std::vector<uint8_t> expected = {
      0x01,                                            // frame version (unsigned varint)
      0x02,                                            // api key: TopicRecord
      0x00,                                            // version 0
      0x04, 'f',  'o',  'o',                           // Name: compact string, length + 1
      0xa0, 0xa1, 0xa2, 0xa3, 0xa4, 0xa5, 0xa6, 0xa7,  // TopicId
      0xa8, 0xa9, 0xaa, 0xab, 0xac, 0xad, 0xae, 0xaf,  //
      0x00,                                            // no tagged fields
  };
  EXPECT_EQ(encode_metadata_record(t, 0), expected);
  auto decoded = decode_metadata_record(expected);
  ASSERT_TRUE(decoded.ok());
  EXPECT_TRUE(decoded->record == metadata_record(t));
}

TEST(metadata_records, partition_record_golden_bytes_v0) {
  protocol::partition_record p;
  p.partition_id = 1;
  p.topic_id = make_uuid(0);
  p.replicas = {1, 2, 3};
  p.isr = {1, 2};
  p.leader = 1;
  p.leader_epoch = 5;
  p.partition_epoch = 7;
  const std::vector<uint8_t> expected = {
      0x01, 0x03, 0x00,                                               // frame 1, PartitionRecord, v0
      0x00, 0x00, 0x00, 0x01,                                         // PartitionId
      0x00, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07,                 // TopicId
      0x08, 0x09, 0x0a, 0x0b, 0x0c, 0x0d, 0x0e, 0x0f,                 //
      0x04, 0,    0,    0,    1,    0,    0,    0,    2, 0, 0, 0, 3,  // Replicas: compact array of 3
      0x03, 0,    0,    0,    1,    0,    0,    0,    2,              // Isr
      0x01,                                                           // RemovingReplicas: empty
      0x01,                                                           // AddingReplicas: empty
      0x00, 0x00, 0x00, 0x01,                                         // Leader
      0x00, 0x00, 0x00, 0x05,                                         // LeaderEpoch
      0x00, 0x00, 0x00, 0x07,                                         // PartitionEpoch
      0x00,  // tagged: LeaderRecoveryState 0 is the default
  };
  EXPECT_EQ(encode_metadata_record(p, 0), expected);
  auto decoded = decode_metadata_record(expected);
  ASSERT_TRUE(decoded.ok());
  EXPECT_TRUE(decoded->record == metadata_record(p));
}

TEST(metadata_records, partition_record_golden_bytes_v2_tagged_fields) {
  protocol::partition_record p;
  p.partition_id = 0;
  p.topic_id = make_uuid(0);
  p.replicas = {4};
  p.isr = {4};
  p.leader = 4;
  p.leader_recovery_state = 1;
  p.leader_epoch = 0;
  p.partition_epoch = 0;
  p.directories = {make_uuid(0x10)};
  p.eligible_leader_replicas = std::vector<int32_t>{4};
  const std::vector<uint8_t> expected = {
      0x01, 0x03, 0x02,                                // frame 1, PartitionRecord, v2
      0x00, 0x00, 0x00, 0x00,                          // PartitionId
      0x00, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07,  // TopicId
      0x08, 0x09, 0x0a, 0x0b, 0x0c, 0x0d, 0x0e, 0x0f,  //
      0x02, 0,    0,    0,    4,                       // Replicas
      0x02, 0,    0,    0,    4,                       // Isr
      0x01, 0x01,                                      // RemovingReplicas, AddingReplicas
      0x00, 0x00, 0x00, 0x04,                          // Leader
      0x00, 0x00, 0x00, 0x00,                          // LeaderEpoch
      0x00, 0x00, 0x00, 0x00,                          // PartitionEpoch
      0x02,                                            // Directories (v1+): one uuid
      0x10, 0x11, 0x12, 0x13, 0x14, 0x15, 0x16, 0x17,  //
      0x18, 0x19, 0x1a, 0x1b, 0x1c, 0x1d, 0x1e, 0x1f,  //
      0x02,                                            // two tagged fields, by tag
      0x00, 0x01, 0x01,                                // tag 0 LeaderRecoveryState, 1 byte: RECOVERING
      0x01, 0x05, 0x02, 0,    0,    0,    4,           // tag 1 EligibleLeaderReplicas, 5 bytes: [4]
  };
  EXPECT_EQ(encode_metadata_record(p, 2), expected);
  auto decoded = decode_metadata_record(expected);
  ASSERT_TRUE(decoded.ok());
  EXPECT_TRUE(decoded->record == metadata_record(p));
}

TEST(metadata_records, refuses_bad_envelopes) {
  // Frame version 0 (the KRaft preview of Kafka 2.8) and 2.
  EXPECT_EQ(decode_metadata_record(std::vector<uint8_t>{0x00, 0x14, 0x00, 0x00}).error().code,
            error_code::corrupt_message);
  EXPECT_EQ(decode_metadata_record(std::vector<uint8_t>{0x02, 0x14, 0x00, 0x00}).error().code,
            error_code::corrupt_message);
  // A NoOpRecord with a byte of garbage after it.
  EXPECT_TRUE(decode_metadata_record(std::vector<uint8_t>{0x01, 0x14, 0x00, 0x00}).ok());
  EXPECT_EQ(decode_metadata_record(std::vector<uint8_t>{0x01, 0x14, 0x00, 0x00, 0x00}).error().code,
            error_code::corrupt_message);
  // Type past int16 (0x8000 as an unsigned varint), and an over-long varint.
  EXPECT_EQ(decode_metadata_record(std::vector<uint8_t>{0x01, 0x80, 0x80, 0x02, 0x00, 0x00}).error().code,
            error_code::corrupt_message);
  EXPECT_EQ(
      decode_metadata_record(std::vector<uint8_t>{0x01, 0xff, 0xff, 0xff, 0xff, 0xff, 0x00}).error().code,
      error_code::corrupt_message);
  EXPECT_FALSE(decode_metadata_record({}).ok());
}

TEST(metadata_records, refuses_unknown_types_and_versions) {
  // NoOpRecord v1 does not exist yet.
  EXPECT_EQ(decode_metadata_record(std::vector<uint8_t>{0x01, 0x14, 0x01, 0x00}).error().code,
            error_code::unsupported_version);
  // Every record type Kafka 4.4 defines (0-29 but the retired 6, 13 and 16) decodes; 99 is no record at all.
  for (int16_t type = 0; type <= 29; ++type) {
    EXPECT_EQ(is_known_metadata_record_type(type), type != 6 && type != 13 && type != 16) << type;
  }
  // An EndTransactionRecord v0: no fields, an empty tag section.
  EXPECT_TRUE(decode_metadata_record(std::vector<uint8_t>{0x01, 24, 0x00, 0x00}).ok());
  EXPECT_FALSE(is_known_metadata_record_type(99));
  EXPECT_EQ(decode_metadata_record(std::vector<uint8_t>{0x01, 99, 0x00, 0x00}).error().code,
            error_code::unsupported_version);
  auto header = peek_metadata_record_header(std::vector<uint8_t>{0x01, 99, 0x03});
  ASSERT_TRUE(header.ok());
  EXPECT_EQ(header->type, 99);
  EXPECT_EQ(header->version, 3);
}

TEST(metadata_records, arbitrary_bodies_never_crash) {
  // Every type byte with a short pseudo-random body: decoding either fails cleanly or round trips.
  uint32_t seed = 7;
  for (int type = 0; type < 32; ++type) {
    for (int n = 0; n < 200; ++n) {
      std::vector<uint8_t> bytes = {0x01, static_cast<uint8_t>(type), static_cast<uint8_t>(n % 4)};
      const size_t len = static_cast<size_t>(n % 40);
      for (size_t i = 0; i < len; ++i) {
        seed = seed * 1664525u + 1013904223u;
        bytes.push_back(static_cast<uint8_t>(seed >> 24));
      }
      auto decoded = decode_metadata_record(bytes);
      if (!decoded.ok()) continue;
      // Unknown tagged fields are dropped, so the bytes may shrink; what is written reads back the same.
      const auto again = encode_metadata_record(decoded->record, decoded->version);
      auto redecoded = decode_metadata_record(again);
      ASSERT_TRUE(redecoded.ok());
      EXPECT_TRUE(redecoded->record == decoded->record);
    }
  }
}

}  // namespace
}  // namespace mala::metadata
