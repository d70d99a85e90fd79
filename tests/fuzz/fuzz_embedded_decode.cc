// libFuzzer target for bytes that arrive inside other messages: the embedded consumer protocol of classic
// groups (ConsumerProtocolSubscription in JoinGroup metadata, ConsumerProtocolAssignment in SyncGroup),
// decoded at every version and, when that succeeds, re-encoded and decoded again to the same bytes; and the
// records region of a produced batch, scanned by the leader's one-pass scan_records and read by
// record_reader, which must agree on whether the records are well formed and how many there are; and a
// KIP-853 VotersRecord, round-tripped and then carried through a bootstrap checkpoint (record batches) and
// read back by raft::voter_set_in_snapshot, which must return the same voters; and the OpenTelemetry metrics
// of a KIP-714 PushTelemetry, whose decoded points, encoded again, must decode to the same. The first input
// byte picks what to do. Any crash, sanitizer report, disagreement or unbounded allocation is a bug.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <span>
#include <vector>

#include "mala/protocol/messages/consumer_protocol_assignment.h"
#include "mala/protocol/messages/consumer_protocol_subscription.h"
#include "mala/protocol/messages/voters_record.h"
#include "mala/protocol/otlp_metrics.h"
#include "mala/protocol/record_batch.h"
#include "mala/protocol/wire.h"
#include "mala/raft/voter_set.h"

using namespace mala::protocol;

namespace {

template <typename M>
void round_trip(std::span<const uint8_t> bytes, int16_t version) {
  wire_reader r(bytes);
  M m;
  if (m.decode(r, version) != decode_status::ok || !r.ok()) return;
  std::vector<uint8_t> first;
  wire_writer w(first);
  m.encode(w, version);
  wire_reader again(first);
  M n;
  if (n.decode(again, version) != decode_status::ok || !again.ok() || again.remaining() != 0) std::abort();
  std::vector<uint8_t> second;
  wire_writer w2(second);
  n.encode(w2, version);
  if (first != second) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  const uint8_t mode = data[0];
  std::span<const uint8_t> rest(data + 1, size - 1);
  const auto version = static_cast<int16_t>(mode % 4);
  switch ((mode >> 2) % 5) {
    case 0:
      round_trip<consumer_protocol_subscription>(rest, version);
      break;
    case 1:
      round_trip<consumer_protocol_assignment>(rest, version);
      break;
    default: {
      // A records region with a declared count (first byte) and base timestamp 0.
      const int32_t count = static_cast<int32_t>(rest[0]) - 8;  // some negative counts too
      auto records = rest.subspan(1);
      const auto scan = scan_records(records, count, 0);
      record_reader reader(records, count);
      int32_t n = 0;
      while (reader.next()) ++n;
      if (scan.status != reader.status()) std::abort();
      if (reader.ok() && scan.records != n) std::abort();
      break;
    }
    case 3: {
      round_trip<voters_record>(rest, 0);
      wire_reader r(rest);
      voters_record decoded;
      if (decoded.decode(r, 0) != decode_status::ok || !r.ok()) break;
      std::vector<mala::raft::voter_info> voters;
      for (const auto& v : decoded.voters) {
        mala::raft::voter_info info{v.voter_id, v.voter_directory_id, {}, {}};
        if (!v.endpoints.empty()) {
          info.listener_name = v.endpoints.front().name;
          info.endpoint = {v.endpoints.front().host, v.endpoints.front().port};
        }
        voters.push_back(std::move(info));
      }
      auto checkpoint = mala::raft::bootstrap_checkpoint(voters, 0);
      if (!checkpoint.ok()) break;  // too large for one metadata batch
      auto read = mala::raft::voter_set_in_snapshot(*checkpoint);
      if (!read.ok() || !read->has_value() || **read != voters) std::abort();
      break;
    }
    case 4: {
      const otlp_limits limits;
      auto decoded = decode_otlp_metrics(rest, limits);
      if (!decoded.ok()) break;
      if (decoded->points.size() > limits.max_points || decoded->metrics.size() > decoded->points.size() ||
          decoded->resources.size() > limits.max_resources)
        std::abort();
      for (const auto& p : decoded->points) {
        if (p.resource >= decoded->resources.size() || p.metric >= decoded->metrics.size() ||
            p.attributes.size() > limits.max_attributes)
          std::abort();
      }
      for (auto& m : decoded->metrics) {
        if (!valid_utf8(m.name)) std::abort();
        m.description.clear();  // the encoder may leave out empty texts; compare what it writes
        m.unit.clear();
        if (m.kind == otlp_metric_kind::gauge) m.monotonic = false;
      }
      auto again = decode_otlp_metrics(encode_otlp_metrics({}, decoded->metrics, decoded->points), limits);
      if (!again.ok() || again->points.size() != decoded->points.size()) std::abort();
      for (size_t i = 0; i < again->points.size(); ++i) {
        const auto& a = decoded->points[i];
        const auto& b = again->points[i];
        if (decoded->metrics[a.metric] != again->metrics[b.metric] || a.attributes != b.attributes ||
            std::memcmp(&a.value, &b.value, sizeof a.value) != 0)
          std::abort();
      }
      break;
    }
  }
  return 0;
}
