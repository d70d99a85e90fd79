// An active quorum_controller for unit tests, brought up as the node brings up the one on the quorum's
// leader: opened as a standby, then activated with the image of everything the metadata log has committed
// (the metadata_loader's job on a node), which bootstraps an empty log. And a registered broker unfenced as
// the broker's lifecycle unfences it: by a heartbeat that reports it has caught up with the log.
#pragma once

#include <memory>
#include <string>
#include <utility>

#include "mala/controller/metadata_log.h"
#include "mala/controller/quorum_controller.h"
#include "mala/metadata/metadata_delta.h"

namespace mala::controller {

// The image of the committed records of `log`, on an image naming the cluster and this node as controller.
// A record the image refuses fails the replay with its offset.
inline result<metadata::metadata_image_ptr> committed_image(const metadata_log& log,
                                                            const controller_options& options) {
  auto base = std::make_shared<metadata::metadata_image>();
  base->cluster_id = options.cluster_id;
  base->controller_id = options.node_id;
  metadata::metadata_delta delta(base);
  auto replayed =
      log.replay(0, [&](const metadata::versioned_metadata_record& r, int64_t offset, int32_t epoch) {
        if (auto st = delta.apply(r.record, offset, epoch); !st.ok()) {
          return status::error(st.code,
                               "metadata log record at offset " + std::to_string(offset) + ": " + st.message);
        }
        return status::success();
      });
  if (!replayed.ok()) return replayed;
  return delta.build();
}

// Opens a controller on `log` and activates it with the log's committed image.
inline result<std::unique_ptr<quorum_controller>> open_active_controller(std::unique_ptr<metadata_log> log,
                                                                         controller_options options) {
  if (!log) return status::error(error_code::invalid_request, "no metadata log");
  auto image = committed_image(*log, options);
  if (!image.ok()) return image.error();
  auto controller = quorum_controller::open(std::move(log), std::move(options));
  if (!controller.ok()) return controller;
  if (!(*controller)->activate(std::move(*image))) {
    return status::error(error_code::kafka_storage_error, "the controller's bootstrap write failed");
  }
  return controller;
}

// The heartbeat at now_ms of broker `id` (registered at `epoch`) reporting every written record as applied:
// it unfences a fenced broker. Returns whether the broker is unfenced.
inline bool heartbeat_caught_up(quorum_controller& controller, int32_t id, int64_t epoch,
                                int64_t now_ms = 0) {
  protocol::broker_heartbeat_request request;
  request.broker_id = id;
  request.broker_epoch = epoch;
  request.current_metadata_offset = controller.last_written_offset();
  const auto response = controller.broker_heartbeat(request, now_ms);
  return response.error_code == 0 && !response.is_fenced;
}

// Registers a broker and unfences it with a caught-up heartbeat at now_ms; returns its epoch.
inline result<int64_t> register_unfenced_broker(quorum_controller& controller,
                                                const metadata::broker_registration& registration,
                                                int64_t now_ms = 0) {
  auto epoch = controller.register_broker(registration, -1, now_ms);
  if (!epoch.ok()) return epoch;
  if (!heartbeat_caught_up(controller, registration.id, *epoch, now_ms)) {
    return status::error(error_code::broker_not_available, "broker " + std::to_string(registration.id) +
                                                               " stayed fenced after a caught-up heartbeat");
  }
  return epoch;
}

}  // namespace mala::controller
