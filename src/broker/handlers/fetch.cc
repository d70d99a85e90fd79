#include "handlers/fetch.h"

#include "handlers/authorization.h"

#include "handlers/raft_common.h"
#include "mala/raft/rpc_codec.h"

#include <algorithm>
#include <chrono>
#include <map>
#include <memory>
#include <string>
#include <utility>

#include <asio/post.hpp>
#include <asio/this_coro.hpp>

#include "handlers/data_path.h"
#include "mala/broker/broker_metrics.h"
#include "mala/broker/fetch_sessions.h"
#include "mala/net/coroutine_frame_warning.h"

namespace mala::broker::handlers {

namespace {

namespace proto = mala::protocol;
using partition_data = proto::fetch_response::partition_data;
using steady_clock = std::chrono::steady_clock;

// The request-wide parameters of a read (Kafka's FetchParams).
struct fetch_params {
  int16_t version = 0;
  int32_t replica_id = replication::consumer_replica_id;
  replication::isolation_level isolation = replication::isolation_level::read_uncommitted;
  int32_t max_wait_ms = 0;
  int32_t min_bytes = 0;
  int32_t max_bytes = 0;
};

// A partition the metadata knows, to be read on its shard; `result` is its place in the answer.
struct read_work {
  size_t result = 0;
  std::string topic;
  int32_t partition = 0;
  fetch_partition_params params;
};

struct read_answer {
  size_t result = 0;
  error_code error = error_code::none;
  int64_t high_watermark = -1;
  int64_t last_stable_offset = -1;
  int64_t log_start_offset = -1;
  std::optional<replication::file_slice> data;
  std::optional<replication::read_outcome::diverging_epoch> diverging;
  // read_committed: the aborted transactions overlapping what was read.
  std::optional<std::vector<storage::aborted_txn>> aborted_transactions;
  // A follower that reported a log start offset below ours: it must hear of the new one (DeleteRecords waits
  // for it to take it, and it must not lead with the deleted records).
  bool follower_behind_log_start = false;
  // What the read was allowed: the partition's own max_bytes, the bytes of the budget it drew on, whether one
  // batch could exceed them (fits_shared_budget checks an answer against them).
  int64_t partition_max_bytes = 0;
  int64_t allowed_bytes = 0;
  bool allowed_min_one_batch = false;
  // Replication throttle (a follower's fetch of a leader-throttled replica): its bytes count toward
  // leader.replication.throttled.rate; `held_back`: it was over the rate and the follower is out of the
  // ISR, so no records were read for it (Kafka's shouldLeaderThrottle).
  bool leader_throttled = false;
  bool held_back = false;

