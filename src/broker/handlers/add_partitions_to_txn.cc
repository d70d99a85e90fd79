#include "handlers/add_partitions_to_txn.h"

#include <set>
#include <string>
#include <vector>

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

  // v4+: sent by partition leaders.
  if (!services.transactions) {
    resp.error_code = to_wire(error_code::coordinator_not_available);
    co_return resp;
  }
  for (auto& txn : req.transactions) {
    auto& result = resp.results_by_transaction.emplace_back();
    result.transactional_id = txn.transactional_id;
    if (auto unknown = unknown_partitions(*image, txn.topics)) {
      result.topic_results = std::move(*unknown);
      continue;
    }
    const std::string id = txn.transactional_id;
    const int64_t pid = txn.producer_id;
    const int16_t epoch = txn.producer_epoch;
    if (txn.verify_only) {
      std::vector<coordinator::txn_partition> asked;
      for (const auto& p : partitions_of(txn.topics)) asked.push_back(p);
      auto call = [id, pid, epoch, asked](coordinator::transaction_coordinator& c, auto done) {
        done(c.verify_partitions(id, pid, epoch, asked));
      };
      auto verified = co_await call_transaction_coordinator<
          std::vector<std::pair<coordinator::txn_partition, error_code>>>(services, std::move(call));
      for (const auto& [p, e] : verified) {
        auto& topics = result.topic_results;
        if (topics.empty() || topics.back().name != p.topic) topics.emplace_back().name = p.topic;
        topics.back().results_by_partition.push_back({p.partition, to_wire(e)});
      }
      continue;
    }
    auto partitions = partitions_of(txn.topics);
    auto call = [id, pid, epoch, partitions](coordinator::transaction_coordinator& c, auto done) {
      c.add_partitions(id, pid, epoch, partitions, 2, std::move(done));
    };
    const error_code e = co_await call_transaction_coordinator<error_code>(services, std::move(call));
    result.topic_results = answer_all(txn.topics, e);
  }
  co_return resp;
}

}  // namespace mala::broker::handlers
