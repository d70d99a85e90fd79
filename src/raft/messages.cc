#include "mala/raft/messages.h"

#include <fmt/format.h>

namespace mala::raft {

namespace {

template <class... Ts>
struct overloaded : Ts... {
  using Ts::operator()...;
};
template <class... Ts>
overloaded(Ts...) -> overloaded<Ts...>;

}  // namespace

std::string describe(const raft_message& message) {
  const std::string body = std::visit(
      overloaded{
          [](const vote_request& m) {
            return fmt::format("{}Vote(candidate {} epoch {} last {}@{})", m.pre_vote ? "Pre" : "",
                               m.candidate_id, m.candidate_epoch, m.last_offset, m.last_offset_epoch);
          },
          [](const vote_response& m) {
            return fmt::format("{}VoteResponse({} granted {} leader {} epoch {})", m.pre_vote ? "Pre" : "",
                               error_name(m.error_code), m.vote_granted, m.leader_id, m.leader_epoch);
          },
          [](const begin_quorum_epoch_request& m) {
            return fmt::format("BeginQuorumEpoch(leader {} epoch {})", m.leader_id, m.leader_epoch);
          },
          [](const begin_quorum_epoch_response& m) {
            return fmt::format("BeginQuorumEpochResponse({} leader {} epoch {})", error_name(m.error_code),
                               m.leader_id, m.leader_epoch);
          },
          [](const end_quorum_epoch_request& m) {
            return fmt::format("EndQuorumEpoch(leader {} epoch {} successors {})", m.leader_id,
                               m.leader_epoch, m.preferred_successors.size());
          },
          [](const end_quorum_epoch_response& m) {
            return fmt::format("EndQuorumEpochResponse({} leader {} epoch {})", error_name(m.error_code),
                               m.leader_id, m.leader_epoch);
          },
          [](const fetch_request& m) {
            return fmt::format("Fetch(replica {} epoch {} offset {} last epoch {})", m.replica_id,
                               m.current_leader_epoch, m.fetch_offset, m.last_fetched_epoch);
          },
          [](const fetch_response& m) {
            return fmt::format(
                "FetchResponse({} hw {} diverging {}@{} leader {} epoch {} records {}{})",
                error_name(m.error_code), m.high_watermark, m.diverging_epoch.end_offset,
                m.diverging_epoch.epoch, m.current_leader.leader_id, m.current_leader.leader_epoch,
                m.records.size(),
                m.snapshot_id ? fmt::format(" snapshot {}@{}", m.snapshot_id->offset, m.snapshot_id->epoch)
                              : std::string());
          },
          [](const update_voter_request& m) {
            return fmt::format("UpdateRaftVoter(voter {} epoch {} {}://{}:{})", m.voter_id,
                               m.current_leader_epoch, m.listener_name, m.host, m.port);
          },
          [](const update_voter_response& m) {
            return fmt::format("UpdateRaftVoterResponse({} leader {} epoch {})", error_name(m.error_code),
                               m.current_leader.leader_id, m.current_leader.leader_epoch);
          },
          [](const fetch_snapshot_request& m) {
            return fmt::format("FetchSnapshot(replica {} epoch {} snapshot {}@{} position {} max {})",
                               m.replica_id, m.current_leader_epoch, m.snapshot_id.offset,
                               m.snapshot_id.epoch, m.position, m.max_bytes);
          },
          [](const fetch_snapshot_response& m) {
            return fmt::format(
                "FetchSnapshotResponse({} snapshot {}@{} size {} position {} bytes {} leader {} epoch {})",
                error_name(m.error_code), m.snapshot_id.offset, m.snapshot_id.epoch, m.size, m.position,
                m.bytes.size(), m.current_leader.leader_id, m.current_leader.leader_epoch);
          },
      },
      message.body);
  return fmt::format("#{} {}", message.correlation_id, body);
}

}  // namespace mala::raft
