#include "mala/broker/directory_assignments.h"

#include <algorithm>
#include <chrono>
#include <string>
#include <utility>
#include <vector>

#include <asio/co_spawn.hpp>
#include <asio/detached.hpp>
#include <asio/redirect_error.hpp>
#include <asio/use_awaitable.hpp>

#include "handlers/assign_replicas_to_dirs.h"
#include "mala/common/exponential_backoff.h"
#include "mala/common/logging.h"
#include "mala/controller/feature_control.h"
#include "mala/controller/quorum_controller.h"
#include "mala/metadata/metadata_delta.h"
#include "mala/net/coroutine_frame_warning.h"

namespace mala::broker {

std::optional<protocol::assign_replicas_to_dirs_request> directory_assignment_request(
    const metadata::metadata_image& image, int32_t broker_id, int64_t broker_epoch,
    const hosted_log_dirs& hosted) {
  if (image.feature_level(std::string(controller::metadata_version_feature)) <
      controller::directory_assignment_metadata_version) {
    return std::nullopt;
  }
  // dir id -> topic id -> partitions, in a stable order (by the ids' text).
  struct topic_partitions {
    uuid topic_id;
    std::vector<int32_t> partitions;
  };
  struct dir_topics {
    uuid dir;
    std::map<std::string, topic_partitions> topics;
  };
  std::map<std::string, dir_topics> changed;
  size_t count = 0;
  for (const auto& [tp, dir] : hosted) {
    if (count == max_assignments_per_request) break;
    const metadata::topic_metadata* topic = image.find_topic(tp.topic);
    if (!topic || tp.partition < 0 || tp.partition >= static_cast<int32_t>(topic->partitions.size()))
      continue;
    const metadata::partition_state& p = topic->partitions[static_cast<size_t>(tp.partition)];
    auto replica = std::find(p.replicas.begin(), p.replicas.end(), broker_id);
    if (replica == p.replicas.end()) continue;  // being removed from this broker
    const auto index = static_cast<size_t>(replica - p.replicas.begin());
    const uuid recorded =
        index < p.directories.size() ? p.directories[index] : metadata::directory_unassigned;
    if (recorded == dir) continue;
    dir_topics& in_dir = changed[dir.to_string()];
    in_dir.dir = dir;
    topic_partitions& of_topic = in_dir.topics[topic->id.to_string()];
    of_topic.topic_id = topic->id;
    of_topic.partitions.push_back(tp.partition);
    ++count;
  }
  if (changed.empty()) return std::nullopt;
  protocol::assign_replicas_to_dirs_request request;
  request.broker_id = broker_id;
  request.broker_epoch = broker_epoch;
  for (const auto& [_, in_dir] : changed) {
    auto& d = request.directories.emplace_back();
    d.id = in_dir.dir;
    for (const auto& [_, of_topic] : in_dir.topics) {
      auto& t = d.topics.emplace_back();
      t.topic_id = of_topic.topic_id;
      for (int32_t partition : of_topic.partitions) t.partitions.emplace_back().partition_index = partition;
    }
  }
  return request;
}

directory_assignments::directory_assignments(asio::io_context& io, controller_channel& channel,
                                             directory_assignments_options options)
    : _io(io),
      _channel(channel),
      _options(std::move(options)),
      _state(std::make_shared<state>()),
      _timer(io) {}

directory_assignments::~directory_assignments() {
  _state->stopped = true;
}

void directory_assignments::start() {
  asio::co_spawn(_io, run(this, _state), asio::detached);
}

void directory_assignments::stop() {
  _state->stopped = true;
  _timer.cancel();
}

asio::awaitable<bool> directory_assignments::send_once() {
  using handler = handlers::assign_replicas_to_dirs_handler;
  const int64_t epoch = _options.broker_epoch ? _options.broker_epoch() : -1;
  const auto image = _options.image ? _options.image() : nullptr;
  if (epoch < 0 || !image || !_options.hosted) co_return true;
  auto request = directory_assignment_request(*image, _options.broker_id, epoch, _options.hosted());
  if (!request) co_return true;
  const handler::request& req = *request;
  auto answer = co_await _channel.call<handler::response>(
      req, 0, true, [&req](controller::quorum_controller& c) { return c.assign_replicas_to_dirs(req); });
  auto log = subsystem_logger("broker");
  if (!answer.ok()) {
    log->debug("directory assignments not sent yet (no controller answer)");
    co_return false;
  }
  if (answer.response->error_code != 0) {
    log->debug("directory assignments refused with error {}; trying again", answer.response->error_code);
    co_return false;
  }
  size_t assigned = 0;
  size_t refused = 0;
  int16_t first_error = 0;
  for (const auto& d : answer.response->directories)
    for (const auto& t : d.topics)
      for (const auto& p : t.partitions) {
        if (p.error_code == 0) {
          ++assigned;
        } else if (refused++ == 0) {
          first_error = p.error_code;
        }
      }
  if (assigned > 0) log->info("{} replica(s) assigned to their log dirs (AssignReplicasToDirs)", assigned);
  if (refused > 0) {
    log->debug("{} directory assignment(s) refused (the first with error {}); trying again", refused,
               first_error);
    co_return false;
  }
  co_return true;
}

asio::awaitable<void> directory_assignments::run(directory_assignments* self, std::shared_ptr<state> st) {
  // A refusal that lasts (a controller whose metadata lags, a partition being deleted) is asked again less
  // and less often, up to every 10 s, as Kafka's AssignmentsManager backs off.
  exponential_backoff backoff(self->_options.interval_ms, 10'000);
  while (!st->stopped) {
    const bool done = co_await self->send_once();
    if (st->stopped) co_return;
    int64_t wait_ms = self->_options.interval_ms;
    if (done) {
      backoff.reset();
    } else {
      wait_ms = backoff.after_failure();
    }
    self->_timer.expires_after(std::chrono::milliseconds(wait_ms));
    std::error_code ec;
    co_await self->_timer.async_wait(asio::redirect_error(asio::use_awaitable, ec));
  }
}

}  // namespace mala::broker
