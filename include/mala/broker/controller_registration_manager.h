// A controller's own registration (Kafka's ControllerRegistrationManager, KIP-919): once the metadata log is
// at metadata.version 3.7-IV0 or later and does not hold this incarnation's RegisterControllerRecord, the
// node sends ControllerRegistration (its id, incarnation id, CONTROLLER listeners and supported features)
// through the controller channel, to the local active controller or forwarded to the remote one, and tries
// again with backoff until the record is applied. A registration removed later (UnregisterControllerRecord)
// is sent again while the node runs, as Kafka's manager does.
//
// Threads: the home shard only (shard 0), like the controller channel.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>

#include <asio/awaitable.hpp>
#include <asio/io_context.hpp>
#include <asio/steady_timer.hpp>

#include "mala/broker/controller_channel.h"
#include "mala/metadata/metadata_image.h"
#include "mala/protocol/messages/controller_registration_request.h"

namespace mala::broker {

struct controller_registration_options {
  // Id, a fresh incarnation id, the CONTROLLER listeners and the supported features.
  protocol::controller_registration_request registration;
  std::function<metadata::metadata_image_ptr()> image;  // the node's applied metadata image
  int32_t check_interval_ms = 1000;                     // how often the image is looked at once registered
  int32_t max_backoff_ms = 10000;                       // the longest wait after a failed attempt
};

class controller_registration_manager {
 public:
  controller_registration_manager(asio::io_context& io, controller_channel& channel,
                                  controller_registration_options options);
  ~controller_registration_manager();

  void start();
  void stop();

  // Whether the applied image holds this incarnation's registration.
  bool registered() const;

 private:
  struct state {
    bool stopped = false;
  };
  static asio::awaitable<void> run(controller_registration_manager* self, std::shared_ptr<state> st);
  // One attempt; whether the active controller accepted it.
  asio::awaitable<bool> register_once();

  asio::io_context& _io;
  controller_channel& _channel;
  controller_registration_options _options;
  std::shared_ptr<state> _state;
  asio::steady_timer _timer;
};

}  // namespace mala::broker
