// ReplicationControlManager directly, on a plain image: topics created over the active brokers, ISR changes
// from the leader, elections, and the partition changes of a broker's fencing.
#include "mala/controller/replication_control.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "image_writer.h"
#include "mala/controller/cluster_control.h"

namespace mala::controller {
namespace {

class replication_control_test : public ::testing::Test {
 protected:
  void SetUp() override {
    // Three brokers, each unfenced by the heartbeat that reports it has caught up with its registration.
    for (int32_t id : {1, 2, 3}) {
      auto epoch = _cluster.register_broker(test_registration(id), -1, 0);
      ASSERT_TRUE(epoch.ok()) << epoch.error().message;
      _epochs[id] = *epoch;
      protocol::broker_heartbeat_request heartbeat;
      heartbeat.broker_id = id;
      heartbeat.broker_epoch = *epoch;
      heartbeat.current_metadata_offset = *epoch;
      ASSERT_FALSE(_cluster.broker_heartbeat(heartbeat, 0).is_fenced);
    }
  }

  static controller_options options() {
    controller_options o;
    o.node_id = 1;
    o.placement_seed = 42;
    o.default_replication_factor = 3;
    return o;
  }

  protocol::create_topics_response create(const std::string& name, int32_t partitions, int16_t rf) {
    protocol::create_topics_request request;
    auto& t = request.topics.emplace_back();
    t.name = name;
    t.num_partitions = partitions;
    t.replication_factor = rf;
    return _replication.create_topics(request);
  }
  const metadata::partition_state& partition(const std::string& topic, int32_t p) {
    return _writer.image()->find_topic(topic)->partitions.at(static_cast<size_t>(p));
  }

