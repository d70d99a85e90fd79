#include "mala/broker/coordinator_log.h"

#include <chrono>
#include <utility>

#include <asio/io_context.hpp>
#include <asio/post.hpp>
#include <asio/steady_timer.hpp>

#include "mala/common/logging.h"

namespace mala::broker {

void append_committed(asio::io_context& home, replication::replica_manager& replicas,
                      const replication::topic_partition& tp, std::vector<uint8_t> batch, int32_t timeout_ms,
                      std::shared_ptr<bool> alive, std::function<void(error_code)> done) {
  // Completions never run inside the call: they are posted to the home shard.
  auto complete = [&home, done = std::move(done)](error_code e) mutable {
    asio::post(home, [done = std::move(done), e]() mutable { done(e); });
  };
  auto* replica = replicas.get(tp);
  if (!replica) return complete(error_code::not_leader_or_follower);
  auto appended = replica->append(batch, -1);
  if (!appended) return complete(appended.error().code);
  if (appended->done) return complete(appended->error);

  struct pending {
    explicit pending(asio::io_context& io) : timer(io) {}
    bool fired = false;
    asio::steady_timer timer;
    replication::waiter_handle handle;
  };
  auto state = std::make_shared<pending>(home);
  auto finish = std::make_shared<std::function<void(error_code)>>(std::move(complete));
  state->handle =
      replica->add_high_watermark_waiter(appended->required_offset, [state, finish](error_code e) {
        if (state->fired) return;
        state->fired = true;
        state->timer.cancel();
        (*finish)(e);
      });
  if (state->fired) return;
  state->timer.expires_after(std::chrono::milliseconds(timeout_ms));
  state->timer.async_wait(
      [state, finish, &replicas, tp, alive = std::move(alive)](const std::error_code& ec) {
        if (ec || state->fired) return;
        state->fired = true;
        if (*alive) {
          if (auto* r = replicas.get(tp)) r->cancel_waiter(state->handle);
        }
        (*finish)(error_code::request_timed_out);
      });
}

struct partition_log_loader::load_state {
  int64_t next_offset = 0;
  uint64_t generation = 0;
  batch_callback on_batch;
  done_callback on_done;
};

partition_log_loader::partition_log_loader(asio::io_context& home, replication::replica_manager& replicas,
                                           int32_t step_bytes)
    : _home(home), _replicas(replicas), _step_bytes(step_bytes) {}

partition_log_loader::~partition_log_loader() {
  *_alive = false;
}

void partition_log_loader::load(const replication::topic_partition& tp, batch_callback on_batch,
                                done_callback on_done) {
  auto* replica = _replicas.get(tp);
  if (!replica) {
    on_done(false);
    return;
  }
  auto state = std::make_shared<load_state>();
  state->next_offset = replica->log_start_offset();
  state->generation = _next_generation++;
  state->on_batch = std::move(on_batch);
  state->on_done = std::move(on_done);
  _loading[tp] = state;
  step(tp, state->generation);
}

void partition_log_loader::cancel(const replication::topic_partition& tp) {
  _loading.erase(tp);
}

void partition_log_loader::cancel_all() {
  _loading.clear();
}

void partition_log_loader::step(const replication::topic_partition& tp, uint64_t generation) {
  auto it = _loading.find(tp);
  if (it == _loading.end() || it->second->generation != generation) return;
  auto state = it->second;  // the callbacks may cancel or restart this load
  auto finish = [this, &tp, &state](bool loaded) {
    auto again = _loading.find(tp);
    if (again != _loading.end() && again->second == state) _loading.erase(again);
    state->on_done(loaded);
  };
  auto* replica = _replicas.get(tp);
  if (!replica || !replica->is_leader()) return finish(false);
  int64_t next = state->next_offset;
  const int64_t end = replica->log_end_offset();
  int32_t budget = _step_bytes;
  while (next < end && budget > 0) {
    replication::read_request rr;
    rr.fetch_offset = next;
    rr.max_bytes = budget;
    rr.up_to_log_end = true;
    auto read = replica->read(rr);
    if (!read) {
      if (read.error().code == error_code::offset_out_of_range && next < replica->log_start_offset()) {
        next = replica->log_start_offset();  // retention or DeleteRecords moved the start meanwhile
        continue;
      }
      subsystem_logger("coordinator")
          ->error("loading {}-{} failed at offset {}: {}", tp.topic, tp.partition, next,
                  read.error().message);
      return finish(false);
    }
    if (!read->data || read->data->size <= 0 || !read->data->file) break;
    auto bytes = read->data->file->read(read->data->position, read->data->size);
    if (!bytes) {
      subsystem_logger("coordinator")
          ->error("loading {}-{}: read failed: {}", tp.topic, tp.partition, bytes.error().message);
      return finish(false);
    }
    budget -= static_cast<int32_t>(bytes->size());
    const int64_t before = next;
    protocol::batch_splitter splitter(*bytes);
    while (auto batch = splitter.next()) {
      protocol::record_batch_view view(*batch);
      if (!view.ok() || view.last_offset() < next) continue;
      state->on_batch(*batch, view, next);
      if (_loading.find(tp) == _loading.end() || _loading[tp] != state) return;  // cancelled by the callback
      next = view.last_offset() + 1;
    }
    if (next == before) break;  // nothing readable: stop rather than spin
  }
  state->next_offset = next;
  if (next >= end || budget > 0) return finish(true);
  asio::post(_home, [this, tp, generation, alive = _alive] {
    if (*alive) step(tp, generation);
  });
}

}  // namespace mala::broker