  int64_t bytes() const { return data ? data->size : 0; }
};

// Kafka's FetchResponse.partitionResponse(error): no offsets, empty records.
void set_error(partition_data& d, error_code error) {
  d.error_code = to_wire(error);
  d.high_watermark = -1;
  d.last_stable_offset = -1;
  d.log_start_offset = -1;
  d.aborted_transactions = std::nullopt;
  d.records = proto::records_view::of({});
}

// The response's byte budget, shared by the partitions in request order (across shards);
// only until some partition returned records may one batch exceed it (KIP-74).
struct read_budget {
  int64_t bytes = 0;
  bool min_one_batch = true;
};

// A read that returned `bytes` draws them from the budget.
void draw(read_budget& budget, int64_t bytes) {
  if (bytes > 0) budget.min_one_batch = false;
  budget.bytes = std::max<int64_t>(0, budget.bytes - bytes);
}

// One pass over the partitions in order (Kafka's ReplicaManager.readFromLog), drawing on `left`; a follower's
// fetch state is updated when `update_followers` (once per request).
std::vector<read_answer> read_all(const broker_services& services, const std::vector<read_work>& work,
                                  const fetch_params& params, bool update_followers, read_budget& left) {
  std::vector<read_answer> answers;
  answers.reserve(work.size());
  int64_t& budget = left.bytes;
  bool& min_one_batch = left.min_one_batch;
  const int64_t now = now_ms(services);
  for (const auto& w : work) {
    read_answer a;
    a.result = w.result;
    auto hosted = hosted_partition(services, w.topic, w.partition);
    if (!hosted) {
      a.error = hosted.error().code;
      answers.push_back(std::move(a));
      continue;
    }
    replication::partition* p = *hosted;
    replication::read_request r;
    r.fetch_offset = w.params.fetch_offset;
    r.max_bytes = static_cast<int32_t>(std::clamp<int64_t>(w.params.max_bytes, 0, budget));
    r.replica_id = params.replica_id;
    r.isolation = params.isolation;
    r.min_one_batch = min_one_batch;
    a.partition_max_bytes = w.params.max_bytes;
    a.allowed_bytes = r.max_bytes;
    a.allowed_min_one_batch = r.min_one_batch;
    if (w.params.current_leader_epoch >= 0) r.current_leader_epoch = w.params.current_leader_epoch;
    if (params.replica_id >= 0 && params.version >= 12 && w.params.last_fetched_epoch >= 0) {
      r.last_fetched_epoch = w.params.last_fetched_epoch;
    }
    // Kafka's shouldLeaderThrottle: an out-of-sync follower of a throttled replica gets no records while the
    // leader's replication rate is over leader.replication.throttled.rate (its fetch state still moves).
    if (params.replica_id >= 0 && p->leader_throttled() && services.leader_replication_quota) {
      a.leader_throttled = true;
      const auto& isr = p->isr();
      if (std::find(isr.begin(), isr.end(), params.replica_id) == isr.end() &&
          services.leader_replication_quota->exceeded(now)) {
        a.held_back = true;
        r.max_bytes = 0;
        r.min_one_batch = false;
      }
    }
    auto read = p->read(r);
    if (!read) {
      a.error = read.error().code;
      answers.push_back(std::move(a));
      continue;
    }
    a.high_watermark = read->high_watermark;
    a.last_stable_offset = read->last_stable_offset;
    a.log_start_offset = read->log_start_offset;
    a.data = read->data;
    a.diverging = read->diverging;
    a.aborted_transactions = std::move(read->aborted_transactions);
    a.follower_behind_log_start = params.replica_id >= 0 && w.params.log_start_offset >= 0 &&
                                  w.params.log_start_offset < read->log_start_offset;
    draw(left, a.bytes());
    // A follower's fetch tells the leader how far it got (Kafka's updateFollowerFetchState, once per
    // request).
    if (update_followers && params.replica_id >= 0 && !read->diverging) {
      (void)p->update_follower_fetch_state(
          {params.replica_id, w.params.fetch_offset, w.params.log_start_offset, read->log_end_offset, now});
    }
    answers.push_back(std::move(a));
  }
  return answers;
}

// Kafka's "respond immediately" rule in fetchMessages (and DelayedFetch.tryComplete): no wait wanted, enough
// bytes, or something the client must hear about at once (an error, a diverging epoch). Mala also answers a
// follower at once whose log start is behind ours (Kafka parks it up to replica.fetch.wait.max.ms): a
// DeleteRecords completes a long poll sooner, and a restarted follower that joins the ISR from this fetch
// has the log start before it can be elected.
bool answers_at_once(const read_answer& a) {
  return a.error != error_code::none || a.diverging || a.follower_behind_log_start;
}

bool can_answer(const std::vector<read_answer>& answers, const fetch_params& params) {
  if (params.max_wait_ms <= 0 || answers.empty()) return true;
  int64_t bytes = 0;
  for (const auto& a : answers) {
    if (answers_at_once(a)) return true;
    bytes += a.bytes();
  }
  return bytes >= params.min_bytes;
}

read_budget full_budget(const fetch_params& params) {
  return {std::max<int64_t>(params.max_bytes, 0), true};
}

// Whether a read from a pass whose shards each read their partitions at once, each drawing on a full budget
// of its own, is the one a single budget shared by the partitions in request order allows (read_all over all
// of them, as Kafka's readFromLog does); if so, draws it from `shared`. A read that got b bytes while allowed
// M is the same as one allowed L (the same log) when b <= L <= M: its batches fit in L, the next did not fit
// in M; and, when it got nothing, when one batch over L was allowed too or the shared budget no longer allows
// it. A shard reads its partitions in request order, so its own budget holds at least what the shared one has
// left at each of them: this fails only where the shared budget cut a read short (the response's max_bytes
// was reached, or an oversized first batch (KIP-74) went to a partition other than the first to return
// records).
bool fits_shared_budget(const read_answer& a, read_budget& shared) {
  // An error or a throttled read does not depend on the budget, nor draws on it.
  if (a.error != error_code::none || a.held_back) return true;
  const int64_t allowed = std::clamp<int64_t>(a.partition_max_bytes, 0, shared.bytes);
  const int64_t got = a.bytes();
  if (allowed > a.allowed_bytes) return false;
  // More than allowed: one batch over the budget, which only a read allowed one gets (KIP-74); any smaller
  // budget allowing one gets the same batch.
  const bool one_oversized_batch = got > a.allowed_bytes && a.allowed_min_one_batch;
  if (got > allowed && !(one_oversized_batch && shared.min_one_batch)) return false;
  if (got == 0 && shared.min_one_batch && !a.allowed_min_one_batch) return false;
  draw(shared, got);
  return true;
}

// How many of `answers` (in request order) from the first on are the reads the shared budget allows; draws
// them from `shared`.
size_t shared_budget_prefix(const std::vector<read_answer>& answers, size_t from, read_budget& shared) {
  size_t i = from;
  while (i < answers.size() && fits_shared_budget(answers[i], shared)) ++i;
  return i;
}

// One pass over every shard's partitions: the answers in the order of the groups, and the data waiters it
// registered (on each shard, the partitions' places in the answer) in `group`.
struct read_pass {
  std::vector<read_answer> answers;
  std::shared_ptr<replication::spanning_waiter_group> group;
  std::vector<std::pair<size_t, std::vector<size_t>>> registered;
};

// One shard's part of a pass: its answers, the budget left after them, and the waiters it registered.
struct shard_read {
  std::vector<read_answer> answers;
  read_budget left;
  std::vector<size_t> waiting;
};

// On the partitions' shard: reads them drawing on `budget`; when the request is still short of min_bytes
// with this shard's answers and nothing answers at once, registers a data waiter on each of them in `group`
// (null: the request answers at once) in the same turn, so that no append slips in between.
shard_read read_shard(const broker_services& services, const std::vector<read_work>& work,
                      const fetch_params& params, bool update_followers, read_budget budget,
                      replication::spanning_waiter_group* group) {
  shard_read out;
  out.left = budget;
  out.answers = read_all(services, work, params, update_followers, out.left);
  int64_t total = 0;
  bool now = !group;
  for (const auto& a : out.answers) {
    total += a.bytes();
    now = now || answers_at_once(a);
  }
  if (now || total >= params.min_bytes) return out;
  for (const auto& w : work) {
    auto hosted = hosted_partition(services, w.topic, w.partition);
    if (!hosted) continue;
    group->track(w.result, *hosted, (*hosted)->add_data_waiter(group->callback(w.result)));
    out.waiting.push_back(w.result);
  }
  return out;
}

// What every pass of a request reads: its partitions grouped by shard, and where it waits (`home`, its own
// shard) for how many answers.
struct read_plan {
  const broker_services& services;
  std::vector<std::pair<size_t, std::vector<read_work>>> groups;
  size_t result_count = 0;
  fetch_params params;
  asio::any_io_executor home;

