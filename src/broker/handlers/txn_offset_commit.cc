#include "handlers/txn_offset_commit.h"

#include <utility>

#include "handlers/admin_common.h"
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

// KIP-890 for the group's __consumer_offsets partition: none when the coordinator vouches for it (or added
// it), else the error every partition of the request answers.
asio::awaitable<error_code> verify_offsets_partition(const broker_services& services,
                                                     const txn_offset_commit_handler::request& req,
                                                     int16_t version) {
  auto* groups = services.groups;
  const std::string* group_id = &req.group_id;  // the request outlives the hop
  // Captures nothing that owns memory: GCC 12 destroys the callable of this hop twice (bug 100611).
  auto placement = [groups, group_id] { return groups->partition_for(*group_id); };
  const int32_t partition = co_await on_home_shard(services, std::move(placement));
  txn_verification_request request{.transactional_id = req.transactional_id,
                                   .producer_id = req.producer_id,
                                   .producer_epoch = req.producer_epoch,
                                   .partitions = {{std::string(coordinator::offsets_topic_name), partition}},
                                   .add = version >= txn_offset_commit_implicit_add_min_version};
  const auto deadline =
      std::chrono::steady_clock::now() +
      std::chrono::milliseconds(
          services.config ? services.config->get_int("request.timeout.ms").value_or(30'000) : 30'000);
  auto answer = co_await verify_with_coordinator(services, std::move(request), deadline);
  const error_code e = answer.empty() ? error_code::unknown_server_error : answer.front();
  if (e == error_code::none) co_return e;
  const error_code code = verification_error_for_write(e, version >= txn_offset_commit_abortable_min_version);
  // The group coordinator's normalizeException: an unfinished verification is retried elsewhere.
  co_return code == error_code::not_enough_replicas ? error_code::coordinator_not_available : code;
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
  // Partitions the metadata does not know are answered here; the rest goes to the coordinator.
  request valid = std::move(req);
  valid.topics = known_partitions(ctx.services, std::move(valid.topics), resp.topics);
  if (valid.topics.empty()) co_return resp;

  if (ctx.services.transaction_verifier && (ctx.services.transaction_verification_enabled ||
                                            version >= txn_offset_commit_implicit_add_min_version)) {
    const error_code e = co_await verify_offsets_partition(ctx.services, valid, version);
    if (e != error_code::none) {
      for (const auto& t : valid.topics) {
        auto& rt = topic_entry(resp.topics, t.name);
        for (const auto& p : t.partitions) rt.partitions.push_back({p.partition_index, to_wire(e)});
      }
      co_return resp;
    }
  }

  auto origin = request_origin_of(ctx, version);
  auto commit = [origin = std::move(origin), valid = std::move(valid)](
                    coordinator::group_coordinator& groups, std::function<void(response)> answer) mutable {
    groups.commit_transactional_offsets(origin, std::move(valid), std::move(answer));
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
