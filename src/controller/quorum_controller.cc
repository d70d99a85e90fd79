#include "mala/controller/quorum_controller.h"

#include <utility>

#include "mala/controller/acl_control.h"
#include "mala/controller/client_quota_control.h"
#include "mala/controller/cluster_control.h"
#include "mala/controller/configuration_control.h"
#include "mala/controller/replication_control.h"
#include "mala/controller/scram_control.h"
#include "mala/metadata/metadata_delta.h"

namespace mala::controller {

using metadata::metadata_image;

// The controller's log, image and activation, and the managers that answer requests by writing through it.
struct quorum_controller::state final : metadata_writer {
  state(std::unique_ptr<metadata_log> metadata, controller_options opts, metadata::metadata_image_ptr base)
      : log(std::move(metadata)),
        options(std::move(opts)),
        current(std::move(base)),
        replication(*this, options),
        configuration(*this, options.node_id, options.static_config,
                      [this](const metadata_image& image, record_list& records) {
                        replication.append_elr_clears_for_min_isr_changes(image, records);
                      }),
        cluster(*this, replication, options) {}

  const metadata::metadata_image_ptr& image() const override { return current; }
  int64_t next_offset() const override { return log->end_offset(); }

  status write(const record_list& records) override {
    if (records.empty()) return status::success();
    auto build = [&](int64_t first_offset, int32_t epoch) -> result<metadata::metadata_image_ptr> {
      metadata::metadata_delta delta(current);
      for (size_t i = 0; i < records.size(); ++i) {
        if (auto st = delta.apply(records[i].record, first_offset + static_cast<int64_t>(i), epoch);
            !st.ok()) {
          return status::error(error_code::unknown_server_error,
                               "the controller generated a record the metadata image refuses: " + st.message);
        }
      }
      return std::move(delta).build();
    };
    const int64_t expected_first = log->end_offset();
    auto next = build(expected_first, log->epoch());
    if (!next.ok()) return next.error();
    auto appended = log->append(records);
    if (!appended.ok()) return appended.error();
    if (appended->first_offset != expected_first || appended->epoch != log->epoch()) {
      next = build(appended->first_offset, appended->epoch);
      if (!next.ok()) return next.error();
    }
    current = std::move(*next);
    // Only committed images go to the broker side; what the quorum commits later is the metadata_loader's to
    // publish.
    if (publisher && log->committed_offset() >= appended->last_offset) publisher(current);
    return status::success();
  }