  // A pass's waiter group: none when the request answers at once.
  std::shared_ptr<replication::spanning_waiter_group> new_waiter_group() const {
    if (params.max_wait_ms <= 0) return nullptr;
    return std::make_shared<replication::spanning_waiter_group>(home, result_count, 1);
  }
};

// The shards at once, each with a full budget of its own (the answers to check with fits_shared_budget). A
// shard whose own answers leave the request short registers its waiters: if the whole request is short,
// every shard is.
asio::awaitable<read_pass> read_shards_at_once(const read_plan& plan, bool update_followers) {
  const auto& services = plan.services;
  const auto& params = plan.params;
  read_pass pass;
  pass.group = plan.new_waiter_group();
  std::vector<std::pair<size_t, const std::vector<read_work>*>> shards_work;
  for (const auto& g : plan.groups) shards_work.emplace_back(g.first, &g.second);
  auto read = [&services, &params, update_followers,
               group = pass.group.get()](const std::vector<read_work>* work) -> asio::awaitable<shard_read> {
    co_return read_shard(services, *work, params, update_followers, full_budget(params), group);
  };
  auto parts =
      co_await replication::run_on_shards_async(services.shards, std::move(shards_work), std::move(read));
  for (size_t i = 0; i < parts.size(); ++i) {
    for (auto& a : parts[i].answers) pass.answers.push_back(std::move(a));
    if (!parts[i].waiting.empty())
      pass.registered.emplace_back(plan.groups[i].first, std::move(parts[i].waiting));
  }
  co_return pass;
}

// The answers of a pass read again so that the response's byte budget goes to the partitions in request
// order, as Kafka's (a fetch session moves the partitions that returned records to its end, so that no
// partition starves, whatever shard it is on). The answers that fit the shared budget from the first on are
// kept; the rest are read again at once on their shards, each shard drawing on what the shared budget has
// left. The first of them is then exact (its shard's budget is the shared one), so each round keeps one more
// answer at least; usually one round does: past the cut, the budget left is short of any more batches.
asio::awaitable<std::vector<read_answer>> read_again_in_request_order(const read_plan& plan,
                                                                      std::vector<read_answer> answers) {
  const auto by_result = [](const read_answer& x, const read_answer& y) { return x.result < y.result; };
  std::sort(answers.begin(), answers.end(), by_result);
  read_budget budget = full_budget(plan.params);
  size_t kept = shared_budget_prefix(answers, 0, budget);
  if (kept == answers.size()) co_return answers;
  std::vector<const read_work*> work_of(plan.result_count, nullptr);
  for (const auto& group : plan.groups) {
    for (const auto& w : group.second) work_of[w.result] = &w;
  }
  while (kept < answers.size()) {
    std::vector<read_work> rest;
    rest.reserve(answers.size() - kept);
    for (size_t i = kept; i < answers.size(); ++i) rest.push_back(*work_of[answers[i].result]);
    auto groups = group_by_shard(plan.services, std::move(rest));
    const auto& services = plan.services;
    const auto& params = plan.params;
    auto read = [&services, &params,
                 budget](const std::vector<read_work>& work) -> asio::awaitable<shard_read> {
      co_return read_shard(services, work, params, false, budget, nullptr);
    };
    auto parts =
        co_await replication::run_on_shards_async(services.shards, std::move(groups), std::move(read));
    answers.resize(kept);
    for (auto& part : parts) {
      for (auto& a : part.answers) answers.push_back(std::move(a));
    }
    std::sort(answers.begin() + static_cast<std::ptrdiff_t>(kept), answers.end(), by_result);
    const size_t first = kept;
    kept = shared_budget_prefix(answers, kept, budget);
    if (kept == first) {  // not expected (the first read again drew on the shared budget): keep it anyway
      draw(budget, answers[kept].bytes());
      ++kept;
    }
  }
  co_return answers;
}

// The waiters of a pass that did not fire are withdrawn on their shards; the request need not wait for it.
void withdraw_waiters(const broker_services& services, read_pass& pass) {
  for (auto& [shard, waiting] : pass.registered) {
    auto withdraw = [group = pass.group, waiting = std::move(waiting)] { group->cancel_unfired(waiting); };
    if (services.shards) {
      asio::post(services.shards->context(shard), std::move(withdraw));
    } else {
      withdraw();
    }
  }
  pass.registered.clear();
}

// Each pass reads every shard's partitions, the shards at once. Short of min_bytes after the first pass (the
// bytes each partition has for the request, as Kafka's DelayedFetch counts them), the handler lets the
// connection start its next request (its reads are done; Kafka serves a connection's requests one at a time),
// and the request sleeps on its own shard until any waiter fires or max_wait_ms passes, then reads again.
// Kafka shares the response's byte budget among the partitions in request order; where that budget cut a read
// of the answering pass short, the reads from there on are read again (read_again_in_request_order).
asio::awaitable<std::vector<read_answer>> read_on_shards(
    const request_context& ctx, const broker_services& services,
    std::vector<std::pair<size_t, std::vector<read_work>>> groups, size_t result_count, fetch_params params,
    steady_clock::time_point deadline) {
  const asio::any_io_executor home = co_await asio::this_coro::executor;
  const read_plan plan{services, std::move(groups), result_count, params, home};
  bool first_pass = true;
  while (true) {
    auto pass = co_await read_shards_at_once(plan, first_pass);
    const bool done = can_answer(pass.answers, params) || steady_clock::now() >= deadline;
    if (!done && first_pass) ctx.release_ordering();
    first_pass = false;
    // Not done: no partition answers at once and the total is short, so every shard registered its waiters.
    if (!done) co_await pass.group->wait_until(deadline);
    withdraw_waiters(services, pass);
    if (done) {
      auto answers = co_await read_again_in_request_order(plan, std::move(pass.answers));
      co_return answers;
    }
  }
}

}  // namespace

size_t fetch_reply::encoded_size(int16_t version) const {
  size_t size = body.encoded_size(version);
  for (const auto& topic : body.responses) {
    for (const auto& d : topic.partitions) {
      if (d.records.is_external()) size -= d.records.external_size;
    }
  }
  return size;
}

namespace {

// BrokerTopicMetrics on the connection's shard: a consumer's partitions and record bytes per topic, a
// follower's bytes as replication (Kafka's BrokerTopicStats.updateBytesOut).
void count_fetch_traffic(const request_context& ctx, bool follower,
                         const std::vector<fetch_partition_result>& results) {
  if (!ctx.services.metrics) return;
  auto& counters = ctx.services.metrics->here();
  if (follower) {
    uint64_t bytes = 0;
    for (const auto& r : results)
      bytes += static_cast<uint64_t>(std::max<int64_t>(r.effective_records_size(), 0));
    counters.add_replication_bytes_out(bytes);
    return;
  }
  topic_traffic* traffic = nullptr;
  const std::string* traffic_topic = nullptr;
  for (const auto& r : results) {
    // Partitions of unknown or unauthorized topics are left out, as Kafka filters them before its stats
    // (and a client's made-up names make no counters).
    const auto code = r.data.error_code;
    if (r.key.topic.empty() || code == to_wire(error_code::unknown_topic_or_partition) ||
        code == to_wire(error_code::unknown_topic_id) ||
        code == to_wire(error_code::topic_authorization_failed)) {
      continue;
    }
    if (!traffic_topic || *traffic_topic != r.key.topic) {
      traffic = &counters.topic(r.key.topic);
      traffic_topic = &r.key.topic;
    }
    ++traffic->fetch_requests;
    if (r.data.error_code != 0) ++traffic->failed_fetch_requests;
    traffic->bytes_out += static_cast<uint64_t>(std::max<int64_t>(r.effective_records_size(), 0));
  }
}

// A Fetch of the metadata partition by a controller (KIP-595): it goes to the Raft replica, not the log.
bool is_raft_fetch(const fetch_handler::request& req, int16_t version) {
  if (req.topics.size() != 1) return false;
  const auto& t = req.topics.front();
  return version >= 13 ? t.topic_id == raft::metadata_topic_id() : t.topic == raft::metadata_topic_name;
}

asio::awaitable<std::optional<fetch_handler::response>> raft_fetch(request_context& ctx,
                                                                   const fetch_handler::request& req,
                                                                   int16_t version) {
  fetch_reply reply;
  if (!ctx.services.raft) {
    reply.body.error_code = to_wire(error_code::invalid_request);
    co_return reply;
  }
  if (!authorized_cluster(ctx, acl_operation::cluster_action)) {
    reply.body.error_code = to_wire(error_code::cluster_authorization_failed);
    co_return reply;
  }
  auto message = raft::from_protocol(req, version, raft_cluster_id(ctx.services));
  if (!message.ok()) {
    reply.body.error_code = to_wire(message.error().code);
    co_return reply;
  }
  auto answer = co_await ask_raft(ctx.services, std::move(*message));
  auto* fetched = answer ? std::get_if<raft::fetch_response>(&*answer) : nullptr;
  if (!fetched) {
    reply.body.error_code = to_wire(error_code::unknown_server_error);
    co_return reply;
  }
  auto encoded = raft::to_protocol(*fetched, ctx.services.clock_ms ? ctx.services.clock_ms() : 0);
  if (!encoded.ok()) {
    reply.body.error_code = to_wire(encoded.error().code);
    co_return reply;
  }
  // The body's records view points into the record bytes; moving the vector into shared ownership keeps its
  // buffer where it is.
  reply.owned_records = std::make_shared<const std::vector<uint8_t>>(std::move(encoded->records));
  reply.body = std::move(encoded->message);
  co_return reply;
}

}  // namespace

asio::awaitable<std::optional<fetch_handler::response>> fetch_handler::handle_async(request_context& ctx,
                                                                                    request req,
                                                                                    int16_t version) {
  const auto& services = ctx.services;
  // On a broker listener __cluster_metadata is not a topic (Kafka's brokers answer UNKNOWN_TOPIC_ID).
  if (is_raft_fetch(req, version) && is_controller_listener(services, ctx.connection.listener_name)) {
    ctx.replica_fetch = true;
    co_return co_await raft_fetch(ctx, req, version);
  }
  const auto deadline = steady_clock::now() + std::chrono::milliseconds(std::max(req.max_wait_ms, 0));
  const auto image = services.metadata->current();

  fetch_params params;
  params.version = version;
  // KIP-903 moved the replica id into ReplicaState (v15).
  params.replica_id = version >= 15 ? req.replica_state.replica_id : req.replica_id;
  params.isolation = req.isolation_level == 1 ? replication::isolation_level::read_committed
                                              : replication::isolation_level::read_uncommitted;
  params.max_wait_ms = req.max_wait_ms;
  params.min_bytes = req.min_bytes;
  params.max_bytes = req.max_bytes;
  // A consumer under a consumer_byte_rate quota (Kafka's KafkaApis.handleFetchRequest): at most what the
  // quota window allows at once, since a larger answer is throttled for certain.
  const bool quota_applies = params.replica_id < 0;
  ctx.replica_fetch = params.replica_id >= 0;
  if (quota_applies) {
    if (auto most = client_quota_max_in_window(ctx, client_quota_type::fetch)) {
      params.max_bytes = static_cast<int32_t>(std::min<double>(*most, params.max_bytes));
      params.min_bytes = std::min(params.min_bytes, params.max_bytes);
    }
  }

  // Without the node's caches (unit tests of other handlers) every fetch is sessionless.
  auto session_request = make_fetch_session_request(req, version);
  std::optional<fetch_session_cache> own_cache;
  fetch_session_cache* cache =
      services.fetch_sessions ? &services.fetch_sessions->cache_for(session_request.metadata) : nullptr;
  if (!cache) {
    fetch_session_cache_config sessionless;
    sessionless.max_slots = 0;
    own_cache.emplace(sessionless);
    cache = &*own_cache;
  }
  auto resolve = [&image](const uuid& id) -> std::optional<std::string> {
    const auto* t = image->find_topic(id);
    if (!t) return std::nullopt;
    return t->name;
  };
  fetch_context context = cache->new_context(std::move(session_request), now_ms(services), resolve);

  std::vector<fetch_partition_result> results;
  std::vector<read_work> work;
  results.reserve(context.partitions().size());
  // KafkaApis.handleFetchRequest: a follower needs CLUSTER_ACTION on the cluster (every partition is
  // TOPIC_AUTHORIZATION_FAILED otherwise), a consumer READ on each topic.
  const bool follower_allowed =
      params.replica_id < 0 || authorized_cluster(ctx, acl_operation::cluster_action);
  std::map<std::string, bool, std::less<>> topic_allowed;
  auto may_read = [&](const std::string& topic) {
    if (params.replica_id >= 0) return follower_allowed;
    auto [it, added] = topic_allowed.try_emplace(topic, false);
    if (added) it->second = authorized(ctx, acl_operation::read, acl_resource_type::topic, topic);
    return it->second;
  };
  for (const auto& fp : context.partitions()) {
    fetch_partition_result r;
    r.key = fp.key;
    if (version >= fetch_topic_ids_min_version && fp.key.topic.empty()) {
      set_error(r.data, error_code::unknown_topic_id);
    } else if (!may_read(fp.key.topic)) {
      set_error(r.data, error_code::topic_authorization_failed);
    } else if (!find_partition(*image, fp.key.topic, fp.key.partition)) {
      set_error(r.data, error_code::unknown_topic_or_partition);
    } else {
      work.push_back({results.size(), fp.key.topic, fp.key.partition, fp.params});
    }
    results.push_back(std::move(r));
  }

  fetch_reply reply;
  // read_on_shards shares the response's byte budget and the wait (for any partition) over every shard the
  // partitions are on, as Kafka does, reading the shards at once.
  std::vector<read_answer> answers;
  auto groups = group_by_shard(services, std::move(work));
  if (!groups.empty()) {
    answers = co_await read_on_shards(ctx, services, std::move(groups), results.size(), params, deadline);
  }
  for (auto& a : answers) {
    auto& d = results[a.result].data;
    if (a.error != error_code::none) {
      set_error(d, a.error);
      continue;
    }
    d.error_code = 0;
    d.high_watermark = a.high_watermark;
    d.last_stable_offset = a.last_stable_offset;
    d.log_start_offset = a.log_start_offset;
    // Kafka sends null unless the consumer reads committed data; then each aborted transaction overlapping
    // the records as {producer id, first offset}, so that the consumer drops its batches up to its marker.
    d.aborted_transactions = std::nullopt;
    if (params.isolation == replication::isolation_level::read_committed && params.replica_id < 0) {
      auto& list = d.aborted_transactions.emplace();
      if (a.aborted_transactions) {
        list.reserve(a.aborted_transactions->size());
        for (const auto& t : *a.aborted_transactions) list.push_back({t.producer_id, t.first_offset});
      }
    }
    if (a.diverging) d.diverging_epoch = {a.diverging->epoch, a.diverging->end_offset};
    d.records = proto::records_view::of({});
    if (a.data && a.data->file && a.data->size > 0) {
      // Zero copy: the range of the segment file, kept open by the reply until sent.
      const auto size = static_cast<uint32_t>(a.data->size);
      d.records = proto::records_view::external(static_cast<int32_t>(reply.files.size()), size);
      reply.files.push_back({a.data->file->fd(), a.data->position, size, a.data->file});
      results[a.result].records_size = a.data->size;
    }
  }

  // Client quotas: the answer's size is recorded before the fetch session learns of it; a throttled consumer
  // gets an empty answer (the bytes taken back, the session untouched) carrying the throttle time, and the
  // connection is muted for it (KafkaApis: fetchContext.getThrottledResponse).
  if (quota_applies && services.quotas && !services.metadata->current()->client_quotas.empty()) {
    const size_t size = build_fetch_response({error_code::none, 0}, results).encoded_size(version);
    const auto charge = charge_client_quota(ctx, client_quota_type::fetch, static_cast<double>(size));
    if (charge.throttle_ms > 0) {
      services.quotas->undo(charge);
      mute_for_quota(ctx, charge.throttle_ms);
      fetch_reply throttled;
      throttled.body = build_fetch_response(context.throttled_response(), {}, charge.throttle_ms);
      co_return throttled;
    }
  }

  // The leader's replication throttle counts what its throttled replicas send, in sync or not (KafkaApis
  // records the size of the throttled partitions of every follower fetch).
  if (params.replica_id >= 0 && services.leader_replication_quota) {
    int64_t throttled_bytes = 0;
    for (const auto& a : answers) {
      if (a.leader_throttled) throttled_bytes += a.bytes();
    }
    services.leader_replication_quota->record(throttled_bytes, now_ms(services));
  }
  count_fetch_traffic(ctx, params.replica_id >= 0, results);
  const auto header = context.update_and_generate_response(results, now_ms(services));
  reply.body = build_fetch_response(header, std::move(results));

  // KIP-951 (v16+): where the leader is, for partitions this node no longer leads.
  if (version >= 16) {
    std::map<int32_t, bool> listed;
    for (auto& topic : reply.body.responses) {
      for (auto& d : topic.partitions) {
        if (d.error_code != to_wire(error_code::not_leader_or_follower) &&
            d.error_code != to_wire(error_code::fenced_leader_epoch)) {
          continue;
        }
        auto leader =
            find_current_leader(*image, topic.topic, d.partition_index, ctx.connection.listener_name);
        d.current_leader = {leader.leader_id, leader.leader_epoch};
        if (leader.endpoint && !listed[leader.leader_id]) {
          listed[leader.leader_id] = true;
          reply.body.node_endpoints.push_back({leader.leader_id, leader.endpoint->host,
                                               static_cast<int32_t>(leader.endpoint->port), leader.rack});
        }
      }
    }
  }
  co_return reply;
}

}  // namespace mala::broker::handlers
