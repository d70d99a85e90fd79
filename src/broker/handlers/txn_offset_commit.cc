#include "handlers/txn_offset_commit.h"

#include <utility>

#include "handlers/admin_common.h"
#include "handlers/data_path.h"
#include "handlers/group_common.h"
#include "handlers/transaction_common.h"
#include "mala/coordinator/group_placement.h"
#include "mala/net/coroutine_frame_warning.h"

namespace mala::broker::handlers {

namespace {

// The first TxnOffsetCommit version that adds the group's partition to the transaction (transactions v2),
// and the first that knows TRANSACTION_ABORTABLE.
constexpr int16_t txn_offset_commit_implicit_add_min_version = 5;
constexpr int16_t txn_offset_commit_abortable_min_version = 4;

// What KIP-890's check of the group's __consumer_offsets partition decided: an error every partition of the
// request answers, or the guard the coordinator's write carries (none: verification is off).
struct offsets_partition_verification {
  error_code error = error_code::none;
  std::optional<uint64_t> guard;
};

// The error a failed guard or verification answers, as the group coordinator's normalizeException gives it:
// an unfinished verification is retried elsewhere.
error_code verification_error_for_offsets(error_code e, int16_t version) {
  const error_code code = verification_error_for_write(e, version >= txn_offset_commit_abortable_min_version);
  return code == error_code::not_enough_replicas ? error_code::coordinator_not_available
                                                 : coordinator::append_error_to_client_error(code);
}

// KIP-890 for the group's __consumer_offsets partition
// (CoordinatorRuntime.scheduleTransactionalWriteOperation through
// ReplicaManager.maybeStartTransactionVerificationForPartition): a guard is taken on the partition first, as
// a produced batch's is; a producer whose transaction is open there (guard 0) needs no question, otherwise
// the transaction coordinator must vouch for the partition (or add it, transactions v2). The coordinator's
// append then checks the guard, so an abort marker written between the answer and the append makes the commit
// fail instead of opening a transaction the coordinator does not know.
asio::awaitable<offsets_partition_verification> verify_offsets_partition(
    const broker_services& services, const txn_offset_commit_handler::request& req, int16_t version) {
  auto* groups = services.groups;
  const std::string* group_id = &req.group_id;  // the request outlives the hop
  // Captures nothing that owns memory: GCC 12 destroys the callable of this hop twice (bug 100611).
  auto placement = [groups, group_id] { return groups->partition_for(*group_id); };
  const int32_t partition = co_await on_home_shard(services, std::move(placement));
  const std::string topic(coordinator::offsets_topic_name);
  const bool epoch_bump = version >= txn_offset_commit_implicit_add_min_version;
  const int64_t producer_id = req.producer_id;
  const int16_t producer_epoch = req.producer_epoch;
  auto take_guard = [&services, topic, partition, producer_id, producer_epoch, epoch_bump,
                     version]() -> asio::awaitable<offsets_partition_verification> {
    auto hosted = hosted_partition(services, topic, partition);
    if (!hosted)
      co_return offsets_partition_verification{verification_error_for_offsets(hosted.error().code, version)};
    // No sequence: the coordinator's writes are not sequence-checked (Kafka passes NO_SEQUENCE).
    auto guard =
        (*hosted)->create_verification_guard(producer_id, protocol::no_sequence, producer_epoch, epoch_bump);
    if (!guard)
      co_return offsets_partition_verification{verification_error_for_offsets(guard.error().code, version)};
    co_return offsets_partition_verification{error_code::none, *guard};
  };
  auto guarded = co_await replication::run_on_shard_async(
      services.shards, services.shard_of(topic, partition), std::move(take_guard));
  if (guarded.error != error_code::none || guarded.guard == 0u) co_return guarded;
  txn_verification_request request{.transactional_id = req.transactional_id,
                                   .producer_id = producer_id,
                                   .producer_epoch = producer_epoch,
                                   .partitions = {{topic, partition}},
                                   .add = epoch_bump};
  const auto deadline =
      std::chrono::steady_clock::now() +
      std::chrono::milliseconds(
          services.config ? services.config->get_int("request.timeout.ms").value_or(30'000) : 30'000);
  auto answer = co_await verify_with_coordinator(services, std::move(request), deadline);
  const error_code e = answer.empty() ? error_code::unknown_server_error : answer.front();
  if (e != error_code::none)
    co_return offsets_partition_verification{verification_error_for_offsets(e, version)};
  co_return guarded;
}

}  // namespace

asio::awaitable<std::optional<txn_offset_commit_handler::response>> txn_offset_commit_handler::handle_async(
    request_context& ctx, request req, int16_t version) {
  response resp;
  if (!ctx.services.groups) {
    for (const auto& t : req.topics) {
      auto& rt = topic_entry(resp.topics, t.name);
      for (const auto& p : t.partitions) {
        rt.partitions.push_back({p.partition_index, to_wire(error_code::coordinator_not_available)});
      }
    }
    co_return resp;
  }
  // KafkaApis.handleTxnOffsetCommitRequest: WRITE on the transactional id, READ on the group (every
  // partition refused otherwise), READ on each topic.
  error_code refusal = error_code::none;
  if (!authorized(ctx, acl_operation::write, acl_resource_type::transactional_id, req.transactional_id)) {
    refusal = error_code::transactional_id_authorization_failed;
  } else if (!group_allowed(ctx, acl_operation::read, req.group_id)) {
    refusal = error_code::group_authorization_failed;
  }
  if (refusal != error_code::none) {
    for (const auto& t : req.topics) {
      auto& rt = topic_entry(resp.topics, t.name);
      for (const auto& p : t.partitions) rt.partitions.push_back({p.partition_index, to_wire(refusal)});
    }
    co_return resp;
  }
  // Topics the client may not READ and partitions the metadata does not know are answered here; the rest
  // goes to the coordinator.
  request valid = std::move(req);
  valid.topics = readable_topics(ctx, std::move(valid.topics), resp.topics);
  valid.topics = known_partitions(ctx.services, std::move(valid.topics), resp.topics);
  if (valid.topics.empty()) co_return resp;

  std::optional<uint64_t> guard;
  if (ctx.services.transaction_verifier && (ctx.services.transaction_verification_enabled ||
                                            version >= txn_offset_commit_implicit_add_min_version)) {
    auto verified = co_await verify_offsets_partition(ctx.services, valid, version);
    if (verified.error != error_code::none) {
      for (const auto& t : valid.topics) {
        auto& rt = topic_entry(resp.topics, t.name);
        for (const auto& p : t.partitions)
          rt.partitions.push_back({p.partition_index, to_wire(verified.error)});
      }
      co_return resp;
    }
    guard = verified.guard;
  }

  auto origin = request_origin_of(ctx, version);
  auto commit = [origin = std::move(origin), valid = std::move(valid), guard](
                    coordinator::group_coordinator& groups, std::function<void(response)> answer) mutable {
    groups.commit_transactional_offsets(origin, std::move(valid), std::move(answer), guard);
  };
  auto committed = co_await call_group_coordinator<response>(ctx.services, std::move(commit));
  for (auto& t : committed.topics) {
    auto& rt = topic_entry(resp.topics, t.name);
    for (auto& p : t.partitions) {
      if (version < 2 && p.error_code == to_wire(error_code::coordinator_load_in_progress))
        p.error_code = to_wire(error_code::coordinator_not_available);
      rt.partitions.push_back(p);
    }
  }
  co_return resp;
}

}  // namespace mala::broker::handlers
