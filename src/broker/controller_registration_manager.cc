#include "mala/broker/controller_registration_manager.h"

#include <algorithm>
#include <chrono>

#include <asio/co_spawn.hpp>
#include <asio/detached.hpp>
#include <asio/redirect_error.hpp>
#include <asio/use_awaitable.hpp>

#include "handlers/controller_registration.h"
#include "mala/common/exponential_backoff.h"
#include "mala/common/logging.h"
#include "mala/controller/feature_control.h"
#include "mala/controller/quorum_controller.h"
#include "mala/net/coroutine_frame_warning.h"

namespace mala::broker {

controller_registration_manager::controller_registration_manager(asio::io_context& io,
                                                                 controller_channel& channel,
                                                                 controller_registration_options options)
    : _io(io),
      _channel(channel),
      _options(std::move(options)),
      _state(std::make_shared<state>()),
      _timer(io) {}

controller_registration_manager::~controller_registration_manager() {
  _state->stopped = true;
}

void controller_registration_manager::start() {
  asio::co_spawn(_io, run(this, _state), asio::detached);
}

void controller_registration_manager::stop() {
  _state->stopped = true;
  _timer.cancel();
}

bool controller_registration_manager::registered() const {
  const auto image = _options.image ? _options.image() : nullptr;
  if (!image) return false;
  auto it = image->controllers.find(_options.registration.controller_id);
  return it != image->controllers.end() && it->second.incarnation_id == _options.registration.incarnation_id;
}

asio::awaitable<bool> controller_registration_manager::register_once() {
  using handler = handlers::controller_registration_handler;
  const auto& req = _options.registration;
  auto answer = co_await _channel.call<handler::response>(
      req, 0, true, [&req](controller::quorum_controller& c) { return c.register_controller(req); });
  auto log = subsystem_logger("controller");
  if (!answer.ok()) {
    log->debug("controller registration not accepted yet (no controller answer)");
    co_return false;
  }
  if (answer.response->error_code != 0) {
    log->info("controller registration refused with error {}: {}", answer.response->error_code,
              answer.response->error_message.value_or(""));
    co_return false;
  }
  log->info("controller {} registered (incarnation {})", req.controller_id, req.incarnation_id.to_string());
  co_return true;
}

asio::awaitable<void> controller_registration_manager::run(controller_registration_manager* self,
                                                           std::shared_ptr<state> st) {
  exponential_backoff backoff(100, self->_options.max_backoff_ms);
  while (!st->stopped) {
    int32_t wait = self->_options.check_interval_ms;
    const auto image = self->_options.image ? self->_options.image() : nullptr;
    const bool supported = image && image->feature_level(std::string(controller::metadata_version_feature)) >=
                                        controller::controller_registration_metadata_version;
    if (supported && !self->registered()) {
      // Kafka's manager: exponential backoff from 100 ms after a failure.
      const bool accepted = co_await self->register_once();
      if (st->stopped) co_return;
      if (accepted) {
        backoff.reset();
      } else {
        wait = static_cast<int32_t>(backoff.after_failure());
      }
    }
    self->_timer.expires_after(std::chrono::milliseconds(wait));
    std::error_code ec;
    co_await self->_timer.async_wait(asio::redirect_error(asio::use_awaitable, ec));
  }
}

}  // namespace mala::broker
