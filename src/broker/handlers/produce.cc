#include "handlers/produce.h"

#include "handlers/authorization.h"

#include <algorithm>
#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <asio/post.hpp>
#include <asio/this_coro.hpp>

#include "handlers/data_path.h"
#include "handlers/transaction_common.h"
#include "mala/broker/broker_metrics.h"
#include "mala/common/logging.h"
#include "mala/common/uuid.h"
#include "mala/net/coroutine_frame_warning.h"
#include "mala/protocol/record_batch.h"

namespace mala::broker::handlers {

namespace {

namespace proto = mala::protocol;
using partition_response = proto::produce_response::partition_produce_response;

// Kafka's AdminUtils.ADMIN_CLIENT_ID: the only client allowed to write to internal topics.
constexpr std::string_view admin_client_id = "__admin_client";

// Kafka's PartitionResponse(error): no offsets.
partition_response error_response(int32_t index, error_code code) {
  partition_response r;
  r.index = index;
  r.error_code = to_wire(code);
  r.base_offset = -1;
  r.log_append_time_ms = -1;
  r.log_start_offset = -1;
  return r;
}

// A partition's records as the request sent them, checked once (ProduceRequest.validateRecords and the batch
// rules for clients): the batch to append, or the error to answer.
struct checked_records {
  result<replication::produced_batch> batch = status::error(error_code::unknown_server_error, "not checked");
  bool in_request = true;  // false: not a view into the request buffer (refused rather than copied)
};

checked_records check_records(const request_context& ctx, const proto::records_view& records) {
  checked_records out;
  auto writable = ctx.writable(records.bytes);
  if (writable.size() != records.bytes.size()) {
    out.in_request = false;
    return out;
  }
  out.batch = replication::validate_produced_records(writable);
  return out;
}

// Kafka's RequestUtils.hasTransactionalRecords, over every partition entry of the request (`checked` parallel
// to them): a checked batch answers from its header; the rest are split here.
bool has_transactional_batches(const proto::produce_request& req,
                               const std::vector<checked_records>& checked) {
  size_t entry = 0;
  for (const auto& topic : req.topic_data) {
    for (const auto& p : topic.partition_data) {
      const auto& c = checked[entry++];
      if (c.batch) {
        if (c.batch->header.is_transactional()) return true;
        continue;
      }
      proto::batch_splitter splitter(p.records.bytes);
      while (auto batch = splitter.next()) {
        auto header = proto::parse_batch_header(*batch);
        if (header && header->is_transactional()) return true;
      }
    }
  }
  return false;
}

// One partition to append on its shard; `slot` is its place in the answer.
struct append_work {
  size_t slot = 0;
  std::string topic;
  int32_t partition = 0;
  // Over the request's own bytes (request_context::writable): the leader stamps offsets into them in place,
  // and the connection keeps them until the request is answered.
  replication::produced_batch batch;
};

struct append_answer {
  size_t slot = 0;
  partition_response data;
};

// What appending a shard's partitions gave: an answer per partition, and the acks=-1 appends that must wait
// for their high watermark (index into answers, the partition, the offset to reach).
struct shard_appends {
  struct pending {
    size_t answer;
    replication::partition* partition;
    int64_t required_offset;
  };
  std::vector<append_answer> answers;
  std::vector<pending> waits;
};

// On the partitions' shard: appends every partition of `work` (Kafka's ReplicaManager.appendToLocalLog).
shard_appends append_all(const broker_services& services, std::vector<append_work>& work, int16_t acks) {
  auto log = subsystem_logger("broker");
  shard_appends out;
  out.answers.reserve(work.size());
  // This shard's BrokerTopicMetrics, looked up once per run of partitions of one topic.
  shard_metrics* counters = services.metrics ? &services.metrics->here() : nullptr;
  topic_traffic* traffic = nullptr;
  const std::string* traffic_topic = nullptr;
  for (auto& w : work) {
    if (counters && (!traffic_topic || *traffic_topic != w.topic)) {
      traffic = &counters->topic(w.topic);
      traffic_topic = &w.topic;
    }
    if (traffic) ++traffic->produce_requests;
    append_answer a{w.slot, {}};
    auto hosted = hosted_partition(services, w.topic, w.partition);
    if (!hosted) {
      if (traffic) ++traffic->failed_produce_requests;
      a.data = error_response(w.partition, hosted.error().code);
      out.answers.push_back(std::move(a));
      continue;
    }
    replication::partition* p = *hosted;
    auto produced = p->append(w.batch, acks);
    auto& appended = produced.appended;
    if (!appended) {
      if (traffic) ++traffic->failed_produce_requests;
      const error_code code = appended.error().code;
      a.data = error_response(w.partition, code);
      if (auto& failure = produced.record_errors) {
        a.data.error_message = failure->message;
        for (auto& e : failure->record_errors) {
          a.data.record_errors.push_back({e.batch_index, std::move(e.message)});
        }
      }
      // A producer-state rejection says which sequence or epoch the partition expected: worth a line (an
      // idempotent producer that keeps getting it is stuck); the rest (not leader, ...) are routine.
      const bool producer_state = code == error_code::out_of_order_sequence_number ||
                                  code == error_code::invalid_producer_epoch ||
                                  code == error_code::invalid_txn_state;
      log->log(producer_state ? spdlog::level::info : spdlog::level::debug,
               "produce to {}-{} failed: {} ({})", w.topic, w.partition, error_name(code),
               appended.error().message);
      out.answers.push_back(std::move(a));
      continue;
    }
    if (traffic) {
      traffic->messages_in += static_cast<uint64_t>(std::max(w.batch.header.record_count, 0));
      traffic->bytes_in += w.batch.bytes.size();
    }
    a.data.index = w.partition;
    a.data.error_code = to_wire(appended->error);
    a.data.base_offset = appended->appended.first_offset;
    a.data.log_append_time_ms = appended->appended.log_append_time;
    a.data.log_start_offset = appended->log_start_offset;
    if (!appended->done) out.waits.push_back({out.answers.size(), p, appended->required_offset});
    out.answers.push_back(std::move(a));
  }
  return out;
}

// What one shard's part of a request spanning shards gave: the answers, and the slots (waiter indices) of
// the appends that wait for their high watermark.
struct spanning_appends {
  std::vector<append_answer> answers;
  std::vector<size_t> waiting;
};

// acks=-1 (Kafka appends to every partition, then waits for all): each shard appends its partitions and
// registers their high-watermark waiters in `group` in the same turn, so none fires unseen; the shards do so
// at once (run_on_shards_async). Once every shard appended, the connection may start its next request (its
// appends come after these, as in Kafka, which serves a connection's requests one at a time), and this one
// sleeps on its own shard until every waiter fired or the timeout.
asio::awaitable<void> append_and_wait(const request_context& ctx, const broker_services& services,
                                      std::vector<std::pair<size_t, std::vector<append_work>>> groups,
                                      size_t slot_count, int16_t acks,
                                      std::chrono::steady_clock::time_point deadline,
                                      std::vector<std::optional<partition_response>>& answers_by_slot) {
  auto group = std::make_shared<replication::spanning_waiter_group>(co_await asio::this_coro::executor,
                                                                    slot_count, slot_count + 1);
  std::vector<size_t> shards;
  for (const auto& g : groups) shards.push_back(g.first);
  auto append = [&services, acks, group](std::vector<append_work>& w) -> asio::awaitable<spanning_appends> {
    auto appended = append_all(services, w, acks);
    spanning_appends out;
    for (const auto& wait : appended.waits) {
      const size_t slot = appended.answers[wait.answer].slot;
      auto handle = wait.partition->add_high_watermark_waiter(wait.required_offset, group->callback(slot));
      group->track(slot, wait.partition, handle);
      out.waiting.push_back(slot);
    }
    out.answers = std::move(appended.answers);
    co_return out;
  };
  auto parts =
      co_await replication::run_on_shards_async(services.shards, std::move(groups), std::move(append));
  std::vector<std::pair<size_t, std::vector<size_t>>> waiting_by_shard;
  size_t waiting = 0;
  for (size_t i = 0; i < parts.size(); ++i) {
    auto& part = parts[i];
    for (auto& a : part.answers) answers_by_slot[a.slot] = std::move(a.data);
    waiting += part.waiting.size();
    if (!part.waiting.empty()) waiting_by_shard.emplace_back(shards[i], std::move(part.waiting));
  }
  if (waiting == 0) co_return;
  ctx.release_ordering();
  group->set_wake_after(waiting);
  co_await group->wait_until(deadline);
  for (auto& [shard, slots] : waiting_by_shard) {
    for (size_t slot : slots) {
      answers_by_slot[slot]->error_code =
          to_wire(group->fired(slot) ? group->error(slot) : error_code::request_timed_out);
    }
    // The waiters that did not fire are withdrawn on their shard; the answer need not wait for it.
    auto withdraw = [group, slots = std::move(slots)] { group->cancel_unfired(slots); };
    if (services.shards) {
      asio::post(services.shards->context(shard), std::move(withdraw));
    } else {
      withdraw();
    }
  }
}

// The first Produce version whose transactional batches add their partition to the transaction (transactions
// v2), and the first that knows TRANSACTION_ABORTABLE.
constexpr int16_t produce_implicit_add_min_version = 12;
constexpr int16_t produce_abortable_min_version = 11;

// A partition of the request whose batch needs a verification guard; what creating it gave.
struct guard_work {
  size_t index = 0;  // into the request's append work
  std::string topic;
  int32_t partition = 0;
  int64_t producer_id = 0;
  int32_t base_sequence = 0;
  int16_t producer_epoch = 0;
};
struct guard_answer {
  size_t index = 0;
  result<uint64_t> guard = uint64_t{0};
};

// KIP-890 (ReplicaManager.maybeStartTransactionVerificationForPartitions): each transactional batch carries a
// verification guard down to its append; a producer with no open transaction on the partition gets a fresh
// guard there, and those partitions are asked of the transaction coordinator, all in one question
// (VerifyOnly, or the implicit add of transactions v2 from v12). A partition the coordinator does not vouch
// for is answered here and not appended; the others append only while their guard is still the stored one.
asio::awaitable<void> verify_transactional_batches(const broker_services& services, const std::string& txn_id,
                                                   int16_t version,
                                                   std::chrono::steady_clock::time_point deadline,
                                                   std::vector<append_work>& work,
                                                   std::vector<std::optional<partition_response>>& refused) {
  std::vector<guard_work> needed;
  std::optional<int64_t> producer_id;
  bool mixed_producers = false;
  for (size_t i = 0; i < work.size(); ++i) {
    const auto& h = work[i].batch.header;
    if (!h.is_transactional()) continue;
    if (producer_id && *producer_id != h.producer_id) mixed_producers = true;
    producer_id = h.producer_id;
    needed.push_back({i, work[i].topic, work[i].partition, h.producer_id, h.base_sequence, h.producer_epoch});
  }
  if (needed.empty()) co_return;
  if (mixed_producers) {
    // Kafka refuses a request whose transactional batches come from several producers.
    for (const auto& n : needed) {
      refused[n.index] = error_response(n.partition, error_code::invalid_producer_id_mapping);
    }
    co_return;
  }
  std::vector<guard_answer> guards;
  const bool epoch_bump = version >= produce_implicit_add_min_version;
  auto create = [&services,
                 epoch_bump](const std::vector<guard_work>& w) -> asio::awaitable<std::vector<guard_answer>> {
    std::vector<guard_answer> out;
    for (const auto& g : w) {
      guard_answer answer{g.index, uint64_t{0}};
      auto hosted = hosted_partition(services, g.topic, g.partition);
      if (hosted) {
        answer.guard = (*hosted)->create_verification_guard(g.producer_id, g.base_sequence, g.producer_epoch,
                                                            epoch_bump);
      } else {
        answer.guard = hosted.error();
      }
      out.push_back(std::move(answer));
    }
    co_return out;
  };
  auto groups = group_by_shard(services, needed);
  auto parts =
      co_await replication::run_on_shards_async(services.shards, std::move(groups), std::move(create));
  for (auto& part : parts) {
    guards.insert(guards.end(), std::make_move_iterator(part.begin()), std::make_move_iterator(part.end()));
  }
  txn_verification_request request{.transactional_id = txn_id,
                                   .producer_id = needed.front().producer_id,
                                   .producer_epoch = needed.front().producer_epoch,
                                   .partitions = {},
                                   .add = version >= produce_implicit_add_min_version};
  std::vector<const guard_answer*> asked;
  for (const auto& g : guards) {
    auto& w = work[g.index];
    if (!g.guard) {
      // Kafka translates these as the coordinator's answers (CONCURRENT_TRANSACTIONS: NOT_ENOUGH_REPLICAS,
      // which every client retries).
      refused[g.index] = error_response(
          w.partition,
          verification_error_for_write(g.guard.error().code, version >= produce_abortable_min_version));
      continue;
    }
    w.batch.verification_guard = *g.guard;
    // Guard 0: the producer's transaction is open there, nothing to ask (an abort marker before the append
    // still makes it fail).
    if (*g.guard == 0) continue;
    request.partitions.emplace_back(w.topic, w.partition);
    asked.push_back(&g);
  }
  if (asked.empty()) co_return;
  auto answer = co_await verify_with_coordinator(services, std::move(request), deadline);
  for (size_t i = 0; i < asked.size(); ++i) {
    const error_code e = i < answer.size() ? answer[i] : error_code::unknown_server_error;
    if (e == error_code::none) continue;
    const size_t index = asked[i]->index;
    const error_code code = verification_error_for_write(e, version >= produce_abortable_min_version);
    auto r = error_response(work[index].partition, code);
    if (code == error_code::invalid_txn_state) r.error_message = "Partition was not added to the transaction";
    refused[index] = std::move(r);
  }
}

asio::awaitable<std::optional<produce_handler::response>> produce(request_context& ctx,
                                                                  produce_handler::request req,
                                                                  int16_t version) {
  using response = produce_handler::response;
  const auto& services = ctx.services;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(req.timeout_ms);
  const auto image = services.metadata->current();
  const bool acks_valid = req.acks == -1 || req.acks == 0 || req.acks == 1;
  const bool internal_allowed = ctx.header.client_id && *ctx.header.client_id == admin_client_id;

  // Every partition entry's records are checked once, here; the batch goes down to the log as it was parsed.
  std::vector<checked_records> checked;
  for (const auto& topic : req.topic_data) {
    for (const auto& p : topic.partition_data) checked.push_back(check_records(ctx, p.records));
  }
  // One answer per partition, in the order the request first names them; a partition named twice takes its
  // last records (Kafka collects the request into a map by partition).
  struct slot {
    size_t topic_entry = 0;  // which response topic it is listed under
    int32_t partition = 0;
    checked_records* records = nullptr;
    std::optional<partition_response> answer;
  };
  std::vector<slot> slots;
  // v13+ names topics by id (KIP-516): resolved here; an id the metadata does not know leaves the name empty
  // and its partitions answer UNKNOWN_TOPIC_ID. The answer names each topic as the request did.
  const bool by_topic_id = version >= produce_topic_ids_min_version;
  std::vector<std::string> topic_names;
  std::vector<uuid> topic_ids;
  std::map<std::pair<std::string, int32_t>, size_t> slot_of;
  size_t entry_index = 0;
  for (const auto& topic : req.topic_data) {
    std::string name = topic.name;
    if (by_topic_id) {
      const auto* known = image->find_topic(topic.topic_id);
      name = known ? known->name : std::string();
    }
    // The request's own naming is the key: two unknown ids stay apart.
    const std::string key = by_topic_id ? topic.topic_id.to_string() : name;
    for (const auto& p : topic.partition_data) {
      checked_records* records = &checked[entry_index++];
      auto [it, inserted] = slot_of.try_emplace({key, p.index}, slots.size());
      if (inserted) {
        size_t entry = topic_names.size();
        for (size_t i = 0; i < topic_names.size(); ++i) {
          if (by_topic_id ? topic_ids[i] == topic.topic_id : topic_names[i] == name) entry = i;
        }
        if (entry == topic_names.size()) {
          topic_names.push_back(name);
          topic_ids.push_back(by_topic_id ? topic.topic_id : uuid{});
        }
        slots.push_back({entry, p.index, records, std::nullopt});
      } else {
        slots[it->second].records = records;
      }
    }
  }

  // Transactional batches need a transactional id the producer may write with (WRITE on the
  // TRANSACTIONAL_ID; no authorizer: any); Kafka refuses the whole request otherwise.
  if (has_transactional_batches(req, checked) &&
      (!req.transactional_id ||
       !authorized(ctx, acl_operation::write, acl_resource_type::transactional_id, *req.transactional_id))) {
    if (req.acks == 0) {
      ctx.close_reason = "acks=0 produce refused: transactional batches without a transactional id";
      co_return std::nullopt;
    }
    response refused;
    for (const auto& topic : req.topic_data) {
      auto& t = refused.responses.emplace_back();
      t.name = topic.name;
      t.topic_id = topic.topic_id;
      for (const auto& p : topic.partition_data) {
        t.partition_responses.push_back(
            error_response(p.index, error_code::transactional_id_authorization_failed));
      }
    }
    co_return refused;
  }

  std::vector<append_work> work;
  std::vector<int8_t> topic_allowed(topic_names.size(), -1);
  for (size_t i = 0; i < slots.size(); ++i) {
    auto& s = slots[i];
    const std::string& topic = topic_names[s.topic_entry];
    if (by_topic_id && topic.empty()) {
      s.answer = error_response(s.partition, error_code::unknown_topic_id);
      continue;
    }
    // KafkaApis.handleProduceRequest: WRITE on the topic before anything else about it (once per topic).
    if (topic_allowed[s.topic_entry] < 0) {
      topic_allowed[s.topic_entry] =
          authorized(ctx, acl_operation::write, acl_resource_type::topic, topic) ? 1 : 0;
    }
    if (topic_allowed[s.topic_entry] == 0) {
      s.answer = error_response(s.partition, error_code::topic_authorization_failed);
      continue;
    }
    const auto* known = find_partition(*image, topic, s.partition);
    if (!known) {
      s.answer = error_response(s.partition, error_code::unknown_topic_or_partition);
      continue;
    }
    // KafkaApis validates the records first; ReplicaManager.appendRecords then checks acks, and
    // appendToLocalLog internal topics.
    if (s.records->in_request && !s.records->batch) {
      s.answer = error_response(s.partition, s.records->batch.error().code);
      continue;
    }
    if (!acks_valid) {
      s.answer = error_response(s.partition, error_code::invalid_required_acks);
      continue;
    }
    if (const auto* t = image->find_topic(topic); t && t->internal && !internal_allowed) {
      s.answer = error_response(s.partition, error_code::invalid_topic_exception);
      continue;
    }
    if (!s.records->in_request) {
      // Not a view into the request (cannot happen with the generated decoder): refused rather than copied.
      subsystem_logger("broker")->error("produce to {}-{}: records outside the request buffer", topic,
                                        s.partition);
      s.answer = error_response(s.partition, error_code::unknown_server_error);
      continue;
    }
    work.push_back({i, topic, s.partition, *s.records->batch});
  }

  if (req.transactional_id && services.transaction_verifier &&
      (services.transaction_verification_enabled || version >= produce_implicit_add_min_version)) {
    std::vector<std::optional<partition_response>> refused(work.size());
    co_await verify_transactional_batches(services, *req.transactional_id, version, deadline, work, refused);
    size_t kept = 0;
    for (size_t i = 0; i < work.size(); ++i) {
      if (refused[i]) {
        slots[work[i].slot].answer = std::move(refused[i]);
      } else {
        if (kept != i) work[kept] = std::move(work[i]);
        ++kept;
      }
    }
    work.resize(kept);
  }

  // Every partition is appended on its shard, the shards at once; acks=-1 then waits for all of them.
  const int16_t acks = req.acks;
  auto groups = group_by_shard(services, std::move(work));
  if (acks != -1) {
    auto append = [&services, acks](std::vector<append_work>& w) -> asio::awaitable<shard_appends> {
      co_return append_all(services, w, acks);
    };
    auto parts =
        co_await replication::run_on_shards_async(services.shards, std::move(groups), std::move(append));
    for (auto& appended : parts) {
      for (auto& a : appended.answers) slots[a.slot].answer = std::move(a.data);
    }
  } else {
    std::vector<std::optional<partition_response>> answers(slots.size());
    co_await append_and_wait(ctx, services, std::move(groups), slots.size(), acks, deadline, answers);
    for (size_t i = 0; i < slots.size(); ++i) {
      if (answers[i]) slots[i].answer = std::move(answers[i]);
    }
  }

  if (req.acks == 0) {
    // Kafka answers nothing to acks=0, but closes the connection when a partition failed, so that the client
    // notices (and refreshes its metadata) instead of writing into the void.
    for (const auto& s : slots) {
      if (s.answer && s.answer->error_code != to_wire(error_code::none)) {
        const auto& name = topic_names[s.topic_entry];
        ctx.close_reason = fmt::format("acks=0 produce to {}-{} failed with error {}",
                                       name.empty() ? topic_ids[s.topic_entry].to_string() : name,
                                       s.partition, s.answer->error_code);
        break;
      }
    }
    co_return std::nullopt;
  }

  response resp;
  std::map<int32_t, size_t> endpoint_listed;
  for (size_t e = 0; e < topic_names.size(); ++e) {
    auto& t = resp.responses.emplace_back();
    t.name = topic_names[e];
    t.topic_id = topic_ids[e];
    for (auto& s : slots) {
      if (s.topic_entry != e) continue;
      auto& answer = t.partition_responses.emplace_back(std::move(*s.answer));
      // KIP-951 (v10+): tell the client where the leader is, so that it need not wait for a metadata refresh.
      if (version >= 10 && answer.error_code == to_wire(error_code::not_leader_or_follower)) {
        auto leader = find_current_leader(*image, t.name, s.partition, ctx.connection.listener_name);
        answer.current_leader.leader_id = leader.leader_id;
        answer.current_leader.leader_epoch = leader.leader_epoch;
        if (leader.endpoint && !endpoint_listed.contains(leader.leader_id)) {
          endpoint_listed[leader.leader_id] = resp.node_endpoints.size();
          resp.node_endpoints.push_back({leader.leader_id, leader.endpoint->host,
                                         static_cast<int32_t>(leader.endpoint->port), leader.rack});
        }
      }
    }
  }
  co_return resp;
}

}  // namespace

asio::awaitable<std::optional<produce_handler::response>> produce_handler::handle_async(request_context& ctx,
                                                                                        request req,
                                                                                        int16_t version) {
  auto resp = co_await produce(ctx, std::move(req), version);
  // Client quotas (KafkaApis.handleProduceRequest): the request's bytes are recorded whatever became of it,
  // acks=0 included; over the quota the answer carries the throttle time and the connection is muted for it
  // (KIP-219), the answer itself going out at once.
  if (const int32_t throttle =
          record_client_quota(ctx, client_quota_type::produce, static_cast<double>(ctx.request.size()));
      throttle > 0 && resp) {
    resp->throttle_time_ms = throttle;
  }
  co_return resp;
}

}  // namespace mala::broker::handlers
