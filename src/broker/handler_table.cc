#include "mala/broker/handler_table.h"

#include <algorithm>
#include <concepts>
#include <optional>
#include <span>
#include <utility>

#include "handlers/acls.h"
#include "handlers/add_offsets_to_txn.h"
#include "handlers/add_partitions_to_txn.h"
#include "handlers/add_raft_voter.h"
#include "handlers/allocate_producer_ids.h"
#include "handlers/alter_configs.h"
#include "handlers/alter_partition.h"
#include "handlers/alter_replica_log_dirs.h"
#include "handlers/api_versions.h"
#include "handlers/assign_replicas_to_dirs.h"
#include "handlers/begin_quorum_epoch.h"
#include "handlers/broker_heartbeat.h"
#include "handlers/broker_registration.h"
#include "handlers/client_quotas.h"
#include "handlers/client_telemetry.h"
#include "handlers/consumer_group_describe.h"
#include "handlers/consumer_group_heartbeat.h"
#include "handlers/controller_registration.h"
#include "handlers/create_partitions.h"
#include "handlers/create_topics.h"
#include "handlers/data_path.h"
#include "handlers/delete_groups.h"
#include "handlers/delete_records.h"
#include "handlers/delete_topics.h"
#include "handlers/describe_cluster.h"
#include "handlers/describe_configs.h"
#include "handlers/describe_groups.h"
#include "handlers/describe_log_dirs.h"
#include "handlers/describe_producers.h"
#include "handlers/describe_quorum.h"
#include "handlers/describe_topic_partitions.h"
#include "handlers/describe_transactions.h"
#include "handlers/elect_leaders.h"
#include "handlers/end_quorum_epoch.h"
#include "handlers/end_txn.h"
#include "handlers/envelope.h"
#include "handlers/fetch.h"
#include "handlers/fetch_snapshot.h"
#include "handlers/find_coordinator.h"
#include "handlers/heartbeat.h"
#include "handlers/incremental_alter_configs.h"
#include "handlers/init_producer_id.h"
#include "handlers/join_group.h"
#include "handlers/leave_group.h"
#include "handlers/list_config_resources.h"
#include "handlers/list_groups.h"
#include "handlers/list_offsets.h"
#include "handlers/list_transactions.h"
#include "handlers/metadata.h"
#include "handlers/offset_commit.h"
#include "handlers/offset_delete.h"
#include "handlers/offset_fetch.h"
#include "handlers/partition_reassignments.h"
#include "handlers/produce.h"
#include "handlers/remove_raft_voter.h"
#include "handlers/sasl.h"
#include "handlers/sync_group.h"
#include "handlers/txn_offset_commit.h"
#include "handlers/unregister_broker.h"
#include "handlers/update_features.h"
#include "handlers/update_raft_voter.h"
#include "handlers/user_scram_credentials.h"
#include "handlers/vote.h"
#include "handlers/write_txn_markers.h"

