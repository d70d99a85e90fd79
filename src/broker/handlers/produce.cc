#include "handlers/produce.h"

#include <algorithm>
#include <chrono>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "handlers/data_path.h"
#include "mala/common/logging.h"
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

// One shard's part of a Produce: its answers and, for acks=-1, the waiters registered on its partitions'
// high watermarks right after the appends (so that none fires unseen before the wait starts).
struct shard_appends {
  size_t shard = 0;
  std::vector<append_answer> answers;
  std::vector<size_t> waiting;                       // by waiter: its entry in `answers`
  std::unique_ptr<replication::waiter_group> group;  // null when nothing waits
};

// The part on the partitions' shard: append every partition and (acks=-1) register a waiter for each one's
// high watermark to pass its last offset. Kafka's DelayedProduce completes when every one has.
asio::awaitable<shard_appends> append_on_shard(const broker_services& services, std::vector<append_work> work,
                                               int16_t acks) {
  auto log = subsystem_logger("broker");
  shard_appends out;
  auto& answers = out.answers;
  answers.reserve(work.size());
  struct pending {
    size_t answer;
    replication::partition* partition;
    int64_t required_offset;
  };
  std::vector<pending> waits;

  for (auto& w : work) {
    append_answer a{w.slot, {}};
    auto hosted = hosted_partition(services, w.topic, w.partition);
    if (!hosted) {
      a.data = error_response(w.partition, hosted.error().code);
      answers.push_back(std::move(a));
      continue;
    }
    replication::partition* p = *hosted;
    auto produced = p->append(w.batch, acks);
    auto& appended = produced.appended;
    if (!appended) {
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
      answers.push_back(std::move(a));
      continue;
    }
    a.data.index = w.partition;
    a.data.error_code = to_wire(appended->error);
    a.data.base_offset = appended->appended.first_offset;
    a.data.log_append_time_ms = appended->appended.log_append_time;
    a.data.log_start_offset = appended->log_start_offset;
    if (!appended->done) waits.push_back({answers.size(), p, appended->required_offset});
    answers.push_back(std::move(a));
  }

  if (!waits.empty()) {
    out.group = std::make_unique<replication::waiter_group>(waits.size(), waits.size());
    for (size_t i = 0; i < waits.size(); ++i) {
      auto handle =
          waits[i].partition->add_high_watermark_waiter(waits[i].required_offset, out.group->callback(i));
      out.group->track(i, waits[i].partition, handle);
      out.waiting.push_back(waits[i].answer);
    }
  }
  co_return out;
}

// Back on the partitions' shard: waits until every waiter fired or the request's timeout, and answers each
// waiting partition with its waiter's error or REQUEST_TIMED_OUT.
asio::awaitable<shard_appends> wait_on_shard(shard_appends appended,
                                             std::chrono::steady_clock::time_point deadline) {
  auto& group = *appended.group;
  co_await group.wait_until(deadline);
  group.cancel_unfired();
  for (size_t i = 0; i < appended.waiting.size(); ++i) {
    auto& data = appended.answers[appended.waiting[i]].data;
    data.error_code = to_wire(group.fired(i) ? group.error(i) : error_code::request_timed_out);
  }
  appended.group.reset();
  co_return appended;
}

}  // namespace

asio::awaitable<std::optional<produce_handler::response>> produce_handler::handle_async(request_context& ctx,
                                                                                        request req,
                                                                                        int16_t version) {
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
  std::vector<std::string> topic_names;
  std::map<std::pair<std::string, int32_t>, size_t> slot_of;
  size_t entry_index = 0;
  for (const auto& topic : req.topic_data) {
    for (const auto& p : topic.partition_data) {
      checked_records* records = &checked[entry_index++];
      auto [it, inserted] = slot_of.try_emplace({topic.name, p.index}, slots.size());
      if (inserted) {
        size_t entry = topic_names.size();
        for (size_t i = 0; i < topic_names.size(); ++i) {
          if (topic_names[i] == topic.name) entry = i;
        }
        if (entry == topic_names.size()) topic_names.push_back(topic.name);
        slots.push_back({entry, p.index, records, std::nullopt});
      } else {
        slots[it->second].records = records;
      }
    }
  }

  // Transactional batches need a transactional id the producer may write with (no authorizer: any); Kafka
  // refuses the whole request otherwise.
  if (!req.transactional_id && has_transactional_batches(req, checked)) {
    if (req.acks == 0) {
      ctx.close_reason = "acks=0 produce refused: transactional batches without a transactional id";
      co_return std::nullopt;
    }
    response refused;
    for (const auto& topic : req.topic_data) {
      auto& t = refused.responses.emplace_back();
      t.name = topic.name;
      for (const auto& p : topic.partition_data) {
        t.partition_responses.push_back(
            error_response(p.index, error_code::transactional_id_authorization_failed));
      }
    }
    co_return refused;
  }

  std::vector<append_work> work;
  for (size_t i = 0; i < slots.size(); ++i) {
    auto& s = slots[i];
    const std::string& topic = topic_names[s.topic_entry];
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

  // Each shard's partitions are appended there in turn (every partition is on one shard today). Then the
  // connection may start its next request (its appends come after these, as in Kafka, which serves a
  // connection's requests one at a time), while this one waits (acks=-1) for the high watermarks on each
  // shard.
  const int16_t acks = req.acks;
  std::vector<shard_appends> appended;
  for (auto& [shard, shard_work] : group_by_shard(services, std::move(work))) {
    auto append = [&services, w = std::move(shard_work), acks]() mutable {
      return append_on_shard(services, std::move(w), acks);
    };
    appended.push_back(co_await replication::run_on_shard_async(services.shards, shard, std::move(append)));
    appended.back().shard = shard;
  }
  const bool waits =
      std::any_of(appended.begin(), appended.end(), [](const auto& a) { return a.group != nullptr; });
  if (waits) ctx.release_ordering();
  for (auto& shard_part : appended) {
    if (shard_part.group) {
      const size_t shard = shard_part.shard;
      auto wait = [a = std::move(shard_part), deadline]() mutable {
        return wait_on_shard(std::move(a), deadline);
      };
      shard_part = co_await replication::run_on_shard_async(services.shards, shard, std::move(wait));
    }
    for (auto& a : shard_part.answers) slots[a.slot].answer = std::move(a.data);
  }

  if (req.acks == 0) {
    // Kafka answers nothing to acks=0, but closes the connection when a partition failed, so that the client
    // notices (and refreshes its metadata) instead of writing into the void.
    for (const auto& s : slots) {
      if (s.answer && s.answer->error_code != to_wire(error_code::none)) {
        ctx.close_reason = fmt::format("acks=0 produce to {}-{} failed with error {}",
                                       topic_names[s.topic_entry], s.partition, s.answer->error_code);
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

}  // namespace mala::broker::handlers
