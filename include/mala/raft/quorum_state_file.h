// The quorum-state file: the replica's persisted quorum_state (epoch, known leader, vote cast in the epoch),
// kept next to the log in <metadata log dir>/__cluster_metadata-0/quorum-state, in the format of Kafka's
// FileQuorumStateStore: one line of QuorumStateData as JSON plus a "data_version" field.
//
//   written (data_version 0, kraft.version 0, static voters as Mala has them):
//     {"clusterId":"","leaderId":1,"leaderEpoch":2,"votedId":-1,"appliedOffset":0,
//      "currentVoters":[{"voterId":1},{"voterId":2},{"voterId":3}],"data_version":0}
//   read: data_version 0 or 1 (KIP-853's version drops clusterId/appliedOffset/currentVoters and adds
//     votedDirectoryId, which Mala ignores). leaderId, leaderEpoch, votedId and data_version are required;
//     anything else that is not valid JSON, a wrong type or an out-of-range value is refused with an error
//     naming the file: a node must not start from a vote it cannot read (it could vote twice in an epoch).
//
// Writes are atomic (quorum-state.tmp, fsync, rename, fsync of the directory), so a crash leaves the old or
// the new state. The glue writes the state a step reports (effects::quorum_state_to_persist) before anything
// else of that step.
//
// Threads: one thread, the replica's. Blocks on the write and the fsyncs.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "mala/common/result.h"
#include "mala/raft/replica.h"

namespace mala::raft {

// FileQuorumStateStore.DEFAULT_FILE_NAME.
inline constexpr std::string_view quorum_state_file_name = "quorum-state";

// The JSON line (no newline, as Kafka writes it).
std::string encode_quorum_state(const quorum_state& state, std::span<const int32_t> voters);
// Parses a file's contents; `what` names the file in errors. kafka_storage_error when refused.
result<quorum_state> parse_quorum_state(std::string_view text, std::string_view what);

class quorum_state_file {
 public:
  // `voters` go into currentVoters (informational: Kafka's tools show them; the configuration is the truth).
  quorum_state_file(std::filesystem::path path, std::vector<int32_t> voters = {});
  // The file in a metadata partition directory (partition_raft_log::dir()).
  static quorum_state_file in_dir(const std::filesystem::path& partition_dir,
                                  std::vector<int32_t> voters = {});

  // nullopt when there is no file (a fresh node); an error when it cannot be read or parsed.
  result<std::optional<quorum_state>> read() const;
  status write(const quorum_state& state) const;

  const std::filesystem::path& path() const { return _path; }

 private:
  std::filesystem::path _path;
  std::vector<int32_t> _voters;
};

}  // namespace mala::raft
