// KIP-227 fetch sessions as Kafka's FetchManager / FetchSessionCache / FetchContext behave: full and
// incremental contexts, session errors, what incremental responses leave out, partition order, eviction,
// topic ids, and the response grouping.
#include "mala/broker/fetch_sessions.h"

#include <gtest/gtest.h>

#include <set>

#include <climits>
#include <map>
#include <string>
#include <vector>

namespace mala::broker {
namespace {

using protocol::fetch_request;

constexpr int64_t t0 = 1'000'000;

fetch_partition part(const std::string& topic, int32_t partition, int64_t offset = 0,
                     int32_t max_bytes = 1024) {
  fetch_partition p;
  p.key = {uuid{}, topic, partition};
  p.params.fetch_offset = offset;
  p.params.max_bytes = max_bytes;
  return p;
}

fetch_session_request request(int32_t session_id, int32_t epoch, std::vector<fetch_partition> partitions,
                              std::vector<fetch_partition_key> forgotten = {}, int16_t version = 12) {
  fetch_session_request r;
  r.version = version;
  r.metadata = {session_id, epoch};
  r.partitions = std::move(partitions);
  r.forgotten = std::move(forgotten);
  return r;
}

// A read result: `records` bytes of records, the given high watermark and log start offset.
fetch_partition_result result(const fetch_partition_key& key, int64_t high_watermark, int64_t log_start = 0,
                              int64_t records = 0, error_code error = error_code::none) {
  fetch_partition_result r;
  r.key = key;
  r.data.high_watermark = high_watermark;
  r.data.log_start_offset = log_start;
  r.data.error_code = to_wire(error);
  r.records_size = records;
  return r;
}

std::vector<fetch_partition_result> results_for(const fetch_context& ctx, std::map<std::string, int64_t> hw,
                                                std::map<std::string, int64_t> records = {}) {
  std::vector<fetch_partition_result> out;
  for (const auto& p : ctx.partitions()) {
    const std::string name = p.key.topic + "-" + std::to_string(p.key.partition);
    out.push_back(result(p.key, hw.count(name) ? hw[name] : 0, 0, records.count(name) ? records[name] : 0));
  }
  return out;
}

std::vector<std::string> names(const std::vector<fetch_partition_result>& results) {
  std::vector<std::string> out;
  for (const auto& r : results) out.push_back(r.key.topic + "-" + std::to_string(r.key.partition));
  return out;
}

std::vector<std::string> names(const std::vector<fetch_partition>& partitions) {
  std::vector<std::string> out;
  for (const auto& p : partitions) out.push_back(p.key.topic + "-" + std::to_string(p.key.partition));
  return out;
}

fetch_session_cache_config config(int32_t slots = 10) {
  fetch_session_cache_config c;
  c.max_slots = slots;
  c.session_id_seed = 42;
  return c;
}

// Opens a session over `partitions` (hw 0 each); returns its id.
int32_t open_session(fetch_session_cache& cache, std::vector<fetch_partition> partitions, int64_t now = t0,
                     bool follower = false) {
  auto req = request(invalid_fetch_session_id, initial_fetch_epoch, std::move(partitions));
  req.is_follower = follower;
  auto ctx = cache.new_context(std::move(req), now);
  EXPECT_EQ(ctx.kind(), fetch_context_kind::full);
  auto results = results_for(ctx, {});
  return ctx.update_and_generate_response(results, now).session_id;
}

TEST(fetch_sessions_test, epochs_follow_kafkas_fetch_metadata) {
  EXPECT_EQ(next_fetch_epoch(final_fetch_epoch), final_fetch_epoch);
  EXPECT_EQ(next_fetch_epoch(0), 1);
  EXPECT_EQ(next_fetch_epoch(41), 42);
  EXPECT_EQ(next_fetch_epoch(INT32_MAX), 1);
  EXPECT_TRUE((fetch_metadata{0, -1}).is_full());
  EXPECT_TRUE((fetch_metadata{7, 0}).is_full());
  EXPECT_FALSE((fetch_metadata{7, 3}).is_full());
}

TEST(fetch_sessions_test, full_fetch_creates_a_session_remembering_what_was_sent) {
  fetch_session_cache cache(config());
  auto ctx = cache.new_context(request(0, 0, {part("a", 0, 5), part("a", 1, 7), part("b", 0)}), t0);
  ASSERT_EQ(ctx.kind(), fetch_context_kind::full);
  EXPECT_EQ(names(ctx.partitions()), (std::vector<std::string>{"a-0", "a-1", "b-0"}));
  auto results = results_for(ctx, {{"a-0", 10}, {"a-1", 20}, {"b-0", 30}}, {{"a-0", 100}});
  auto header = ctx.update_and_generate_response(results, t0);
  EXPECT_EQ(header.error, error_code::none);
  EXPECT_NE(header.session_id, invalid_fetch_session_id);
  EXPECT_EQ(results.size(), 3u);  // a full response carries everything
  auto session = cache.find(header.session_id);
  ASSERT_TRUE(session);
  EXPECT_EQ(session->epoch, 1);
  EXPECT_FALSE(session->privileged);
  ASSERT_EQ(session->partitions.size(), 3u);
  EXPECT_EQ(session->partitions[0].params.fetch_offset, 5);
  EXPECT_EQ(session->partitions[1].response.high_watermark, 20);
  EXPECT_EQ(cache.size(), 1u);
  EXPECT_EQ(cache.total_partitions(), 3);
}

TEST(fetch_sessions_test, final_epoch_is_sessionless_and_closes_a_named_session) {
  fetch_session_cache cache(config());
  const int32_t id = open_session(cache, {part("a", 0)});
  ASSERT_NE(id, 0);
  auto ctx = cache.new_context(request(id, final_fetch_epoch, {part("a", 0)}), t0);
  EXPECT_EQ(ctx.kind(), fetch_context_kind::sessionless);
  auto results = results_for(ctx, {});
  EXPECT_EQ(ctx.update_and_generate_response(results, t0).session_id, invalid_fetch_session_id);
  EXPECT_FALSE(cache.find(id));
  EXPECT_EQ(cache.size(), 0u);
  EXPECT_EQ(cache.total_partitions(), 0);

  // A new full fetch naming an old session closes it too, and opens another.
  const int32_t first = open_session(cache, {part("a", 0)});
  auto reopened = cache.new_context(request(first, initial_fetch_epoch, {part("a", 0)}), t0);
  EXPECT_FALSE(cache.find(first));
  auto r = results_for(reopened, {});
  const int32_t second = reopened.update_and_generate_response(r, t0).session_id;
  EXPECT_NE(second, 0);
  EXPECT_NE(second, first);
  EXPECT_EQ(cache.size(), 1u);
}

TEST(fetch_sessions_test, legacy_requests_have_no_session) {
  fetch_request req;
  req.replica_id = -1;
  auto& topic = req.topics.emplace_back();
  topic.topic = "a";
  topic.partitions.push_back({});
  auto extracted = make_fetch_session_request(req, 6);  // v4-v6: no session fields, their defaults apply
  EXPECT_EQ(extracted.metadata.session_id, 0);
  EXPECT_EQ(extracted.metadata.epoch, final_fetch_epoch);
  EXPECT_FALSE(extracted.is_follower);
  fetch_session_cache cache(config());
  EXPECT_EQ(cache.new_context(extracted, t0).kind(), fetch_context_kind::sessionless);

  // KIP-903: from v15 the replica id is in ReplicaState.
  req.replica_id = -1;
  req.replica_state.replica_id = 3;
  EXPECT_TRUE(make_fetch_session_request(req, 15).is_follower);
  EXPECT_FALSE(make_fetch_session_request(req, 14).is_follower);
}

TEST(fetch_sessions_test, incremental_errors) {
  fetch_session_cache cache(config());
  const int32_t id = open_session(cache, {part("a", 0)});
  auto unknown = cache.new_context(request(id + 1, 1, {}), t0);
  EXPECT_EQ(unknown.kind(), fetch_context_kind::session_error);
  EXPECT_EQ(unknown.error(), error_code::fetch_session_id_not_found);
  EXPECT_TRUE(unknown.partitions().empty());

  auto wrong_epoch = cache.new_context(request(id, 2, {}), t0);
  EXPECT_EQ(wrong_epoch.error(), error_code::invalid_fetch_session_epoch);
  std::vector<fetch_partition_result> results = {result({uuid{}, "a", 0}, 1)};
  auto header = wrong_epoch.update_and_generate_response(results, t0);
  EXPECT_EQ(header.error, error_code::invalid_fetch_session_epoch);
  EXPECT_EQ(header.session_id, invalid_fetch_session_id);
  EXPECT_TRUE(results.empty());

  // A session opened without topic ids cannot continue with a v13+ request.
  auto ids = cache.new_context(request(id, 1, {}, {}, 13), t0);
  EXPECT_EQ(ids.error(), error_code::fetch_session_topic_id_error);
  // The errors did not consume the epoch.
  EXPECT_EQ(cache.new_context(request(id, 1, {}), t0).kind(), fetch_context_kind::incremental);
}

TEST(fetch_sessions_test, incremental_fetch_reads_the_session_and_sends_only_changes) {
  fetch_session_cache cache(config());
  auto full = cache.new_context(request(0, 0, {part("a", 0, 5), part("a", 1, 7), part("b", 0, 9)}), t0);
  auto full_results = results_for(full, {{"a-0", 10}, {"a-1", 20}, {"b-0", 30}});
  const int32_t id = full.update_and_generate_response(full_results, t0).session_id;

  // Epoch 1: a-1 moves its offset; nothing is new anywhere but b-0's high watermark.
  auto ctx = cache.new_context(request(id, 1, {part("a", 1, 8)}), t0 + 1);
  ASSERT_EQ(ctx.kind(), fetch_context_kind::incremental);
  EXPECT_EQ(names(ctx.partitions()), (std::vector<std::string>{"a-0", "a-1", "b-0"}));
  EXPECT_EQ(ctx.partitions()[1].params.fetch_offset, 8);
  EXPECT_EQ(ctx.partitions()[0].params.fetch_offset, 5);  // cached parameters for the others
  auto results = results_for(ctx, {{"a-0", 10}, {"a-1", 20}, {"b-0", 31}});
  auto header = ctx.update_and_generate_response(results, t0 + 1);
  EXPECT_EQ(header.error, error_code::none);
  EXPECT_EQ(header.session_id, id);
  EXPECT_EQ(names(results), (std::vector<std::string>{"b-0"}));

  // Epoch 2: records on a-0 (it then moves to the back of the session), an error on a-1.
  auto ctx2 = cache.new_context(request(id, 2, {}), t0 + 2);
  auto results2 = results_for(ctx2, {{"a-0", 10}, {"a-1", 20}, {"b-0", 31}}, {{"a-0", 64}});
  results2[1].data.error_code = to_wire(error_code::not_leader_or_follower);
  ctx2.update_and_generate_response(results2, t0 + 2);
  EXPECT_EQ(names(results2), (std::vector<std::string>{"a-0", "a-1"}));
  auto session = cache.find(id);
  ASSERT_TRUE(session);
  EXPECT_EQ(session->epoch, 3);
  EXPECT_EQ(session->partitions.back().key.topic + "-0", "a-0");

  // Epoch 3: the error cleared with the same high watermark as before; a-1 is sent again (its remembered high
  // watermark was reset by the error). a-0 is now read last.
  auto ctx3 = cache.new_context(request(id, 3, {}), t0 + 3);
  EXPECT_EQ(names(ctx3.partitions()), (std::vector<std::string>{"a-1", "b-0", "a-0"}));
  auto results3 = results_for(ctx3, {{"a-0", 10}, {"a-1", 20}, {"b-0", 31}});
  ctx3.update_and_generate_response(results3, t0 + 3);
  EXPECT_EQ(names(results3), (std::vector<std::string>{"a-1"}));

  // A log start offset change is sent too.
  auto ctx4 = cache.new_context(request(id, 4, {}), t0 + 4);
  auto results4 = results_for(ctx4, {{"a-0", 10}, {"a-1", 20}, {"b-0", 31}});
  results4[1].data.log_start_offset = 3;  // b-0
  ctx4.update_and_generate_response(results4, t0 + 4);
  EXPECT_EQ(names(results4), (std::vector<std::string>{"b-0"}));
}

TEST(fetch_sessions_test, forgotten_partitions_leave_and_an_empty_session_closes) {
  fetch_session_cache cache(config());
  const int32_t id = open_session(cache, {part("a", 0), part("a", 1)});
  auto ctx = cache.new_context(request(id, 1, {part("c", 0)}, {{uuid{}, "a", 0}}), t0);
  EXPECT_EQ(names(ctx.partitions()), (std::vector<std::string>{"a-1", "c-0"}));
  auto results = results_for(ctx, {});
  ctx.update_and_generate_response(results, t0);
  EXPECT_EQ(cache.total_partitions(), 2);

  // Forgetting everything: the session closes and this fetch is answered without one.
  auto last = cache.new_context(request(id, 2, {}, {{uuid{}, "a", 1}, {uuid{}, "c", 0}}), t0);
  EXPECT_EQ(last.kind(), fetch_context_kind::sessionless);
  EXPECT_TRUE(last.partitions().empty());
  EXPECT_FALSE(cache.find(id));
  EXPECT_EQ(cache.total_partitions(), 0);
}

TEST(fetch_sessions_test, a_duplicate_request_is_refused) {
  fetch_session_cache cache(config());
  const int32_t id = open_session(cache, {part("a", 0)});
  auto first = cache.new_context(request(id, 1, {}), t0);
  // The same epoch again (a retry racing the first): the session already expects epoch 2.
  auto again = cache.new_context(request(id, 1, {}), t0);
  EXPECT_EQ(again.error(), error_code::invalid_fetch_session_epoch);
  // A request of the next epoch runs before the first one answers: the first one is told it was a duplicate.
  auto next = cache.new_context(request(id, 2, {}), t0);
  ASSERT_EQ(next.kind(), fetch_context_kind::incremental);
  auto results = results_for(first, {{"a-0", 1}});
  auto header = first.update_and_generate_response(results, t0);
  EXPECT_EQ(header.error, error_code::invalid_fetch_session_epoch);
  EXPECT_EQ(header.session_id, id);
  EXPECT_TRUE(results.empty());
  EXPECT_EQ(first.throttled_response().error, error_code::invalid_fetch_session_epoch);
}

TEST(fetch_sessions_test, duplicate_partitions_keep_the_first_position_and_last_parameters) {
  fetch_session_cache cache(config());
  auto ctx = cache.new_context(request(0, 0, {part("a", 0, 1), part("b", 0, 2), part("a", 0, 3)}), t0);
  ASSERT_EQ(ctx.partitions().size(), 2u);
  EXPECT_EQ(names(ctx.partitions()), (std::vector<std::string>{"a-0", "b-0"}));
  EXPECT_EQ(ctx.partitions()[0].params.fetch_offset, 3);
}

TEST(fetch_sessions_test, no_session_for_zero_partitions_or_when_the_cache_is_off) {
  fetch_session_cache cache(config());
  EXPECT_EQ(open_session(cache, {}), invalid_fetch_session_id);
  fetch_session_cache off(config(0));
  EXPECT_EQ(open_session(off, {part("a", 0)}), invalid_fetch_session_id);
  EXPECT_EQ(off.size(), 0u);
}

TEST(fetch_sessions_test, eviction_follows_kafkas_rules) {
  auto c = config(1);
  c.eviction_ms = 1000;
  fetch_session_cache cache(c);
  const int32_t consumer = open_session(cache, {part("a", 0), part("a", 1)}, t0);
  ASSERT_NE(consumer, 0);
  // Full cache, the session is young and not worth less: no room for another consumer.
  EXPECT_EQ(open_session(cache, {part("b", 0), part("b", 1), part("b", 2)}, t0 + 10), 0);
  EXPECT_TRUE(cache.find(consumer));
  // A follower's session takes a consumer's slot at any age.
  const int32_t follower = open_session(cache, {part("f", 0)}, t0 + 20, /*follower=*/true);
  ASSERT_NE(follower, 0);
  EXPECT_FALSE(cache.find(consumer));
  EXPECT_EQ(cache.evictions(), 1u);
  // A young follower session is safe even from a bigger consumer session...
  EXPECT_EQ(open_session(cache, {part("b", 0), part("b", 1), part("b", 2)}, t0 + 30), 0);
  // ...but once unused for longer than eviction_ms it is stale and anyone may take its slot.
  EXPECT_NE(open_session(cache, {part("b", 0)}, t0 + 20 + 1001), 0);
  EXPECT_FALSE(cache.find(follower));
  EXPECT_EQ(cache.evictions(), 2u);
}

TEST(fetch_sessions_test, an_older_session_with_fewer_partitions_is_evicted) {
  auto c = config(1);
  c.eviction_ms = 1000;
  fetch_session_cache cache(c);
  const int32_t small = open_session(cache, {part("a", 0)}, t0);
  // Keep it in use so that it is not stale, but old enough to be evictable.
  auto use = cache.new_context(request(small, 1, {}), t0 + 1500);
  auto r = results_for(use, {});
  use.update_and_generate_response(r, t0 + 1500);
  EXPECT_EQ(open_session(cache, {part("b", 0), part("b", 1)}, t0 + 1600) != 0, true);
  EXPECT_FALSE(cache.find(small));
}

TEST(fetch_sessions_test, topic_ids_resolve_now_or_later) {
  fetch_session_cache cache(config());
  const uuid known = uuid::random();
  const uuid later = uuid::random();
  std::vector<std::pair<uuid, std::string>> image = {{known, "orders"}};
  auto resolve = [&](const uuid& id) -> std::optional<std::string> {
    for (const auto& [i, name] : image) {
      if (i == id) return name;
    }
    return std::nullopt;
  };
  fetch_partition a;
  a.key = {known, "", 0};
  fetch_partition b;
  b.key = {later, "", 0};
  auto ctx = cache.new_context(request(0, 0, {a, b}, {}, 13), t0, resolve);
  ASSERT_EQ(ctx.partitions().size(), 2u);
  EXPECT_EQ(ctx.partitions()[0].key.topic, "orders");
  EXPECT_EQ(ctx.partitions()[1].key.topic, "");  // the handler answers UNKNOWN_TOPIC_ID
  auto results = results_for(ctx, {});
  const int32_t id = ctx.update_and_generate_response(results, t0).session_id;
  ASSERT_NE(id, 0);
  EXPECT_TRUE(cache.find(id)->uses_topic_ids);

  image.emplace_back(later, "payments");
  auto next = cache.new_context(request(id, 1, {}, {}, 13), t0, resolve);
  ASSERT_EQ(next.kind(), fetch_context_kind::incremental);
  EXPECT_EQ(next.partitions()[1].key.topic, "payments");
  // Keys of one topic id match whether or not the name is known.
  EXPECT_TRUE((fetch_partition_key{later, "", 0}) == (fetch_partition_key{later, "payments", 0}));
  EXPECT_FALSE((fetch_partition_key{later, "", 0}) == (fetch_partition_key{later, "", 1}));
}

TEST(fetch_sessions_test, response_groups_consecutive_partitions_by_topic) {
  fetch_response_header header{error_code::none, 77};
  std::vector<fetch_partition_result> results = {result({uuid{}, "a", 0}, 1), result({uuid{}, "a", 1}, 2),
                                                 result({uuid{}, "b", 0}, 3), result({uuid{}, "a", 2}, 4)};
  auto resp = build_fetch_response(header, std::move(results), 5);
  EXPECT_EQ(resp.session_id, 77);
  EXPECT_EQ(resp.throttle_time_ms, 5);
  ASSERT_EQ(resp.responses.size(), 3u);
  EXPECT_EQ(resp.responses[0].topic, "a");
  ASSERT_EQ(resp.responses[0].partitions.size(), 2u);
  EXPECT_EQ(resp.responses[0].partitions[1].partition_index, 1);
  EXPECT_EQ(resp.responses[0].partitions[1].high_watermark, 2);
  EXPECT_EQ(resp.responses[2].topic, "a");
  EXPECT_EQ(resp.responses[2].partitions[0].partition_index, 2);
}

// One cache per shard (KAFKA-9401): the ids a shard's cache hands out name that cache, a request naming a
// session is routed to it, and the slots are shared out.
TEST(fetch_sessions_test, sharded_caches_route_by_session_id) {
  sharded_fetch_session_cache caches(config(/*slots=*/16), 4);
  std::set<int32_t> ids;
  for (int i = 0; i < 4; ++i) {
    // Off any shard thread a new session goes to the first cache.
    auto& cache = caches.cache_for(fetch_metadata{invalid_fetch_session_id, initial_fetch_epoch});
    const int32_t id = open_session(cache, {part("t", i)});
    ASSERT_NE(id, invalid_fetch_session_id);
    EXPECT_EQ(id % 4, 0);
    ids.insert(id);
    // An incremental request of that session finds it.
    EXPECT_TRUE(caches.cache_for(fetch_metadata{id, 1}).find(id));
  }
  EXPECT_EQ(ids.size(), 4u);
  EXPECT_EQ(caches.size(), 4u);
  // 16 slots over 4 caches: this cache is full (its young sessions are not evictable), the others are not.
  auto& first = caches.cache_for(fetch_metadata{invalid_fetch_session_id, initial_fetch_epoch});
  EXPECT_EQ(open_session(first, {part("t", 9)}), invalid_fetch_session_id);
  EXPECT_EQ(caches.size(), 4u);
}

}  // namespace
}  // namespace mala::broker
