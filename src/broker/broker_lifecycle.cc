#include "mala/broker/broker_lifecycle.h"

#include <algorithm>
#include <chrono>
#include <utility>

#include <asio/co_spawn.hpp>
#include <asio/detached.hpp>
#include <asio/redirect_error.hpp>
#include <asio/use_awaitable.hpp>

#include "handlers/broker_heartbeat.h"
#include "handlers/broker_registration.h"
#include "mala/common/logging.h"

namespace mala::broker {

namespace {
// Versions sent: the newest each side of a Kafka 4.x cluster speaks.
constexpr int16_t registration_version = 4;
constexpr int16_t heartbeat_version = 2;  // v2: CordonedLogDirs (KIP-1066)
}  // namespace

std::string unsupported_finalized_features(const protocol::broker_registration_request& registration,
                                           const std::map<std::string, int16_t>& finalized) {
  std::string problems;
  std::string downgrade;
  for (const auto& [name, level] : finalized) {
    int16_t min = 0;
    int16_t max = 0;
    for (const auto& f : registration.features) {
      if (f.name == name) {
        min = f.min_supported_version;
        max = f.max_supported_version;
      }
    }
    if (level >= min && level <= max) continue;
    if (!problems.empty()) problems += "; ";
    problems += name + " " + std::to_string(level) + " (this broker supports " + std::to_string(min) + "-" +
                std::to_string(max) + ")";
    downgrade += " --feature " + name + "=" + std::to_string(max);
  }
  if (problems.empty()) return problems;
  return problems +
         ". Mala does not implement those levels; lower them before moving the cluster to "
         "Mala: kafka-features.sh --bootstrap-server <broker> downgrade" +
         downgrade;
}

broker_lifecycle::broker_lifecycle(asio::io_context& io, controller_channel& channel,
                                   broker_lifecycle_options options)
    : _io(io),
      _channel(channel),
      _options(std::move(options)),
      _state(std::make_shared<state>()),
      _timer(io) {}

broker_lifecycle::~broker_lifecycle() {
  _state->stopped = true;
}

void broker_lifecycle::start() {
  asio::co_spawn(_io, run(this, _state), asio::detached);
}

void broker_lifecycle::stop() {
  _state->stopped = true;
  _timer.cancel();
}

asio::awaitable<bool> broker_lifecycle::register_once() {
  using handler = handlers::broker_registration_handler;
  const auto& req = _options.registration;
  auto clock = _options.clock_ms;
  auto answer = co_await _channel.call<handler::response>(
      req, registration_version, true,
      [&req, &clock](controller::quorum_controller& c) {
        return handler::register_on_controller(c, req, clock ? clock() : 0);
      },
      _options.heartbeat_interval_ms);
  auto log = subsystem_logger("broker");
  if (!answer.ok()) {
    log->debug("broker registration not accepted yet (no controller answer)");
    co_return false;
  }
  if (answer.response->error_code != 0) {
    // DUPLICATE_BROKER_REGISTRATION after a crash lasts until the controller fences the old session.
    std::string reason;
    if (answer.response->error_code == to_wire(error_code::unsupported_version) &&
        _options.finalized_features) {
      reason = unsupported_finalized_features(req, _options.finalized_features());
    }
    if (!reason.empty()) {
      // A cluster Kafka formatted finalizes features Mala does not implement (share.version and
      // streams.version by default in 4.4): say which, and how to lower them, once per distinct reason.
      if (reason != _last_refusal) {
        log->error("broker registration refused: the cluster finalized {}; will retry", reason);
        _last_refusal = reason;
      }
    } else {
      log->info("broker registration refused with error {}, will retry", answer.response->error_code);
    }
    co_return false;
  }
  _state->epoch = answer.response->broker_epoch;
  log->info("broker {} registered with broker epoch {}", req.broker_id, _state->epoch);
  co_return true;
}

asio::awaitable<std::optional<bool>> broker_lifecycle::heartbeat_once(bool want_shut_down) {
  using handler = handlers::broker_heartbeat_handler;
  handler::request req;
  req.broker_id = _options.registration.broker_id;
  req.broker_epoch = _state->epoch;
  req.current_metadata_offset = _options.applied_metadata_offset ? _options.applied_metadata_offset() : 0;
  req.want_fence = false;
  req.want_shut_down = want_shut_down;
  // BrokerLifecycleManager: the cordoned dirs only once the broker caught up (null before: not yet known).
  if (_state->caught_up && _options.cordoned_log_dirs) req.cordoned_log_dirs = _options.cordoned_log_dirs();
  for (const auto& [dir, reported] : _state->offline_dirs) req.offline_log_dirs.push_back(dir);
  auto clock = _options.clock_ms;
  auto answer = co_await _channel.call<handler::response>(
      req, heartbeat_version, true,
      [&req, &clock](controller::quorum_controller& c) {
        return handler::heartbeat_on_controller(c, req, clock ? clock() : 0);
      },
      _options.heartbeat_interval_ms);
  if (!answer.ok()) co_return std::nullopt;
  const auto& resp = *answer.response;
  if (resp.error_code == to_wire(error_code::stale_broker_epoch)) {
    _state->epoch = -1;  // register again
    co_return std::nullopt;
  }
  if (resp.error_code != 0) co_return std::nullopt;
  for (auto& [dir, reported] : _state->offline_dirs) {
    if (std::find(req.offline_log_dirs.begin(), req.offline_log_dirs.end(), dir) !=
        req.offline_log_dirs.end())
      reported = true;
  }
  if (_state->fenced != resp.is_fenced) {
    subsystem_logger("broker")->info("broker {} is {}", req.broker_id,
                                     resp.is_fenced ? "fenced" : "unfenced");
  }
  _state->fenced = resp.is_fenced;
  if (resp.is_caught_up && !_state->caught_up) {
    _state->caught_up = true;
    subsystem_logger("broker")->info("broker {} has caught up with the metadata log", req.broker_id);
    if (_on_caught_up) _on_caught_up();
  }
  co_return resp.should_shut_down;
}

asio::awaitable<void> broker_lifecycle::run(broker_lifecycle* self, std::shared_ptr<state> st) {
  while (!st->stopped) {
    st->heartbeat_now = false;  // a dir failing from here on asks for the heartbeat after this one
    if (!st->shutting_down) {
      if (st->epoch < 0) {
        const bool registered = co_await self->register_once();
        if (st->stopped) co_return;
        // A new registration heartbeats at once so that it is unfenced as soon as it has caught up.
        if (registered) (void)co_await self->heartbeat_once(false);
      } else {
        (void)co_await self->heartbeat_once(false);
      }
    }
    if (st->stopped) co_return;
    if (st->heartbeat_now) continue;
    const int32_t wait = st->epoch < 0 ? 500 : (st->fenced ? 250 : self->_options.heartbeat_interval_ms);
    self->_timer.expires_after(std::chrono::milliseconds(wait));
    std::error_code ec;
    co_await self->_timer.async_wait(asio::redirect_error(asio::use_awaitable, ec));
  }
}

void broker_lifecycle::report_offline_log_dir(const uuid& dir) {
  auto& dirs = _state->offline_dirs;
  if (std::any_of(dirs.begin(), dirs.end(), [&dir](const auto& d) { return d.first == dir; })) return;
  dirs.emplace_back(dir, false);
  subsystem_logger("broker")->warn("log dir {} failed: telling the controller in the next heartbeat",
                                   dir.to_string());
  // BrokerLifecycleManager: the next heartbeat goes now (after the one in flight, if any).
  _state->heartbeat_now = true;
  _timer.cancel();
  // OfflineDirBrokerFailureEvent: a controller that never hears of the failure would keep this broker leading
  // replicas it can no longer serve; the broker stops instead so that they move.
  auto deadline = std::make_shared<asio::steady_timer>(_io);
  deadline->expires_after(std::chrono::milliseconds(_options.log_dir_failure_timeout_ms));
  deadline->async_wait(
      [deadline, st = _state, dir, fail = _options.on_unreported_dir_failure](const std::error_code& ec) {
        if (ec || st->stopped || !fail) return;
        for (const auto& [d, reported] : st->offline_dirs) {
          if (d == dir && !reported) {
            fail("could not tell the controller that log dir " + dir.to_string() + " failed");
            return;
          }
        }
      });
}

asio::awaitable<void> broker_lifecycle::controlled_shutdown(int32_t timeout_ms) {
  if (_state->epoch < 0) co_return;
  _state->shutting_down = true;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  asio::steady_timer pause(_io);
  bool first = true;
  while (std::chrono::steady_clock::now() < deadline) {
    auto done = co_await heartbeat_once(true);
    if (done && *done) {
      subsystem_logger("broker")->info("controlled shutdown: the controller moved this broker's leaderships");
      co_return;
    }
    // The first answer only starts the controlled shutdown; asked again at once, a controller whose brokers
    // have all applied the moves (a lone node has as it commits) lets this one stop without a pause.
    pause.expires_after(std::chrono::milliseconds(first ? 0 : 200));
    first = false;
    std::error_code ec;
    co_await pause.async_wait(asio::redirect_error(asio::use_awaitable, ec));
  }
  subsystem_logger("broker")->warn("controlled shutdown timed out after {} ms", timeout_ms);
}

}  // namespace mala::broker
