#include "mala/net/shard_pool.h"

#include <pthread.h>
#include <sched.h>
#include <time.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <string>
#include <vector>

#include <asio/post.hpp>

#include "mala/common/current_shard.h"
#include "mala/common/logging.h"

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

shard_pool::shard_pool(size_t shard_count) : _cpu_clocks(std::max<size_t>(shard_count, 1)) {
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
  _running.store(true, std::memory_order_release);
  for (size_t i = 0; i < _contexts.size(); ++i) {
    _threads.emplace_back([this, c = _contexts[i].get(), i] {
      const std::string name = "shard-" + std::to_string(i);  // at most 15 characters for the kernel
      pthread_setname_np(pthread_self(), name.substr(0, 15).c_str());
      set_current_shard(static_cast<int>(i));
      clockid_t clock{};
      if (pthread_getcpuclockid(pthread_self(), &clock) == 0) {
        _cpu_clocks[i].clock.store(clock, std::memory_order_relaxed);
        _cpu_clocks[i].known.store(true, std::memory_order_release);
      }
      c->run();
    });
  }
}

int64_t shard_pool::thread_cpu_nanos(size_t shard) const {
  if (shard >= _cpu_clocks.size() || !_cpu_clocks[shard].known.load(std::memory_order_acquire)) return 0;
  const clockid_t clock = _cpu_clocks[shard].clock.load(std::memory_order_relaxed);
  timespec ts{};
  if (clock_gettime(clock, &ts) != 0) return 0;
  return static_cast<int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

void shard_pool::run_on_each_and_wait(const std::function<void(size_t shard)>& fn) {
  // Before the threads run (start-up) or after they ended nothing else touches the shards' state. A thread
  // that is no shard while they run posts like any other caller.
  if (!running()) {
    for (size_t shard = 0; shard < _contexts.size(); ++shard) fn(shard);
    return;
  }
  const int here = current_shard();
  std::mutex mutex;
  std::condition_variable done;
  size_t pending = 0;
  std::vector<bool> answered(_contexts.size(), false);
  for (size_t shard = 0; shard < _contexts.size(); ++shard) {
    if (static_cast<int>(shard) == here) continue;
    ++pending;
    asio::post(*_contexts[shard], [&, shard] {
      fn(shard);
      std::lock_guard lock(mutex);
      answered[shard] = true;
      if (--pending == 0) done.notify_one();
    });
  }
  if (here >= 0) fn(static_cast<size_t>(here));
  std::unique_lock lock(mutex);
  // Every shard answers within microseconds; one that has not after 10 s is stuck, and the log names it (a
  // hang here is otherwise silent: the caller's shard serves nothing meanwhile, signals included).
  while (!done.wait_for(lock, std::chrono::seconds(10), [&] { return pending == 0; })) {
    std::string stuck;
    for (size_t shard = 0; shard < answered.size(); ++shard) {
      if (static_cast<int>(shard) != here && !answered[shard])
        stuck += (stuck.empty() ? "" : ",") + std::to_string(shard);
    }
    subsystem_logger("net")->error(
        "shard {} has waited 10 s more for shard(s) {} to run a task on each shard", here, stuck);
  }
}

void shard_pool::stop() {
  for (auto& ctx : _contexts) ctx->stop();
}

void shard_pool::join() {
  for (auto& t : _threads)
    if (t.joinable()) t.join();
  _threads.clear();
  _running.store(false, std::memory_order_release);
  _guards.clear();
}

}  // namespace mala::net
