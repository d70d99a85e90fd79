#include "mala/replication/alter_partition_manager.h"

#include <algorithm>
#include <chrono>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include <asio/co_spawn.hpp>
#include <asio/detached.hpp>
#include <asio/redirect_error.hpp>
#include <asio/steady_timer.hpp>
#include <asio/use_awaitable.hpp>

#include "mala/common/logging.h"

namespace mala::replication {
namespace {

bool isr_eligible(const metadata::metadata_image& image, int32_t id) {
  auto it = image.brokers.find(id);
  return it != image.brokers.end() && !it->second.fenced && !it->second.in_controlled_shutdown;
}

int64_t broker_epoch_of(const metadata::metadata_image& image, int32_t id) {
  auto it = image.brokers.find(id);
  return it == image.brokers.end() ? -1 : it->second.epoch;
}

}  // namespace

alter_partition_manager::alter_partition_manager(asio::io_context& io, replica_manager& replicas,
                                                 const metadata::metadata_cache& metadata,
                                                 alter_partition_sender send,
                                                 alter_partition_manager_options options)
    : _io(io),
      _replicas(replicas),
      _metadata(metadata),
      _send(std::move(send)),
      _options(std::move(options)),
      _state(std::make_shared<shared_state>()) {}

void alter_partition_manager::start() {
  asio::co_spawn(_io, run(_state), asio::detached);
}

void alter_partition_manager::stop() {
  _state->stopped = true;
}

int64_t alter_partition_manager::now_ms() const {
  if (_options.clock_ms) return _options.clock_ms();
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

asio::awaitable<void> alter_partition_manager::run(std::shared_ptr<shared_state> state) {
  asio::steady_timer timer(_io);
  while (!state->stopped) {
    timer.expires_after(std::chrono::milliseconds(_options.interval_ms));
    std::error_code ec;
    co_await timer.async_wait(asio::redirect_error(asio::use_awaitable, ec));
    if (state->stopped) break;
    co_await send_round();
  }
}

const std::vector<topic_partition>& alter_partition_manager::candidates(
    const metadata::metadata_image_ptr& image) {
  if (image == _candidates_image && ++_rounds_since_rescan < _options.rescan_rounds) return _candidates;
  _candidates_image = image;
  _rounds_since_rescan = 0;
  _candidates.clear();
  for (const auto& tp : _replicas.partitions()) {
    if (_options.placement.shard_of(tp) != _options.shard) continue;
    const auto* p = _replicas.get(tp);
    if (!p || !p->is_leader()) continue;
    if (p->replicas().size() > 1 || p->leader_recovery_state() != 0) _candidates.push_back(tp);
  }
  return _candidates;
}

asio::awaitable<void> alter_partition_manager::send_round() {
  const int64_t broker_epoch = _options.broker_epoch ? _options.broker_epoch() : -1;
  const metadata::metadata_image_ptr image = _metadata.current();
  if (broker_epoch < 0 || !image) co_return;
  const auto eligible = [&image](int32_t id) { return isr_eligible(*image, id); };
  const int64_t now = now_ms();

  protocol::alter_partition_request request;
  request.broker_id = _options.node_id;
  request.broker_epoch = broker_epoch;
  std::map<std::string, size_t> topic_index;  // by name
  std::vector<std::pair<uuid, std::string>> topic_names;
  std::vector<topic_partition> proposed;
  for (const auto& tp : candidates(image)) {
    auto* p = _replicas.get(tp);
    if (!p || !p->is_leader()) continue;
    auto proposal = p->propose_isr_change(now, eligible);
    if (!proposal) continue;
    proposed.push_back(tp);
    auto [it, inserted] = topic_index.emplace(tp.topic, request.topics.size());
    if (inserted) {
      protocol::alter_partition_request::topic_data topic;
      topic.topic_name = tp.topic;
      topic.topic_id = p->topic_id();
      request.topics.push_back(std::move(topic));
      topic_names.emplace_back(p->topic_id(), tp.topic);
    }
    protocol::alter_partition_request::partition_data data;
    data.partition_index = tp.partition;
    data.leader_epoch = proposal->leader_epoch;
    data.partition_epoch = proposal->partition_epoch;
    data.leader_recovery_state = proposal->leader_recovery_state;
    for (int32_t id : proposal->new_isr) {
      data.new_isr.push_back(id);
      data.new_isr_with_epochs.push_back({id, broker_epoch_of(*image, id)});
    }
    request.topics[it->second].partitions.push_back(std::move(data));
  }
  if (proposed.empty()) co_return;

  auto answer = co_await _send(request);
  if (_state->stopped) co_return;
  std::map<topic_partition, isr_change_answer> answers;
  error_code request_error = error_code::none;
  if (!answer) {
    request_error = error_code::not_controller;
  } else if (answer->error_code != 0) {
    request_error = static_cast<error_code>(answer->error_code);
  } else {
    for (const auto& topic : answer->topics) {
      auto name = std::find_if(topic_names.begin(), topic_names.end(),
                               [&topic](const auto& t) { return t.first == topic.topic_id; });
      if (name == topic_names.end()) continue;
      for (const auto& part : topic.partitions) {
        isr_change_answer a;
        a.error = static_cast<error_code>(part.error_code);
        a.leader_epoch = part.leader_epoch;
        a.partition_epoch = part.partition_epoch;
        a.isr = part.isr;
        a.leader_recovery_state = part.leader_recovery_state;
        answers[topic_partition{name->second, part.partition_index}] = std::move(a);
      }
    }
  }
  if (request_error != error_code::none) {
    subsystem_logger("replication")
        ->info("AlterPartition for {} partition(s) failed: {}", proposed.size(), error_name(request_error));
  }
  const int64_t answered_at = now_ms();
  for (const auto& tp : proposed) {
    auto* p = _replicas.get(tp);
    if (!p) continue;
    isr_change_answer a;
    if (auto it = answers.find(tp); it != answers.end()) {
      a = it->second;
    } else {
      a.error = request_error != error_code::none ? request_error : error_code::unknown_server_error;
    }
    p->isr_change_answered(a, answered_at);
  }
}

}  // namespace mala::replication
