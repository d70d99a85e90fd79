// The settings of a quorum_controller and of the managers it routes requests to (cluster_control,
// replication_control, configuration_control): the broker properties Kafka's controller reads.
//
// Plain data: copy freely.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "mala/controller/topic_config.h"

namespace mala::controller {

struct controller_options {
  int32_t node_id = 0;
  std::string cluster_id;
  int32_t num_partitions = 1;  // num.partitions: CreateTopics with num_partitions -1, auto-creation
  int16_t default_replication_factor = 1;  // default.replication.factor: replication_factor -1
  bool delete_topic_enable = true;         // delete.topic.enable: false refuses every DeleteTopics
  // The node's static configuration file, for validating broker-level config changes and resolving
  // topic-config defaults (topic_config.h).
  static_broker_config_lookup static_config;
  // Seeds the generator that picks each placement's starting broker and follower shift (Kafka picks them at
  // random). 0: a random seed; tests fix a non-zero one.
  uint64_t placement_seed = 0;
  std::function<int64_t()> clock_ms;                     // wall clock; the system clock when unset
  int64_t broker_session_timeout_ms = 9000;              // broker.session.timeout.ms
  bool auto_leader_rebalance = true;                     // auto.leader.rebalance.enable
  int64_t leader_imbalance_check_interval_ms = 300'000;  // leader.imbalance.check.interval.seconds
};

}  // namespace mala::controller