  std::unique_ptr<metadata_log> log;
  controller_options options;
  metadata::metadata_image_ptr current;
  image_publisher publisher;
  bool active = false;
  replication_control replication;
  configuration_control configuration;
  cluster_control cluster;
};

quorum_controller::quorum_controller(std::unique_ptr<state> s) : _state(std::move(s)) {}
quorum_controller::~quorum_controller() = default;

result<std::unique_ptr<quorum_controller>> quorum_controller::open(std::unique_ptr<metadata_log> log,
                                                                   controller_options options) {
  if (!log) return status::error(error_code::invalid_request, "quorum_controller needs a metadata log");
  // A standby learns the log from the metadata_loader (activate()): nothing is committed before the quorum
  // says so.
  auto base = std::make_shared<metadata_image>();
  base->cluster_id = options.cluster_id;
  base->controller_id = options.node_id;
  auto s = std::make_unique<state>(std::move(log), std::move(options), std::move(base));
  return std::unique_ptr<quorum_controller>(new quorum_controller(std::move(s)));
}

bool quorum_controller::active() const {
  return _state->active;
}

bool quorum_controller::activate(metadata::metadata_image_ptr committed, bool open_transaction) {
  state& s = *_state;
  s.current = std::move(committed);
  s.active = true;
  if (open_transaction) {
    protocol::abort_transaction_record abort;
    abort.reason = "Controller failover";
    if (auto st = s.write({versioned(std::move(abort), record_v0)}); !st.ok()) {
      s.active = false;
      return false;
    }
  }
  if (auto st = s.write(bootstrap_records(*s.current)); !st.ok()) {
    // The next leader will try again; this one cannot write.
    s.active = false;
  }
  return s.active;
}

void quorum_controller::deactivate(metadata::metadata_image_ptr committed) {
  _state->current = std::move(committed);
  _state->active = false;
}

int64_t quorum_controller::last_written_offset() const {
  return _state->log->end_offset() - 1;
}

metadata::metadata_image_ptr quorum_controller::image() const {
  return _state->current;
}

void quorum_controller::set_publisher(image_publisher publisher) {
  _state->publisher = std::move(publisher);
}

result<int64_t> quorum_controller::register_broker(const metadata::broker_registration& registration,
                                                   int64_t previous_broker_epoch, int64_t now_ms) {
  return _state->cluster.register_broker(registration, previous_broker_epoch, now_ms);
}

protocol::broker_heartbeat_response quorum_controller::broker_heartbeat(
    const protocol::broker_heartbeat_request& request, int64_t now_ms) {
  return _state->cluster.broker_heartbeat(request, now_ms);
}

void quorum_controller::fence_stale_brokers(int64_t now_ms) {
  _state->cluster.fence_stale_brokers(now_ms);
}

void quorum_controller::reset_heartbeat_deadlines(int64_t now_ms) {
  _state->cluster.reset_heartbeat_deadlines(now_ms);
}

protocol::create_topics_response quorum_controller::create_topics(
    const protocol::create_topics_request& request, int16_t version) {
  (void)version;  // v5+ fields are filled always; the encoder leaves out what a version lacks
  return _state->replication.create_topics(request);
}

protocol::delete_topics_response quorum_controller::delete_topics(
    const protocol::delete_topics_request& request, int16_t version) {
  return _state->replication.delete_topics(request, version);
}

protocol::create_partitions_response quorum_controller::create_partitions(
    const protocol::create_partitions_request& request, int16_t version) {
  (void)version;
  return _state->replication.create_partitions(request);
}

protocol::alter_partition_response quorum_controller::alter_partition(
    const protocol::alter_partition_request& request, int16_t version) {
  return _state->replication.alter_partition(request, version);
}

protocol::assign_replicas_to_dirs_response quorum_controller::assign_replicas_to_dirs(
    const protocol::assign_replicas_to_dirs_request& request) {
  return _state->replication.assign_replicas_to_dirs(request);
}

protocol::controller_registration_response quorum_controller::register_controller(
    const protocol::controller_registration_request& request) {
  protocol::controller_registration_response resp;
  if (auto st = _state->cluster.register_controller(request); !st.ok()) {
    resp.error_code = to_wire(st.code);
    resp.error_message = st.message;
  }
  return resp;
}

protocol::unregister_broker_response quorum_controller::unregister_broker(
    const protocol::unregister_broker_request& request) {
  protocol::unregister_broker_response resp;
  if (auto st = _state->cluster.unregister_broker(request.broker_id); !st.ok()) {
    resp.error_code = to_wire(st.code);
    resp.error_message = st.message;
  }
  return resp;
}

protocol::update_features_response quorum_controller::update_features(
    const protocol::update_features_request& request, int16_t version) {
  state& s = *_state;
  std::vector<feature_update> updates;
  updates.reserve(request.feature_updates.size());
  for (const auto& u : request.feature_updates) {
    feature_update update;
    update.name = u.feature;
    update.level = u.max_version_level;
    if (version == 0) {
      update.type = u.allow_downgrade ? feature_upgrade_type::safe_downgrade : feature_upgrade_type::upgrade;
    } else {
      update.type = static_cast<feature_upgrade_type>(u.upgrade_type);
    }
    updates.push_back(std::move(update));
  }
  protocol::update_features_response resp;
  feature_update_context context;
  context.kraft_version = s.log->kraft_version();
  context.validate_only = request.validate_only;
  context.upgrade_kraft_version = [&s](int16_t level, bool validate_only) {
    return s.log->upgrade_kraft_version(s.log->epoch(), level, validate_only);
  };
  auto records = controller::update_features(*s.current, s.options.node_id, updates, context);
  status outcome = records.ok() ? status::success() : records.error();
  if (outcome.ok() && !request.validate_only) outcome = s.write(*records);
  if (!outcome.ok()) {
    resp.error_code = static_cast<int16_t>(outcome.code);
    resp.error_message =
        "The update failed for all features since the following feature had an error: " + outcome.message;
    return resp;
  }
  resp.error_message = std::nullopt;
  if (version <= 1) {
    for (const auto& u : request.feature_updates) {
      auto& r = resp.results.emplace_back();
      r.feature = u.feature;
      r.error_message = "NONE";  // what Kafka's Errors.NONE.message() gives
    }
  }
  return resp;
}

protocol::alter_user_scram_credentials_response quorum_controller::alter_user_scram_credentials(
    const protocol::alter_user_scram_credentials_request& request) {
  state& s = *_state;
  auto alteration = controller::alter_user_scram_credentials(*s.current, request);
  if (alteration.records.empty()) return std::move(alteration.response);
  if (auto st = s.write(alteration.records); !st.ok()) {
    for (auto& r : alteration.response.results) {
      if (r.error_code != 0) continue;
      r.error_code = to_wire(st.code);
      r.error_message = st.message;
    }
  }
  return std::move(alteration.response);
}

protocol::elect_leaders_response quorum_controller::elect_leaders(
    const protocol::elect_leaders_request& request, int16_t version) {
  return _state->replication.elect_leaders(request, version);
}

protocol::alter_partition_reassignments_response quorum_controller::alter_partition_reassignments(
    const protocol::alter_partition_reassignments_request& request, int16_t version) {
  (void)version;
  return _state->replication.alter_partition_reassignments(request);
}

protocol::list_partition_reassignments_response quorum_controller::list_partition_reassignments(
    const protocol::list_partition_reassignments_request& request) const {
  return _state->replication.list_partition_reassignments(request);
}

void quorum_controller::elect_unclean_leaders() {
  _state->replication.elect_unclean_leaders();
}

void quorum_controller::maybe_rebalance_leaders(int64_t now_ms) {
  _state->replication.maybe_rebalance_leaders(now_ms);
}

protocol::incremental_alter_configs_response quorum_controller::incremental_alter_configs(
    const protocol::incremental_alter_configs_request& request, int16_t version) {
  (void)version;
  return _state->configuration.incremental_alter_configs(request);
}

protocol::alter_client_quotas_response quorum_controller::alter_client_quotas(
    const protocol::alter_client_quotas_request& request, int16_t version) {
  (void)version;
  state& s = *_state;
  auto alteration = controller::alter_client_quotas(*s.current, request);
  const api_error outcome = write_user_operation(
      s, alteration.records, alteration.records.size() > max_records_per_user_op, request.validate_only);
  if (!outcome.ok()) {
    for (auto& e : alteration.response.entries) {
      if (e.error_code != 0) continue;
      e.error_code = to_wire(outcome.code);
      e.error_message = outcome.message;
    }
  }
  return alteration.response;
}

protocol::alter_configs_response quorum_controller::alter_configs(
    const protocol::alter_configs_request& request, int16_t version) {
  (void)version;
  return _state->configuration.alter_configs(request);
}

protocol::create_acls_response quorum_controller::create_acls(const protocol::create_acls_request& request) {
  return controller::create_acls(*_state, request);
}

protocol::delete_acls_response quorum_controller::delete_acls(const protocol::delete_acls_request& request) {
  return controller::delete_acls(*_state, request);
}

result<producer_id_block> quorum_controller::allocate_producer_ids(int32_t broker_id, int64_t broker_epoch) {
  return controller::allocate_producer_ids(*_state, broker_id, broker_epoch);
}

}  // namespace mala::controller
