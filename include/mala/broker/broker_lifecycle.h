// The broker's side of KIP-631's lifecycle on a Raft quorum (Kafka's BrokerLifecycleManager): it registers
// with the active controller (BrokerRegistration with a new incarnation id each start, its listeners, rack,
// log dir ids and the metadata.version range this binary supports), then heartbeats every
// broker.heartbeat.interval.ms with the offset of the metadata it has applied, so the controller unfences it
// once it has caught up. A heartbeat answered STALE_BROKER_EPOCH (the controller lost the registration, or
// fenced and forgot it) registers again; NOT_CONTROLLER or no answer retries at the next interval.
// controlled_shutdown() heartbeats with WantShutDown until the controller answers ShouldShutDown (it has
// moved this broker's leaderships away) or the time is up. on_caught_up fires at the first heartbeat answer
// with IsCaughtUp.
//
// Threads: shard 0 (its timers run on the io_context given).
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>

#include <asio/awaitable.hpp>
#include <asio/io_context.hpp>
#include <asio/steady_timer.hpp>

#include "mala/broker/controller_channel.h"
#include "mala/protocol/messages/broker_registration_request.h"

namespace mala::broker {

struct broker_lifecycle_options {
  protocol::broker_registration_request registration;
  int32_t heartbeat_interval_ms = 2000;              // broker.heartbeat.interval.ms
  std::function<int64_t()> applied_metadata_offset;  // the broker side's metadata offset
  std::function<int64_t()> clock_ms;
  // The finalized feature levels this node has applied (to name the feature when a registration is refused
  // with UNSUPPORTED_VERSION, whose answer carries no message).
  std::function<std::map<std::string, int16_t>()> finalized_features;
  // KIP-1066: the ids of the log dirs cordoned now (cordoned_log_dirs.h), sent in every heartbeat once the
  // broker has caught up; nullopt while metadata.version is below 4.3-IV0 (nothing is sent). Unset: never
  // sent.
  std::function<std::optional<std::vector<uuid>>()> cordoned_log_dirs;
  // KIP-858: how long a failed log dir may go unreported to the controller before the broker gives up and
  // stops (log.dir.failure.timeout.ms), and what stopping means (set by the node; unset: nothing happens).
  int64_t log_dir_failure_timeout_ms = 30000;
  std::function<void(const std::string& reason)> on_unreported_dir_failure;
};

// Why a registration with `registration`'s feature ranges is refused for the finalized levels: for each
// finalized feature outside its range, "<name> <level> (this broker supports <min>-<max>)", joined with
// "; ", and the kafka-features.sh downgrade that would let it register. Empty when every level is in range.
std::string unsupported_finalized_features(const protocol::broker_registration_request& registration,
                                           const std::map<std::string, int16_t>& finalized);

class broker_lifecycle {
 public:
  broker_lifecycle(asio::io_context& io, controller_channel& channel, broker_lifecycle_options options);
  ~broker_lifecycle();

  void start();
  void stop();
  // Asks the controller to move this broker's leaderships away; returns when it agreed or after timeout_ms.
  asio::awaitable<void> controlled_shutdown(int32_t timeout_ms);

  // Called once (on shard 0), at the first heartbeat answer that says this broker has caught up with the
  // metadata log (Kafka's initialCatchUpFuture: its broker listeners open then). Set before start().
  void set_on_caught_up(std::function<void()> callback) { _on_caught_up = std::move(callback); }

  // KIP-858 (BrokerLifecycleManager.propagateDirectoryFailure), on shard 0: log dir `dir` failed. Every
  // heartbeat from now on lists it in OfflineLogDirs, and the next one goes at once; when none carrying it
  // is answered within log_dir_failure_timeout_ms, on_unreported_dir_failure runs.
  void report_offline_log_dir(const uuid& dir);

  int64_t broker_epoch() const { return _state->epoch; }
  bool fenced() const { return _state->fenced; }

 private:
  struct state {
    std::atomic<int64_t> epoch = -1;  // read from every shard (their ISR changes carry it)
    bool fenced = true;
    bool stopped = false;
    bool shutting_down = false;
    bool caught_up = false;
    bool heartbeat_now = false;  // skip the wait before the next heartbeat
    // The failed log dirs, each with whether a heartbeat carrying it was answered.
    std::vector<std::pair<uuid, bool>> offline_dirs;
  };
  static asio::awaitable<void> run(broker_lifecycle* self, std::shared_ptr<state> st);
  asio::awaitable<bool> register_once();
  asio::awaitable<std::optional<bool>> heartbeat_once(bool want_shut_down);

  asio::io_context& _io;
  controller_channel& _channel;
  broker_lifecycle_options _options;
  std::function<void()> _on_caught_up;
  std::string _last_refusal;  // the last UNSUPPORTED_VERSION reason logged
  std::shared_ptr<state> _state;
  asio::steady_timer _timer;
};

}  // namespace mala::broker