  image_writer _writer;
  replication_control _replication{_writer, options()};
  cluster_control _cluster{_writer, _replication, options()};
  std::map<int32_t, int64_t> _epochs;
};

TEST_F(replication_control_test, create_topics_places_replicas_on_active_brokers) {
  auto response = create("t", 2, 3);
  ASSERT_EQ(response.topics.size(), 1u);
  EXPECT_EQ(response.topics[0].error_code, 0);
  EXPECT_EQ(response.topics[0].num_partitions, 2);
  EXPECT_EQ(response.topics[0].replication_factor, 3);
  const auto& p = partition("t", 0);
  EXPECT_EQ(p.replicas.size(), 3u);
  EXPECT_EQ(p.isr, p.replicas);
  EXPECT_EQ(p.leader, p.replicas.front());

  EXPECT_EQ(create("t", 1, 1).topics[0].error_code, to_wire(error_code::topic_already_exists));
  EXPECT_EQ(create("x", 1, 4).topics[0].error_code, to_wire(error_code::invalid_replication_factor));
  auto collision = create("t.", 1, 1);
  EXPECT_EQ(collision.topics[0].error_code, 0);
  EXPECT_EQ(create("t_", 1, 1).topics[0].error_message, "Topic 't_' collides with existing topic: t.");
}

TEST_F(replication_control_test, delete_topics_by_name) {
  create("t", 1, 1);
  protocol::delete_topics_request request;
  request.topic_names = {"t", "missing"};
  auto response = _replication.delete_topics(request, 5);
  ASSERT_EQ(response.responses.size(), 2u);
  EXPECT_EQ(response.responses[0].error_code, to_wire(error_code::unknown_topic_or_partition));
  EXPECT_EQ(response.responses[1].error_code, 0);
  EXPECT_EQ(_writer.image()->find_topic("t"), nullptr);
}

TEST_F(replication_control_test, alter_partition_shrinks_the_isr) {
  create("t", 1, 3);
  const auto p = partition("t", 0);
  protocol::alter_partition_request request;
  request.broker_id = p.leader;
  request.broker_epoch = _epochs[p.leader];
  auto& topic = request.topics.emplace_back();
  topic.topic_id = _writer.image()->find_topic("t")->id;
  auto& data = topic.partitions.emplace_back();
  data.partition_index = 0;
  data.leader_epoch = p.leader_epoch;
  data.partition_epoch = p.partition_epoch;
  data.new_isr_with_epochs.push_back({p.leader, _epochs[p.leader]});
  auto response = _replication.alter_partition(request, 3);
  EXPECT_EQ(response.error_code, 0);
  ASSERT_EQ(response.topics.at(0).partitions.size(), 1u);
  EXPECT_EQ(response.topics[0].partitions[0].error_code, 0);
  EXPECT_EQ(response.topics[0].partitions[0].isr, std::vector<int32_t>{p.leader});
  EXPECT_EQ(partition("t", 0).isr, std::vector<int32_t>{p.leader});
  EXPECT_EQ(partition("t", 0).partition_epoch, p.partition_epoch + 1);

  // The same epoch again is stale.
  EXPECT_EQ(_replication.alter_partition(request, 3).topics[0].partitions[0].error_code,
            to_wire(error_code::invalid_update_version));
  request.broker_epoch = -5;
  EXPECT_EQ(_replication.alter_partition(request, 3).error_code, to_wire(error_code::stale_broker_epoch));
}

// KIP-858: a broker names the log dir of its replicas; the controller records it in Directories, and a dir
// the broker did not register (offline) also takes the broker out of the ISR.
TEST_F(replication_control_test, assign_replicas_to_dirs_records_the_directory) {
  create("t", 2, 3);
  const auto image = _writer.image();
  const uuid topic_id = image->find_topic("t")->id;
  const int32_t broker = partition("t", 0).replicas.at(1);  // a follower
  const uuid dir = image->brokers.at(broker).log_dirs.at(0);
  auto request_for = [&](const uuid& to_dir, std::vector<int32_t> partitions) {
    protocol::assign_replicas_to_dirs_request request;
    request.broker_id = broker;
    request.broker_epoch = _epochs[broker];
    auto& d = request.directories.emplace_back();
    d.id = to_dir;
    auto& t = d.topics.emplace_back();
    t.topic_id = topic_id;
    for (int32_t p : partitions) t.partitions.emplace_back().partition_index = p;
    return request;
  };
  auto directory_of = [&](int32_t p) {
    const auto& state = partition("t", p);
    const auto at = std::find(state.replicas.begin(), state.replicas.end(), broker) - state.replicas.begin();
    return state.directories.at(static_cast<size_t>(at));
  };

  // A broker registered with one dir has it recorded at creation (the controller's defaultDir): assigning it
  // again writes nothing.
  EXPECT_EQ(directory_of(0), dir);
  const auto epoch_before = partition("t", 0).partition_epoch;
  auto response = _replication.assign_replicas_to_dirs(request_for(dir, {0, 1, 7}));
  EXPECT_EQ(response.error_code, 0);
  const auto& answers = response.directories.at(0).topics.at(0).partitions;
  ASSERT_EQ(answers.size(), 3u);
  EXPECT_EQ(answers[0].error_code, 0);
  EXPECT_EQ(answers[1].error_code, 0);
  EXPECT_EQ(answers[2].error_code, to_wire(error_code::unknown_topic_or_partition));
  EXPECT_EQ(partition("t", 0).partition_epoch, epoch_before);

  // A dir the broker did not register (offline): recorded, and the broker leaves the ISR.
  const uuid unknown_dir = uuid::random();
  EXPECT_EQ(_replication.assign_replicas_to_dirs(request_for(unknown_dir, {0})).error_code, 0);
  EXPECT_EQ(directory_of(0), unknown_dir);
  EXPECT_GT(partition("t", 0).partition_epoch, epoch_before);
  EXPECT_EQ(std::count(partition("t", 0).isr.begin(), partition("t", 0).isr.end(), broker), 0);
  EXPECT_EQ(directory_of(1), dir);  // the other partition is untouched
  EXPECT_EQ(partition("t", 1).isr.size(), 3u);
  // UNASSIGNED counts as online (DirectoryId.isOnline): recorded, the ISR kept.
  EXPECT_EQ(_replication.assign_replicas_to_dirs(request_for(metadata::directory_unassigned, {1})).error_code,
            0);
  EXPECT_EQ(directory_of(1), metadata::directory_unassigned);
  EXPECT_EQ(partition("t", 1).isr.size(), 3u);
  // Back in its registered dir: recorded again, the ISR left to the leader (AlterPartition expands it).
  const auto epoch_moved = partition("t", 0).partition_epoch;
  EXPECT_EQ(_replication.assign_replicas_to_dirs(request_for(dir, {0})).error_code, 0);
  EXPECT_EQ(directory_of(0), dir);
  EXPECT_EQ(partition("t", 0).partition_epoch, epoch_moved + 1);

  auto unknown_topic = request_for(dir, {0});
  unknown_topic.directories[0].topics[0].topic_id = uuid::random();
  EXPECT_EQ(
      _replication.assign_replicas_to_dirs(unknown_topic).directories[0].topics[0].partitions[0].error_code,
      to_wire(error_code::unknown_topic_id));
  auto stale = request_for(dir, {0});
  stale.broker_epoch = -5;
  EXPECT_EQ(_replication.assign_replicas_to_dirs(stale).error_code, to_wire(error_code::stale_broker_epoch));
}

// A replica of another broker is not this broker's to assign.
TEST_F(replication_control_test, assign_replicas_to_dirs_refuses_a_partition_the_broker_does_not_replicate) {
  create("one", 1, 1);
  const int32_t owner = partition("one", 0).replicas.at(0);
  const int32_t other = owner == 1 ? 2 : 1;
  protocol::assign_replicas_to_dirs_request request;
  request.broker_id = other;
  request.broker_epoch = _epochs[other];
  auto& d = request.directories.emplace_back();
  d.id = _writer.image()->brokers.at(other).log_dirs.at(0);
  auto& t = d.topics.emplace_back();
  t.topic_id = _writer.image()->find_topic("one")->id;
  t.partitions.emplace_back().partition_index = 0;
  EXPECT_EQ(_replication.assign_replicas_to_dirs(request).directories[0].topics[0].partitions[0].error_code,
            to_wire(error_code::not_leader_or_follower));
}

// KIP-858 (handleDirectoriesOffline): a heartbeat reporting a failed dir takes the broker out of the ISRs of
// the replicas recorded in that dir and moves their leaderships; the registration keeps the other dirs, and
// replicas there are untouched. The broker may not lead from the failed dir again.
TEST_F(replication_control_test, a_dir_reported_offline_in_a_heartbeat_moves_its_replicas_leaderships) {
  // Broker 4 registers two dirs and takes the leadership of a topic placed on it.
  auto registration = test_registration(4);
  const uuid failing = uuid::random();
  const uuid healthy = uuid::random();
  registration.log_dirs = {failing, healthy};
  auto epoch = _cluster.register_broker(registration, -1, 0);
  ASSERT_TRUE(epoch.ok()) << epoch.error().message;
  protocol::broker_heartbeat_request heartbeat;
  heartbeat.broker_id = 4;
  heartbeat.broker_epoch = *epoch;
  heartbeat.current_metadata_offset = *epoch;
  ASSERT_FALSE(_cluster.broker_heartbeat(heartbeat, 0).is_fenced);
  protocol::create_topics_request request;
  auto& t = request.topics.emplace_back();
  t.name = "jbod";
  t.num_partitions = -1;
  t.replication_factor = -1;
  for (int32_t p = 0; p < 2; ++p) {
    auto& a = t.assignments.emplace_back();
    a.partition_index = p;
    a.broker_ids = {4, 1, 2};
  }
  ASSERT_EQ(_replication.create_topics(request).topics.at(0).error_code, 0);
  // Partition 0 in the dir that fails, partition 1 in the other.
  protocol::assign_replicas_to_dirs_request assign;
  assign.broker_id = 4;
  assign.broker_epoch = *epoch;
  for (auto [dir, p] : {std::pair{failing, 0}, std::pair{healthy, 1}}) {
    auto& d = assign.directories.emplace_back();
    d.id = dir;
    auto& at = d.topics.emplace_back();
    at.topic_id = _writer.image()->find_topic("jbod")->id;
    at.partitions.emplace_back().partition_index = p;
  }
  ASSERT_EQ(_replication.assign_replicas_to_dirs(assign).error_code, 0);
  ASSERT_EQ(partition("jbod", 0).leader, 4);
  ASSERT_EQ(partition("jbod", 1).leader, 4);

  heartbeat.offline_log_dirs = {failing};
  ASSERT_EQ(_cluster.broker_heartbeat(heartbeat, 0).error_code, 0);
  const auto image = _writer.image();
  EXPECT_EQ(image->brokers.at(4).log_dirs, std::vector<uuid>{healthy});
  EXPECT_FALSE(image->brokers.at(4).fenced);
  EXPECT_EQ(partition("jbod", 0).leader, 1);
  EXPECT_EQ(partition("jbod", 0).isr, (std::vector<int32_t>{1, 2}));
  EXPECT_TRUE(image->replica_in_offline_dir(partition("jbod", 0), 4));
  EXPECT_EQ(partition("jbod", 1).leader, 4);
  EXPECT_EQ(partition("jbod", 1).isr.size(), 3u);
  EXPECT_FALSE(image->replica_in_offline_dir(partition("jbod", 1), 4));

  // Reported again: nothing more is written.
  const int64_t end = _writer.next_offset();
  ASSERT_EQ(_cluster.broker_heartbeat(heartbeat, 0).error_code, 0);
  EXPECT_EQ(_writer.next_offset(), end);

  // A preferred election does not hand the partition back to the replica in the failed dir, even were it in
  // the ISR.
  protocol::elect_leaders_request elect;
  elect.election_type = 0;
  elect.topic_partitions.emplace();
  auto& et = elect.topic_partitions->emplace_back();
  et.topic = "jbod";
  et.partitions = {0};
  _replication.elect_leaders(elect, 1);
  EXPECT_EQ(partition("jbod", 0).leader, 1);
}

TEST_F(replication_control_test, fencing_moves_leadership_within_the_isr) {
  create("t", 1, 3);
  const auto before = partition("t", 0);
  record_list records;
  _replication.append_fence_records(*_writer.image(), {before.leader}, records);
  ASSERT_TRUE(_writer.write(records).ok());
  const auto& after = partition("t", 0);
  EXPECT_NE(after.leader, before.leader);
  EXPECT_NE(after.leader, metadata::no_leader);
  EXPECT_EQ(after.isr.size(), 2u);
  EXPECT_TRUE(_writer.image()->brokers.at(before.leader).fenced);
  EXPECT_TRUE(leads_any(*_writer.image(), after.leader));
  EXPECT_FALSE(leads_any(*_writer.image(), before.leader));

  // Unfenced again, it leads nothing until an election; it is back in no ISR.
  record_list unfence;
  _replication.append_unfence_records(*_writer.image(), before.leader, _epochs[before.leader], unfence);
  ASSERT_TRUE(_writer.write(unfence).ok());
  EXPECT_FALSE(_writer.image()->brokers.at(before.leader).fenced);
  EXPECT_FALSE(leads_any(*_writer.image(), before.leader));
}

TEST_F(replication_control_test, preferred_elections) {
  create("t", 1, 3);
  protocol::elect_leaders_request request;
  request.election_type = 0;
  request.topic_partitions.emplace();
  auto& tp = request.topic_partitions->emplace_back();
  tp.topic = "t";
  tp.partitions = {0, 5};
  auto response = _replication.elect_leaders(request, 1);
  ASSERT_EQ(response.replica_election_results.size(), 1u);
  const auto& results = response.replica_election_results[0].partition_result;
  ASSERT_EQ(results.size(), 2u);
  EXPECT_EQ(results[0].error_code, to_wire(error_code::election_not_needed));
  EXPECT_EQ(results[1].error_code, to_wire(error_code::unknown_topic_or_partition));

  // The preferred replica fenced, then back and in the ISR again: the election moves leadership to it.
  const int32_t preferred = partition("t", 0).replicas.front();
  record_list records;
  _replication.append_fence_records(*_writer.image(), {preferred}, records);
  _replication.append_unfence_records(*_writer.image(), preferred, _epochs[preferred], records);
  ASSERT_TRUE(_writer.write(records).ok());
  EXPECT_NE(partition("t", 0).leader, preferred);
  tp.partitions = {0};
  response = _replication.elect_leaders(request, 1);
  EXPECT_EQ(response.replica_election_results[0].partition_result.at(0).error_code,
            to_wire(error_code::preferred_leader_not_available));
}

TEST_F(replication_control_test, a_min_isr_change_clears_the_elr) {
  create("t", 1, 1);
  record_list records;
  protocol::config_record c;
  c.resource_type = static_cast<int8_t>(metadata::config_resource_type::topic);
  c.resource_name = "t";
  c.name = "min.insync.replicas";
  c.value = "1";
  records.push_back(versioned(c, record_v0));
  _replication.append_elr_clears_for_min_isr_changes(*_writer.image(), records);
  EXPECT_EQ(records.size(), 1u);  // no partition has an ELR
}

}  // namespace
}  // namespace mala::controller
