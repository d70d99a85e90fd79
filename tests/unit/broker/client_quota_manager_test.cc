// Client quotas on the broker: Kafka's Rate sampling (SampledStat windows, the window size the rate divides
// by), QuotaUtils.throttleTime, KIP-55 precedence of the DefaultQuotaCallback (which quota and which quota
// group a connection gets), sensors shared by the connections of one group, the undo of a throttled fetch,
// and DescribeClientQuotas' filters (ClientQuotasImage.describe).
#include "mala/broker/client_quota_manager.h"

#include <gtest/gtest.h>

#include "handlers/client_quotas.h"

namespace mala::broker {
namespace {

constexpr quota_window kafka_window{11, 1};

TEST(rate_stat, counts_at_least_samples_minus_one_full_windows) {
  rate_stat rate;
  rate.record(kafka_window, 1000, 0);
  // One sample: 0 ms elapsed, counted as 10 full windows.
  EXPECT_EQ(rate.window_size_ms(kafka_window, 0), 10000);
  EXPECT_DOUBLE_EQ(rate.measure(kafka_window, 0), 100.0);
  // 5.5 s elapsed: 5 full windows, 5 more added.
  EXPECT_EQ(rate.window_size_ms(kafka_window, 5500), 10500);
  rate.record(kafka_window, 1000, 1000);  // a new sample: the first one is complete
  EXPECT_DOUBLE_EQ(rate.measure(kafka_window, 1000), 200.0);
  // Samples with no event for samples * window are reset.
  EXPECT_DOUBLE_EQ(rate.measure(kafka_window, 12000), 0.0);
}

TEST(rate_stat, a_steady_rate_measures_as_itself_over_the_whole_window) {
  rate_stat rate;
  // 500 bytes every 100 ms: 5000 B/s, for 30 s.
  int64_t t = 0;
  for (; t < 30000; t += 100) rate.record(kafka_window, 500, t);
  const double measured = rate.measure(kafka_window, t);
  EXPECT_NEAR(measured, 5000.0, 5000.0 * 0.1);
  // The window spans the 11 samples kept (about 11 s, the oldest overlapping the start).
  const int64_t w = rate.window_size_ms(kafka_window, t);
  EXPECT_GE(w, 10000);
  EXPECT_LE(w, 12000);
}

TEST(quota_throttle, throttle_time_brings_the_rate_back_to_the_bound) {
  // O * W / (W + X) = T.
  EXPECT_EQ(throttle_time_ms(200, 100, 10000), 10000);
  EXPECT_EQ(throttle_time_ms(150, 100, 10000), 5000);
  EXPECT_EQ(throttle_time_ms(100.5, 100, 10000), 50);
  const double o = 1234, t = 1000;
  const int64_t w = 10500, x = throttle_time_ms(o, t, w);
  EXPECT_NEAR(o * static_cast<double>(w) / static_cast<double>(w + x), t, 1.0);
}

metadata::client_quota_map quota_map(
    std::vector<std::tuple<std::optional<std::optional<std::string>>,
                           std::optional<std::optional<std::string>>, double>>
        entries,
    const std::string& key = "producer_byte_rate") {
  metadata::client_quota_map out;
  for (auto& [user, client, value] : entries) {
    metadata::client_quota_entity entity;
    if (user) entity["user"] = *user;
    if (client) entity["client-id"] = *client;
    out[entity][key] = value;
  }
  return out;
}

const std::optional<std::string> default_entity = std::nullopt;
using named = std::optional<std::string>;

TEST(quota_table, default_client_id_quota_gives_each_client_id_its_own_group) {
  quota_table table(quota_map({{std::nullopt, default_entity, 100}}), "producer_byte_rate");
  auto a = table.resolve("ANONYMOUS", "app");
  EXPECT_EQ(a.tags, (quota_tags{"", "app"}));
  EXPECT_EQ(a.bound, 100);
  auto b = table.resolve("ANONYMOUS", "other");
  EXPECT_EQ(b.tags, (quota_tags{"", "other"}));
  EXPECT_EQ(b.bound, 100);
  // Another key has no quota.
  quota_table consumer(quota_map({{std::nullopt, default_entity, 100}}), "consumer_byte_rate");
  EXPECT_TRUE(consumer.empty());
}

TEST(quota_table, kip55_precedence) {
  // user+client-id > user+default client > user > default user+client-id > default user+default client >
  // default user > client-id > default client-id.
  quota_table table(quota_map({{named("alice"), named("app"), 1},
                               {named("alice"), default_entity, 2},
                               {named("alice"), std::nullopt, 3},
                               {default_entity, named("app"), 4},
                               {default_entity, default_entity, 5},
                               {default_entity, std::nullopt, 6},
                               {std::nullopt, named("app"), 7},
                               {std::nullopt, default_entity, 8}}),
                    "producer_byte_rate");
  EXPECT_EQ(table.resolve("alice", "app").bound, 1);
  EXPECT_EQ(table.resolve("alice", "other").bound, 2);
  EXPECT_EQ(table.resolve("bob", "app").bound, 4);
  EXPECT_EQ(table.resolve("bob", "other").bound, 5);

  // The user default outranks a client-id quota.
  quota_table user_default(quota_map({{default_entity, std::nullopt, 200}, {std::nullopt, named("app"), 50}}),
                           "producer_byte_rate");
  auto r = user_default.resolve("ANONYMOUS", "app");
  EXPECT_EQ(r.tags, (quota_tags{"ANONYMOUS", ""}));
  EXPECT_EQ(r.bound, 200);

  // A user quota groups all the user's client ids; a default-user + client-id quota each (user, client).
  quota_table mixed(quota_map({{named("alice"), std::nullopt, 300}, {default_entity, named("app"), 40}}),
                    "producer_byte_rate");
  auto alice = mixed.resolve("alice", "app");
  EXPECT_EQ(alice.tags, (quota_tags{"alice", ""}));
  EXPECT_EQ(alice.bound, 300);
  auto bob = mixed.resolve("bob", "app");
  EXPECT_EQ(bob.tags, (quota_tags{"bob", "app"}));
  EXPECT_EQ(bob.bound, 40);
  // Nothing matches: no quota.
  EXPECT_FALSE(mixed.resolve("bob", "other").bound);

  // ip quotas are connection quotas, not client quotas.
  metadata::client_quota_map ip;
  ip[{{"ip", std::nullopt}}]["producer_byte_rate"] = 5;
  EXPECT_TRUE(quota_table(ip, "producer_byte_rate").empty());
}

metadata::client_quotas_image image_of(metadata::client_quota_map map) {
  return {std::make_shared<const metadata::client_quota_map>(std::move(map))};
}

TEST(client_quota_manager, a_user_quota_is_shared_by_the_users_client_ids) {
  client_quota_manager manager(kafka_window, 1);
  const auto quotas = image_of(quota_map({{named("alice"), std::nullopt, 150}}));
  auto first = manager.record(quotas, client_quota_type::produce, "alice", "c1", 1000, 0);
  EXPECT_EQ(first.throttle_ms, 0);  // 100 B/s
  auto second = manager.record(quotas, client_quota_type::produce, "alice", "c2", 1000, 0);
  // 200 B/s over a 10 s window against 150: (200 - 150) / 150 * 10000.
  EXPECT_EQ(second.throttle_ms, 3333);
  EXPECT_EQ(manager.sensor_count(), 1u);
  // A fetch-style undo takes the bytes back.
  manager.undo(second);
  EXPECT_EQ(manager.record(quotas, client_quota_type::produce, "alice", "c1", 0, 0).throttle_ms, 0);
  // Another user has no quota: nothing recorded.
  auto other = manager.record(quotas, client_quota_type::produce, "bob", "c1", 1e9, 0);
  EXPECT_EQ(other.throttle_ms, 0);
  EXPECT_FALSE(other.sensor);
  // The consumer side has no quota.
  EXPECT_FALSE(manager.record(quotas, client_quota_type::fetch, "alice", "c1", 1e9, 0).sensor);
  // No quotas at all: nothing.
  EXPECT_FALSE(manager.record({}, client_quota_type::produce, "alice", "c1", 1e9, 0).sensor);
}

TEST(client_quota_manager, a_changed_quota_applies_to_the_existing_rate) {
  client_quota_manager manager(kafka_window, 1);
  auto loose = image_of(quota_map({{std::nullopt, default_entity, 1000}}));
  EXPECT_EQ(manager.record(loose, client_quota_type::produce, "u", "app", 2000, 0).throttle_ms, 0);
  auto tight = image_of(quota_map({{std::nullopt, default_entity, 100}}));
  // 2000 + 1000 bytes over 10 s = 300 B/s against 100.
  EXPECT_EQ(manager.record(tight, client_quota_type::produce, "u", "app", 1000, 0).throttle_ms, 20000);
  EXPECT_EQ(manager.max_value_in_window(tight, client_quota_type::produce, "u", "app"), 100.0 * 10);
  EXPECT_FALSE(manager.max_value_in_window(tight, client_quota_type::fetch, "u", "app"));
}

TEST(client_quota_manager, a_producer_held_to_its_throttle_settles_at_the_quota) {
  // A client that sends 10x its quota but waits out every throttle (what the muted connection forces).
  client_quota_manager manager(kafka_window, 1);
  const double bound = 100000;
  auto quotas = image_of(quota_map({{std::nullopt, default_entity, bound}}));
  int64_t t = 0;
  double sent_after_warmup = 0;
  const int64_t warmup = 20000, end = 80000;
  while (t < end) {
    const double bytes = 100000;  // 1 s worth of quota in each request
    auto c = manager.record(quotas, client_quota_type::produce, "u", "app", bytes, t);
    if (t >= warmup) sent_after_warmup += bytes;
    t += 100 + c.throttle_ms;  // the client would send every 100 ms (10x the quota)
  }
  const double rate = sent_after_warmup / (static_cast<double>(end - warmup) / 1000.0);
  EXPECT_NEAR(rate, bound, bound * 0.2);
}

TEST(client_quota_manager, request_percentage_throttles_at_most_one_window_and_is_its_own_quota) {
  // request_percentage 10 for the client id: 10 % of one thread, 100 ms of thread time per second.
  client_quota_manager manager(kafka_window, 1);
  metadata::client_quota_map map;
  map[{{"client-id", "spammer"}}]["request_percentage"] = 10;
  map[{{"client-id", "spammer"}}]["producer_byte_rate"] = 1e12;
  const auto quotas = image_of(std::move(map));
  // 0.5 s of thread time at once (50 percentage-seconds) is 50 / 10 s = 5 % of the window's rate: within.
  EXPECT_EQ(manager.record(quotas, client_quota_type::request, "ANONYMOUS", "spammer", 50, 0).throttle_ms, 0);
  // Another 2 s of thread time: (250 / 10 s = 25 %) - 10 over 10 would be 15 s; capped at one window (1 s).
  auto over = manager.record(quotas, client_quota_type::request, "ANONYMOUS", "spammer", 200, 0);
  EXPECT_EQ(over.throttle_ms, 1000);
  // The byte-rate quota of the same client has a sensor of its own: the request time does not count there.
  EXPECT_EQ(manager.record(quotas, client_quota_type::produce, "ANONYMOUS", "spammer", 100, 0).throttle_ms,
            0);
  // Other clients have no request quota.
  EXPECT_FALSE(manager.record(quotas, client_quota_type::request, "ANONYMOUS", "other", 1e6, 0).sensor);
  EXPECT_STREQ(quota_key(client_quota_type::request), "request_percentage");
}

TEST(token_bucket, refills_at_the_bound_up_to_the_burst) {
  token_bucket bucket;
  // 2 tokens/s, burst 11 * 1 s * 2 = 22; a first measure finds the bucket full.
  EXPECT_DOUBLE_EQ(bucket.measure(2, 22, 100000), 22);
  bucket.record(2, 22, 30, 100000);
  EXPECT_DOUBLE_EQ(bucket.measure(2, 22, 100000), -8);
  EXPECT_DOUBLE_EQ(bucket.measure(2, 22, 102000), -4);
  EXPECT_DOUBLE_EQ(bucket.measure(2, 22, 200000), 22);
}

TEST(controller_mutation_quota, strict_refuses_once_the_tokens_are_spent_permissive_throttles) {
  client_quota_manager manager(kafka_window, 1, kafka_window);
  auto quotas = image_of(quota_map({{default_entity, std::nullopt, 2}}, "controller_mutation_rate"));
  const int64_t t0 = client_quota_manager::steady_now_ms();
  auto strict = manager.mutation_quota(quotas, "ANONYMOUS", "admin", true);
  ASSERT_TRUE(strict.bounded());
  EXPECT_TRUE(strict.record(30, t0));  // 22 tokens: taken, down to -8
  EXPECT_FALSE(strict.record(1, t0));  // below zero: refused, 4 s to get back to zero
  EXPECT_EQ(strict.throttle_time_ms(t0), 4000);
  EXPECT_EQ(strict.throttle_time_ms(t0 + 1500), 2500);
  // The same user's next request shares the bucket.
  auto next = manager.mutation_quota(quotas, "ANONYMOUS", "other-client", false);
  EXPECT_TRUE(next.record(2, t0 + 1000));  // permissive: taken, -8 + 2 - 2 = -8 tokens
  EXPECT_EQ(next.throttle_time_ms(t0 + 1000), 4000);
  // Without a quota: unbounded.
  auto none = manager.mutation_quota({}, "ANONYMOUS", "admin", true);
  EXPECT_FALSE(none.bounded());
  EXPECT_TRUE(none.record(1e9));
  EXPECT_EQ(none.throttle_time_ms(), 0);
}

TEST(describe_client_quotas, filters_as_kafka) {
  metadata::metadata_image image;
  metadata::client_quota_map map;
  map[{{"user", "alice"}}]["producer_byte_rate"] = 1;
  map[{{"user", std::nullopt}}]["producer_byte_rate"] = 2;
  map[{{"user", "alice"}, {"client-id", "app"}}]["consumer_byte_rate"] = 3;
  map[{{"client-id", "app"}}]["consumer_byte_rate"] = 4;
  image.client_quotas = image_of(map);
  using req_t = protocol::describe_client_quotas_request;
  auto describe = [&](std::vector<std::tuple<std::string, int8_t, std::optional<std::string>>> components,
                      bool strict) {
    req_t req;
    for (auto& [type, match_type, match] : components) req.components.push_back({type, match_type, match});
    req.strict = strict;
    return handlers::describe_client_quotas(image, req);
  };
  auto all = describe({}, false);
  ASSERT_TRUE(all.entries);
  EXPECT_EQ(all.entries->size(), 4u);
  // Exact user alice, not strict: alice and alice+app.
  EXPECT_EQ(describe({{"user", 0, "alice"}}, false).entries->size(), 2u);
  // Strict: only alice alone.
  auto strict = describe({{"user", 0, "alice"}}, true);
  ASSERT_EQ(strict.entries->size(), 1u);
  EXPECT_EQ((*strict.entries)[0].values[0].value, 1);
  // The default user.
  auto defaults = describe({{"user", 1, std::nullopt}}, true);
  ASSERT_EQ(defaults.entries->size(), 1u);
  EXPECT_FALSE((*defaults.entries)[0].entity[0].entity_name);
  // Any client id (specified), strict: client-id app only.
  EXPECT_EQ(describe({{"client-id", 2, std::nullopt}}, true).entries->size(), 1u);
  // Refusals.
  EXPECT_EQ(describe({{"user", 0, std::nullopt}}, false).error_code, to_wire(error_code::invalid_request));
  EXPECT_EQ(describe({{"user", 1, "x"}}, false).error_code, to_wire(error_code::invalid_request));
  EXPECT_EQ(describe({{"user", 2, std::nullopt}, {"user", 2, std::nullopt}}, false).error_code,
            to_wire(error_code::invalid_request));
  EXPECT_EQ(describe({{"group", 2, std::nullopt}}, false).error_code,
            to_wire(error_code::unsupported_version));
  EXPECT_EQ(describe({{"ip", 2, std::nullopt}, {"user", 2, std::nullopt}}, false).error_code,
            to_wire(error_code::invalid_request));
  EXPECT_FALSE(describe({{"user", 9, std::nullopt}}, false).entries);
}

}  // namespace
}  // namespace mala::broker
