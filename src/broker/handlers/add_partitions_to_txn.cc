#include "handlers/add_partitions_to_txn.h"

#include <set>
#include <string>
#include <vector>

#include "handlers/authorization.h"
#include "handlers/transaction_common.h"

namespace mala::broker::handlers {

namespace {

using topic_list = std::vector<protocol::add_partitions_to_txn_request::add_partitions_to_txn_topic>;
using topic_results =
    std::vector<protocol::add_partitions_to_txn_response::add_partitions_to_txn_topic_result>;

// Every partition of `topics` answered `e`.
topic_results answer_all(const topic_list& topics, error_code e) {
  topic_results out;
  for (const auto& t : topics) {
    auto& r = out.emplace_back();
    r.name = t.name;
    for (int32_t p : t.partitions) r.results_by_partition.push_back({p, to_wire(e)});
  }
  return out;
}

std::set<coordinator::txn_partition> partitions_of(const topic_list& topics) {
  std::set<coordinator::txn_partition> out;
  for (const auto& t : topics) {
    for (int32_t p : t.partitions) out.insert({t.name, p});
  }
  return out;
}

// Partitions the metadata does not know: UNKNOWN_TOPIC_OR_PARTITION for them and OPERATION_NOT_ATTEMPTED
// for the rest (AddPartitionsToTxn adds all or nothing); nullopt when every partition exists.
std::optional<topic_results> unknown_partitions(const metadata::metadata_image& image,
                                                const topic_list& topics) {
  bool any_unknown = false;
  topic_results out;
  for (const auto& t : topics) {
    const auto* topic = image.find_topic(t.name);
    auto& r = out.emplace_back();
    r.name = t.name;
    for (int32_t p : t.partitions) {
      const bool known = topic && p >= 0 && p < static_cast<int32_t>(topic->partitions.size());
      any_unknown |= !known;
      r.results_by_partition.push_back(
          {p, to_wire(known ? error_code::operation_not_attempted : error_code::unknown_topic_or_partition)});
    }
  }
  if (!any_unknown) return std::nullopt;
  return out;
}

}  // namespace

asio::awaitable<std::optional<add_partitions_to_txn_handler::response>>
add_partitions_to_txn_handler::handle_async(request_context& ctx, request req, int16_t version) {
  const auto& services = ctx.services;
  response resp;
  const auto image = services.metadata->current();
  if (version < 4) {
    const topic_list& topics = req.v3_and_below_topics;
    // KafkaApis.handleAddPartitionsToTxnRequest: WRITE on the transactional id, then on each topic (the
    // others' partitions OPERATION_NOT_ATTEMPTED).
    if (!authorized(ctx, acl_operation::write, acl_resource_type::transactional_id,
                    req.v3_and_below_transactional_id)) {
      resp.results_by_topic_v3_and_below =
          answer_all(topics, error_code::transactional_id_authorization_failed);
      co_return resp;
    }
    if (authorization_enabled(ctx)) {
      bool any_refused = false;
      topic_results refused;
      for (const auto& t : topics) {
        const bool ok = authorized(ctx, acl_operation::write, acl_resource_type::topic, t.name);
        any_refused |= !ok;
        auto& r = refused.emplace_back();
        r.name = t.name;
        for (int32_t p : t.partitions) {
          r.results_by_partition.push_back({p, to_wire(ok ? error_code::operation_not_attempted
                                                          : error_code::topic_authorization_failed)});
        }
      }
      if (any_refused) {
        resp.results_by_topic_v3_and_below = std::move(refused);
        co_return resp;
      }
    }
    if (auto unknown = unknown_partitions(*image, topics)) {
      resp.results_by_topic_v3_and_below = std::move(*unknown);
      co_return resp;
    }
    if (!services.transactions) {
      resp.results_by_topic_v3_and_below = answer_all(topics, error_code::coordinator_not_available);
      co_return resp;
    }
    auto partitions = partitions_of(topics);
    const std::string id = req.v3_and_below_transactional_id;
    const int64_t pid = req.v3_and_below_producer_id;
    const int16_t epoch = req.v3_and_below_producer_epoch;
    auto call = [id, pid, epoch, partitions](coordinator::transaction_coordinator& c, auto done) {
      c.add_partitions(id, pid, epoch, partitions, 0, std::move(done));
    };
    const error_code e = co_await call_transaction_coordinator<error_code>(services, std::move(call));
    resp.results_by_topic_v3_and_below = answer_all(topics, fenced_for_version(e, version, 2));
    co_return resp;
  }

  // v4+: sent by partition leaders, which need CLUSTER_ACTION.
  if (!authorized_cluster(ctx, acl_operation::cluster_action)) {
    resp.error_code = to_wire(error_code::cluster_authorization_failed);
    co_return resp;
  }
  if (!services.transactions) {
    resp.error_code = to_wire(error_code::coordinator_not_available);
    co_return resp;
  }
  // The transactions of one request (a leader's verifications, batched per coordinator node) are worked on
  // together, as Kafka's handler does: each VerifyOnly one answered from the coordinator's state, each
  // implicit add (transactions v2) once its state is written; the answer goes when the last is done.
  struct txn_work {
    size_t result_index = 0;
    std::string id;
    int64_t producer_id = 0;
    int16_t producer_epoch = 0;
    bool verify_only = true;
    std::set<coordinator::txn_partition> partitions;
  };
  // Per transaction: the verdicts per partition (VerifyOnly), or the error for all of them (an add).
  struct txn_outcome {
    std::vector<std::pair<coordinator::txn_partition, error_code>> verified;
    error_code added = error_code::none;
  };
  std::vector<txn_work> work;
  for (auto& txn : req.transactions) {
    auto& result = resp.results_by_transaction.emplace_back();
    result.transactional_id = txn.transactional_id;
    if (auto unknown = unknown_partitions(*image, txn.topics)) {
      result.topic_results = std::move(*unknown);
      continue;
    }
    work.push_back({resp.results_by_transaction.size() - 1, txn.transactional_id, txn.producer_id,
                    txn.producer_epoch, txn.verify_only, partitions_of(txn.topics)});
  }
  if (work.empty()) co_return resp;
  auto call = [work](coordinator::transaction_coordinator& c,
                     std::function<void(std::vector<txn_outcome>)> answer) {
    auto outcomes = std::make_shared<std::vector<txn_outcome>>(work.size());
    auto left = std::make_shared<size_t>(work.size());
    auto finish = [outcomes, left, answer = std::move(answer)]() {
      if (--*left == 0) answer(std::move(*outcomes));
    };
    for (size_t i = 0; i < work.size(); ++i) {
      const auto& w = work[i];
      if (w.verify_only) {
        (*outcomes)[i].verified = c.verify_partitions(
            w.id, w.producer_id, w.producer_epoch,
            std::vector<coordinator::txn_partition>(w.partitions.begin(), w.partitions.end()));
        finish();
        continue;
      }
      c.add_partitions(w.id, w.producer_id, w.producer_epoch, w.partitions, 2,
                       [outcomes, finish, i](error_code e) {
                         (*outcomes)[i].added = e;
                         finish();
                       });
    }
  };
  auto outcomes = co_await call_transaction_coordinator<std::vector<txn_outcome>>(services, std::move(call));
  for (size_t i = 0; i < work.size() && i < outcomes.size(); ++i) {
    auto& result = resp.results_by_transaction[work[i].result_index];
    const auto& txn = req.transactions[work[i].result_index];
    if (!work[i].verify_only) {
      result.topic_results = answer_all(txn.topics, outcomes[i].added);
      continue;
    }
    for (const auto& [p, e] : outcomes[i].verified) {
      auto& topics = result.topic_results;
      if (topics.empty() || topics.back().name != p.topic) topics.emplace_back().name = p.topic;
      topics.back().results_by_partition.push_back({p.partition, to_wire(e)});
    }
  }
  co_return resp;
}

}  // namespace mala::broker::handlers
