// Codec cost of the requests every client sends most: the request header (decoded for every request before
// dispatch) and Metadata, which clients send on connect and on every metadata.max.age.ms refresh and whose
// response grows with brokers x topics x partitions x replicas. Sizes follow a small cluster: 3 brokers,
// 10 topics of 6 partitions with replication factor 3. Then the leader's checks of every produced batch:
// the CRC (validate_batch) and the one-pass record scan (scan_records), per byte and per record.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "mala/protocol/messages/metadata_request.h"
#include "mala/protocol/messages/metadata_response.h"
#include "mala/protocol/record_batch.h"
#include "mala/protocol/request_header.h"
#include "mala/protocol/versioned_message.h"
#include "mala/protocol/wire.h"

namespace {

using namespace mala::protocol;

constexpr int16_t metadata_version = 12;

mala::uuid make_topic_id(int n) {
  mala::uuid id;
  for (size_t i = 0; i < id.bytes.size(); ++i)
    id.bytes[i] = static_cast<uint8_t>(n * 31 + static_cast<int>(i) + 1);
  return id;
}

// A Metadata v12 request header as the Java client sends it (header v2, client id "adminclient-1").
std::vector<uint8_t> make_request_header_bytes() {
  request_header header;
  header.api_key = metadata_request::api_key;
  header.api_version = metadata_version;
  header.correlation_id = 12345;
  header.client_id = "adminclient-1";
  std::vector<uint8_t> out;
  wire_writer w(out);
  encode_request_header(w, header, 2);
  return out;
}

metadata_request make_metadata_request() {
  metadata_request request;
  request.topics.emplace();
  for (const char* name : {"orders", "payments", "shipments-eu-west-1"}) {
    auto& topic = request.topics->emplace_back();
    topic.name = name;  // by name, zero topic id: what clients send when they know names only
  }
  request.allow_auto_topic_creation = false;
  return request;
}

metadata_response make_metadata_response() {
  constexpr int brokers = 3;
  constexpr int topics = 10;
  constexpr int partitions = 6;
  constexpr int replicas = 3;
  metadata_response response;
  for (int b = 0; b < brokers; ++b) {
    auto& broker = response.brokers.emplace_back();
    broker.node_id = b + 1;
    broker.host = "broker-" + std::to_string(b + 1) + ".kafka.internal";
    broker.port = 9092;
    broker.rack = "rack-" + std::to_string(b % 3);
  }
  response.cluster_id = "aI7BFS8BSH29iEdKvr4wAg";
  response.controller_id = 1;
  for (int t = 0; t < topics; ++t) {
    auto& topic = response.topics.emplace_back();
    topic.name = "topic-" + std::to_string(t);
    topic.topic_id = make_topic_id(t);
    for (int p = 0; p < partitions; ++p) {
      auto& partition = topic.partitions.emplace_back();
      partition.partition_index = p;
      partition.leader_id = (t + p) % brokers + 1;
      partition.leader_epoch = 7;
      for (int r = 0; r < replicas; ++r) {
        partition.replica_nodes.push_back((t + p + r) % brokers + 1);
        partition.isr_nodes.push_back((t + p + r) % brokers + 1);
      }
    }
  }
  return response;
}

void set_counters(benchmark::State& state, size_t bytes_per_item) {
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations()));
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * bytes_per_item));
  state.counters["bytes_per_item"] = static_cast<double>(bytes_per_item);
}

void bm_request_header_decode_v2(benchmark::State& state) {
  const auto bytes = make_request_header_bytes();
  for (auto _ : state) {
    wire_reader r(bytes);
    request_header header;
    decode_request_header_prefix(r, header);
    const auto status = decode_request_header_rest(r, header, 2);
    benchmark::DoNotOptimize(status);
    benchmark::DoNotOptimize(header);
    if (status != decode_status::ok) state.SkipWithError("decode failed");
  }
  set_counters(state, bytes.size());
}

