// The two things a coordinator does with its internal partition's log (__transaction_state; the group
// coordinator's __consumer_offsets works the same way): append a batch and learn once it is committed
// (acks=-1: the high watermark passed it), and read the log back from its start to its end when the
// partition becomes led here.
//
// Threads: the home shard (the shard of the internal topics' replicas).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <span>
#include <vector>

#include "mala/common/error_code.h"
#include "mala/protocol/record_batch.h"
#include "mala/replication/replica_manager.h"

namespace asio {
class io_context;
}

namespace mala::broker {

// Appends `batch` to the local leader replica of `tp` and calls `done` (posted to `home`, never inside the
// call) with NONE once the high watermark passed it, the append's error, or REQUEST_TIMED_OUT after
// `timeout_ms`. `alive` guards against the caller being gone when the timer fires.
void append_committed(asio::io_context& home, replication::replica_manager& replicas,
                      const replication::topic_partition& tp, std::vector<uint8_t> batch, int32_t timeout_ms,
                      std::shared_ptr<bool> alive, std::function<void(error_code)> done);

// Reads led partitions' logs from their start to their end (not the high watermark: after a whole-cluster
// crash a new leader's high watermark may sit below acknowledged records), in steps of at most
// `step_bytes`, yielding to the event loop between steps so requests keep flowing. A partition loaded again
// before its previous load finished starts over; the earlier load stops.
class partition_log_loader {
 public:
  // Every batch read (its bytes and a view of them), in offset order (`next_offset`: records below it were
  // seen already).
  using batch_callback = std::function<void(std::span<const uint8_t> bytes,
                                            const protocol::record_batch_view& batch, int64_t next_offset)>;
  // The end was reached (true), or the read failed or the replica stopped being the leader (false).
  using done_callback = std::function<void(bool loaded)>;

  partition_log_loader(asio::io_context& home, replication::replica_manager& replicas, int32_t step_bytes);
  ~partition_log_loader();
  partition_log_loader(const partition_log_loader&) = delete;
  partition_log_loader& operator=(const partition_log_loader&) = delete;

  void load(const replication::topic_partition& tp, batch_callback on_batch, done_callback on_done);
  void cancel(const replication::topic_partition& tp);
  void cancel_all();

 private:
  struct load_state;
  void step(const replication::topic_partition& tp, uint64_t generation);

  asio::io_context& _home;
  replication::replica_manager& _replicas;
  int32_t _step_bytes;
  std::map<replication::topic_partition, std::shared_ptr<load_state>> _loading;
  uint64_t _next_generation = 1;
  std::shared_ptr<bool> _alive = std::make_shared<bool>(true);
};

}  // namespace mala::broker
