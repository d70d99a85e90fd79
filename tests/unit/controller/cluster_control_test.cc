// ClusterControlManager directly, on a plain image: registration (epochs, incarnations, directories,
// features), heartbeats moving a broker between fenced and unfenced, and session expiry.
#include "mala/controller/cluster_control.h"

#include <gtest/gtest.h>

#include "image_writer.h"
#include "mala/controller/feature_control.h"
#include "mala/controller/replication_control.h"

namespace mala::controller {
namespace {

class cluster_control_test : public ::testing::Test {
 protected:
  controller_options options() {
    controller_options o;
    o.node_id = 1;
    o.placement_seed = 42;
    o.broker_session_timeout_ms = 1000;
    return o;
  }

  protocol::broker_heartbeat_response heartbeat(int32_t id, int64_t epoch, int64_t now_ms, int64_t offset) {
    protocol::broker_heartbeat_request request;
    request.broker_id = id;
    request.broker_epoch = epoch;
    request.current_metadata_offset = offset;
    return _cluster.broker_heartbeat(request, now_ms);
  }

  image_writer _writer;
  replication_control _replication{_writer, options()};
  cluster_control _cluster{_writer, _replication, options()};
};

TEST_F(cluster_control_test, a_registration_starts_fenced_with_its_offset_as_epoch) {
  const int64_t next = _writer.next_offset();
  auto reg = test_registration(1);
  auto epoch = _cluster.register_broker(reg, -1, 0);
  ASSERT_TRUE(epoch.ok()) << epoch.error().message;
  EXPECT_EQ(*epoch, next);
  const auto& broker = _writer.image()->brokers.at(1);
  EXPECT_TRUE(broker.fenced);
  EXPECT_EQ(broker.epoch, next);
  EXPECT_FALSE(is_active_broker(*_writer.image(), 1));
  EXPECT_EQ(default_dir(*_writer.image(), 1), reg.log_dirs.front());

  // The same incarnation keeps its epoch; a new one gets a new epoch.
  EXPECT_EQ(*_cluster.register_broker(reg, -1, 0), next);
  reg.incarnation_id = uuid::random();
  auto again = _cluster.register_broker(reg, next, 0);
  ASSERT_TRUE(again.ok());
  EXPECT_GT(*again, next);
}

// KIP-919: a controller's registration is one RegisterControllerRecord that replaces the previous one of its
// id; below metadata.version 3.7-IV0 Kafka refuses it.
TEST_F(cluster_control_test, controller_registration_writes_one_record) {
  protocol::controller_registration_request request;
  request.controller_id = 3000;
  request.incarnation_id = uuid::random();
  request.listeners.push_back({"CONTROLLER", "ctl", 9093, 1});
  request.features.push_back({"metadata.version", 7, 33});
  ASSERT_TRUE(_cluster.register_controller(request).ok());
  ASSERT_EQ(_writer.batches.size(), 1u);
  ASSERT_EQ(_writer.batches[0].size(), 1u);
  EXPECT_TRUE(std::holds_alternative<protocol::register_controller_record>(_writer.batches[0][0].record));
  const auto& registered = _writer.image()->controllers.at(3000);
  EXPECT_EQ(registered.incarnation_id, request.incarnation_id);
  EXPECT_EQ(registered.endpoints.at(0), (metadata::broker_endpoint{"CONTROLLER", "ctl", 9093, "SSL"}));
  EXPECT_EQ(registered.supported_features.at("metadata.version"), (metadata::supported_feature{7, 33}));
  request.incarnation_id = uuid::random();
  ASSERT_TRUE(_cluster.register_controller(request).ok());
  EXPECT_EQ(_writer.image()->controllers.size(), 1u);
  EXPECT_EQ(_writer.image()->controllers.at(3000).incarnation_id, request.incarnation_id);

  protocol::feature_level_record old;
  old.name = "metadata.version";
  old.feature_level = 14;  // 3.6-IV2
  ASSERT_TRUE(_writer.write({versioned(old, record_v0)}).ok());
  const status refused = _cluster.register_controller(request);
  EXPECT_EQ(refused.code, error_code::unsupported_version);
  EXPECT_EQ(refused.message, "The current MetadataVersion is too old to support controller registrations.");
}

TEST_F(cluster_control_test, registrations_are_checked) {
  auto negative = test_registration(-1);
  EXPECT_EQ(_cluster.register_broker(negative, -1, 0).error().code, error_code::invalid_registration);
  auto reserved = test_registration(1);
  reserved.log_dirs = {metadata::directory_lost};
  EXPECT_EQ(_cluster.register_broker(reserved, -1, 0).error().message, "Reserved directory ID in request");
  auto first = test_registration(1);
  ASSERT_TRUE(_cluster.register_broker(first, -1, 0).ok());
  auto shared_dir = test_registration(2);
  shared_dir.log_dirs = first.log_dirs;
  EXPECT_EQ(_cluster.register_broker(shared_dir, -1, 0).error().message,
            "Broker 1 is already registered with directory " + first.log_dirs.front().to_string());
  auto old_binary = test_registration(3);
  old_binary.supported_features[std::string(metadata_version_feature)] = {1, 7};
  EXPECT_EQ(_cluster.register_broker(old_binary, -1, 0).error().code, error_code::unsupported_version);
}

TEST_F(cluster_control_test, a_caught_up_heartbeat_unfences_and_a_silent_broker_is_fenced) {
  auto epoch = _cluster.register_broker(test_registration(1), -1, 0);
  ASSERT_TRUE(epoch.ok());
  // Behind its registration: stays fenced.
  auto behind = heartbeat(1, *epoch, 0, *epoch - 1);
  EXPECT_EQ(behind.error_code, 0);
  EXPECT_TRUE(behind.is_fenced);
  EXPECT_FALSE(behind.is_caught_up);
  auto caught_up = heartbeat(1, *epoch, 100, *epoch);
  EXPECT_FALSE(caught_up.is_fenced);
  EXPECT_TRUE(is_active_broker(*_writer.image(), 1));

  EXPECT_EQ(heartbeat(1, *epoch + 1, 100, *epoch).error_code, to_wire(error_code::stale_broker_epoch));
  EXPECT_EQ(heartbeat(9, 0, 100, 0).error_code, to_wire(error_code::stale_broker_epoch));

  _cluster.fence_stale_brokers(1100);  // last contact + timeout >= now: still valid
  EXPECT_FALSE(_writer.image()->brokers.at(1).fenced);
  _cluster.fence_stale_brokers(1101);
  EXPECT_TRUE(_writer.image()->brokers.at(1).fenced);
}

// KIP-1066: a heartbeat's cordoned log dirs are recorded (BrokerRegistrationChangeRecord v3) when they change
// or were never recorded, from metadata.version 4.3-IV0; a broker whose dirs are all cordoned gets no new
// replicas.
TEST_F(cluster_control_test, cordoned_log_dirs_are_recorded_and_keep_the_broker_out_of_placement) {
  auto cordon = [this](int32_t id, int64_t epoch, std::optional<std::vector<uuid>> dirs) {
    protocol::broker_heartbeat_request request;
    request.broker_id = id;
    request.broker_epoch = epoch;
    request.current_metadata_offset = epoch;
    request.cordoned_log_dirs = std::move(dirs);
    return _cluster.broker_heartbeat(request, 0);
  };
  const auto reg1 = test_registration(1);
  const auto reg2 = test_registration(2);
  auto e1 = _cluster.register_broker(reg1, -1, 0);
  auto e2 = _cluster.register_broker(reg2, -1, 0);
  ASSERT_TRUE(e1.ok() && e2.ok());
  heartbeat(1, *e1, 0, *e1);
  heartbeat(2, *e2, 0, *e2);
  ASSERT_EQ(usable_brokers(*_writer.image()).size(), 2u);

  // Below metadata.version 4.3-IV0 the field is ignored.
  protocol::feature_level_record older;
  older.name = "metadata.version";
  older.feature_level = cordoned_log_dirs_metadata_version - 1;
  ASSERT_TRUE(_writer.write({versioned(older, record_v0)}).ok());
  size_t batches = _writer.batches.size();
  cordon(2, *e2, reg2.log_dirs);
  EXPECT_EQ(_writer.batches.size(), batches);
  EXPECT_FALSE(_writer.image()->brokers.at(2).cordoned_log_dirs);

  protocol::feature_level_record mv;
  mv.name = "metadata.version";
  mv.feature_level = cordoned_log_dirs_metadata_version;
  ASSERT_TRUE(_writer.write({versioned(mv, record_v0)}).ok());
  // Never recorded: an empty list is recorded too.
  cordon(1, *e1, std::vector<uuid>{});
  ASSERT_TRUE(_writer.image()->brokers.at(1).cordoned_log_dirs);
  EXPECT_TRUE(_writer.image()->brokers.at(1).cordoned_log_dirs->empty());
  EXPECT_TRUE(has_uncordoned_dirs(_writer.image()->brokers.at(1)));

  cordon(2, *e2, reg2.log_dirs);
  EXPECT_EQ(_writer.image()->brokers.at(2).cordoned_log_dirs, std::optional(reg2.log_dirs));
  EXPECT_FALSE(has_uncordoned_dirs(_writer.image()->brokers.at(2)));
  const auto usable = usable_brokers(*_writer.image());
  ASSERT_EQ(usable.size(), 1u);
  EXPECT_EQ(usable[0].id, 1);
  // The same dirs again, or no field (not known yet), write nothing.
  batches = _writer.batches.size();
  cordon(2, *e2, reg2.log_dirs);
  cordon(2, *e2, std::nullopt);
  EXPECT_EQ(_writer.batches.size(), batches);
  // Uncordoned: placed on again.
  cordon(2, *e2, std::vector<uuid>{});
  EXPECT_TRUE(has_uncordoned_dirs(_writer.image()->brokers.at(2)));
  EXPECT_EQ(usable_brokers(*_writer.image()).size(), 2u);
}

TEST_F(cluster_control_test, a_live_session_refuses_another_incarnation) {
  auto epoch = _cluster.register_broker(test_registration(1), -1, 0);
  ASSERT_TRUE(epoch.ok());
  heartbeat(1, *epoch, 0, *epoch);
  auto other = _cluster.register_broker(test_registration(1), *epoch, 500);
  ASSERT_FALSE(other.ok());
  EXPECT_EQ(other.error().code, error_code::duplicate_broker_registration);
  // Once the session has expired it may register.
  EXPECT_TRUE(_cluster.register_broker(test_registration(1), *epoch, 1500).ok());
}

TEST_F(cluster_control_test, reset_gives_every_broker_a_full_session) {
  auto epoch = _cluster.register_broker(test_registration(1), -1, 0);
  ASSERT_TRUE(epoch.ok());
  heartbeat(1, *epoch, 0, *epoch);
  _cluster.reset_heartbeat_deadlines(5000);
  _cluster.fence_stale_brokers(5900);
  EXPECT_FALSE(_writer.image()->brokers.at(1).fenced);
}

}  // namespace
}  // namespace mala::controller
