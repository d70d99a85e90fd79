// The voter set of a KIP-853 quorum (kraft.version 1): the voters are not in the configuration
// (controller.quorum.voters is empty; nodes find the quorum through controller.quorum.bootstrap.servers) but
// in the metadata log itself, as Kafka keeps them.
//
// On disk, as Kafka writes them (KRaftControlRecordStateMachine, RecordsSnapshotWriter): a KRaftVersionRecord
// (control record type 5, KRaftVersion 1) and a VotersRecord (type 6) follow the SnapshotHeaderRecord in the
// first control batch of a snapshot. The first one is the bootstrap checkpoint
// 00000000000000000000-0000000000.checkpoint that formatting a controller with the initial voters writes
// (`kafka-storage format --standalone` / `--initial-controllers`, Mala's `mala --standalone` /
// `--initial-controllers`): header, voters, footer and no metadata records. Every later snapshot of a
// kraft.version 1 quorum carries the same batch, so the voter set survives the deletion of the segments
// below a snapshot.
//
// A node reads the voter set of its latest snapshot at start-up; the VotersRecords in the log after it change
// it (AddRaftVoter / RemoveRaftVoter; raft::replica tracks them).
//
// Pure functions on bytes: callable from any thread.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "mala/common/listener.h"
#include "mala/common/result.h"
#include "mala/common/uuid.h"

namespace mala::raft {

// Kafka's ControlRecordType.KRAFT_VERSION / KRAFT_VOTERS.
inline constexpr int16_t kraft_version_control_type = 5;
inline constexpr int16_t kraft_voters_control_type = 6;
// The kraft.version this binary writes and supports (KIP-853).
inline constexpr int16_t dynamic_kraft_version = 1;

struct voter_endpoint {
  std::string host;
  int32_t port = 0;
};

// One voter: Kafka's ReplicaKey (id, directory id; the zero uuid when unknown) and its controller listener.
struct voter_info {
  int32_t id = -1;
  uuid directory_id;
  std::string listener_name;
  voter_endpoint endpoint;

  bool operator==(const voter_info& other) const {
    return id == other.id && directory_id == other.directory_id && listener_name == other.listener_name &&
           endpoint.host == other.endpoint.host && endpoint.port == other.endpoint.port;
  }
};

// One control record: its key (ControlRecordType) and value (version-prefixed body).
struct control_record {
  std::vector<uint8_t> key;
  std::vector<uint8_t> value;
};

// The KRaftVersionRecord (kraft.version 1) and VotersRecord of `voters`, in that order.
std::vector<control_record> voter_set_control_records(std::span<const voter_info> voters);
// A VotersRecord's value (version-prefixed, as in a control record) and back; corrupt_message for a value
// that does not decode.
std::vector<uint8_t> encode_voters_record(std::span<const voter_info> voters);
result<std::vector<voter_info>> decode_voters_record(std::span<const uint8_t> value);

// The bootstrap checkpoint's payload (offsets from 0, epoch 0): one control batch of SnapshotHeaderRecord
// and the records above, then a control batch of SnapshotFooterRecord.
result<std::vector<uint8_t>> bootstrap_checkpoint(std::span<const voter_info> voters, int64_t timestamp_ms);

// The voter set a snapshot payload carries: the last VotersRecord in its control batches; nullopt when it
// has none (a kraft.version 0 snapshot). corrupt_message for bytes that are not whole, valid batches or a
// VotersRecord that does not decode.
result<std::optional<std::vector<voter_info>>> voter_set_in_snapshot(std::span<const uint8_t> payload);

// Kafka's --initial-controllers: "id@host:port[:directory-id],...". The directory id (Kafka's base64 uuid)
// is optional in Mala: without it the voter has the zero directory id. `listener_name` is the controller
// listener every voter is reached on. A malformed list is invalid_config.
result<std::vector<voter_info>> parse_initial_controllers(std::string_view text,
                                                          std::string_view listener_name);

}  // namespace mala::raft
