// The KRaft metadata log records (__cluster_metadata-0) that the metadata image is built from, and their
// envelope: Kafka's ApiMessageAndVersion serialization (MetadataRecordSerde / AbstractApiMessageSerde), which
// is the value of each record in a metadata log batch:
//
//   unsigned varint  frame version (always 1; 0 was the KRaft preview of Kafka 2.8 and is refused)
//   unsigned varint  api key (the record type: TopicRecord 2, PartitionRecord 3, ...)
//   unsigned varint  record version
//   body             the record at that version (all metadata records are flexible from v0)
//
// and nothing after it (Kafka refuses trailing bytes). The record bodies are the generated structs of
// proto/*Record.msg (kind `metadata`). Pure functions on bytes: no shared state, callable from any thread.
#pragma once

#include <cstdint>
#include <span>
#include <variant>
#include <vector>

#include "mala/common/result.h"
#include "mala/protocol/messages/abort_transaction_record.h"
#include "mala/protocol/messages/access_control_entry_record.h"
#include "mala/protocol/messages/begin_transaction_record.h"
#include "mala/protocol/messages/broker_registration_change_record.h"
#include "mala/protocol/messages/clear_elr_record.h"
#include "mala/protocol/messages/client_quota_record.h"
#include "mala/protocol/messages/config_record.h"
#include "mala/protocol/messages/delegation_token_record.h"
#include "mala/protocol/messages/end_transaction_record.h"
#include "mala/protocol/messages/feature_level_record.h"
#include "mala/protocol/messages/fence_broker_record.h"
#include "mala/protocol/messages/no_op_record.h"
#include "mala/protocol/messages/partition_change_record.h"
#include "mala/protocol/messages/partition_record.h"
#include "mala/protocol/messages/producer_ids_record.h"
#include "mala/protocol/messages/register_broker_record.h"
#include "mala/protocol/messages/register_controller_record.h"
#include "mala/protocol/messages/remove_access_control_entry_record.h"
#include "mala/protocol/messages/remove_delegation_token_record.h"
#include "mala/protocol/messages/remove_topic_record.h"
#include "mala/protocol/messages/remove_user_scram_credential_record.h"
#include "mala/protocol/messages/topic_record.h"
#include "mala/protocol/messages/unfence_broker_record.h"
#include "mala/protocol/messages/unregister_broker_record.h"
#include "mala/protocol/messages/unregister_controller_record.h"
#include "mala/protocol/messages/user_scram_credential_record.h"
#include "mala/protocol/messages/zk_migration_state_record.h"

namespace mala::metadata {

// The records the metadata image is built from: every metadata record type Kafka 4.4 defines. The KIP-868
// transaction markers (Begin/End/AbortTransactionRecord) change no image: the replay delivers the records
// between Begin and End together and drops those before an Abort (raft_metadata_log). A type Kafka does not
// define is refused by decode_metadata_record.
using metadata_record =
    std::variant<protocol::register_broker_record, protocol::unregister_broker_record, protocol::topic_record,
                 protocol::partition_record, protocol::config_record, protocol::partition_change_record,
                 protocol::fence_broker_record, protocol::unfence_broker_record,
                 protocol::remove_topic_record, protocol::feature_level_record, protocol::producer_ids_record,
                 protocol::broker_registration_change_record, protocol::no_op_record,
                 protocol::user_scram_credential_record, protocol::remove_user_scram_credential_record,
                 protocol::access_control_entry_record, protocol::remove_access_control_entry_record,
                 protocol::client_quota_record, protocol::register_controller_record,
                 protocol::unregister_controller_record, protocol::begin_transaction_record,
                 protocol::end_transaction_record, protocol::abort_transaction_record,
                 protocol::delegation_token_record, protocol::remove_delegation_token_record,
                 protocol::zk_migration_state_record, protocol::clear_elr_record>;

// The only envelope frame version Kafka writes and reads.
inline constexpr uint32_t metadata_record_frame_version = 1;

// A record with the version it was read at.
struct versioned_metadata_record {
  metadata_record record;
  int16_t version = 0;
};

// The envelope fields in front of the body.
struct metadata_record_header {
  int16_t type = -1;
  int16_t version = -1;
};

// The record type (api key) of a record: TopicRecord 2, PartitionRecord 3, ...
int16_t metadata_record_type(const metadata_record& record);
// The versions of a record's schema Mala can encode and decode.
int16_t metadata_record_min_version(const metadata_record& record);
int16_t metadata_record_max_version(const metadata_record& record);
// Whether Kafka defines a metadata record of this type (whether or not metadata_record holds it).
bool is_known_metadata_record_type(int16_t type);

// Envelope + body at `version`. The version must lie within the record's min/max version: the writer picks it
// (Kafka derives it from metadata.version); a version outside that range is a programming error and aborts.
std::vector<uint8_t> encode_metadata_record(const metadata_record& record, int16_t version);

// Reads the envelope only. Errors: corrupt_message (truncated or over-long varints, frame version other than
// 1, a type or version past int16).
result<metadata_record_header> peek_metadata_record_header(std::span<const uint8_t> bytes);

// Reads envelope and body. Never reads past `bytes` and never crashes on arbitrary input. Errors:
// corrupt_message (bad envelope, body that does not decode, bytes left after the body), unsupported_version
// (a type metadata_record does not hold, known or not, or a version newer than Mala knows for the type).
result<versioned_metadata_record> decode_metadata_record(std::span<const uint8_t> bytes);

}  // namespace mala::metadata