namespace mala::broker {

namespace {

template <typename Response>
concept with_external_records = requires(const Response& resp) {
  { resp.external_records() } -> std::convertible_to<std::span<const net::file_range>>;
};

template <typename Response>
handler_outcome encode_response(const Response& resp, int16_t version) {
  handler_outcome out;
  out.body.reserve(resp.encoded_size(version));
  protocol::wire_writer w(out.body);
  resp.encode(w, version);
  if constexpr (with_external_records<Response>) {
    const std::span<const net::file_range> ranges = resp.external_records();
    out.files.reserve(w.gaps().size());
    for (const auto& gap : w.gaps()) {
      out.files.push_back({gap.position, ranges[static_cast<size_t>(gap.external_id)]});
    }
  }
  return out;
}

template <typename H>
concept async_handler = requires(request_context& ctx, typename H::request req) {
  H::handle_async(ctx, std::move(req), int16_t{0});
};

template <typename H>
concept controller_only_handler = requires {
  requires H::controller_only;
};

template <typename H>
concept client_telemetry_handler = requires {
  requires H::client_telemetry_only;
};

template <typename H>
concept with_request_quota_exemption = requires(const typename H::request& req) {
  { H::exempt_from_request_quota(req, int16_t{0}) } -> std::convertible_to<bool>;
};

template <typename Response>
concept with_throttle_time = requires(Response& resp) {
  resp.throttle_time_ms = int32_t{0};
};

// Kafka's request quota (ClientRequestQuotaManager) once the handler is done: the request's thread time
// charged to its quota group, the connection muted for the throttle, and the throttle in the response when
// it is larger than what a byte-rate quota put there. Controller listeners, the KRaft and broker-lifecycle
// RPCs, WriteTxnMarkers and followers' fetches are exempt, as Kafka's cluster actions are.
template <typename Response>
void apply_request_quota(request_context& ctx, Response* resp) {
  const int32_t throttle = handlers::record_request_quota(ctx);
  if (throttle <= 0 || !resp) return;
  if constexpr (with_throttle_time<Response>)
    resp->throttle_time_ms = std::max(resp->throttle_time_ms, throttle);
}

// Decodes the request at `version`, runs the handler, encodes the response body.
template <typename H>
asio::awaitable<handler_outcome> run(request_context& ctx, protocol::wire_reader& body, int16_t version) {
  typename H::request req;
  const auto status = req.decode(body, version);
  if (status != protocol::decode_status::ok) {
    co_return handler_outcome{handler_outcome::kind::bad_request, {}, status};
  }
  bool quota_exempt = controller_only_handler<H>;
  if constexpr (with_request_quota_exemption<H>)
    quota_exempt = quota_exempt || H::exempt_from_request_quota(req, version);
  handler_outcome out;
  if constexpr (async_handler<H>) {
    std::optional<typename H::response> resp = co_await H::handle_async(ctx, std::move(req), version);
    if (!quota_exempt) apply_request_quota(ctx, resp ? &*resp : nullptr);
    if (!resp) co_return handler_outcome{handler_outcome::kind::no_response, {}, {}};
    out = encode_response(*resp, version);
  } else {
    auto resp = H::handle(ctx, req, version);
    if (!quota_exempt) apply_request_quota(ctx, &resp);
    out = encode_response(resp, version);
  }
  out.quota_charged = !quota_exempt;
  co_return out;
}

template <typename H>
handler_entry entry(std::string_view name, int16_t advertised_min = H::min_version) {
  static_assert(H::min_version >= H::request::min_version && H::max_version <= H::request::max_version,
                "a handler cannot serve versions its messages do not define");
  int16_t first_flexible = -1;
  for (int16_t v = H::request::min_version; v <= H::request::max_version; ++v) {
    if (H::request::is_flexible(v)) {
      first_flexible = v;
      break;
    }
  }
  handler_entry e{H::api_key,          name,           H::min_version, H::max_version, advertised_min,
                  first_flexible >= 0, first_flexible, &run<H>};
  e.controller_only = controller_only_handler<H>;
  e.client_telemetry_only = client_telemetry_handler<H>;
  return e;
}

}  // namespace

handler_table::handler_table() {
  _entries = {
      // Produce is advertised from v0 although v0-v2 are refused, as Kafka 4 does (KAFKA-18659).
      entry<handlers::produce_handler>("Produce", 0),
      entry<handlers::fetch_handler>("Fetch"),
      entry<handlers::list_offsets_handler>("ListOffsets"),
      entry<handlers::metadata_handler>("Metadata"),
      entry<handlers::find_coordinator_handler>("FindCoordinator"),
      entry<handlers::offset_commit_handler>("OffsetCommit"),
      entry<handlers::offset_fetch_handler>("OffsetFetch"),
      entry<handlers::join_group_handler>("JoinGroup"),
      entry<handlers::heartbeat_handler>("Heartbeat"),
      entry<handlers::leave_group_handler>("LeaveGroup"),
      entry<handlers::sync_group_handler>("SyncGroup"),
      entry<handlers::describe_groups_handler>("DescribeGroups"),
      entry<handlers::list_groups_handler>("ListGroups"),
      entry<handlers::delete_groups_handler>("DeleteGroups"),
      entry<handlers::consumer_group_heartbeat_handler>("ConsumerGroupHeartbeat"),
      entry<handlers::consumer_group_describe_handler>("ConsumerGroupDescribe"),
      entry<handlers::offset_delete_handler>("OffsetDelete"),
      entry<handlers::txn_offset_commit_handler>("TxnOffsetCommit"),
      entry<handlers::delete_records_handler>("DeleteRecords"),
      entry<handlers::api_versions_handler>("ApiVersions"),
      entry<handlers::create_topics_handler>("CreateTopics"),
      entry<handlers::delete_topics_handler>("DeleteTopics"),
      entry<handlers::init_producer_id_handler>("InitProducerId"),
      entry<handlers::add_partitions_to_txn_handler>("AddPartitionsToTxn"),
      entry<handlers::add_offsets_to_txn_handler>("AddOffsetsToTxn"),
      entry<handlers::end_txn_handler>("EndTxn"),
      entry<handlers::describe_transactions_handler>("DescribeTransactions"),
      entry<handlers::list_transactions_handler>("ListTransactions"),
      entry<handlers::write_txn_markers_handler>("WriteTxnMarkers"),
      entry<handlers::describe_producers_handler>("DescribeProducers"),
      entry<handlers::describe_configs_handler>("DescribeConfigs"),
      entry<handlers::alter_configs_handler>("AlterConfigs"),
      entry<handlers::describe_acls_handler>("DescribeAcls"),
      entry<handlers::create_acls_handler>("CreateAcls"),
      entry<handlers::delete_acls_handler>("DeleteAcls"),
      entry<handlers::alter_replica_log_dirs_handler>("AlterReplicaLogDirs"),
      entry<handlers::describe_log_dirs_handler>("DescribeLogDirs"),
      entry<handlers::create_partitions_handler>("CreatePartitions"),
      entry<handlers::incremental_alter_configs_handler>("IncrementalAlterConfigs"),
      entry<handlers::describe_cluster_handler>("DescribeCluster"),
      entry<handlers::describe_topic_partitions_handler>("DescribeTopicPartitions"),
      entry<handlers::vote_handler>("Vote"),
      entry<handlers::fetch_snapshot_handler>("FetchSnapshot"),
      entry<handlers::describe_quorum_handler>("DescribeQuorum"),
      entry<handlers::add_raft_voter_handler>("AddRaftVoter"),
      entry<handlers::remove_raft_voter_handler>("RemoveRaftVoter"),
      entry<handlers::update_raft_voter_handler>("UpdateRaftVoter"),
      entry<handlers::begin_quorum_epoch_handler>("BeginQuorumEpoch"),
      entry<handlers::end_quorum_epoch_handler>("EndQuorumEpoch"),
      entry<handlers::broker_registration_handler>("BrokerRegistration"),
      entry<handlers::controller_registration_handler>("ControllerRegistration"),
      entry<handlers::broker_heartbeat_handler>("BrokerHeartbeat"),
      entry<handlers::allocate_producer_ids_handler>("AllocateProducerIds"),
      entry<handlers::alter_partition_handler>("AlterPartition"),
      entry<handlers::assign_replicas_to_dirs_handler>("AssignReplicasToDirs"),
      entry<handlers::envelope_handler>("Envelope"),
      entry<handlers::elect_leaders_handler>("ElectLeaders"),
      entry<handlers::alter_partition_reassignments_handler>("AlterPartitionReassignments"),
      entry<handlers::list_partition_reassignments_handler>("ListPartitionReassignments"),
      entry<handlers::update_features_handler>("UpdateFeatures"),
      entry<handlers::unregister_broker_handler>("UnregisterBroker"),
      entry<handlers::sasl_handshake_handler>("SaslHandshake"),
      entry<handlers::sasl_authenticate_handler>("SaslAuthenticate"),
      entry<handlers::describe_user_scram_credentials_handler>("DescribeUserScramCredentials"),
      entry<handlers::alter_user_scram_credentials_handler>("AlterUserScramCredentials"),
      entry<handlers::describe_client_quotas_handler>("DescribeClientQuotas"),
      entry<handlers::alter_client_quotas_handler>("AlterClientQuotas"),
      entry<handlers::get_telemetry_subscriptions_handler>("GetTelemetrySubscriptions"),
      entry<handlers::push_telemetry_handler>("PushTelemetry"),
      entry<handlers::list_config_resources_handler>("ListConfigResources"),
  };
  std::sort(_entries.begin(), _entries.end(),
            [](const handler_entry& a, const handler_entry& b) { return a.api_key < b.api_key; });
}

const handler_entry* handler_table::find(int16_t api_key) const {
  for (const auto& e : _entries)
    if (e.api_key == api_key) return &e;
  return nullptr;
}

}  // namespace mala::broker
