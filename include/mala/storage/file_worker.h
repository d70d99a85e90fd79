// A background thread for the file work of the logs that must not run on a shard: creating the standby
// segment a log rolls to, renaming it to its base offset, trimming a rolled segment's indexes. Jobs run one
// at a time in the order posted, so work on one segment posted earlier is done before work posted later. The
// log manager owns one and hands it to every log it opens; a log without one does that work itself.
#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>

namespace mala::storage {

class file_worker {
 public:
  file_worker() = default;
  file_worker(const file_worker&) = delete;
  file_worker& operator=(const file_worker&) = delete;
  // Finishes the jobs posted and joins the thread.
  ~file_worker();

  // Queues the job; the thread starts with the first one. After stop(), or when no thread can be started,
  // the job runs now, on the caller's thread.
  void post(std::function<void()> job);
  // Runs what is queued, then ends the thread. Later posts run in place.
  void stop();
  // Jobs posted and not finished yet (tests and the log wait for none to be left).
  size_t pending() const;

  // Standby segments (log_segment::create_standby) are counted against a bound, so that logs that stopped
  // near a roll cannot hold descriptors and index mappings without limit: a log takes a place before it asks
  // for one and gives it back once its standby is adopted or discarded; without a place it rolls in place.
  bool take_standby_place();
  void return_standby_place();
  static constexpr int standby_places = 512;

 private:
  void run();

  std::atomic<int> _standbys{0};
  mutable std::mutex _mutex;
  std::condition_variable _wake;
  std::deque<std::function<void()>> _jobs;
  size_t _running = 0;
  bool _stopping = false;
  std::thread _thread;
};

}  // namespace mala::storage
