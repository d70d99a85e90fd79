#include "mala/broker/metadata_publisher.h"

#include <algorithm>
#include <charconv>
#include <cstdlib>
#include <map>
#include <memory>
#include <set>

#include <asio/post.hpp>
#include <asio/thread_pool.hpp>

#include "mala/common/logging.h"
#include "mala/controller/topic_config.h"
#include "mala/replication/replication_quota.h"

namespace mala::broker {

namespace {

// What a topic's throttled-replica configs say of this node's replicas.
struct topic_throttles {
  replication::throttled_replicas leader;
  replication::throttled_replicas follower;
  bool operator==(const topic_throttles&) const = default;
};

template <typename T>
void parse_number(const std::optional<std::string>& text, T& out) {
  if (!text) return;
  T value{};
  auto [end, ec] = std::from_chars(text->data(), text->data() + text->size(), value);
  if (ec == std::errc() && end == text->data() + text->size()) out = value;
}

std::map<std::string_view, std::optional<std::string>> resolved(const metadata::metadata_image& image,
                                                                const std::string& topic, int32_t node_id,
                                                                const static_property_lookup& static_config) {
  std::map<std::string_view, std::optional<std::string>> out;
  for (auto& e : controller::resolve_topic_configs(image, topic, node_id, static_config)) {
    out.emplace(e.key->name, std::move(e.value));
  }
  return out;
}

bool same_state(const metadata::partition_state& a, const metadata::partition_state& b) {
  return a.leader == b.leader && a.leader_epoch == b.leader_epoch && a.partition_epoch == b.partition_epoch &&
         a.replicas == b.replicas && a.isr == b.isr;
}

// A topic's leader.replication.throttled.replicas / follower.replication.throttled.replicas as they concern
// this node (Kafka's TopicConfigHandler: the topic's own configs; there is no broker default).
topic_throttles throttles_of(const metadata::metadata_image& image, const std::string& topic,
                             int32_t node_id) {
  topic_throttles out;
  const auto* configs = image.find_configs(metadata::config_resource_type::topic, topic);
  if (!configs) return out;
  if (auto it = configs->find("leader.replication.throttled.replicas"); it != configs->end())
    out.leader = replication::parse_throttled_replicas(it->second, node_id);
  if (auto it = configs->find("follower.replication.throttled.replicas"); it != configs->end())
    out.follower = replication::parse_throttled_replicas(it->second, node_id);
  return out;
}

bool same_log_config(const replication::log_config& a, const replication::log_config& b) {
  return a.segment_bytes == b.segment_bytes && a.segment_ms == b.segment_ms &&
         a.segment_jitter_ms == b.segment_jitter_ms && a.segment_index_bytes == b.segment_index_bytes &&
         a.index_interval_bytes == b.index_interval_bytes && a.max_message_bytes == b.max_message_bytes &&
         a.log_append_time == b.log_append_time &&
         a.message_timestamp_before_max_ms == b.message_timestamp_before_max_ms &&
         a.message_timestamp_after_max_ms == b.message_timestamp_after_max_ms &&
         a.retention_ms == b.retention_ms && a.retention_bytes == b.retention_bytes &&
         a.file_delete_delay_ms == b.file_delete_delay_ms && a.flush_messages == b.flush_messages &&
         a.flush_ms == b.flush_ms && a.cleanup == b.cleanup &&
         a.delete_retention_ms == b.delete_retention_ms &&
         a.min_cleanable_dirty_ratio == b.min_cleanable_dirty_ratio &&
         a.min_compaction_lag_ms == b.min_compaction_lag_ms &&
         a.max_compaction_lag_ms == b.max_compaction_lag_ms;
}

}  // namespace

replication::log_config effective_log_config(const metadata::metadata_image& image, const std::string& topic,
                                             int32_t node_id, const static_property_lookup& static_config) {
  const auto values = resolved(image, topic, node_id, static_config);
  auto get = [&](std::string_view name) -> std::optional<std::string> {
    auto it = values.find(name);
    return it == values.end() ? std::nullopt : it->second;
  };
  replication::log_config c;
  parse_number(get("segment.bytes"), c.segment_bytes);
  parse_number(get("segment.ms"), c.segment_ms);
  parse_number(get("segment.jitter.ms"), c.segment_jitter_ms);
  parse_number(get("segment.index.bytes"), c.segment_index_bytes);
  parse_number(get("index.interval.bytes"), c.index_interval_bytes);
  parse_number(get("max.message.bytes"), c.max_message_bytes);
  c.log_append_time = get("message.timestamp.type") == std::optional<std::string>("LogAppendTime");
  parse_number(get("message.timestamp.before.max.ms"), c.message_timestamp_before_max_ms);
  parse_number(get("message.timestamp.after.max.ms"), c.message_timestamp_after_max_ms);
  parse_number(get("retention.ms"), c.retention_ms);
  parse_number(get("retention.bytes"), c.retention_bytes);
  parse_number(get("file.delete.delay.ms"), c.file_delete_delay_ms);
  parse_number(get("flush.messages"), c.flush_messages);
  parse_number(get("flush.ms"), c.flush_ms);
  parse_number(get("delete.retention.ms"), c.delete_retention_ms);
  if (auto ratio = get("min.cleanable.dirty.ratio")) {
    char* end = nullptr;
    const double value = std::strtod(ratio->c_str(), &end);
    if (end == ratio->c_str() + ratio->size() && value >= 0 && value <= 1)
      c.min_cleanable_dirty_ratio = value;
  }
  parse_number(get("min.compaction.lag.ms"), c.min_compaction_lag_ms);
  parse_number(get("max.compaction.lag.ms"), c.max_compaction_lag_ms);
  const auto policy = controller::parse_config_list(get("cleanup.policy").value_or("delete"));
  const bool compact = std::find(policy.begin(), policy.end(), "compact") != policy.end();
  const bool del = std::find(policy.begin(), policy.end(), "delete") != policy.end();
  c.cleanup =
      compact ? (del ? replication::cleanup_policy::compact_and_delete : replication::cleanup_policy::compact)
              : replication::cleanup_policy::delete_segments;
  return c;
}

int32_t effective_min_insync_replicas(const metadata::metadata_image& image, const std::string& topic,
                                      int32_t node_id, const static_property_lookup& static_config) {
  int32_t min_isr = 1;
  parse_number(resolved(image, topic, node_id, static_config)["min.insync.replicas"], min_isr);
  return std::max(1, min_isr);
}

// The publisher's thread, on which missing logs are created.
struct metadata_publisher::log_creator {
  asio::thread_pool thread{1};
};

metadata_publisher::metadata_publisher(int32_t node_id,
                                       std::vector<replication::replica_manager*> replicas_by_shard,
                                       replication::replica_placement placement, net::shard_pool* shards,
                                       metadata::metadata_cache& cache, static_property_lookup static_config,
                                       storage::log_manager* logs)
    : _node_id(node_id),
      _replicas_by_shard(std::move(replicas_by_shard)),
      _placement(placement),
      _shards(shards),
      _cache(cache),
      _static_config(std::move(static_config)),
      _logs(logs) {
  if (_logs && _shards) _creator = std::make_unique<log_creator>();
}

metadata_publisher::~metadata_publisher() {
  stop();
}

void metadata_publisher::stop() {
  _alive->store(false);
  _answer_gate.store(INT64_MAX);  // a creation cut short holds nothing back
  if (_creator) _creator->thread.join();
}

void metadata_publisher::set_answer_gate_listener(std::function<void()> listener) {
  _answer_gate_opened = std::move(listener);
}

void metadata_publisher::set_published_listener(
    std::function<void(const metadata::metadata_image_ptr&)> listener) {
  _published_listener = std::move(listener);
}

// An image being applied: what each shard is told, and how many shards are not done yet.
struct metadata_publisher::apply_job {
  metadata::metadata_image_ptr image;
  std::vector<std::vector<hosted_replica>> by_shard;
  std::vector<std::vector<replication::topic_partition>> removed_by_shard;  // no longer hosted here
  std::vector<std::unique_ptr<replication::log_config>> configs;  // the hosted replicas point into these
  std::vector<std::unique_ptr<topic_throttles>> throttles;        // and into these
  std::vector<std::vector<replication::topic_partition>> failed;  // per shard, filled as it applies
  std::atomic<size_t> shards_left{0};
};

// A partition of the image with a replica on this node that changed since the published image (or that
// failed to apply before), as the shard owning it is told of it.
struct metadata_publisher::hosted_replica {
  const std::string* topic = nullptr;
  const metadata::topic_metadata* metadata = nullptr;
  const metadata::partition_state* state = nullptr;
  const replication::log_config* log_config = nullptr;
  int32_t min_isr = 1;
  const topic_throttles* throttles = nullptr;
};

void metadata_publisher::publish(const metadata::metadata_image_ptr& image) {
  _latest = image;
  if (_busy) return;  // the creation or apply in progress publishes the latest image when done
  publish_latest();
}

namespace {

bool hosts(const metadata::partition_state& p, int32_t node_id) {
  return std::find(p.replicas.begin(), p.replicas.end(), node_id) != p.replicas.end();
}

// The elements a chunked_cow_vector keeps per chunk: shared or not as a whole.
template <typename>
struct chunk_size_of;
template <typename T, size_t N>
struct chunk_size_of<chunked_cow_vector<T, N>> {
  static constexpr size_t value = N;
};

bool same_configs(const metadata::config_map* a, const metadata::config_map* b) {
  if (a == b) return true;
  if (!a || !b) return (a ? a->empty() : true) && (b ? b->empty() : true);
  return *a == *b;
}

}  // namespace

void metadata_publisher::publish_latest() {
  if (!_alive->load()) return;
  const metadata::metadata_image_ptr image = _latest;
  const metadata::metadata_image_ptr previous = _cache.current();

  // On this (the home) shard: what changed since the published image, per owning shard (Kafka's publisher
  // applies the delta's local changes). The shards have applied `previous`, so a topic whose partitions the
  // new image shares with it (chunked_cow_vector: an unchanged copy shares its storage) and whose configs did
  // not change is skipped without visiting its partitions, and within a changed topic every 64 partitions
  // left shared are; the cost of an image is its changes, not the partitions hosted. The image is immutable:
  // the shards read it.
  auto job = std::make_shared<apply_job>();
  job->image = image;
  auto& by_shard = job->by_shard;
  auto& removed = job->removed_by_shard;
  auto& configs = job->configs;
  by_shard.resize(std::max<size_t>(1, _replicas_by_shard.size()));
  removed.resize(by_shard.size());
  auto shard_of = [&](const std::string& topic, int32_t partition) {
    return _placement.shard_of(topic, partition) % by_shard.size();
  };
  using metadata::config_resource_type;
  const std::string node_name = std::to_string(_node_id);
  const bool broker_configs_same =
      previous &&
      same_configs(previous->find_configs(config_resource_type::broker, ""),
                   image->find_configs(config_resource_type::broker, "")) &&
      same_configs(previous->find_configs(config_resource_type::broker, node_name),
                   image->find_configs(config_resource_type::broker, node_name));
  // Replicas whose apply failed last time are tried again with this image, changed or not.
  std::set<replication::topic_partition> retry;
  retry.swap(_failed);

  // The topics the images differ in: a topic only in `previous` (or there under another id) was deleted, its
  // replicas here go before any of a re-created topic's apply.
  const bool configs_same = previous && broker_configs_same && previous->configs == image->configs;
  static const decltype(metadata::metadata_image::topics) no_topics;
  const auto& topics_before = previous ? previous->topics : no_topics;
  auto gone = [&](const std::string& name, const metadata::topic_metadata& topic) {
    for (const auto& p : topic.partitions) {
      if (hosts(p, _node_id)) removed[shard_of(name, p.partition)].push_back({name, p.partition});
    }
  };
  // One topic of the new image, `name` its key there (the applies point to it), `named_before` the previous
  // image's topic of that name, if any.
  auto visit_topic = [&](const std::string& name, const metadata::topic_metadata& topic,
                         const metadata::topic_metadata* named_before) {
    const metadata::topic_metadata* before = nullptr;
    if (named_before) {
      if (named_before->id == topic.id) {
        before = named_before;
      } else {
        gone(name, *named_before);  // deleted and re-created under the same name
      }
    }
    const bool raw_configs_same =
        before && (configs_same || (broker_configs_same &&
                                    same_configs(previous->find_configs(config_resource_type::topic, name),
                                                 image->find_configs(config_resource_type::topic, name))));
    const auto first_retry = retry.lower_bound({name, 0});
    const bool any_retry = first_retry != retry.end() && first_retry->topic == name;
    if (raw_configs_same && !any_retry && topic.partitions.shares_with(before->partitions)) return;

    // The topic's effective settings, resolved once the first hosted partition needs them.
    replication::log_config* log_config = nullptr;
    int32_t min_isr = 1;
    const topic_throttles* topic_throttled = nullptr;
    bool config_changed = !raw_configs_same;
    auto resolve = [&] {
      if (log_config) return;
      log_config = configs
                       .emplace_back(std::make_unique<replication::log_config>(
                           effective_log_config(*image, name, _node_id, _static_config)))
                       .get();
      min_isr = effective_min_insync_replicas(*image, name, _node_id, _static_config);
      topic_throttled =
          job->throttles.emplace_back(std::make_unique<topic_throttles>(throttles_of(*image, name, _node_id)))
              .get();
      if (before && config_changed) {
        // Raw configs differ; what the log uses may not.
        config_changed =
            !same_log_config(*log_config, effective_log_config(*previous, name, _node_id, _static_config)) ||
            min_isr != effective_min_insync_replicas(*previous, name, _node_id, _static_config) ||
            *topic_throttled != throttles_of(*previous, name, _node_id);
      }
    };
    if (config_changed && before) resolve();  // a changed config reaches every hosted partition

    constexpr size_t run = chunk_size_of<decltype(metadata::topic_metadata::partitions)>::value;
    const size_t count = topic.partitions.size();
    const size_t count_before = before ? before->partitions.size() : 0;
    for (size_t first = 0; first < count; first += run) {
      const size_t last = std::min(count, first + run);
      // A run the image shares with the previous one: its first element is the same object.
      const bool shared = last <= count_before && &topic.partitions[first] == &before->partitions[first];
      if (shared && !config_changed && !any_retry) continue;
      for (size_t i = first; i < last; ++i) {
        const auto& p = topic.partitions[i];
        const metadata::partition_state* was = i < count_before ? &before->partitions[i] : nullptr;
        const bool hosted_before = was && hosts(*was, _node_id);
        if (!hosts(p, _node_id)) {
          if (hosted_before) removed[shard_of(name, p.partition)].push_back({name, p.partition});
          continue;
        }
        const bool changed = !hosted_before || config_changed || !same_state(*was, p) ||
                             (any_retry && retry.count({name, p.partition}));
        if (!changed) continue;
        resolve();
        // A replica new to this node (or loaded from disk) is placed now, on the shard with the fewest.
        by_shard[_placement.place({name, p.partition}) % by_shard.size()].push_back(
            {&name, &topic, &p, log_config, min_isr, topic_throttled});
      }
    }
  };
  if (!previous || !broker_configs_same) {
    // The broker's configs changed (every topic's effective config may have): every topic, both images side
    // by side in name order.
    auto old_it = topics_before.begin();
    for (const auto& [name, topic] : image->topics) {
      while (old_it != topics_before.end() && old_it->first < name) {
        gone(old_it->first, old_it->second);
        ++old_it;
      }
      const metadata::topic_metadata* was = nullptr;
      if (old_it != topics_before.end() && old_it->first == name) {
        was = &old_it->second;
        ++old_it;
      }
      visit_topic(name, topic, was);
    }
    for (; old_it != topics_before.end(); ++old_it) gone(old_it->first, old_it->second);
  } else {
    // Only the topics the two images do not share (persistent maps: O(changes log topics)), those whose
    // configs changed, and those with a replica to try again.
    std::set<std::string> retried;
    for (const auto& tp : retry) retried.insert(tp.topic);
    if (!configs_same) {
      using config_maps = decltype(metadata::metadata_image::configs);
      config_maps::for_each_difference(
          previous->configs, image->configs,
          [&](const metadata::config_resource& resource, const auto*, const auto*) {
            if (resource.type == config_resource_type::topic) retried.insert(resource.name);
          });
    }
    using topic_map = decltype(metadata::metadata_image::topics);
    topic_map::for_each_difference(previous->topics, image->topics,
                                   [&](const std::string& name, const metadata::topic_metadata* was,
                                       const metadata::topic_metadata* now) {
                                     retried.erase(name);
                                     if (!now) {
                                       gone(name, *was);
                                     } else {
                                       visit_topic(name, *now, was);
                                     }
                                   });
    for (const auto& name : retried) {
      auto it = image->topics.find(name);
      if (it != image->topics.end()) visit_topic(it->first, it->second, previous->topics.get(name));
    }
  }

  // How much the shards have to do: the replicas that changed (the most on one shard).
  size_t most_changes = 0;
  bool any_change = false;
  for (size_t shard = 0; shard < by_shard.size(); ++shard) {
    most_changes = std::max(most_changes, by_shard[shard].size() + removed[shard].size());
    any_change = any_change || !by_shard[shard].empty() || !removed[shard].empty();
  }

  // Logs to create first, off the shards: changed replicas without a log (not retried when the last job
  // could not create them: the shard's apply then reports why).
  if (_creator) {
    struct missing_log {
      replication::topic_partition tp;
      uuid topic_id;
      replication::log_config config;
      std::optional<size_t> dir;  // the log dir the metadata names for this replica
    };
    std::vector<missing_log> missing;
    for (const auto& hosted : by_shard) {
      for (const auto& h : hosted) {
        replication::topic_partition tp{*h.topic, h.state->partition};
        if (_attempted.count(tp) || _logs->get(tp) || _logs->is_offline(tp)) continue;
        std::optional<size_t> dir;
        const auto& p = *h.state;
        const auto self = static_cast<size_t>(std::find(p.replicas.begin(), p.replicas.end(), _node_id) -
                                              p.replicas.begin());
        if (self < p.directories.size()) {
          const auto named = std::find(_log_dir_ids.begin(), _log_dir_ids.end(), p.directories[self]);
          if (named != _log_dir_ids.end()) dir = static_cast<size_t>(named - _log_dir_ids.begin());
        }
        missing.push_back({std::move(tp), h.metadata->id, *h.log_config, dir});
      }
    }
    _attempted.clear();
    if (!missing.empty()) {
      _busy = true;
      // A small image's controller answers wait for its logs (answer_gate()), as when the shards created
      // them in place: a CreateTopics of up to max_held_log_creations partitions per broker is answered once
      // this node hosts them.
      if (missing.size() <= max_held_log_creations && most_changes <= apply_slice_size)
        _answer_gate.store(previous->metadata_offset + 1);
      _failed.insert(retry.begin(), retry.end());  // not applied yet: the next publish tries them
      for (const auto& m : missing) _attempted.insert(m.tp);
      subsystem_logger("broker")->info("creating {} log(s) before publishing metadata offset {}",
                                       missing.size(), image->metadata_offset);
      asio::post(_creator->thread, [this, alive = _alive, missing = std::move(missing)] {
        for (const auto& m : missing) {
          if (!alive->load()) return;
          // Failures are reported by the shard's apply, which tries once more.
          if (m.dir) _logs->set_preferred_dir(m.tp, *m.dir);
          (void)_logs->create(m.tp, m.topic_id, m.config);
        }
        asio::post(_shards->context(0), [this, alive] {
          if (!alive->load()) return;
          _busy = false;
          const bool held = answer_gate() != INT64_MAX;
          _answer_gate.store(INT64_MAX);
          publish_latest();
          // Published at once, finish() told the listener; otherwise (another creation or a sliced apply
          // under way) the gate's listener hears that it opened.
          if (held && _busy && _answer_gate_opened) _answer_gate_opened();
        });
      });
      return;
    }
  }

  // On each shard: the replicas no longer hosted go, then the changed ones become leaders or followers.
  job->failed.resize(by_shard.size());
  if (!any_change) {
    finish(*job);  // nothing hosted here changed (another broker's partitions, a config of no topic here)
    return;
  }
  if (!_shards || !_shards->running() || most_changes <= apply_slice_size) {
    // A small image (the common case: a topic created, a leader moved), and unit tests and the images loaded
    // before the shards run: applied at once, the home shard waiting for every shard. The loader returns
    // only after the image is published, so the next Raft Fetch this node sends says it is applied: the
    // controller answers a CreateTopics once every broker hosts the new partitions.
    auto apply_on = [&](size_t shard) {
      if (shard >= _replicas_by_shard.size() || !_replicas_by_shard[shard]) return;
      auto& replicas = *_replicas_by_shard[shard];
      remove_replicas(replicas, removed[shard]);
      apply_range(replicas, by_shard[shard], 0, by_shard[shard].size(), job->failed[shard]);
    };
    if (_shards) {
      _shards->run_on_each_and_wait(apply_on);
    } else {
      for (size_t shard = 0; shard < by_shard.size(); ++shard) apply_on(shard);
    }
    finish(*job);
    return;
  }
  // On running shards, a slice at a time: a shard (the home shard with the controller and the heartbeats
  // above all) goes on serving between slices of an image that changes thousands of partitions.
  _busy = true;
  job->shards_left = by_shard.size();
  for (size_t shard = 0; shard < by_shard.size(); ++shard) {
    asio::post(_shards->context(shard), [this, alive = _alive, job, shard] {
      if (!alive->load()) return;
      if (shard < _replicas_by_shard.size() && _replicas_by_shard[shard])
        remove_replicas(*_replicas_by_shard[shard], job->removed_by_shard[shard]);
      apply_slice(job, shard, 0);
    });
  }
}

void metadata_publisher::apply_slice(const std::shared_ptr<apply_job>& job, size_t shard, size_t from) {
  const auto& hosted = job->by_shard[shard];
  auto* replicas = shard < _replicas_by_shard.size() ? _replicas_by_shard[shard] : nullptr;
  if (replicas) {
    const size_t to = std::min(hosted.size(), from + apply_slice_size);
    apply_range(*replicas, hosted, from, to, job->failed[shard]);
    if (to < hosted.size()) {
      asio::post(_shards->context(shard), [this, alive = _alive, job, shard, to] {
        if (alive->load()) apply_slice(job, shard, to);
      });
      return;
    }
  }
  if (job->shards_left.fetch_sub(1) != 1) return;
  asio::post(_shards->context(0), [this, alive = _alive, job] {
    if (!alive->load()) return;
    _busy = false;
    finish(*job);
    if (_latest != job->image) publish_latest();
  });
}

void metadata_publisher::finish(const apply_job& job) {
  for (const auto& failed : job.failed) _failed.insert(failed.begin(), failed.end());
  // The replicas removed give their places back, unless the image hosts them again (a topic re-created
  // under its name) or their log is still here (its removal failed: it stays where it is).
  for (const auto& removed : job.removed_by_shard) {
    for (const auto& tp : removed) {
      const auto* topic = job.image->topics.get(tp.topic);
      if (topic && tp.partition >= 0 && static_cast<size_t>(tp.partition) < topic->partitions.size() &&
          topic->partitions[static_cast<size_t>(tp.partition)].partition == tp.partition &&
          hosts(topic->partitions[static_cast<size_t>(tp.partition)], _node_id))
        continue;
      if (_logs && (_logs->get(tp) || _logs->get_future(tp))) continue;
      _placement.release(tp);
    }
  }
  _cache.publish(job.image);
  if (_published_listener) _published_listener(job.image);
}

void metadata_publisher::apply_range(replication::replica_manager& replicas,
                                     const std::vector<hosted_replica>& hosted, size_t from, size_t to,
                                     std::vector<replication::topic_partition>& failed) {
  auto log = subsystem_logger("broker");
  for (size_t i = from; i < to; ++i) {
    const auto& h = hosted[i];
    const auto& p = *h.state;
    replication::partition_leadership leadership;
    leadership.topic = *h.topic;
    leadership.partition = p.partition;
    leadership.topic_id = h.metadata->id;
    leadership.state.leader = p.leader;
    leadership.state.leader_epoch = p.leader_epoch;
    leadership.state.partition_epoch = p.partition_epoch;
    leadership.state.replicas = p.replicas;
    leadership.state.isr = p.isr;
    leadership.state.min_insync_replicas = h.min_isr;
    leadership.state.leader_throttled = h.throttles->leader.contains(p.partition);
    leadership.state.follower_throttled = h.throttles->follower.contains(p.partition);
    leadership.state.leader_recovery_state = p.leader_recovery_state;
    leadership.log_config = *h.log_config;
    auto applied = replicas.apply_leadership(leadership);
    if (!applied) {
      // The replica stays unavailable here (Metadata reports it offline); the next image retries it.
      log->error("{}-{}: cannot apply leadership: {}", *h.topic, p.partition, applied.error().message);
      failed.push_back({*h.topic, p.partition});
    }
  }
}

void metadata_publisher::remove_replicas(replication::replica_manager& replicas,
                                         const std::vector<replication::topic_partition>& removed) {
  auto log = subsystem_logger("broker");
  // Replicas this node no longer hosts: the topic was deleted (or re-created with another id), or the replica
  // moved away. Their logs are deleted, as Kafka's ReplicaManager does on a RemoveTopicRecord.
  for (const auto& tp : removed) {
    if (!replicas.get(tp)) continue;  // never applied (its apply failed)
    if (auto st = replicas.remove_partition(tp, /*delete_log=*/true); !st.ok()) {
      log->error("{}-{}: cannot remove replica: {}", tp.topic, tp.partition, st.message);
    }
  }
}

}  // namespace mala::broker
