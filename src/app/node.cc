#include "node.h"

#include <algorithm>
#include <charconv>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <limits>
#include <utility>
#include <vector>

#include <asio/co_spawn.hpp>
#include <asio/detached.hpp>
#include <asio/post.hpp>
#include <asio/redirect_error.hpp>
#include <asio/use_awaitable.hpp>

#include "mala/broker/cordoned_log_dirs.h"
#include "mala/common/current_shard.h"
#include "mala/controller/feature_control.h"
#include "mala/controller/raft_metadata_log.h"
#include "subsystem_options.h"

namespace mala::app {

namespace {

// The security protocol of a listener this node connects through: its own listener of that name, or the
// one listener.security.protocol.map gives (a broker-only node does not listen on the controller
// listener), or the protocol named like the listener (Kafka's default map).
security_protocol listener_protocol(const node_config& config, const std::string& name) {
  for (const auto* list : {&config.listeners(), &config.advertised_listeners()}) {
    for (const auto& l : *list)
      if (l.name == name) return l.protocol;
  }
  // A listener this node does not open (a broker-only node's CONTROLLER): its protocol from the map.
  if (auto csv = config.get_string("listener.security.protocol.map")) {
    if (auto parsed = parse_security_protocol_map(*csv); parsed.ok()) {
      for (const auto& m : parsed.value())
        if (m.listener_name == name) return m.protocol;
    }
  }
  return parse_security_protocol(name).value_or(security_protocol::plaintext);
}

// The client context of the SSL or SASL_SSL listener `name` (null when it is neither).
result<std::shared_ptr<net::tls_client_context>> client_tls_for(const node_config& config,
                                                                const std::string& name) {
  const auto protocol = name.empty() ? security_protocol::plaintext : listener_protocol(config, name);
  if (protocol != security_protocol::ssl && protocol != security_protocol::sasl_ssl)
    return std::shared_ptr<net::tls_client_context>();
  return net::make_tls_client_context(tls_settings_for(config, name));
}

// How the node connects through listener `name`: its TLS context, and on a SASL listener the mechanism of
// `mechanism_key` (Kafka's default GSSAPI when unset) with the credentials of the listener's login module.
// SCRAM on the controller listener is refused: its credentials live in the metadata log, which the quorum
// serves through that very listener (Kafka needs `kafka-storage format --add-scram` for it, which Mala does
// not have).
result<net::peer_client_options> client_options_for(const node_config& config, const std::string& name,
                                                    const std::string& mechanism_key, bool controller) {
  net::peer_client_options out;
  out.listener_name = name;
  auto tls = client_tls_for(config, name);
  if (!tls.ok()) return tls.error();
  out.tls = tls.value();
  const auto protocol = name.empty() ? security_protocol::plaintext : listener_protocol(config, name);
  if (protocol != security_protocol::sasl_plaintext && protocol != security_protocol::sasl_ssl) return out;
  const std::string mechanism = config.get_string(mechanism_key).value_or("GSSAPI");
  const bool scram = security::scram_mechanism_from_name(mechanism) != security::scram_mechanism::unknown;
  if (mechanism != "PLAIN" && mechanism != "OAUTHBEARER" && (controller || !scram)) {
    return status::error(
        error_code::invalid_config,
        mechanism_key + ": the node's connections through listener " + name + " cannot use " + mechanism +
            (controller ? " (PLAIN and OAUTHBEARER are supported on the controller listener: SCRAM "
                          "credentials live in the metadata log the quorum serves through it)"
                        : " (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 and OAUTHBEARER are supported)"));
  }
  auto credentials = security::node_sasl_credentials(config, name, mechanism);
  if (!credentials.ok()) return credentials.error();
  out.sasl = std::move(credentials.value());
  return out;
}

// How long SIGTERM waits for the controller to move this broker's leaderships (WantShutDown) before the node
// stops anyway. Kafka's broker waits up to 5 minutes; 5 s keeps a stop prompt when the controller is gone.
constexpr int32_t controlled_shutdown_timeout_ms = 5'000;
// How long a resigning Raft leader waits for its EndQuorumEpoch to go out before the node stops.
constexpr auto resignation_grace = std::chrono::milliseconds(200);
// How often the active controller fences brokers whose heartbeats stopped and elects leaders.
constexpr auto controller_work_interval = std::chrono::milliseconds(250);

broker::fetch_session_cache_config fetch_session_options_from(const node_config& config) {
  broker::fetch_session_cache_config options;
  options.max_slots = config.get_int("max.incremental.fetch.session.cache.slots")
                          .value_or(broker::default_fetch_session_cache_slots);
  return options;
}

}  // namespace

node::node(node_config config) : _config(std::move(config)), _log(subsystem_logger("main")) {}

node::~node() = default;

result<std::unique_ptr<node>> node::open(node_config config, quorum_bootstrap bootstrap) {
  std::unique_ptr<node> n(new node(std::move(config)));
  // The SASL listeners' mechanisms and users first: a configuration Mala cannot serve is refused before
  // anything is formatted or opened.
  auto sasl = security::build_sasl_settings(n->_config);
  if (!sasl.ok()) return sasl.error();
  n->_sasl = std::make_unique<security::sasl_settings>(std::move(*sasl));
  auto metrics_endpoints = metrics_endpoints_from(n->_config);
  if (!metrics_endpoints.ok()) return metrics_endpoints.error();
  n->_metrics_endpoints = std::move(*metrics_endpoints);
  if (auto st = n->open_storage(); !st.ok()) return st;
  n->open_replicas();
  if (auto st = n->open_quorum(bootstrap); !st.ok()) return st;
  n->open_broker();
  n->open_server();
  return n;
}

// Step 1: the log dirs and the logs in them. A separate metadata.log.dir is formatted and checked like the
// log dirs, as `kafka-storage format` does, but it holds no partitions and is not registered as a log dir.
status node::open_storage() {
  const std::filesystem::path metadata_dir = metadata_log_dir(_config);
  std::vector<std::string> formatted_dirs = _config.log_dirs();
  const bool separate_metadata_dir =
      std::none_of(formatted_dirs.begin(), formatted_dirs.end(), [&](const std::string& d) {
        return std::filesystem::path(d).lexically_normal() == metadata_dir.lexically_normal();
      });
  if (separate_metadata_dir) formatted_dirs.push_back(metadata_dir.string());
  auto identity = storage::format_or_check_log_dirs(formatted_dirs, _config.node_id(), _config.cluster_id());
  if (!identity.ok())
    return status::error(identity.error().code, "cannot use log dirs: " + identity.error().message);
  _dirs = std::move(identity.value());
  for (size_t i = 0; i < _dirs.dirs.size(); ++i) {
    const auto& d = _dirs.dirs[i];
    _log->info("{} {} (directory id {}){}", i < _config.log_dirs().size() ? "log dir" : "metadata log dir",
               d.path, d.directory_id.to_string(), d.formatted_now ? ", formatted now" : "");
  }
  _log->info("cluster id {}", _dirs.cluster_id);
  _metadata_dir_id = (separate_metadata_dir ? _dirs.dirs.back() : _dirs.dirs.front()).directory_id;

  storage::log_manager_options log_options;
  for (const auto& d : _config.log_dirs()) log_options.dirs.emplace_back(d);
  log_options.defaults = log_defaults_from(_config);
  log_options.recovery_threads_per_dir = _config.get_int("num.recovery.threads.per.data.dir").value_or(1);
  auto opened = storage::log_manager::open(std::move(log_options));
  if (!opened.ok())
    return status::error(opened.error().code, "cannot open the logs: " + opened.error().message);
  _logs = std::move(opened.value());
  return status::success();
}

// Step 2: the shards exist (their threads start later) before anything that lives on a shard's io_context.
// Each shard gets a replica manager for the partitions the placement puts there.
void node::open_replicas() {
  const size_t shard_count =
      _config.shards() > 0 ? static_cast<size_t>(_config.shards()) : net::shard_pool::default_shard_count();
  _shards = std::make_unique<net::shard_pool>(shard_count);
  _placement = replication::replica_placement(_shards->size());
  // The logs loaded from disk are placed now, balanced by count, before any shard touches them; the metadata
  // publisher places the replicas new to this node.
  {
    size_t loaded = 0;
    for (const auto& tp : _logs->partitions()) {
      _placement.place(tp);
      ++loaded;
    }
    if (_shards->size() > 1 && loaded > 0) {
      std::string spread;
      for (const size_t count : _placement.placed_per_shard())
        spread += (spread.empty() ? "" : ", ") + std::to_string(count);
      _log->info("{} log(s) loaded, placed over the shards (internal topics on shard 0): {}", loaded, spread);
    }
  }
  for (size_t shard = 0; shard < _shards->size(); ++shard) {
    auto replica_options = replica_manager_options_from(_config);
    replica_options.shard = static_cast<int>(shard);
    // A restarted replica resumes from the high watermark it had checkpointed
    // (replication-offset-checkpoint).
    replica_options.checkpointed_high_watermark = [this](const storage::topic_partition& tp) {
      return _logs->checkpointed_high_watermark(tp);
    };
    _replicas.push_back(std::make_unique<replication::replica_manager>(*_logs, replica_options));
  }
  // A log dir that fails stops its logs and replicas on their own shards (Kafka's
  // ReplicaManager.handleLogDirFailure).
  _logs->set_run_on_owner([this](const storage::topic_partition& tp, std::function<void()> fn) {
    run_on_owner(tp, std::move(fn));
  });
  _logs->set_offline_listener(
      [this](const std::filesystem::path& dir, const std::vector<storage::topic_partition>& partitions) {
        for (const auto& tp : partitions) {
          const size_t owner = _placement.shard_of(tp);
          run_on_owner(tp, [this, tp, owner] {
            const int here = current_shard();  // the shard it was posted to (the owner when posted)
            _replicas[here >= 0 ? static_cast<size_t>(here) : owner]->mark_offline({tp});
          });
        }
        // KIP-858: the controller hears of it in the next heartbeat, moves the dir's leaderships and takes
        // its replicas out of the ISRs.
        const auto& dirs = _config.log_dirs();
        const auto at = static_cast<size_t>(
            std::find_if(dirs.begin(), dirs.end(),
                         [&dir](const std::string& d) { return std::filesystem::path(d) == dir; }) -
            dirs.begin());
        if (at >= dirs.size() || at >= _dirs.dirs.size()) return;
        const uuid id = _dirs.dirs[at].directory_id;
        asio::post(_shards->context(0), [this, id] {
          if (_lifecycle) _lifecycle->report_offline_log_dir(id);
        });
      });
  _publisher = std::make_unique<broker::metadata_publisher>(_config.node_id(), replicas_by_shard(),
                                                            _placement, _shards.get(), _metadata,
                                                            static_property_lookup(_config), _logs.get());
  {
    std::vector<uuid> log_dir_ids;  // only log.dirs (a separate metadata.log.dir is last in _dirs.dirs)
    for (size_t i = 0; i < _config.log_dirs().size() && i < _dirs.dirs.size(); ++i)
      log_dir_ids.push_back(_dirs.dirs[i].directory_id);
    _publisher->set_log_dir_ids(std::move(log_dir_ids));
  }
  // The group coordinator follows the images the replicas were given (its __consumer_offsets replicas exist).
  _publisher->set_published_listener([this](const metadata::metadata_image_ptr& image) {
    if (_groups) _groups->on_metadata(*image);
    if (_transactions) _transactions->on_metadata(*image);
    apply_dynamic_tls(*image);
    apply_replication_throttles(*image);
    release_commit_waits();
  });
  _publisher->set_answer_gate_listener([this] { release_commit_waits(); });
}

void node::release_commit_waits() {
  if (_raft) _raft->fetch_gate_opened();
  if (!_controller_link) return;
  int64_t high_watermark = _committed_high_watermark;
  if (_publisher) high_watermark = std::min(high_watermark, _publisher->answer_gate());
  _controller_link->on_commit(high_watermark);
}

void node::apply_replication_throttles(const metadata::metadata_image& image) {
  if (!_leader_throttle || !_follower_throttle || !_alter_log_dirs_throttle) return;
  const auto* node_dynamic =
      image.find_configs(metadata::config_resource_type::broker, std::to_string(_config.node_id()));
  const auto* cluster_dynamic = image.find_configs(metadata::config_resource_type::broker, "");
  // Kafka's BrokerConfigHandler: this broker's dynamic value, else the cluster-wide one, else no bound.
  auto rate = [&](const char* name) -> std::optional<int64_t> {
    for (const auto* configs : {node_dynamic, cluster_dynamic}) {
      if (!configs) continue;
      auto it = configs->find(name);
      if (it == configs->end()) continue;
      int64_t value = 0;
      const auto& text = it->second;
      auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
      if (ec == std::errc() && end == text.data() + text.size()) return value;
    }
    return std::nullopt;
  };
  for (auto [quota, name] :
       {std::pair{_leader_throttle.get(), "leader.replication.throttled.rate"},
        std::pair{_follower_throttle.get(), "follower.replication.throttled.rate"},
        std::pair{_alter_log_dirs_throttle.get(), "replica.alter.log.dirs.io.max.bytes.per.second"}}) {
    auto wanted = rate(name);
    if (wanted && (*wanted < 0 || *wanted == std::numeric_limits<int64_t>::max())) wanted.reset();
    if (quota->bound() == wanted) continue;
    quota->set_bound(wanted);
    if (quota->bound()) {
      _log->info("{} is {} bytes/s", name, *quota->bound());
    } else {
      _log->info("{} is unbounded", name);
    }
  }
}

// Kafka's dynamic SSL reconfiguration: this broker's listener.name.<listener>.ssl.keystore.* (and trust
// store) configs in the metadata image, applied over the static settings whenever they change; new
// connections use the new stores, the node's own outgoing connections through the listener too. A store that
// cannot be loaded keeps the one in use (logged).
void node::apply_dynamic_tls(const metadata::metadata_image& image) {
  if (!_server) return;
  const auto* dynamic =
      image.find_configs(metadata::config_resource_type::broker, std::to_string(_config.node_id()));
  for (const auto& l : _config.listeners()) {
    if (l.protocol != security_protocol::ssl && l.protocol != security_protocol::sasl_ssl) continue;
    std::string listener = l.name;
    for (auto& c : listener) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    std::map<std::string, std::string> wanted;
    if (dynamic) {
      for (const auto& [name, value] : *dynamic) {
        auto key = parse_listener_ssl_key(name);
        if (key && key->first == listener && is_reconfigurable_tls_key(key->second))
          wanted[key->second] = value;
      }
    }
    auto& applied = _dynamic_tls[l.name];
    if (wanted == applied) continue;
    auto settings = tls_settings_for(_config, l.name);
    for (const auto& [key, value] : wanted) apply_tls_setting(settings, key, value);
    if (auto st = _server->reload_tls(settings); !st.ok()) {
      _log->error("listener {}: dynamic TLS configuration not applied, the stores in use stay: {}", l.name,
                  st.message);
    } else {
      // The node's own connections through this listener (Raft, registration and forwarding on the controller
      // listener; replica fetchers and transaction markers on the inter-broker one) take the same stores from
      // their next connection, as Kafka reconfigures its inter-broker and controller clients.
      std::vector<net::tls_client_context*> clients;
      for (auto* c : {_controller_tls.get(), _inter_broker_tls.get()}) {
        if (c && c->listener_name == l.name && std::find(clients.begin(), clients.end(), c) == clients.end())
          clients.push_back(c);
      }
      if (!clients.empty()) {
        auto fresh = net::make_tls_client_context(settings);
        if (!fresh.ok()) {
          _log->error("listener {}: the node's own connections keep their TLS stores: {}", l.name,
                      fresh.error().message);
        } else {
          for (auto* c : clients) c->replace((*fresh)->current());
          _log->info("listener {}: the node's own connections through it use the new TLS stores", l.name);
        }
      }
    }
    applied = std::move(wanted);
  }
}

std::vector<replication::replica_manager*> node::replicas_by_shard() const {
  std::vector<replication::replica_manager*> out;
  for (const auto& r : _replicas) out.push_back(r.get());
  return out;
}

void node::run_on_owner(const storage::topic_partition& tp, std::function<void()> fn) {
  const size_t owner = _placement.shard_of(tp);
  if (!_shards->running() || current_shard() == static_cast<int>(owner)) {
    fn();
    return;
  }
  asio::post(_shards->context(owner), std::move(fn));
}

// Step 3: every node runs a Raft replica of the metadata quorum (raft_node on shard 0); with the controller
// role it is a voter and its controller starts as a standby, activated by the metadata_loader while this node
// leads the quorum. The loader publishes what the quorum commits to the broker side.
status node::open_quorum(const quorum_bootstrap& bootstrap) {
  const bool dynamic = dynamic_quorum(_config);
  if ((bootstrap.standalone || bootstrap.initial_controllers) &&
      !(dynamic && _config.has_role("controller"))) {
    return status::error(error_code::invalid_config,
                         "--standalone / --initial-controllers need the controller role, "
                         "controller.quorum.bootstrap.servers and no controller.quorum.voters");
  }
  auto initial =
      initial_voters(_config, bootstrap.standalone, bootstrap.initial_controllers, _metadata_dir_id);
  if (!initial.ok()) return initial.error();

  const auto& controller_names = _config.controller_listener_names();
  auto controller_client =
      client_options_for(_config, controller_names.empty() ? "" : controller_names.front(),
                         "sasl.mechanism.controller.protocol", true);
  if (!controller_client.ok()) return controller_client.error();
  _controller_client = std::move(controller_client.value());
  _controller_tls = _controller_client.tls;
  auto inter_broker_client = client_options_for(_config, _config.inter_broker_listener_name(),
                                                "sasl.mechanism.inter.broker.protocol", false);
  if (!inter_broker_client.ok()) return inter_broker_client.error();
  _inter_broker_client = std::move(inter_broker_client.value());
  _inter_broker_tls = _inter_broker_client.tls;
  _peers = std::make_unique<net::peer_client>(
      _shards->context(0), "mala-" + std::to_string(_config.node_id()), _controller_client);
  _broker_peers = std::make_unique<net::peer_client>(
      _shards->context(0), "mala-" + std::to_string(_config.node_id()), _inter_broker_client);
  auto raft_options = raft_node_options_from(_config, _dirs.cluster_id);
  raft_options.client = _controller_client;
  raft_options.initial_voters = std::move(initial.value());
  raft_options.directory_id = _metadata_dir_id;
  raft_options.file_worker = _logs->worker();
  raft_options.config.local_voter = local_voter(_config, _metadata_dir_id);
  auto opened_raft = raft::raft_node::open(_shards->context(0), std::move(raft_options));
  if (!opened_raft) {
    return status::error(opened_raft.error().code,
                         "cannot open the metadata quorum: " + opened_raft.error().message);
  }
  _raft = std::move(opened_raft.value());
  if (dynamic && _config.has_role("controller") && _raft->voters().empty()) {
    _log->warn(
        "the metadata log holds no voter set yet (a new controller without --standalone or "
        "--initial-controllers): this controller observes until kafka-metadata-quorum add-controller adds "
        "it");
  } else if (dynamic && !_raft->voters().empty()) {
    _log->info("KIP-853 quorum: voters {} from the metadata log, bootstrap servers {}",
               fmt::join(_raft->voters(), ","), _config.quorum_bootstrap_servers().size());
  } else if (dynamic) {
    _log->info("KIP-853 quorum: an observer finding the leader through {} bootstrap server(s)",
               _config.quorum_bootstrap_servers().size());
  }

  if (_config.has_role("controller")) {
    auto opened = controller::quorum_controller::open(std::make_unique<controller::raft_metadata_log>(*_raft),
                                                      controller_options_from(_config, _dirs.cluster_id));
    if (!opened) {
      return status::error(opened.error().code, "cannot start the controller: " + opened.error().message);
    }
    _controller = std::move(opened.value());
  }

  // Until the quorum has committed something this node serves an image without brokers: clients retry.
  auto base = std::make_shared<metadata::metadata_image>();
  base->cluster_id = _dirs.cluster_id;
  _metadata.publish(base);
  _controller_link = std::make_unique<broker::controller_channel>(
      _shards.get(), 0, _controller.get(), *_raft, _peers.get(), controller_request_timeout_ms);
  controller::metadata_loader_hooks hooks;
  hooks.publish = [this](const metadata::metadata_image_ptr& image) { publish(image); };
  hooks.on_activation = [this](bool active) {
    if (active) {
      _controller->reset_heartbeat_deadlines(wall_clock_ms());
      // After the loader's update that activated the controller.
      asio::post(_shards->context(0), [this] { fence_previous_incarnation(); });
    } else {
      _controller_link->on_deactivated();
    }
  };
  hooks.on_commit = [this](int64_t high_watermark) {
    _committed_high_watermark = high_watermark;
    release_commit_waits();
  };
  hooks.clock_ms = wall_clock_ms;
  hooks.max_bytes_between_snapshots =
      _config.get_long("metadata.log.max.record.bytes.between.snapshots").value_or(20 * 1024 * 1024);
  _loader = std::make_unique<controller::metadata_loader>(*_raft, _controller.get(), base, std::move(hooks));
  // The next Fetch tells the leader this node applied what it was sent: it waits while the publisher creates
  // a small image's logs (controller_channel's broker propagation answers a CreateTopics once every broker
  // hosts the partitions).
  _raft->set_fetch_gate([this] { return !_publisher || _publisher->answer_gate() == INT64_MAX; });
  if (_controller) {
    auto registration = controller_registration_options_from(_config);
    registration.image = [this] { return _loader->image(); };
    _controller_registration = std::make_unique<broker::controller_registration_manager>(
        _shards->context(0), *_controller_link, std::move(registration));
  }
  return status::success();
}

// Step 4: the broker role's subsystems, all on shard 0 with the replicas.
void node::open_broker() {
  if (!_config.has_role("broker")) return;
  // The group coordinator follows every image the quorum commits (a newly created __consumer_offsets
  // partition is loaded at once).
  auto group_options = broker::group_coordinator_options_from(_config);
  group_options.clock_ms = wall_clock_ms;
  // The coordinators' partitions (__consumer_offsets) live on the home shard with them (replica_placement).
  _groups = std::make_unique<broker::group_coordinator_driver>(_shards->context(0), *_replicas[0],
                                                               std::move(group_options));
  // The transaction coordinator, beside it on the home shard with __transaction_state.
  auto txn_options = broker::transaction_coordinator_options_from(_config);
  txn_options.clock_ms = wall_clock_ms;
  _transactions = std::make_unique<broker::transaction_coordinator_driver>(
      _shards->context(0), *_replicas[0], _metadata, *_broker_peers, _producer_ids, std::move(txn_options));

  std::vector<uuid> log_dir_ids;  // only log.dirs (a separate metadata.log.dir is last in _dirs.dirs)
  for (size_t i = 0; i < _config.log_dirs().size(); ++i) log_dir_ids.push_back(_dirs.dirs[i].directory_id);
  auto lifecycle_options = broker_lifecycle_options_from(_config, _dirs.cluster_id, log_dir_ids,
                                                         _logs->loaded().previous_broker_epoch);
  _incarnation_id = lifecycle_options.registration.incarnation_id;
  lifecycle_options.applied_metadata_offset = [this] { return _loader->applied_offset(); };
  lifecycle_options.finalized_features = [this] { return _loader->image()->finalized_features; };
  lifecycle_options.cordoned_log_dirs = [this, log_dir_ids]() -> std::optional<std::vector<uuid>> {
    const auto image = _loader->image();
    if (image->feature_level(std::string(controller::metadata_version_feature)) <
        controller::cordoned_log_dirs_metadata_version)
      return std::nullopt;
    std::vector<uuid> ids;
    for (const auto& dir : broker::cordoned_log_dirs(_config, *image, _config.node_id())) {
      const auto& dirs = _config.log_dirs();
      const auto at = std::find(dirs.begin(), dirs.end(), dir) - dirs.begin();
      if (static_cast<size_t>(at) < log_dir_ids.size()) ids.push_back(log_dir_ids[static_cast<size_t>(at)]);
    }
    return ids;
  };
  lifecycle_options.on_unreported_dir_failure = [this](const std::string& reason) {
    _log->critical("shutting down: {} within log.dir.failure.timeout.ms", reason);
    asio::co_spawn(_shards->context(0), stop(), asio::detached);
  };
  _lifecycle = std::make_unique<broker::broker_lifecycle>(_shards->context(0), *_controller_link,
                                                          std::move(lifecycle_options));
  broker::directory_assignments_options assignment_options;
  assignment_options.broker_id = _config.node_id();
  assignment_options.broker_epoch = [this] { return _lifecycle->broker_epoch(); };
  assignment_options.image = [this] { return _loader->image(); };
  assignment_options.hosted = [this, log_dir_ids] {
    // The log manager's dirs are log.dirs in order, as log_dir_ids.
    broker::hosted_log_dirs hosted;
    for (auto& [tp, index] : _logs->log_dir_index_of_partitions()) {
      if (index < log_dir_ids.size()) hosted.emplace(tp, log_dir_ids[index]);
    }
    return hosted;
  };
  _directory_assignments = std::make_unique<broker::directory_assignments>(
      _shards->context(0), *_controller_link, std::move(assignment_options));

  // Follower replicas fetch from their leaders; leaders change their ISRs through AlterPartition: one
  // fetcher and one ISR manager per shard, each for the replicas of its shard.
  const int32_t throttle_samples = _config.get_int("replication.quota.window.num").value_or(11);
  const int32_t throttle_window_ms =
      _config.get_int("replication.quota.window.size.seconds").value_or(1) * 1000;
  _leader_throttle = std::make_unique<replication::replication_quota>(throttle_samples, throttle_window_ms);
  _follower_throttle = std::make_unique<replication::replication_quota>(throttle_samples, throttle_window_ms);
  _alter_log_dirs_throttle =
      std::make_unique<replication::replication_quota>(throttle_samples, throttle_window_ms);
  for (size_t shard = 0; shard < _shards->size(); ++shard) {
    auto fetcher_options = follower_fetcher_options_from(_config);
    fetcher_options.follower_throttle = _follower_throttle.get();
    fetcher_options.shard = shard;
    fetcher_options.client = _inter_broker_client;
    fetcher_options.placement = _placement;
    _fetchers.push_back(std::make_unique<replication::follower_fetcher>(
        _shards->context(shard), *_replicas[shard], _metadata, std::move(fetcher_options)));
    replication::alter_partition_manager_options isr_options;
    isr_options.node_id = _config.node_id();
    isr_options.broker_epoch = [this] { return _lifecycle->broker_epoch(); };
    isr_options.clock_ms = wall_clock_ms;
    isr_options.shard = shard;
    isr_options.placement = _placement;
    _isr_changes.push_back(std::make_unique<replication::alter_partition_manager>(
        _shards->context(shard), *_replicas[shard], _metadata,
        broker::alter_partition_sender(*_controller_link), std::move(isr_options)));
  }
}

// Step 5: the handlers' view of the node, the server and the maintenance timers.
void node::open_server() {
  _services.node_id = _config.node_id();
  _services.metadata = &_metadata;
  _services.handlers = &_handlers;
  _services.local_replica_offline = [this](const std::string& topic, int32_t partition) {
    return _logs->is_offline({topic, partition});
  };
  _services.config = &_config;
  _services.sasl = _sasl->listeners.empty() ? nullptr : _sasl.get();
  // authorizer.class.name: config validation accepts only "" and Kafka's StandardAuthorizer.
  if (!_config.get_string("authorizer.class.name").value_or("").empty()) {
    _authorizer = std::make_unique<broker::authorizer>(
        _config.get_string("super.users").value_or(""),
        _config.get_bool("allow.everyone.if.no.acl.found").value_or(false));
    _services.acl_authorizer = _authorizer.get();
  }
  _services.shards = _shards.get();
  _services.home_shard = 0;
  _services.placement = _placement;
  _services.replicas_by_shard = replicas_by_shard();
  _services.controller = _controller.get();
  _services.controller_link = _controller_link.get();
  _services.raft = _raft.get();
  _fetch_sessions = std::make_unique<broker::sharded_fetch_session_cache>(fetch_session_options_from(_config),
                                                                          _shards->size());
  _services.fetch_sessions = _fetch_sessions.get();
  _client_quotas = std::make_unique<broker::client_quota_manager>(
      broker::quota_window{_config.get_int("quota.window.num").value_or(11),
                           _config.get_int("quota.window.size.seconds").value_or(1)},
      _shards->size(),
      broker::quota_window{_config.get_int("controller.quota.window.num").value_or(11),
                           _config.get_int("controller.quota.window.size.seconds").value_or(1)});
  _services.quotas = _client_quotas.get();
  _services.leader_replication_quota = _leader_throttle.get();
  _services.producer_ids = &_producer_ids;
  _services.groups = _groups ? &_groups->coordinator() : nullptr;
  _services.transactions = _transactions ? &_transactions->coordinator() : nullptr;
  if (_transactions) {
    _services.transaction_verifier = [this](broker::txn_verification_request request,
                                            std::function<void(broker::txn_verification_answer)> done) {
      _transactions->verify(std::move(request), std::move(done));
    };
    _services.transaction_verification_enabled =
        _config.get_bool("transaction.partition.verification.enable").value_or(true);
  }
  // Markers for partitions this node leads: written in-process, not as a request to itself.
  if (_transactions) _transactions->set_local_services(&_services);
  // WriteTxnMarkers on __consumer_offsets: the group coordinator writes the marker and settles the
  // producer's pending offsets; its coordinator errors tell the transaction coordinator to retry elsewhere.
  if (_groups) {
    _services.group_txn_marker_writer = [this](int32_t partition, const storage::txn_marker_request& marker,
                                               std::function<void(error_code)> done) {
      const coordinator::txn_marker_write write{marker.producer_id, marker.producer_epoch, marker.commit,
                                                marker.coordinator_epoch, marker.transaction_version};
      _groups->coordinator().complete_transaction(partition, write, [done = std::move(done)](error_code e) {
        const bool moved = e == error_code::coordinator_not_available || e == error_code::not_coordinator ||
                           e == error_code::coordinator_load_in_progress;
        done(moved ? error_code::not_leader_or_follower : e);
      });
    };
  }
  _services.clock_ms = wall_clock_ms;
  // Counted only while the endpoint exists: without it the data path pays nothing, and no per-topic
  // counters wait for a scrape to be pruned.
  _metrics = std::make_unique<broker::broker_metrics>(_shards->size());
  if (!_metrics_endpoints.empty()) _services.metrics = _metrics.get();
  // KIP-714: what clients push is shown on the metrics endpoint, so the node takes it only with one (Kafka
  // advertises the telemetry APIs only with a receiver configured).
  if (!_metrics_endpoints.empty() && _lifecycle) {
    broker::client_telemetry_options telemetry_options;
    telemetry_options.telemetry_max_bytes = _config.get_int("telemetry.max.bytes").value_or(1024 * 1024);
    _telemetry = std::make_unique<broker::client_telemetry>(telemetry_options);
    _services.telemetry = _telemetry.get();
  }
  _dispatcher = std::make_unique<broker::broker_dispatcher>(_services);
  _server = std::make_unique<net::kafka_server>(*_shards, *_dispatcher, server_limits_from(_config));

  // Every listener speaks the Kafka protocol. A broker's listeners other than the controller listeners open
  // only once the controller says it has caught up with the metadata log (Kafka's BrokerServer waits for
  // that too): before, it would answer clients from an empty or stale image (UNKNOWN_TOPIC_OR_PARTITION, a
  // leader that moved), and a producer's first batch answered so could be overtaken by its second.
  const auto& controller_names = _config.controller_listener_names();
  for (const auto& l : _config.listeners()) {
    const bool controller_listener =
        std::find(controller_names.begin(), controller_names.end(), l.name) != controller_names.end();
    (_lifecycle && !controller_listener ? _listen_caught_up : _listen_now)
        .push_back({l.name, l.host, l.port, l.protocol,
                    l.protocol == security_protocol::ssl || l.protocol == security_protocol::sasl_ssl
                        ? std::optional(tls_settings_for(_config, l.name))
                        : std::nullopt});
  }

  _maintenance =
      std::make_unique<log_maintenance>(*_shards, *_logs, _config, _placement, replicas_by_shard());
  _maintenance->time_flushes_into(_metrics->log_flush_time());
  _cleaning = std::make_unique<log_cleaning>(*_shards, *_logs, _config, replicas_by_shard());
  if (!_metrics_endpoints.empty()) {
    broker::metrics_exporter_options exporter_options;
    exporter_options.broker_role = _lifecycle != nullptr;
    exporter_options.controller_role = _controller != nullptr;
    // Ready: a broker once its listeners opened (it caught up with the metadata log); a controller alone
    // once the quorum has a leader.
    exporter_options.ready = [this] {
      if (_lifecycle) return _serving.load(std::memory_order_acquire);
      return _raft->state().leader_id() >= 0 && !_shards_stopping.load(std::memory_order_acquire);
    };
    _exporter = std::make_unique<broker::metrics_exporter>(_services, *_metrics, std::move(exporter_options));
    _metrics_http = std::make_unique<net::http_server>(
        _shards->context(0), [this](const http_request_head& request) { return _exporter->serve(request); });
  }
  _controller_work_timer = std::make_unique<asio::steady_timer>(_shards->context(0));
  _signals = std::make_unique<asio::signal_set>(_shards->context(0), SIGTERM, SIGINT);
}

status node::run() {
  if (auto st = start(); !st.ok()) {
    _log->critical("{}", st.message);
    return st;
  }
  _shards->join();
  return close();
}

// The start sequence. Everything but the shard threads is set up from this thread before they run.
status node::start() {
  // 1. The metrics and health endpoint (liveness from now on); controller listeners accept now; broker
  //    listeners are bound (so a port in use fails the start) and open once the broker has caught up with
  //    the metadata log.
  if (_metrics_http) {
    if (auto st = _metrics_http->listen(_metrics_endpoints); !st.ok()) return st;
  }
  if (auto st = _server->listen(_listen_now); !st.ok()) return st;
  if (auto st = _server->bind(_listen_caught_up); !st.ok()) return st;
  if (!_listen_caught_up.empty()) {
    _lifecycle->set_on_caught_up([this] {
      // As Kafka's BrokerServer, a broker whose listener cannot open stops (nothing was served yet).
      if (auto st = _server->start(); !st.ok()) {
        _log->critical("{}", st.message);
        std::_Exit(1);
      }
      if (!_shards_stopping.load(std::memory_order_acquire)) _serving.store(true, std::memory_order_release);
    });
  }
  // 2. The group coordinator replays the __consumer_offsets partitions this node already leads (their groups
  //    answer COORDINATOR_LOAD_IN_PROGRESS until they are).
  if (_groups) {
    _groups->on_metadata(*_metadata.current());
    _groups->start();
  }
  if (_transactions) {
    _transactions->on_metadata(*_metadata.current());
    _transactions->start();
  }
  // 3. Log maintenance (retention, checkpoints, flushes) and the log cleaner's threads.
  _maintenance->start();
  _cleaning->start();
  // 4. SIGTERM / SIGINT run the stop sequence on shard 0.
  _signals->async_wait([this](const std::error_code& ec, int signal) {
    if (ec) return;
    _log->info("received {}, shutting down", signal == SIGTERM ? "SIGTERM" : "SIGINT");
    asio::co_spawn(_shards->context(0), stop(), asio::detached);
  });
  // 5. The metadata quorum: the Raft replica (a single voter elects itself at once), the loader catches up
  //    with what is committed, and the active controller's periodic work is scheduled.
  _raft->start();
  _loader->update();
  schedule_controller_work();
  // 6. The broker side: registration and heartbeats, follower fetching, ISR changes.
  if (_controller_registration) _controller_registration->start();
  if (_lifecycle) _lifecycle->start();
  if (_directory_assignments) _directory_assignments->start();
  for (auto& f : _fetchers) f->start();
  for (auto& m : _isr_changes) m->start();
  for (size_t shard = 0; shard < _replicas.size(); ++shard)
    asio::co_spawn(_shards->context(shard), copy_future_logs(shard), asio::detached);
  // 7. The shard threads.
  std::signal(SIGPIPE, SIG_IGN);
  _shards->start();
  _log->info("node {} ready with {} shard(s)", _config.node_id(), _shards->size());
  return status::success();
}

// The stop sequence, on shard 0.
asio::awaitable<void> node::copy_future_logs(size_t shard) {
  // A slice per turn bounds how long the shard is busy copying; while moves remain it comes back at once,
  // unless replica.alter.log.dirs.io.max.bytes.per.second holds the copies back (a tenth of the bound a
  // slice then).
  constexpr int64_t slice_bytes = 4 << 20;
  asio::steady_timer pause(_shards->context(shard));
  while (!_shards_stopping.load(std::memory_order_acquire)) {
    auto& replicas = *_replicas[shard];
    auto* throttle = _alter_log_dirs_throttle.get();
    const int64_t now = wall_clock_ms();
    const bool held = throttle && throttle->exceeded(now);
    if (replicas.moving() && !held) {
      int64_t slice = slice_bytes;
      if (throttle && throttle->bound()) slice = std::clamp<int64_t>(*throttle->bound() / 10, 1, slice_bytes);
      const int64_t copied = replicas.copy_to_future_logs(slice);
      if (throttle) throttle->record(copied, now);
    }
    const bool more = replicas.moving();
    pause.expires_after(std::chrono::milliseconds(!more ? 100 : held ? 10 : 1));
    std::error_code ec;
    co_await pause.async_wait(asio::redirect_error(asio::use_awaitable, ec));
  }
}

asio::awaitable<void> node::stop() {
  // /health/ready says no from now on, so that a load balancer stops sending clients here. The sequence
  // runs once (a signal may come while a failed log dir's deadline already stops the node).
  if (_shards_stopping.exchange(true, std::memory_order_acq_rel)) co_return;
  _serving.store(false, std::memory_order_release);
  // 1. Controlled shutdown (KIP-631 WantShutDown): the controller moves this broker's leaderships away.
  if (_lifecycle) co_await _lifecycle->controlled_shutdown(controlled_shutdown_timeout_ms);
  // 2. Nothing new is served or scheduled.
  _server->stop();
  if (_metrics_http) {
    // A scrape in flight hops over the shards: it ends before their event loops do.
    _metrics_http->stop();
    asio::steady_timer wait(_shards->context(0));
    for (int i = 0; i < 200 && _metrics_http->answering(); ++i) {
      wait.expires_after(std::chrono::milliseconds(10));
      co_await wait.async_wait(asio::use_awaitable);
    }
  }
  _publisher->stop();
  _maintenance->stop();
  _cleaning->stop();
  if (_groups) _groups->stop();
  if (_transactions) _transactions->stop();
  _controller_work_timer->cancel();
  if (_lifecycle) _lifecycle->stop();
  if (_directory_assignments) _directory_assignments->stop();
  if (_controller_registration) _controller_registration->stop();
  // Each shard's fetcher and ISR manager stop on their shard, before any shard's loop ends.
  for (size_t shard = 0; shard < _fetchers.size(); ++shard) {
    co_await _shards->invoke_on(shard, [this, shard] {
      _fetchers[shard]->stop();
      _isr_changes[shard]->stop();
      return true;
    });
  }
  // 3. The Raft leader resigns (EndQuorumEpoch, so the other voters elect a successor at once rather than
  //    after their fetch timeout) and is given a moment to send it; then the replica stops.
  const bool leads = _raft->state().current_role() == raft::role::leader;
  const bool others = _raft->voters().size() > 1;
  _raft->resign();
  if (leads && others) {
    asio::steady_timer grace(_shards->context(0), resignation_grace);
    std::error_code ignored;
    co_await grace.async_wait(asio::redirect_error(asio::use_awaitable, ignored));
  }
  _raft->stop();
  // 4. The shard threads end; run() continues with close().
  _shards->stop();
}

// After the shards stopped: the objects go in the reverse order of their dependencies, and the logs close.
status node::close() {
  _fetchers.clear();
  _isr_changes.clear();
  _services.groups = nullptr;
  _groups.reset();
  _services.transactions = nullptr;
  _services.transaction_verifier = nullptr;
  _services.group_txn_marker_writer = nullptr;
  if (_transactions) _transactions->set_local_services(nullptr);
  _transactions.reset();
  if (_lifecycle) _broker_epoch = _lifecycle->broker_epoch();
  _directory_assignments.reset();
  _lifecycle.reset();
  _controller_registration.reset();
  // The high watermarks are checkpointed while the replicas still exist; then the replicas stop before their
  // logs close (parked requests are gone with the shards).
  if (auto st = _logs->checkpoint_high_watermarks(
          [this](const storage::topic_partition& tp) { return replica_high_watermark(tp); });
      !st.ok()) {
    _log->error("high watermark checkpoint: {}", st.message);
  }
  for (auto& replicas : _replicas) {
    for (const auto& tp : replicas->partitions()) (void)replicas->remove_partition(tp, /*delete_log=*/false);
  }
  _controller.reset();
  _loader.reset();
  _controller_link.reset();
  _raft.reset();
  _peers.reset();
  _broker_peers.reset();
  // Flushes and closes every log, writes the checkpoints and the clean-shutdown marker, so the next start
  // skips the recovery scan.
  if (auto st = _logs->shutdown(_broker_epoch); !st.ok()) {
    _log->error("log shutdown: {}", st.message);
    return st;
  }
  _log->info("stopped cleanly");
  return status::success();
}

// Every image the quorum commits: to the replicas, then the group coordinator (the publisher's listener).
void node::publish(const metadata::metadata_image_ptr& image) {
  _publisher->publish(image);
}

// A lone voter that becomes active finds this node's broker registered by an earlier process of this node
// when that one stopped without being fenced (a crash, or a stop that skipped the controlled shutdown). No
// other controller can have kept that session alive, and that process is gone: the controller fences it
// (a WantFence heartbeat on its behalf) so that this process registers at once rather than being refused
// DUPLICATE_BROKER_REGISTRATION until broker.session.timeout.ms has passed. With more voters the session is
// waited out, as Kafka does: the registration may have reached another controller since.
void node::fence_previous_incarnation() {
  if (!_lifecycle || !_controller || !_controller->active() || _raft->voters().size() != 1) return;
  const auto image = _controller->image();
  const auto it = image->brokers.find(_config.node_id());
  if (it == image->brokers.end() || it->second.fenced || it->second.incarnation_id == _incarnation_id) return;
  protocol::broker_heartbeat_request request;
  request.broker_id = _config.node_id();
  request.broker_epoch = it->second.epoch;
  request.current_metadata_offset = image->metadata_offset;
  request.want_fence = true;
  const auto answer = _controller->broker_heartbeat(request, wall_clock_ms());
  _log->info("fenced broker {} of this node's previous process (broker epoch {}): error {}",
             _config.node_id(), it->second.epoch, answer.error_code);
}

// The active controller's periodic work: fence brokers whose heartbeats stopped, elect leaders for
// leaderless partitions when allowed, rebalance preferred leaders.
void node::schedule_controller_work() {
  _controller_work_timer->expires_after(controller_work_interval);
  _controller_work_timer->async_wait([this](const std::error_code& ec) {
    if (ec) return;
    if (_controller && _controller->active()) {
      _controller->fence_stale_brokers(wall_clock_ms());
      _controller->elect_unclean_leaders();
      _controller->maybe_rebalance_leaders(wall_clock_ms());
    }
    schedule_controller_work();
  });
}

// After the shards ended (close()): any replica may be read from this thread.
std::optional<int64_t> node::replica_high_watermark(const storage::topic_partition& tp) const {
  if (const auto* p = _replicas[_placement.shard_of(tp)]->get(tp)) return p->high_watermark();
  return std::nullopt;
}

}  // namespace mala::app
