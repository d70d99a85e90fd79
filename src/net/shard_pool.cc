#include "mala/net/shard_pool.h"

#include <sched.h>

#include <algorithm>

namespace mala::net {

size_t shard_pool::default_shard_count() {
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  if (sched_getaffinity(0, sizeof allowed, &allowed) == 0) {
    const int count = CPU_COUNT(&allowed);
    if (count > 0) return static_cast<size_t>(count);
  }
  return std::max(1u, std::thread::hardware_concurrency());
}

shard_pool::shard_pool(size_t shard_count) {
  if (shard_count == 0) shard_count = 1;
  for (size_t i = 0; i < shard_count; ++i) {
    // concurrency hint 1: each context is run by exactly one thread, so asio can skip internal locking.
    _contexts.push_back(std::make_unique<asio::io_context>(1));
  }
}

shard_pool::~shard_pool() {
  stop();
  join();
}

void shard_pool::start() {
  for (auto& ctx : _contexts) {
    _guards.push_back(std::make_unique<asio::executor_work_guard<asio::io_context::executor_type>>(
        asio::make_work_guard(*ctx)));
  }
  for (auto& ctx : _contexts) {
    _threads.emplace_back([c = ctx.get()] { c->run(); });
  }
}

void shard_pool::stop() {
  for (auto& ctx : _contexts) ctx->stop();
}

void shard_pool::join() {
  for (auto& t : _threads)
    if (t.joinable()) t.join();
  _threads.clear();
  _guards.clear();
}

}  // namespace mala::net