void bm_metadata_request_decode_v12(benchmark::State& state) {
  const auto bytes = encode_message(make_metadata_request(), metadata_version);
  for (auto _ : state) {
    wire_reader r(bytes);
    metadata_request request;
    const auto status = request.decode(r, metadata_version);
    benchmark::DoNotOptimize(status);
    benchmark::DoNotOptimize(request);
    if (status != decode_status::ok) state.SkipWithError("decode failed");
  }
  set_counters(state, bytes.size());
}

void bm_metadata_response_encode_v12(benchmark::State& state) {
  const auto response = make_metadata_response();
  std::vector<uint8_t> out;
  for (auto _ : state) {
    // One encoded_size() then one encode, as the broker does for each response (buffer reused).
    out.clear();
    out.reserve(response.encoded_size(metadata_version));
    wire_writer w(out);
    response.encode(w, metadata_version);
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  set_counters(state, out.size());
}

void bm_metadata_response_decode_v12(benchmark::State& state) {
  const auto bytes = encode_message(make_metadata_response(), metadata_version);
  for (auto _ : state) {
    wire_reader r(bytes);
    metadata_response response;
    const auto status = response.decode(r, metadata_version);
    benchmark::DoNotOptimize(status);
    benchmark::DoNotOptimize(response);
    if (status != decode_status::ok) state.SkipWithError("decode failed");
  }
  set_counters(state, bytes.size());
}

// The leader's per-batch work on an uncompressed produce, as bench/e2e's raw load sends it: one batch of
// about 1 MB of records of state.range(0) bytes (random value, null key, no headers, timestamp delta 0), the
// shape of franzload rawproduce. Small keyed records with increasing timestamps (the Java producer's shape)
// differ only in varint lengths.
std::vector<uint8_t> make_produce_batch(size_t value_size, bool keyed) {
  std::vector<uint8_t> value(value_size);
  uint32_t x = 12345;
  for (auto& b : value) {
    x = x * 1103515245u + 12345u;
    b = static_cast<uint8_t>(x >> 16);
  }
  const size_t count = 1'000'000 / (value_size + 8);
  record_batch_builder builder;
  const int64_t base = 1'764'000'000'000;
  std::string key;
  for (size_t i = 0; i < count; ++i) {
    key = "bus-" + std::to_string(i % 1200);
    std::optional<std::span<const uint8_t>> k;
    if (keyed) k = std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(key.data()), key.size());
    builder.add(keyed ? base + static_cast<int64_t>(i / 16) : base, k, std::span<const uint8_t>(value));
  }
  return builder.build();
}

void bm_scan_records(benchmark::State& state) {
  const auto batch = make_produce_batch(static_cast<size_t>(state.range(0)), state.range(1) != 0);
  const auto header = *parse_batch_header(batch);
  const auto records = std::span<const uint8_t>(batch).subspan(batch_layout::header_size);
  for (auto _ : state) {
    const auto scan = scan_records(records, header.record_count, header.base_timestamp);
    benchmark::DoNotOptimize(scan);
    if (scan.status != batch_status::ok || scan.records != header.record_count) state.SkipWithError("scan");
  }
  set_counters(state, batch.size());
  state.counters["records"] = header.record_count;
  state.counters["ns_per_record"] =
      benchmark::Counter(static_cast<double>(state.iterations()) * header.record_count,
                         benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}

void bm_validate_batch(benchmark::State& state) {
  const auto batch = make_produce_batch(static_cast<size_t>(state.range(0)), false);
  for (auto _ : state) {
    const auto status = validate_batch(batch);
    benchmark::DoNotOptimize(status);
    if (status != batch_status::ok) state.SkipWithError("validate");
  }
  set_counters(state, batch.size());
}

}  // namespace

BENCHMARK(bm_scan_records)->ArgsProduct({{100, 1024}, {0, 1}});
BENCHMARK(bm_validate_batch)->Arg(100);
BENCHMARK(bm_request_header_decode_v2);
BENCHMARK(bm_metadata_request_decode_v12);
BENCHMARK(bm_metadata_response_encode_v12);
BENCHMARK(bm_metadata_response_decode_v12);
