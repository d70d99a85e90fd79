#include "mala/storage/file_worker.h"

#include <pthread.h>

#include <system_error>
#include <utility>

#include "mala/common/logging.h"

namespace mala::storage {

file_worker::~file_worker() {
  stop();
}

void file_worker::post(std::function<void()> job) {
  {
    std::unique_lock lock(_mutex);
    if (!_stopping) {
      if (!_thread.joinable()) {
        try {
          _thread = std::thread([this] { run(); });
        } catch (const std::system_error& e) {
          subsystem_logger("storage")->warn(
              "cannot start the file worker thread ({}); file work runs in place", e.what());
        }
      }
      if (_thread.joinable()) {
        _jobs.push_back(std::move(job));
        _wake.notify_one();
        return;
      }
    }
  }
  job();
}

void file_worker::stop() {
  {
    std::lock_guard lock(_mutex);
    _stopping = true;
    _wake.notify_one();
  }
  if (_thread.joinable()) _thread.join();
}

size_t file_worker::pending() const {
  std::lock_guard lock(_mutex);
  return _jobs.size() + _running;
}

bool file_worker::take_standby_place() {
  if (_standbys.fetch_add(1, std::memory_order_relaxed) < standby_places) return true;
  _standbys.fetch_sub(1, std::memory_order_relaxed);
  return false;
}

void file_worker::return_standby_place() {
  _standbys.fetch_sub(1, std::memory_order_relaxed);
}

void file_worker::run() {
  pthread_setname_np(pthread_self(), "file-worker");
  std::unique_lock lock(_mutex);
  for (;;) {
    _wake.wait(lock, [this] { return _stopping || !_jobs.empty(); });
    if (_jobs.empty()) return;  // stopping, and everything queued ran
    auto job = std::move(_jobs.front());
    _jobs.pop_front();
    ++_running;
    lock.unlock();
    job();
    lock.lock();
    --_running;
  }
}

}  // namespace mala::storage
