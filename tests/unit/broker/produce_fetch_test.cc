// The data path end to end inside one node (shard_node_fixture.h): Produce, Fetch, ListOffsets and
// DeleteRecords frames through the broker_dispatcher, real replica_managers (one per shard) and a real
// log_manager. Every test runs with 1, 2 and 4 shards (replica_placement spreads the partitions over them;
// the requests come in on shard 0) and must give the same answers.
#include "shard_node_fixture.h"

namespace mala::broker {
namespace {

class produce_fetch_test : public shard_node_test {};

TEST_P(produce_fetch_test, produce_then_fetch_round_trip) {
  auto first = produce("orders", 0, batch(3));
  EXPECT_EQ(first.error_code, 0);
  EXPECT_EQ(first.base_offset, 0);
  EXPECT_EQ(first.log_append_time_ms, -1);
  EXPECT_EQ(first.log_start_offset, 0);
  auto second = produce("orders", 0, batch(2), 1);
  EXPECT_EQ(second.error_code, 0);
  EXPECT_EQ(second.base_offset, 3);

  for (int16_t version : {4, 11, 12, 17}) {
    auto f = fetch(fetch_req({{"orders", 0, 0}}), version);
    EXPECT_EQ(f.resp.error_code, 0);
    const auto& d = f.partition();
    EXPECT_EQ(d.error_code, 0) << "v" << version;
    EXPECT_EQ(d.high_watermark, 5);
    EXPECT_EQ(d.last_stable_offset, 5);
    if (version >= 5) {
      EXPECT_EQ(d.log_start_offset, 0);
    }
    EXPECT_EQ(batches_in(d.records), (std::vector<std::pair<int64_t, int32_t>>{{0, 3}, {3, 2}}));
  }
  // From the middle of a batch: the whole batch that holds the offset (the client skips what it has).
  auto mid = fetch(fetch_req({{"orders", 0, 4}}), 12);
  EXPECT_EQ(batches_in(mid.partition().records), (std::vector<std::pair<int64_t, int32_t>>{{3, 2}}));
  // At the end: nothing, but the offsets.
  auto end = fetch(fetch_req({{"orders", 0, 5}}), 12);
  EXPECT_EQ(end.partition().error_code, 0);
  EXPECT_TRUE(end.partition().records.bytes.empty());
  EXPECT_FALSE(end.partition().records.null);
  EXPECT_EQ(end.partition().high_watermark, 5);
  // Past the end, and by an unknown topic name or id.
  EXPECT_EQ(fetch(fetch_req({{"orders", 0, 6}}), 12).partition().error_code, 1);  // OFFSET_OUT_OF_RANGE
  EXPECT_EQ(fetch(fetch_req({{"nope", 0, 0}}), 12).partition().error_code, 3);  // UNKNOWN_TOPIC_OR_PARTITION
  auto by_id = fetch_req({{"nope", 0, 0}});
  by_id.topics[0].topic_id = uuid::random();
  auto unknown_id = fetch(by_id, 17);
  EXPECT_EQ(unknown_id.partition().error_code, 100);  // UNKNOWN_TOPIC_ID
  EXPECT_EQ(unknown_id.partition().high_watermark, -1);
}

// v12 is v11 on the wire; v13 names topics by id (KIP-516): a known id is written to its topic and answered
// by that id, an unknown one is UNKNOWN_TOPIC_ID, a known id with an unknown partition
// UNKNOWN_TOPIC_OR_PARTITION.
TEST_P(produce_fetch_test, produce_v12_and_v13_by_topic_id) {
  EXPECT_EQ(produce("orders", 0, batch(2), -1, 12).base_offset, 0);

  const auto records = batch(3);
  const auto other_records = batch(1);
  auto req = produce_req("", 0, records);
  req.topic_data[0].topic_id = topic_id("orders");
  auto& unknown = req.topic_data.emplace_back();
  unknown.topic_id = uuid::random();
  unknown.partition_data.push_back({0, records_view::of(other_records)});
  auto& no_partition = req.topic_data.emplace_back();
  no_partition.topic_id = topic_id("orders");
  no_partition.partition_data.push_back({99, records_view::of(other_records)});
  auto resp = decode<produce_response>(send(frame(0, 13, req)), 13);
  ASSERT_EQ(resp.responses.size(), 2u);  // the known id is listed once, with both of its partitions
  EXPECT_EQ(resp.responses[0].topic_id, topic_id("orders"));
  ASSERT_EQ(resp.responses[0].partition_responses.size(), 2u);
  EXPECT_EQ(resp.responses[0].partition_responses[0].error_code, 0);
  EXPECT_EQ(resp.responses[0].partition_responses[0].base_offset, 2);
  EXPECT_EQ(resp.responses[0].partition_responses[1].index, 99);
  EXPECT_EQ(resp.responses[0].partition_responses[1].error_code, 3);  // UNKNOWN_TOPIC_OR_PARTITION
  EXPECT_EQ(resp.responses[1].topic_id, req.topic_data[1].topic_id);
  ASSERT_EQ(resp.responses[1].partition_responses.size(), 1u);
  EXPECT_EQ(resp.responses[1].partition_responses[0].error_code, 100);  // UNKNOWN_TOPIC_ID
  EXPECT_EQ(resp.responses[1].partition_responses[0].base_offset, -1);

  auto f = fetch(fetch_req({{"orders", 0, 0}}), 17);
  EXPECT_EQ(batches_in(f.partition().records), (std::vector<std::pair<int64_t, int32_t>>{{0, 2}, {2, 3}}));
}

TEST_P(produce_fetch_test, acks_zero_gets_no_response) {
  auto result = send(frame(0, 9, produce_req("orders", 0, batch(2), 0)));
  EXPECT_EQ(result.what, net::dispatch_result::action::no_response);
  auto f = fetch(fetch_req({{"orders", 0, 0}}), 12);
  EXPECT_EQ(f.partition().high_watermark, 2);
}

// The dispatcher lends the connection's buffer to the handler: Produce stamps the leader's fields into the
// batch where it lies in the request, and appends those bytes without a copy.
TEST_P(produce_fetch_test, produce_stamps_the_batch_in_the_request_buffer) {
  ASSERT_EQ(produce("orders", 0, batch(3)).base_offset, 0);
  const auto records = batch(2);
  auto bytes = frame(0, 11, produce_req("orders", 0, records));
  const auto at = std::search(bytes.begin(), bytes.end(), records.begin(), records.end());
  ASSERT_NE(at, bytes.end());
  const auto offset = static_cast<size_t>(at - bytes.begin());
  net::dispatch_result result = asio::co_spawn(
                                    _pool->context(0),
                                    [&]() -> asio::awaitable<net::dispatch_result> {
                                      net::ordering_point order;
                                      co_return co_await _dispatcher->dispatch(connection, bytes, order);
                                    },
                                    asio::use_future)
                                    .get();
  auto resp = decode<produce_response>(result, 11);
  ASSERT_EQ(resp.responses.size(), 1u);
  EXPECT_EQ(resp.responses[0].partition_responses[0].base_offset, 3);
  auto stamped = parse_batch_header(std::span<const uint8_t>(bytes).subspan(offset));
  ASSERT_TRUE(stamped);
  EXPECT_EQ(stamped->base_offset, 3);
  EXPECT_EQ(stamped->partition_leader_epoch, 3);
  // The log holds exactly those bytes.
  auto f = fetch(fetch_req({{"orders", 0, 3}}), 12);
  const auto& fetched = f.partition().records.bytes;
  EXPECT_EQ(std::vector<uint8_t>(fetched.begin(), fetched.end()),
            std::vector<uint8_t>(bytes.begin() + static_cast<std::ptrdiff_t>(offset),
                                 bytes.begin() + static_cast<std::ptrdiff_t>(offset + records.size())));
}

TEST(request_context, writable_only_inside_the_request) {
  std::vector<uint8_t> buffer(64, 7);
  std::span<uint8_t> request(buffer.data(), 32);
  protocol::request_header header;
  net::connection_info connection;
  broker_services services;
  request_context ctx{header, connection, services, request};
  const std::span<const uint8_t> all(buffer);
  auto part = ctx.writable(all.subspan(4, 8));
  ASSERT_EQ(part.size(), 8u);
  EXPECT_EQ(part.data(), buffer.data() + 4);
  EXPECT_EQ(ctx.writable(all.first(32)).size(), 32u);
  EXPECT_TRUE(ctx.writable({}).empty());
  EXPECT_TRUE(ctx.writable(all.subspan(28, 8)).empty());  // runs past the request's end
  EXPECT_TRUE(ctx.writable(all.subspan(40, 8)).empty());  // after it
}

TEST_P(produce_fetch_test, produce_errors) {
  EXPECT_EQ(produce("orders", 0, batch(1), 2).error_code, 21);  // INVALID_REQUIRED_ACKS
  EXPECT_EQ(produce("orders", 0, batch(1), 2).base_offset, -1);
  EXPECT_EQ(produce("nope", 0, batch(1)).error_code, 3);  // UNKNOWN_TOPIC_OR_PARTITION
  EXPECT_EQ(produce("orders", 7, batch(1)).error_code, 3);
  EXPECT_EQ(produce("__consumer_offsets", 0, batch(1)).error_code, 17);  // INVALID_TOPIC_EXCEPTION

  // Two batches, no batch, a corrupt CRC, a control batch from a client, a batch over max.message.bytes.
  auto two = batch(1);
  auto more = batch(1);
  two.insert(two.end(), more.begin(), more.end());
  EXPECT_EQ(produce("orders", 0, two).error_code, 87);  // INVALID_RECORD
  EXPECT_EQ(produce("orders", 0, {}).error_code, 87);
  auto corrupt = batch(2);
  corrupt.back() ^= 0xff;
  EXPECT_EQ(produce("orders", 0, corrupt).error_code, 2);  // CORRUPT_MESSAGE
  record_batch_builder control;
  control.control().producer(5, 0, -1).add(start_ms, bytes_of("k"), bytes_of("v"));
  EXPECT_EQ(produce("orders", 0, control.build()).error_code, 87);
  EXPECT_EQ(produce("small", 0, batch(20)).error_code, 10);  // MESSAGE_TOO_LARGE
  // Transactional batches need a transactional id.
  record_batch_builder txn;
  txn.transactional().producer(6, 0, 0).add(start_ms, std::nullopt, bytes_of("v"));
  EXPECT_EQ(produce("orders", 0, txn.build()).error_code, 53);  // TRANSACTIONAL_ID_AUTHORIZATION_FAILED

  // A record an hour and a minute ahead of the broker's clock: INVALID_TIMESTAMP with the record at fault.
  auto future = produce("orders", 0, batch(2, start_ms + 3'660'000 - 1));
  EXPECT_EQ(future.error_code, 32);  // INVALID_TIMESTAMP
  EXPECT_EQ(future.base_offset, -1);
  ASSERT_EQ(future.record_errors.size(), 2u);
  EXPECT_EQ(future.record_errors[1].batch_index, 1);
  EXPECT_EQ(future.error_message, std::optional<std::string>("One or more records have been rejected due to "
                                                             "invalid timestamp"));

  // Not the leader here: KIP-951 tells where it is (v10+).
  auto resp = decode<produce_response>(send(frame(0, 11, produce_req("elsewhere", 0, batch(1)))), 11);
  const auto& p = resp.responses.at(0).partition_responses.at(0);
  EXPECT_EQ(p.error_code, 6);  // NOT_LEADER_OR_FOLLOWER
  EXPECT_EQ(p.current_leader.leader_id, 2);
  EXPECT_EQ(p.current_leader.leader_epoch, 3);
  ASSERT_EQ(resp.node_endpoints.size(), 1u);
  EXPECT_EQ(resp.node_endpoints[0].node_id, 2);
  EXPECT_EQ(resp.node_endpoints[0].host, "broker-2");
  EXPECT_EQ(resp.node_endpoints[0].port, 9092);

  // Nothing of this was written.
  EXPECT_EQ(fetch(fetch_req({{"orders", 0, 0}}), 12).partition().high_watermark, 0);
}

TEST_P(produce_fetch_test, produce_v0_to_v2_are_refused_but_v0_is_advertised) {
  const auto* e = table.find(0);
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->advertised_min_version, 0);
  EXPECT_EQ(e->min_version, 3);
  auto bytes = frame(0, 3, produce_req("orders", 0, batch(1)));
  bytes[3] = 2;  // the same body claimed as v2
  EXPECT_EQ(send(bytes).what, net::dispatch_result::action::close);
}

TEST_P(produce_fetch_test, acks_all_waits_for_the_isr_and_times_out) {
  // A single in-sync replica: committed at once.
  EXPECT_EQ(produce("orders", 0, batch(1), -1).error_code, 0);
  // An in-sync follower that never fetches: the produce waits for timeout_ms, then REQUEST_TIMED_OUT, with
  // the offsets it was written at.
  const auto started = steady_clock::now();
  auto resp =
      decode<produce_response>(send(frame(0, 11, produce_req("replicated", 0, batch(2), -1, 300))), 11);
  const auto waited = steady_clock::now() - started;
  const auto& p = resp.responses.at(0).partition_responses.at(0);
  EXPECT_EQ(p.error_code, 7);  // REQUEST_TIMED_OUT
  EXPECT_EQ(p.base_offset, 0);
  EXPECT_GE(waited, milliseconds(290));
  EXPECT_LT(waited, milliseconds(5000));
  // acks=1 does not wait; the records stay below the high watermark for consumers.
  EXPECT_EQ(produce("replicated", 0, batch(1), 1).base_offset, 2);
  auto f = fetch(fetch_req({{"replicated", 0, 0}}), 12);
  EXPECT_EQ(f.partition().high_watermark, 0);
  EXPECT_TRUE(f.partition().records.bytes.empty());
}

// Produce and Fetch let the connection start its next request once their appends or first read are done,
// before they wait (acks=all replication, min_bytes); requests that do not wait leave the release to the
// connection.
TEST_P(produce_fetch_test, data_path_handlers_release_the_ordering_point_before_waiting) {
  // acks=all to a partition whose in-sync follower never fetches: released once appended, answered later.
  auto parked_produce = start_ordered(frame(0, 11, produce_req("replicated", 0, batch(2), -1, 2000)));
  ASSERT_EQ(parked_produce.released.wait_for(milliseconds(1500)), std::future_status::ready);
  EXPECT_EQ(parked_produce.result.wait_for(milliseconds(0)), std::future_status::timeout);
  // The append came first: the next produce to the partition lands after it.
  EXPECT_EQ(produce("replicated", 0, batch(1), 1).base_offset, 2);
  auto timed_out = decode<produce_response>(parked_produce.result.get(), 11);
  EXPECT_EQ(timed_out.responses.at(0).partition_responses.at(0).error_code, 7);  // REQUEST_TIMED_OUT

  // A Fetch with nothing to read: released after its first read, parked until a produce wakes it.
  auto parked_fetch = start_ordered(frame(1, 12, fetch_req({{"orders", 0, 0}}, /*max_wait_ms=*/10'000, 1)));
  ASSERT_EQ(parked_fetch.released.wait_for(milliseconds(5000)), std::future_status::ready);
  EXPECT_EQ(parked_fetch.result.wait_for(milliseconds(0)), std::future_status::timeout);
  EXPECT_EQ(produce("orders", 0, batch(1)).base_offset, 0);
  auto woken = decode<fetch_response>(parked_fetch.result.get(), 12);
  EXPECT_EQ(woken.responses.at(0).partitions.at(0).high_watermark, 1);

  // Requests answered at once (acks=1, a Fetch with data) do not release early.
  auto quick_produce = start_ordered(frame(0, 11, produce_req("orders", 0, batch(1), 1)));
  EXPECT_EQ(decode<produce_response>(quick_produce.result.get(), 11)
                .responses.at(0)
                .partition_responses.at(0)
                .base_offset,
            1);
  EXPECT_EQ(quick_produce.released.wait_for(milliseconds(0)), std::future_status::timeout);
  auto quick_fetch = start_ordered(frame(1, 12, fetch_req({{"orders", 0, 0}}, /*max_wait_ms=*/10'000, 1)));
  EXPECT_EQ(
      decode<fetch_response>(quick_fetch.result.get(), 12).responses.at(0).partitions.at(0).high_watermark,
      2);
  EXPECT_EQ(quick_fetch.released.wait_for(milliseconds(0)), std::future_status::timeout);
}

TEST_P(produce_fetch_test, long_poll_is_woken_by_a_produce) {
  produce("orders", 0, batch(1));
  net::connection_info consumer;
  consumer.listener_name = "PLAINTEXT";
  const auto started = steady_clock::now();
  auto pending = start(frame(1, 12, fetch_req({{"orders", 0, 1}}, /*max_wait_ms=*/10'000, 1)), &consumer);
  EXPECT_EQ(pending.wait_for(milliseconds(200)), std::future_status::timeout);
  EXPECT_EQ(produce("orders", 0, batch(2)).base_offset, 1);
  ASSERT_EQ(pending.wait_for(milliseconds(5000)), std::future_status::ready);
  EXPECT_LT(steady_clock::now() - started, milliseconds(5000));
  auto raw = pending.get();
  auto resp = decode<fetch_response>(raw, 12);
  const auto& d = resp.responses.at(0).partitions.at(0);
  EXPECT_EQ(d.error_code, 0);
  EXPECT_EQ(d.high_watermark, 3);
  EXPECT_EQ(batches_in(d.records), (std::vector<std::pair<int64_t, int32_t>>{{1, 2}}));
  // Nothing left parked on the partition.
  EXPECT_EQ(on_owner("orders", 0,
                     [this] {
                       return replicas_of("orders", 0).get({"orders", 0})->waiter_count();
                     }),
            0u);
}

TEST_P(produce_fetch_test, parked_requests_end_when_leadership_moves) {
  net::connection_info producer, consumer;
  producer.listener_name = consumer.listener_name = "PLAINTEXT";
  auto produced = start(frame(0, 11, produce_req("replicated", 0, batch(1), -1, 10'000)), &producer);
  auto fetched = start(frame(1, 12, fetch_req({{"orders", 0, 0}}, 10'000, 1)), &consumer);
  EXPECT_EQ(produced.wait_for(milliseconds(200)), std::future_status::timeout);
  EXPECT_EQ(fetched.wait_for(milliseconds(0)), std::future_status::timeout);

  // Node 2 becomes leader of both: the parked requests wake up at once instead of waiting out their time.
  for (const std::string topic : {"replicated", "orders"}) {
    const bool moved = on_owner(topic, 0, [this, topic] {
      replication::partition_leadership l;
      l.topic = topic;
      l.partition = 0;
      l.topic_id = topic_id(topic);
      l.state = {2, 4, 4, {self, 2}, {self, 2}, 1};
      return replicas_of(topic, 0).apply_leadership(l).ok();
    });
    ASSERT_TRUE(moved);
  }
  ASSERT_EQ(produced.wait_for(milliseconds(3000)), std::future_status::ready);
  ASSERT_EQ(fetched.wait_for(milliseconds(3000)), std::future_status::ready);
  auto p = decode<produce_response>(produced.get(), 11);
  EXPECT_EQ(p.responses.at(0).partition_responses.at(0).error_code, 6);  // NOT_LEADER_OR_FOLLOWER
  auto raw = fetched.get();
  auto f = decode<fetch_response>(raw, 12);
  EXPECT_EQ(f.responses.at(0).partitions.at(0).error_code, 6);
}

TEST_P(produce_fetch_test, min_bytes_and_max_wait) {
  // Nothing to read: the answer comes after max_wait_ms, empty.
  auto started = steady_clock::now();
  auto empty = fetch(fetch_req({{"orders", 0, 0}}, 250, 1), 12);
  auto waited = steady_clock::now() - started;
  EXPECT_EQ(empty.partition().error_code, 0);
  EXPECT_TRUE(empty.partition().records.bytes.empty());
  EXPECT_GE(waited, milliseconds(240));
  // Some data but less than min_bytes: also after max_wait_ms, with what there is.
  produce("orders", 0, batch(1));
  started = steady_clock::now();
  auto some = fetch(fetch_req({{"orders", 0, 0}}, 250, 1 << 20), 12);
  waited = steady_clock::now() - started;
  EXPECT_EQ(batches_in(some.partition().records).size(), 1u);
  EXPECT_GE(waited, milliseconds(240));
  // Enough: at once.
  started = steady_clock::now();
  auto enough = fetch(fetch_req({{"orders", 0, 0}}, 10'000, 1), 12);
  EXPECT_LT(steady_clock::now() - started, milliseconds(2000));
  EXPECT_EQ(batches_in(enough.partition().records).size(), 1u);
  // An error answers at once too.
  started = steady_clock::now();
  auto error = fetch(fetch_req({{"orders", 0, 99}}, 10'000, 1), 12);
  EXPECT_EQ(error.partition().error_code, 1);
  EXPECT_LT(steady_clock::now() - started, milliseconds(2000));
}

TEST_P(produce_fetch_test, byte_limits_keep_whole_batches) {
  for (int i = 0; i < 3; ++i) produce("orders", 0, batch(4));
  produce("orders", 1, batch(4));
  const size_t one_batch = batch(4).size();
  // partition_max_bytes below one batch: still the first batch (KIP-74), never a piece of it.
  auto req = fetch_req({{"orders", 0, 0}, {"orders", 1, 0}});
  req.topics[0].partitions[0].partition_max_bytes = 10;
  auto f = fetch(req, 12);
  EXPECT_EQ(batches_in(f.partition(0, 0).records).size(), 1u);
  EXPECT_EQ(f.partition(0, 0).records.bytes.size(), one_batch);
  // The second partition gets its own batch: the response's max_bytes is not reached.
  EXPECT_EQ(batches_in(f.partition(0, 1).records).size(), 1u);
  // max_bytes below one batch: the first partition with data still gets one batch, the next ones nothing.
  req = fetch_req({{"orders", 0, 0}, {"orders", 1, 0}});
  req.max_bytes = 10;
  f = fetch(req, 12);
  EXPECT_EQ(batches_in(f.partition(0, 0).records).size(), 1u);
  EXPECT_TRUE(f.partition(0, 1).records.bytes.empty());
  // Two and a half batches of room: two whole batches.
  req = fetch_req({{"orders", 0, 0}});
  req.max_bytes = static_cast<int32_t>(one_batch * 5 / 2);
  f = fetch(req, 12);
  EXPECT_EQ(batches_in(f.partition().records).size(), 2u);
}

TEST_P(produce_fetch_test, fetch_leader_epoch_and_leadership_errors) {
  produce("orders", 0, batch(1));
  auto req = fetch_req({{"orders", 0, 0}});
  req.topics[0].partitions[0].current_leader_epoch = 2;
  EXPECT_EQ(fetch(req, 12).partition().error_code, 74);  // FENCED_LEADER_EPOCH
  req.topics[0].partitions[0].current_leader_epoch = 4;
  EXPECT_EQ(fetch(req, 12).partition().error_code, 75);  // UNKNOWN_LEADER_EPOCH
  req.topics[0].partitions[0].current_leader_epoch = 3;
  EXPECT_EQ(fetch(req, 12).partition().error_code, 0);

  auto f = fetch(fetch_req({{"elsewhere", 0, 0}}), 16);
  EXPECT_EQ(f.partition().error_code, 6);  // NOT_LEADER_OR_FOLLOWER
  EXPECT_EQ(f.partition().current_leader.leader_id, 2);
  ASSERT_EQ(f.resp.node_endpoints.size(), 1u);
  EXPECT_EQ(f.resp.node_endpoints[0].host, "broker-2");

  // A broker that is no replica of the partition, fetching as a follower: refused, not crashed.
  auto follower = fetch_req({{"orders", 0, 0}});
  follower.replica_id = 5;
  EXPECT_EQ(fetch(follower, 12).partition().error_code, 6);
}

TEST_P(produce_fetch_test, follower_fetch_moves_the_high_watermark) {
  EXPECT_EQ(produce("replicated", 0, batch(2), 1).base_offset, 0);
  auto req = fetch_req({{"replicated", 0, 0}});
  req.replica_state.replica_id = 2;
  auto f = fetch(req, 15);
  EXPECT_EQ(f.partition().error_code, 0);
  EXPECT_EQ(batches_in(f.partition().records).size(), 1u);  // a follower reads past the high watermark
  // The follower now asks for offset 2: it has everything, and the high watermark follows.
  req.topics[0].partitions[0].fetch_offset = 2;
  f = fetch(req, 15);
  EXPECT_EQ(f.partition().high_watermark, 0);  // what the read saw, before the fetch was recorded
  EXPECT_EQ(fetch(fetch_req({{"replicated", 0, 0}}), 12).partition().high_watermark, 2);
}

TEST_P(produce_fetch_test, idempotent_duplicates_and_sequence_errors) {
  auto first = produce("orders", 0, batch(3, start_ms, 4000, 0, 0));
  EXPECT_EQ(first.error_code, 0);
  EXPECT_EQ(first.base_offset, 0);
  EXPECT_EQ(produce("orders", 0, batch(2, start_ms, 4000, 0, 3)).base_offset, 3);
  // The producer retries its first batch: same answer, nothing written.
  auto retry = produce("orders", 0, batch(3, start_ms, 4000, 0, 0));
  EXPECT_EQ(retry.error_code, 0);
  EXPECT_EQ(retry.base_offset, 0);
  EXPECT_EQ(retry.log_start_offset, 0);
  EXPECT_EQ(fetch(fetch_req({{"orders", 0, 0}}), 12).partition().high_watermark, 5);
  EXPECT_EQ(produce("orders", 0, batch(1, start_ms, 4000, 0, 9)).error_code,
            45);  // OUT_OF_ORDER_SEQUENCE_NUMBER
  EXPECT_EQ(produce("orders", 0, batch(1, start_ms, 4000, 1, 3)).error_code, 45);  // a new epoch starts at 0
  EXPECT_EQ(produce("orders", 0, batch(1, start_ms, 4000, 1, 0)).base_offset, 5);
  EXPECT_EQ(produce("orders", 0, batch(1, start_ms, 4000, 0, 5)).error_code, 47);  // INVALID_PRODUCER_EPOCH
  // A batch with a producer id but no sequence is not a valid idempotent batch.
  EXPECT_EQ(produce("orders", 0, batch(1, start_ms, 4001, 0, -1)).error_code, 87);
}

TEST_P(produce_fetch_test, incremental_fetch_sessions) {
  produce("orders", 0, batch(1));
  produce("orders", 1, batch(1));
  auto full = fetch_req({{"orders", 0, 0}, {"orders", 1, 0}});
  full.session_id = 0;
  full.session_epoch = 0;
  auto f = fetch(full, 12);
  EXPECT_EQ(f.resp.error_code, 0);
  const int32_t session = f.resp.session_id;
  ASSERT_NE(session, 0);
  ASSERT_EQ(f.resp.responses.size(), 1u);
  EXPECT_EQ(f.resp.responses[0].partitions.size(), 2u);

  // Epoch 1: both partitions move on to offset 1; nothing new anywhere, so nothing is listed.
  auto inc = fetch_req({{"orders", 0, 1}, {"orders", 1, 1}});
  inc.session_id = session;
  inc.session_epoch = 1;
  f = fetch(inc, 12);
  EXPECT_EQ(f.resp.error_code, 0);
  EXPECT_EQ(f.resp.session_id, session);
  EXPECT_TRUE(f.resp.responses.empty());

  // Epoch 2, no partitions named (the session remembers them): only orders-1, which got a record.
  produce("orders", 1, batch(2));
  auto again = fetch_req({});
  again.session_id = session;
  again.session_epoch = 2;
  f = fetch(again, 12);
  ASSERT_EQ(f.resp.responses.size(), 1u);
  ASSERT_EQ(f.resp.responses[0].partitions.size(), 1u);
  EXPECT_EQ(f.resp.responses[0].partitions[0].partition_index, 1);
  EXPECT_EQ(batches_in(f.resp.responses[0].partitions[0].records),
            (std::vector<std::pair<int64_t, int32_t>>{{1, 2}}));

  // A stale epoch and an unknown session are top-level errors.
  again.session_epoch = 2;
  EXPECT_EQ(fetch(again, 12).resp.error_code, 71);  // INVALID_FETCH_SESSION_EPOCH
  again.session_id = session + 1;
  again.session_epoch = 3;
  EXPECT_EQ(fetch(again, 12).resp.error_code, 70);  // FETCH_SESSION_ID_NOT_FOUND
}

TEST_P(produce_fetch_test, read_committed_answers_an_empty_aborted_list) {
  produce("orders", 0, batch(1));
  auto req = fetch_req({{"orders", 0, 0}});
  req.isolation_level = 1;
  auto committed = fetch(req, 12);
  ASSERT_TRUE(committed.partition().aborted_transactions.has_value());
  EXPECT_TRUE(committed.partition().aborted_transactions->empty());
  EXPECT_EQ(committed.partition().last_stable_offset, 1);
  auto uncommitted = fetch(fetch_req({{"orders", 0, 0}}), 12);
  EXPECT_FALSE(uncommitted.partition().aborted_transactions.has_value());
}

TEST_P(produce_fetch_test, list_offsets_specials_and_timestamps) {
  produce("orders", 0, batch(3, start_ms - 1000));  // offsets 0-2 at -1000, -999, -998
  produce("orders", 0, batch(2, start_ms + 500));   // offsets 3-4 at +500, +501
  produce("orders", 0, batch(1, start_ms));         // offset 5
  auto earliest = list_offset("orders", -2);
  EXPECT_EQ(earliest.error_code, 0);
  EXPECT_EQ(earliest.offset, 0);
  EXPECT_EQ(earliest.timestamp, -1);
  auto latest = list_offset("orders", -1);
  EXPECT_EQ(latest.offset, 6);
  EXPECT_EQ(latest.leader_epoch, 3);
  auto max_ts = list_offset("orders", -3);
  EXPECT_EQ(max_ts.offset, 4);
  EXPECT_EQ(max_ts.timestamp, start_ms + 501);
  EXPECT_EQ(list_offset("orders", -4).offset, 0);
  auto tiered = list_offset("orders", -5);
  EXPECT_EQ(tiered.error_code, 0);
  EXPECT_EQ(tiered.offset, -1);
  EXPECT_EQ(tiered.timestamp, -1);
  EXPECT_EQ(tiered.leader_epoch, -1);
  auto by_time = list_offset("orders", start_ms + 400);
  EXPECT_EQ(by_time.offset, 3);
  EXPECT_EQ(by_time.timestamp, start_ms + 500);
  auto none = list_offset("orders", start_ms + 10'000);
  EXPECT_EQ(none.error_code, 0);
  EXPECT_EQ(none.offset, -1);
  EXPECT_EQ(list_offset("orders", -1, 1).offset, 6);  // v1: no leader epoch in the answer
  // Special timestamps need the version that introduced them.
  EXPECT_EQ(list_offset("orders", -3, 6).error_code, 35);  // UNSUPPORTED_VERSION
  EXPECT_EQ(list_offset("orders", -3, 7).offset, 4);
  EXPECT_EQ(list_offset("orders", -4, 7).error_code, 35);
  EXPECT_EQ(list_offset("orders", -5, 8).error_code, 35);
  EXPECT_EQ(list_offset("orders", -6, 10).error_code, 35);
  // Earliest pending upload (v11, KIP-1023): no offset without tiered storage, as latest tiered.
  auto pending = list_offset("orders", -6, 11);
  EXPECT_EQ(pending.error_code, 0);
  EXPECT_EQ(pending.offset, -1);
  EXPECT_EQ(pending.timestamp, -1);
  EXPECT_EQ(pending.leader_epoch, -1);
  EXPECT_EQ(list_offset("orders", -7, 11).error_code, 35);

  EXPECT_EQ(list_offset("orders", -1, 10, 2).error_code, 74);  // FENCED_LEADER_EPOCH
  EXPECT_EQ(list_offset("orders", -1, 10, 4).error_code, 75);  // UNKNOWN_LEADER_EPOCH
  EXPECT_EQ(list_offset("orders", -1, 10, 3).error_code, 0);
  EXPECT_EQ(list_offset("nope", -1).error_code, 3);
  EXPECT_EQ(list_offset("elsewhere", -1).error_code, 6);

  // The high watermark bounds consumers; a replica (or the debugging id) sees the log end.
  produce("replicated", 0, batch(2), 1);
  EXPECT_EQ(list_offset("replicated", -1).offset, 0);
  list_offsets_request req;
  req.replica_id = -2;
  auto& t = req.topics.emplace_back();
  t.name = "replicated";
  t.partitions.push_back({0, -1, -1});
  t.partitions.push_back({0, -1, -1});  // the same partition twice: INVALID_REQUEST for both
  auto resp = decode<list_offsets_response>(send(frame(2, 10, req)), 10);
  EXPECT_EQ(resp.topics[0].partitions[0].error_code, 42);
  req.topics[0].partitions.pop_back();
  resp = decode<list_offsets_response>(send(frame(2, 10, req)), 10);
  EXPECT_EQ(resp.topics[0].partitions[0].offset, 2);
}

TEST_P(produce_fetch_test, delete_records_then_fetch_below_the_start_is_out_of_range) {
  for (int i = 0; i < 4; ++i) produce("orders", 0, batch(2));  // offsets 0-7
  auto deleted = delete_records("orders", 5);
  EXPECT_EQ(deleted.error_code, 0);
  EXPECT_EQ(deleted.low_watermark, 5);
  EXPECT_EQ(fetch(fetch_req({{"orders", 0, 2}}), 12).partition().error_code, 1);  // OFFSET_OUT_OF_RANGE
  auto from_start = fetch(fetch_req({{"orders", 0, 5}}), 12);
  EXPECT_EQ(from_start.partition().error_code, 0);
  EXPECT_EQ(from_start.partition().log_start_offset, 5);
  EXPECT_EQ(batches_in(from_start.partition().records).front().first, 4);  // the batch holding offset 5
  EXPECT_EQ(list_offset("orders", -2).offset, 5);

  EXPECT_EQ(delete_records("orders", 9).error_code, 1);  // beyond the high watermark
  EXPECT_EQ(delete_records("orders", 9).low_watermark, -1);
  EXPECT_EQ(delete_records("orders", -1).low_watermark, 8);  // -1: up to the high watermark
  EXPECT_EQ(delete_records("nope", 1).error_code, 3);
  EXPECT_EQ(delete_records("elsewhere", 0).error_code, 6);
  EXPECT_EQ(delete_records("__consumer_offsets", 0).error_code, 17);
}

TEST_P(produce_fetch_test, delete_records_waits_for_followers_then_times_out) {
  produce("replicated", 0, batch(2), 1);
  // The follower catches up (its fetch reports log start 0), so the high watermark reaches 2.
  auto req = fetch_req({{"replicated", 0, 2}});
  req.replica_state.replica_id = 2;
  req.topics[0].partitions[0].log_start_offset = 0;
  fetch(req, 15);
  const auto started = steady_clock::now();
  auto deleted = delete_records("replicated", 1, 300);
  EXPECT_EQ(deleted.error_code, 7);  // REQUEST_TIMED_OUT: the follower still has offset 0
  EXPECT_EQ(deleted.low_watermark, 0);
  EXPECT_GE(steady_clock::now() - started, milliseconds(290));
}

// A follower long-polling at the log end is answered at once when the log start it reported is behind the
// leader's (here after a DeleteRecords), with the new log start: it takes it from that answer.
TEST_P(produce_fetch_test, a_follower_behind_the_log_start_is_answered_without_waiting) {
  produce("replicated", 0, batch(4), 1);
  auto req = fetch_req({{"replicated", 0, 4}}, /*max_wait_ms=*/1500, 1);
  req.replica_state.replica_id = 2;
  req.topics[0].partitions[0].log_start_offset = 0;
  fetch(req, 15);  // the follower has everything: the high watermark reaches 4
  ASSERT_EQ(fetch(fetch_req({{"replicated", 0, 0}}), 12).partition().high_watermark, 4);
  auto started = steady_clock::now();
  EXPECT_EQ(fetch(req, 15).partition().log_start_offset, 0);  // nothing new: parked for max_wait_ms
  EXPECT_GE(steady_clock::now() - started, milliseconds(1400));

  EXPECT_EQ(delete_records("replicated", 3, 100).error_code, 7);  // REQUEST_TIMED_OUT: the follower has 0
  started = steady_clock::now();
  auto answer = fetch(req, 15);
  EXPECT_LT(steady_clock::now() - started, milliseconds(1000));
  EXPECT_EQ(answer.partition().error_code, 0);
  EXPECT_EQ(answer.partition().log_start_offset, 3);
  // Once it reports the new start, a fetch at the log end long-polls again, and the deletion is complete.
  req.topics[0].partitions[0].log_start_offset = 3;
  started = steady_clock::now();
  fetch(req, 15);
  EXPECT_GE(steady_clock::now() - started, milliseconds(1400));
  auto deleted = delete_records("replicated", 3, 100);
  EXPECT_EQ(deleted.error_code, 0);
  EXPECT_EQ(deleted.low_watermark, 3);
}

// Kafka's shouldLeaderThrottle: while the leader's replication rate is over
// leader.replication.throttled.rate, a follower of a throttled replica that is out of the ISR gets no records
// (its fetch state still moves); one in the ISR, and consumers, still do. Every follower's bytes of a
// throttled replica count toward the rate.
TEST_P(produce_fetch_test, a_leader_throttle_holds_back_out_of_sync_followers_only) {
  produce("throttled", 0, batch(5), 1);
  auto follower = [&](int32_t id, int64_t offset) {
    auto req = fetch_req({{"throttled", 0, offset}});
    req.replica_state.replica_id = id;
    req.topics[0].partitions[0].log_start_offset = 0;
    return fetch(req, 15);
  };
  // No bound: the out-of-sync follower reads, and its bytes are counted.
  auto free = follower(3, 0);
  ASSERT_EQ(free.partition().error_code, 0);
  ASSERT_EQ(batches_in(free.partition().records).size(), 1u);
  EXPECT_GT(leader_throttle.rate(_now.load()), 0.0);

  leader_throttle.set_bound(1);  // far below what was just sent: exceeded
  auto held = follower(3, 0);
  EXPECT_EQ(held.partition().error_code, 0);
  EXPECT_TRUE(batches_in(held.partition().records).empty());
  EXPECT_EQ(held.partition().high_watermark, 0);  // node 2 (in the ISR) has not fetched yet
  auto in_sync = follower(2, 0);
  EXPECT_EQ(batches_in(in_sync.partition().records).size(), 1u);
  EXPECT_EQ(batches_in(fetch(fetch_req({{"throttled", 0, 0}}), 12).partition().records).size(), 0u);
  follower(2, 5);  // node 2 has everything: the high watermark moves to 5
  EXPECT_EQ(batches_in(fetch(fetch_req({{"throttled", 0, 0}}), 12).partition().records).size(), 1u);
  // Unthrottled replicas are not held back by the same follower.
  auto other = fetch_req({{"replicated", 0, 0}});
  other.replica_state.replica_id = 2;
  produce("replicated", 0, batch(1), 1);
  EXPECT_EQ(batches_in(fetch(other, 15).partition().records).size(), 1u);
  // Once the rate falls under the bound again (the window passed), the follower reads.
  leader_throttle.set_bound(1'000'000);
  _now += 12'000;
  EXPECT_EQ(batches_in(follower(3, 0).partition().records).size(), 1u);
}

// One Produce and one Fetch naming partitions on every shard: acks=-1 completes once the follower has every
// partition (not one shard after the other), and a long poll over all of them wakes when any one gets data.
TEST_P(produce_fetch_test, requests_spanning_shards_append_wait_and_wake_as_one) {
  constexpr int32_t partitions = 8;
  std::set<size_t> shards;
  for (int32_t p = 0; p < partitions; ++p) shards.insert(shard_of("spread", p));
  EXPECT_EQ(shards.size(), std::min<size_t>(GetParam(), partitions));

  produce_request req;
  req.acks = -1;
  req.timeout_ms = 10'000;
  auto& t = req.topic_data.emplace_back();
  t.name = "spread";
  std::vector<std::vector<uint8_t>> records;
  for (int32_t p = 0; p < partitions; ++p) records.push_back(batch(p + 1));
  for (int32_t p = 0; p < partitions; ++p) {
    auto& d = t.partition_data.emplace_back();
    d.index = p;
    d.records = records_view::of(records[p]);
  }
  auto produced = start(frame(0, 11, req));
  EXPECT_EQ(produced.wait_for(milliseconds(100)), std::future_status::timeout);  // node 2 has nothing yet

  // Node 2 fetches every partition up to its end: the high watermarks move on every shard.
  auto follower = fetch_req({});
  follower.replica_state.replica_id = 2;
  for (int32_t p = 0; p < partitions; ++p) {
    if (follower.topics.empty()) {
      auto& ft = follower.topics.emplace_back();
      ft.topic = "spread";
      ft.topic_id = topic_id("spread");
    }
    auto& fp = follower.topics.back().partitions.emplace_back();
    fp.partition = p;
    fp.fetch_offset = p + 1;
    fp.partition_max_bytes = 1 << 20;
    fp.log_start_offset = 0;
  }
  fetch(follower, 15);
  ASSERT_EQ(produced.wait_for(milliseconds(5000)), std::future_status::ready);
  auto resp = decode<produce_response>(produced.get(), 11);
  ASSERT_EQ(resp.responses.at(0).partition_responses.size(), static_cast<size_t>(partitions));
  for (int32_t p = 0; p < partitions; ++p) {
    const auto& r = resp.responses[0].partition_responses[p];
    EXPECT_EQ(r.index, p);
    EXPECT_EQ(r.error_code, 0) << "partition " << p;
    EXPECT_EQ(r.base_offset, 0);
  }

  // A consumer long-polls every partition from its end; a record on the last partition wakes it at once.
  std::vector<std::tuple<std::string, int32_t, int64_t>> at_end;
  for (int32_t p = 0; p < partitions; ++p) at_end.emplace_back("spread", p, p + 1);
  net::connection_info consumer;
  consumer.listener_name = "PLAINTEXT";
  const auto started = steady_clock::now();
  auto polled = start(frame(1, 12, fetch_req(at_end, 10'000, 1)), &consumer);
  EXPECT_EQ(polled.wait_for(milliseconds(100)), std::future_status::timeout);
  EXPECT_EQ(produce("spread", partitions - 1, batch(2), 1).base_offset, partitions);
  // acks=1 on a partition whose follower lags: the consumer sees it once the high watermark moves.
  auto catch_up = fetch_req({{"spread", partitions - 1, partitions + 2}});
  catch_up.replica_state.replica_id = 2;
  catch_up.topics[0].partitions[0].log_start_offset = 0;
  fetch(catch_up, 15);
  ASSERT_EQ(polled.wait_for(milliseconds(5000)), std::future_status::ready);
  EXPECT_LT(steady_clock::now() - started, milliseconds(5000));
  auto raw = polled.get();
  auto f = decode<fetch_response>(raw, 12);
  ASSERT_EQ(f.responses.at(0).partitions.size(), static_cast<size_t>(partitions));
  for (int32_t p = 0; p < partitions; ++p) {
    const auto& d = f.responses[0].partitions[p];
    EXPECT_EQ(d.error_code, 0);
    if (p == partitions - 1) {
      EXPECT_EQ(batches_in(d.records), (std::vector<std::pair<int64_t, int32_t>>{{partitions, 2}}));
    } else {
      EXPECT_TRUE(d.records.bytes.empty()) << "partition " << p;
    }
  }
  // Nothing left parked on any shard once the withdrawals ran.
  for (int attempt = 0; attempt < 100; ++attempt) {
    size_t parked = 0;
    for (int32_t p = 0; p < partitions; ++p) {
      parked += on_owner("spread", p, [this, p] {
        return replicas_of("spread", p).get({"spread", p})->waiter_count();
      });
    }
    if (parked == 0) break;
    std::this_thread::sleep_for(milliseconds(10));
    ASSERT_LT(attempt, 99) << parked << " waiters left";
  }
}

// The response's byte budget (max_bytes) covers the partitions of every shard together (KIP-74: only the
// first partition with data may go over it).
TEST_P(produce_fetch_test, the_byte_budget_spans_shards) {
  constexpr int32_t partitions = 8;
  for (int32_t p = 0; p < partitions; ++p) produce("spread", p, batch(20), 1);
  std::vector<std::tuple<std::string, int32_t, int64_t>> all;
  for (int32_t p = 0; p < partitions; ++p) all.emplace_back("spread", p, 0);
  auto req = fetch_req(all);
  req.replica_state.replica_id = 2;  // a follower reads up to the log end
  for (auto& fp : req.topics[0].partitions) fp.log_start_offset = 0;
  const int64_t one = static_cast<int64_t>(batch(20).size());
  req.max_bytes = static_cast<int32_t>(one * 3 + one / 2);  // room for three batches and a half
  auto got = fetch(req, 15);
  int64_t total = 0;
  int32_t with_data = 0;
  for (const auto& d : got.resp.responses.at(0).partitions) {
    total += static_cast<int64_t>(d.records.bytes.size());
    with_data += d.records.bytes.empty() ? 0 : 1;
  }
  EXPECT_EQ(with_data, 3);
  EXPECT_LE(total, req.max_bytes);
  // The budget goes to the partitions in request order, whatever shards they are on (Kafka's readFromLog; a
  // fetch session moves the partitions that returned records to its end, so none starves).
  const auto& answered = got.resp.responses.at(0).partitions;
  for (int32_t p = 0; p < partitions; ++p) {
    EXPECT_EQ(answered.at(p).records.bytes.empty(), p >= 3) << "partition " << p;
  }
  // The request in reverse order: the last three partitions get the budget.
  std::vector<std::tuple<std::string, int32_t, int64_t>> reversed(all.rbegin(), all.rend());
  auto back = fetch_req(reversed);
  back.replica_state.replica_id = 2;
  for (auto& fp : back.topics[0].partitions) fp.log_start_offset = 0;
  back.max_bytes = req.max_bytes;
  got = fetch(back, 15);
  for (const auto& d : got.resp.responses.at(0).partitions) {
    EXPECT_EQ(d.records.bytes.empty(), d.partition_index < partitions - 3)
        << "partition " << d.partition_index;
  }
  // Half a batch: the first partition in request order with records may exceed the budget (KIP-74); then no
  // other gets any.
  back.max_bytes = static_cast<int32_t>(one / 2);
  got = fetch(back, 15);
  for (const auto& d : got.resp.responses.at(0).partitions) {
    EXPECT_EQ(d.records.bytes.empty(), d.partition_index != partitions - 1)
        << "partition " << d.partition_index;
  }
  // Room for every batch: each partition gets its own, the shards read at once.
  req.max_bytes = static_cast<int32_t>(one * partitions);
  got = fetch(req, 15);
  for (const auto& d : got.resp.responses.at(0).partitions)
    EXPECT_EQ(batches_in(d.records).size(), 1u) << "partition " << d.partition_index;
}

INSTANTIATE_TEST_SUITE_P(shards, produce_fetch_test, ::testing::Values(1, 2, 4),
                         [](const auto& info) { return std::to_string(info.param) + "_shards"; });

}  // namespace
}  // namespace mala::broker
