// Brokers as the controller sees them (Kafka's ClusterControlManager with its BrokerHeartbeatManager):
// registration (BrokerRegistration: epochs, incarnations, log directories, features), heartbeats and the
// broker states they move through (fenced, unfenced, controlled shutdown), and the fencing of brokers whose
// sessions expired. The partition changes that follow a broker's fencing, unfencing, controlled shutdown or
// unclean shutdown are replication_control's; cluster_control asks it for them and writes them in the same
// batch as the broker's own records.
//
// Threads: used on the controller's thread only (shard 0). Session times (in memory only, see
// broker_heartbeat_manager) are the caller's milliseconds. The free functions are pure.
#pragma once

#include <cstdint>
#include <vector>

#include "mala/common/result.h"
#include "mala/common/uuid.h"
#include "mala/controller/broker_heartbeat_manager.h"
#include "mala/controller/controller_options.h"
#include "mala/controller/controller_records.h"
#include "mala/controller/replica_placement.h"
#include "mala/metadata/metadata_image.h"
#include "mala/protocol/messages/broker_heartbeat_request.h"
#include "mala/protocol/messages/broker_heartbeat_response.h"
#include "mala/protocol/messages/controller_registration_request.h"

namespace mala::controller {

class replication_control;

// ClusterControlManager.isActive: registered, unfenced and not in controlled shutdown.
bool is_active_broker(const metadata::metadata_image& image, int32_t id);
// KIP-1066 (BrokerRegistration.hasUncordonedDirs): whether some log dir of the broker is not cordoned; true
// for a broker that registered no dirs or whose cordoned dirs were never recorded.
bool has_uncordoned_dirs(const metadata::broker_registration& broker);
// The active brokers with their racks that have a log dir not cordoned: where new replicas may be placed.
std::vector<placement_broker> usable_brokers(const metadata::metadata_image& image);
// ClusterControlManager.defaultDir (KIP-858): a broker with one log dir gets its new replicas there; one with
// several leaves the choice to the broker (UNASSIGNED); one that registered none predates directory ids
// (MIGRATING).
uuid default_dir(const metadata::metadata_image& image, int32_t id);

class cluster_control {
 public:
  // `replication` supplies the partition changes of broker state changes; both outlive this.
  cluster_control(metadata_writer& writer, replication_control& replication,
                  const controller_options& options);

  // BrokerRegistration (ClusterControlManager.registerBroker); see quorum_controller::register_broker.
  result<int64_t> register_broker(const metadata::broker_registration& registration,
                                  int64_t previous_broker_epoch, int64_t now_ms);
  // BrokerHeartbeat (ReplicationControlManager.processBrokerHeartbeat); see
  // quorum_controller::broker_heartbeat.
  protocol::broker_heartbeat_response broker_heartbeat(const protocol::broker_heartbeat_request& request,
                                                       int64_t now_ms);
  // Fences, in one batch, every unfenced broker whose session expired by now_ms.
  void fence_stale_brokers(int64_t now_ms);
  // UnregisterBroker (QuorumController.unregisterBroker): BROKER_ID_NOT_REGISTERED unless `id` is registered;
  // otherwise replication_control's partition changes and UnregisterBrokerRecord, and its session is
  // forgotten.
  status unregister_broker(int32_t id);
  // ControllerRegistration (QuorumController.registerController, KIP-919): UNSUPPORTED_VERSION below
  // metadata.version 3.7-IV0, otherwise one RegisterControllerRecord v0, replacing any earlier registration
  // of the id.
  status register_controller(const protocol::controller_registration_request& request);
  // Every registered broker's session starts afresh at now_ms (ClusterControlManager.activate).
  void reset_heartbeat_deadlines(int64_t now_ms);

 private:
  metadata_writer& _writer;
  replication_control& _replication;
  broker_heartbeat_manager _sessions;
};

}  // namespace mala::controller
