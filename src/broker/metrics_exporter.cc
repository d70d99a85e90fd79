#include "mala/broker/metrics_exporter.h"

#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <map>
#include <string_view>

#include <fmt/format.h>

#include "mala/broker/client_telemetry.h"
#include "mala/broker/cordoned_log_dirs.h"
#include "mala/broker/handler_table.h"
#include "mala/controller/quorum_controller.h"
#include "mala/coordinator/group_coordinator.h"
#include "mala/net/coroutine_frame_warning.h"
#include "mala/net/shard_pool.h"
#include "mala/raft/raft_node.h"
#include "mala/replication/replica_manager.h"

namespace mala::broker {

namespace {

using metrics::prometheus_text;
using gauge_type = prometheus_text::type;

// One hosted partition as a scrape sees it (Kafka's per-partition Partition and Log gauges).
struct partition_view {
  std::string topic;
  int32_t partition = 0;
  bool leader = false;
  int32_t replicas = 0;
  int32_t in_sync = 0;
  int32_t min_isr = 1;
  bool under_replicated = false;
  bool under_min_isr = false;
  int64_t size_bytes = 0;
  int64_t log_end_offset = 0;
};

// What a scrape reads on one shard.
struct shard_view {
  traffic_snapshot traffic;
  replication::replica_manager::replica_gauges gauges;
  std::vector<partition_view> partitions;
  std::vector<std::pair<size_t, int64_t>> high_watermarks;  // committed offset index -> partition's HW
};

// A committed offset of a group this node coordinates, and the high watermark of its partition where this
// node has a replica.
struct group_offset {
  std::string group;
  std::string topic;
  int32_t partition = 0;
  int64_t offset = -1;
  int64_t high_watermark = -1;
};

int64_t monotonic_nanos() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

shard_view read_shard(const broker_services& services, broker_metrics& counters, size_t shard,
                      const std::vector<group_offset>& offsets, const std::vector<size_t>& offsets_here) {
  shard_view view;
  // Against this shard's own latest image, not the one the scrape began with: a topic created since keeps
  // its counts.
  const auto latest = services.metadata->current();
  view.traffic = counters.on(shard).snapshot(
      [&latest](const std::string& topic) { return latest->topics.contains(topic); });
  auto* replicas = services.replicas_on(shard);
  if (!replicas) return view;
  view.gauges = replicas->gauges();
  for (const auto& tp : replicas->partitions()) {
    const auto* p = replicas->get(tp);
    if (!p) continue;
    partition_view v;
    v.topic = tp.topic;
    v.partition = tp.partition;
    v.leader = p->is_leader();
    v.replicas = static_cast<int32_t>(p->replicas().size());
    v.in_sync = static_cast<int32_t>(p->isr().size());
    v.min_isr = p->min_insync_replicas();
    v.under_replicated = v.leader && p->under_replicated();
    v.under_min_isr = v.leader && p->under_min_isr();
    if (!p->log().is_offline()) {
      v.size_bytes = p->log().size_bytes();
      v.log_end_offset = p->log().log_end_offset();
    }
    view.partitions.push_back(std::move(v));
  }
  for (size_t i : offsets_here) {
    const auto* p = replicas->get({offsets[i].topic, offsets[i].partition});
    if (p) view.high_watermarks.emplace_back(i, p->high_watermark());
  }
  return view;
}

// The name Kafka's RequestMetrics gives an API: ApiKeys' name, with Fetch split into FetchConsumer and
// FetchFollower.
std::string request_metric_name(const handler_table* handlers, size_t key) {
  if (key == static_cast<size_t>(fetch_follower_metric_key)) return "FetchFollower";
  if (key == 1) return "FetchConsumer";
  if (handlers) {
    if (const auto* e = handlers->find(static_cast<int16_t>(key))) return std::string(e->name);
  }
  return fmt::format("ApiKey{}", key);
}

struct process_figures {
  double cpu_seconds = 0;
  double resident_bytes = 0;
  double virtual_bytes = 0;
  double max_fds = 0;
  double start_time_seconds = 0;
};

// The process's figures without listing /proc/self/fd (which grows with the partitions' segment files).
process_figures read_process_figures() {
  process_figures f;
  timespec cpu{};
  if (clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &cpu) == 0) {
    f.cpu_seconds = static_cast<double>(cpu.tv_sec) + static_cast<double>(cpu.tv_nsec) / 1e9;
  }
  const double page = static_cast<double>(sysconf(_SC_PAGESIZE));
  if (FILE* statm = std::fopen("/proc/self/statm", "r")) {
    unsigned long size = 0;
    unsigned long resident = 0;
    if (std::fscanf(statm, "%lu %lu", &size, &resident) == 2) {
      f.virtual_bytes = static_cast<double>(size) * page;
      f.resident_bytes = static_cast<double>(resident) * page;
    }
    std::fclose(statm);
  }
  rlimit files{};
  if (getrlimit(RLIMIT_NOFILE, &files) == 0) f.max_fds = static_cast<double>(files.rlim_cur);
  return f;
}

const double process_start_seconds =
    std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();

}  // namespace

metrics_exporter::metrics_exporter(const broker_services& services, broker_metrics& counters,
                                   metrics_exporter_options options)
    : _services(services), _counters(counters), _options(std::move(options)) {}

asio::awaitable<net::http_response> metrics_exporter::serve(const http_request_head& request) {
  if (request.path == "/metrics") {
    net::http_response r;
    r.content_type = "text/plain; version=0.0.4; charset=utf-8";
    r.body = co_await scrape();
    co_return r;
  }
  if (request.path == "/health/live")
    co_return net::http_response{200, "text/plain; charset=utf-8", "live\n"};
  if (request.path == "/health/ready") {
    const bool ready = !_options.ready || _options.ready();
    co_return net::http_response{ready ? 200 : 503, "text/plain; charset=utf-8",
                                 ready ? "ready\n" : "not ready\n"};
  }
  co_return net::http_response{404, "text/plain; charset=utf-8",
                               "not found: /metrics, /health/live and /health/ready are served\n"};
}

asio::awaitable<std::string> metrics_exporter::scrape() {
  const auto image_ptr = _services.metadata->current();
  const metadata::metadata_image& image = *image_ptr;
  const size_t shard_count = _services.shards ? _services.shards->size() : 1;

  // The committed offsets of the groups this node coordinates (home shard), each looked up on the shard of
  // its partition for the high watermark.
  std::vector<group_offset> offsets;
  if (_services.groups) {
    _services.groups->for_each_committed_offset([&offsets](const std::string& group, const std::string& topic,
                                                           int32_t partition,
                                                           const coordinator::committed_offset& committed) {
      offsets.push_back({group, topic, partition, committed.offset, -1});
    });
  }
  std::vector<std::vector<size_t>> offsets_by_shard(shard_count);
  for (size_t i = 0; i < offsets.size(); ++i) {
    const size_t shard = _services.shard_of(offsets[i].topic, offsets[i].partition);
    offsets_by_shard[shard < shard_count ? shard : 0].push_back(i);
  }

  std::vector<shard_view> shards;
  shards.reserve(shard_count);
  for (size_t s = 0; s < shard_count; ++s) {
    auto read = [this, s, &offsets, &offsets_by_shard] {
      return read_shard(_services, _counters, s, offsets, offsets_by_shard[s]);
    };
    if (_services.shards && _services.shards->running()) {
      shards.push_back(co_await _services.shards->invoke_on(s, read));
    } else {
      shards.push_back(read());
    }
  }
  traffic_snapshot traffic;
  replication::replica_manager::replica_gauges gauges;
  for (auto& v : shards) {
    traffic.merge(v.traffic);
    gauges.partitions += v.gauges.partitions;
    gauges.leaders += v.gauges.leaders;
    gauges.under_replicated += v.gauges.under_replicated;
    gauges.under_min_isr += v.gauges.under_min_isr;
    gauges.at_min_isr += v.gauges.at_min_isr;
    gauges.offline += v.gauges.offline;
    for (const auto& [index, hw] : v.high_watermarks) offsets[index].high_watermark = hw;
  }

  prometheus_text out;

  // --- kafka.server:type=BrokerTopicMetrics (the broker-wide series without a topic label, then per topic)
  if (_options.broker_role) {
    struct topic_counter {
      std::string_view name;
      std::string_view help;
      uint64_t topic_traffic::*field;
    };
    static constexpr topic_counter topic_counters[] = {
        {"kafka_server_brokertopicmetrics_messagesin_total",
         "Records appended by produce requests as leader.", &topic_traffic::messages_in},
        {"kafka_server_brokertopicmetrics_bytesin_total",
         "Bytes of the record batches produce requests appended.", &topic_traffic::bytes_in},
        {"kafka_server_brokertopicmetrics_bytesout_total", "Record bytes sent to consumers' fetch requests.",
         &topic_traffic::bytes_out},
        {"kafka_server_brokertopicmetrics_totalproducerequests_total", "Partitions of produce requests.",
         &topic_traffic::produce_requests},
        {"kafka_server_brokertopicmetrics_failedproducerequests_total",
         "Partitions of produce requests answered with an error.", &topic_traffic::failed_produce_requests},
        {"kafka_server_brokertopicmetrics_totalfetchrequests_total",
         "Partitions of consumers' fetch requests.", &topic_traffic::fetch_requests},
        {"kafka_server_brokertopicmetrics_failedfetchrequests_total",
         "Partitions of consumers' fetch requests answered with an error.",
         &topic_traffic::failed_fetch_requests},
    };
    for (const auto& c : topic_counters) {
      out.family(c.name, c.help, gauge_type::counter);
      uint64_t all = traffic.deleted_topics.*c.field;
      for (const auto& [topic, t] : traffic.topics) all += t.*c.field;
      out.sample(c.name, {}, all);
      for (const auto& [topic, t] : traffic.topics) out.sample(c.name, {{"topic", topic}}, t.*c.field);
    }
    out.family("kafka_server_brokertopicmetrics_replicationbytesout_total", "Record bytes sent to followers.",
               gauge_type::counter);
    out.sample("kafka_server_brokertopicmetrics_replicationbytesout_total", {},
               traffic.replication_bytes_out);

    // --- kafka.server:type=ReplicaManager
    const std::pair<std::string_view, int32_t> replica_gauges[] = {
        {"kafka_server_replicamanager_partitioncount", gauges.partitions},
        {"kafka_server_replicamanager_leadercount", gauges.leaders},
        {"kafka_server_replicamanager_underreplicatedpartitions", gauges.under_replicated},
        {"kafka_server_replicamanager_underminisrpartitioncount", gauges.under_min_isr},
        {"kafka_server_replicamanager_atminisrpartitioncount", gauges.at_min_isr},
        {"kafka_server_replicamanager_offlinereplicacount", gauges.offline},
    };
    for (const auto& [name, value] : replica_gauges) {
      out.family(name, "Kafka's ReplicaManager gauge of the same name, over the replicas this node hosts.",
                 gauge_type::gauge);
      out.sample(name, {}, static_cast<uint64_t>(value));
    }

    // --- kafka.cluster:type=Partition and kafka.log:type=Log, per hosted partition (leaders for the
    // replication gauges, as Kafka reports them only where it leads)
    struct partition_gauge {
      std::string_view name;
      std::string_view help;
      bool leaders_only;
      int64_t (*value)(const partition_view&);
    };
    static constexpr partition_gauge partition_gauges[] = {
        {"kafka_cluster_partition_underreplicated",
         "1 when the partition's ISR is smaller than its replicas.", true,
         [](const partition_view& p) -> int64_t { return p.under_replicated ? 1 : 0; }},
        {"kafka_cluster_partition_underminisr", "1 when the partition's ISR is below min.insync.replicas.",
         true, [](const partition_view& p) -> int64_t { return p.under_min_isr ? 1 : 0; }},
        {"kafka_cluster_partition_atminisr", "1 when the partition's ISR is exactly min.insync.replicas.",
         true, [](const partition_view& p) -> int64_t { return p.in_sync == p.min_isr ? 1 : 0; }},
        {"kafka_cluster_partition_replicascount", "Replicas of the partition.", true,
         [](const partition_view& p) -> int64_t { return p.replicas; }},
        {"kafka_cluster_partition_insyncreplicascount", "In-sync replicas of the partition.", true,
         [](const partition_view& p) -> int64_t { return p.in_sync; }},
        {"kafka_log_log_size", "Bytes of the partition's log on this node.", false,
         [](const partition_view& p) -> int64_t { return p.size_bytes; }},
        {"kafka_log_log_logendoffset", "The log end offset of the partition's log on this node.", false,
         [](const partition_view& p) -> int64_t { return p.log_end_offset; }},
    };
    for (const auto& g : partition_gauges) {
      out.family(g.name, g.help, gauge_type::gauge);
      for (const auto& v : shards) {
        for (const auto& p : v.partitions) {
          if (g.leaders_only && !p.leader) continue;
          const std::string partition = std::to_string(p.partition);
          out.sample(g.name, {{"topic", p.topic}, {"partition", partition}}, static_cast<double>(g.value(p)));
        }
      }
    }
  }

  // --- kafka.network:type=RequestMetrics
  out.family("kafka_network_requestmetrics_requests_total", "Requests served, per API and version.",
             gauge_type::counter);
  for (size_t key = 0; key < traffic.apis.size(); ++key) {
    const auto& api = traffic.apis[key];
    if (api.empty()) continue;
    const std::string name = request_metric_name(_services.handlers, key);
    for (size_t v = 0; v < api.requests_by_version.size(); ++v) {
      if (api.requests_by_version[v] == 0) continue;
      const std::string version = std::to_string(v);
      out.sample("kafka_network_requestmetrics_requests_total", {{"request", name}, {"version", version}},
                 api.requests_by_version[v]);
    }
  }
  out.family("kafka_network_requestmetrics_totaltimems",
             "Milliseconds from a request's start to its response, per API.", gauge_type::histogram);
  for (size_t key = 0; key < traffic.apis.size(); ++key) {
    const auto& api = traffic.apis[key];
    if (api.empty()) continue;
    const std::string name = request_metric_name(_services.handlers, key);
    out.histogram("kafka_network_requestmetrics_totaltimems", {{"request", name}}, api.total_time);
  }

  // --- Shards: each serves its connections and runs its requests, Kafka's network processors and request
  // handlers in one thread. Idle = 1 - the share of wall time its thread was on a CPU since the scrape before
  // (at least a second ago).
  if (_services.shards && _services.shards->running()) {
    const int64_t wall = monotonic_nanos();
    std::vector<int64_t> cpu(shard_count);
    for (size_t s = 0; s < shard_count; ++s) cpu[s] = _services.shards->thread_cpu_nanos(s);
    if (_previous.shard_cpu_nanos.size() != shard_count) {
      _previous = {wall, cpu};
      _idle_ratio.assign(shard_count, 1.0);
    } else if (wall - _previous.wall_nanos >= 1'000'000'000) {
      const double elapsed = static_cast<double>(wall - _previous.wall_nanos);
      for (size_t s = 0; s < shard_count; ++s) {
        const double busy = static_cast<double>(cpu[s] - _previous.shard_cpu_nanos[s]) / elapsed;
        _idle_ratio[s] = std::clamp(1.0 - busy, 0.0, 1.0);
      }
      _previous = {wall, cpu};
    }
    double sum = 0;
    for (double r : _idle_ratio) sum += r;
    const double average = _idle_ratio.empty() ? 1.0 : sum / static_cast<double>(_idle_ratio.size());
    out.family("kafka_network_socketserver_networkprocessoravgidlepercent",
               "Average share of time the shards were idle (0 to 1).", gauge_type::gauge);
    out.sample("kafka_network_socketserver_networkprocessoravgidlepercent", {}, average);
    out.family("kafka_server_kafkarequesthandlerpool_requesthandleravgidle_percent",
               "Average share of time the shards were idle (0 to 1); shards also run the requests.",
               gauge_type::gauge);
    out.sample("kafka_server_kafkarequesthandlerpool_requesthandleravgidle_percent", {}, average);
    out.family("kafka_network_processor_idlepercent", "Share of time each shard was idle (0 to 1).",
               gauge_type::gauge);
    for (size_t s = 0; s < shard_count; ++s) {
      const std::string shard = std::to_string(s);
      out.sample("kafka_network_processor_idlepercent", {{"networkProcessor", shard}}, _idle_ratio[s]);
    }
    out.family("mala_shard_cpu_seconds_total", "CPU time each shard's thread used.", gauge_type::counter);
    for (size_t s = 0; s < shard_count; ++s) {
      const std::string shard = std::to_string(s);
      out.sample("mala_shard_cpu_seconds_total", {{"shard", shard}}, static_cast<double>(cpu[s]) / 1e9);
    }
  }

  // --- kafka.log:type=LogFlushStats
  out.family("kafka_log_logflushstats_logflushrateandtimems", "Milliseconds each log flush's fsyncs took.",
             gauge_type::histogram);
  out.histogram("kafka_log_logflushstats_logflushrateandtimems", {}, _counters.log_flush_time().snapshot());

  // --- kafka.log:type=LogManager: KIP-1066's cordoned log dirs (cordoned.log.dirs)
  if (_options.broker_role && _services.config) {
    const auto cordoned = cordoned_log_dirs(*_services.config, image, _services.node_id);
    out.family("kafka_log_logmanager_cordonedlogdirectorycount", "Log dirs of this node that are cordoned.",
               gauge_type::gauge);
    out.sample("kafka_log_logmanager_cordonedlogdirectorycount", {}, static_cast<uint64_t>(cordoned.size()));
    out.family("kafka_log_logmanager_logdirectorycordoned", "1 when the log dir is cordoned, else 0.",
               gauge_type::gauge);
    for (const auto& dir : _services.config->log_dirs()) {
      const bool is_cordoned = std::find(cordoned.begin(), cordoned.end(), dir) != cordoned.end();
      out.sample("kafka_log_logmanager_logdirectorycordoned", {{"logDirectory", dir}},
                 static_cast<uint64_t>(is_cordoned ? 1 : 0));
    }
  }

  // --- kafka.server:type=KafkaServer,name=BrokerState (3 = RUNNING, 1 = STARTING)
  const bool ready = !_options.ready || _options.ready();
  if (_options.broker_role) {
    out.family("kafka_server_kafkaserver_brokerstate", "Kafka's BrokerState: 1 starting, 3 running.",
               gauge_type::gauge);
    out.sample("kafka_server_kafkaserver_brokerstate", {}, static_cast<uint64_t>(ready ? 3 : 1));
  }

  // --- kafka.controller:type=KafkaController (controllers; the counts from the metadata image)
  if (_options.controller_role) {
    const bool active = _services.controller && _services.controller->active();
    uint64_t partitions = 0;
    uint64_t offline = 0;
    uint64_t imbalance = 0;
    for (const auto& [name, topic] : image.topics) {
      for (const auto& p : topic.partitions) {
        ++partitions;
        if (p.leader < 0) ++offline;
        if (!p.replicas.empty() && p.leader != p.replicas.front()) ++imbalance;
      }
    }
    uint64_t fenced = 0;
    for (const auto& [id, b] : image.brokers) fenced += b.fenced ? 1 : 0;
    const std::pair<std::string_view, uint64_t> controller_gauges[] = {
        {"kafka_controller_kafkacontroller_activecontrollercount", active ? 1 : 0},
        {"kafka_controller_kafkacontroller_globaltopiccount", image.topics.size()},
        {"kafka_controller_kafkacontroller_globalpartitioncount", partitions},
        {"kafka_controller_kafkacontroller_offlinepartitionscount", offline},
        {"kafka_controller_kafkacontroller_preferredreplicaimbalancecount", imbalance},
        {"kafka_controller_kafkacontroller_activebrokercount", image.brokers.size() - fenced},
        {"kafka_controller_kafkacontroller_fencedbrokercount", fenced},
    };
    for (const auto& [name, value] : controller_gauges) {
      out.family(name, "Kafka's KafkaController gauge of the same name.", gauge_type::gauge);
      out.sample(name, {}, value);
    }
  }

  // --- kafka.server:type=raft-metrics (named as Strimzi's rules name them)
  if (_services.raft) {
    const auto& replica = _services.raft->state();
    std::string_view state = raft::role_name(replica.current_role());
    if (replica.current_role() == raft::role::follower && !replica.is_voter()) state = "observer";
    out.family("kafka_server_raftmetrics_current_state", "1 for the node's current Raft state.",
               gauge_type::gauge);
    out.sample("kafka_server_raftmetrics_current_state", {{"current_state", state}}, uint64_t{1});
    const std::pair<std::string_view, double> raft_gauges[] = {
        {"kafka_server_raftmetrics_current_leader", static_cast<double>(replica.leader_id())},
        {"kafka_server_raftmetrics_current_epoch", static_cast<double>(replica.epoch())},
        {"kafka_server_raftmetrics_current_vote", static_cast<double>(replica.voted_id())},
        {"kafka_server_raftmetrics_high_watermark", static_cast<double>(replica.high_watermark())},
        {"kafka_server_raftmetrics_log_end_offset", static_cast<double>(replica.log().end_offset())},
    };
    for (const auto& [name, value] : raft_gauges) {
      out.family(name, "Kafka's raft-metrics gauge of the same name.", gauge_type::gauge);
      out.sample(name, {}, value);
    }
  }

  // --- Consumer group lag of the groups this node coordinates (kafka_exporter's names): the partition's high
  // watermark on this node's replica (a follower's trails its leader's by at most a fetch) minus the
  // committed offset; partitions without a replica here are not reported.
  out.family("kafka_consumergroup_current_offset", "The group's committed offset of the partition.",
             gauge_type::gauge);
  for (const auto& o : offsets) {
    const std::string partition = std::to_string(o.partition);
    out.sample("kafka_consumergroup_current_offset",
               {{"consumergroup", o.group}, {"topic", o.topic}, {"partition", partition}},
               static_cast<double>(o.offset));
  }
  out.family("kafka_consumergroup_lag", "The partition's high watermark minus the group's committed offset.",
             gauge_type::gauge);
  std::map<std::pair<std::string_view, std::string_view>, int64_t> lag_sums;
  for (const auto& o : offsets) {
    if (o.high_watermark < 0) continue;
    const int64_t lag = o.offset < 0 ? -1 : std::max<int64_t>(0, o.high_watermark - o.offset);
    const std::string partition = std::to_string(o.partition);
    out.sample("kafka_consumergroup_lag",
               {{"consumergroup", o.group}, {"topic", o.topic}, {"partition", partition}},
               static_cast<double>(lag));
    if (lag > 0)
      lag_sums[{o.group, o.topic}] += lag;
    else
      lag_sums.try_emplace({o.group, o.topic}, 0);
  }
  out.family("kafka_consumergroup_lag_sum", "The group's lag summed over the topic's partitions.",
             gauge_type::gauge);
  for (const auto& [key, sum] : lag_sums) {
    out.sample("kafka_consumergroup_lag_sum", {{"consumergroup", key.first}, {"topic", key.second}},
               static_cast<double>(sum));
  }

  // --- The process (the names of Prometheus client libraries' process collector)
  const auto process = read_process_figures();
  out.family("process_cpu_seconds_total", "User and system CPU time the process used.", gauge_type::counter);
  out.sample("process_cpu_seconds_total", {}, process.cpu_seconds);
  out.family("process_resident_memory_bytes", "Resident memory.", gauge_type::gauge);
  out.sample("process_resident_memory_bytes", {}, process.resident_bytes);
  out.family("process_virtual_memory_bytes", "Virtual memory.", gauge_type::gauge);
  out.sample("process_virtual_memory_bytes", {}, process.virtual_bytes);
  out.family("process_max_fds", "The open files limit.", gauge_type::gauge);
  out.sample("process_max_fds", {}, process.max_fds);
  out.family("process_start_time_seconds", "When the process started, in seconds since the epoch.",
             gauge_type::gauge);
  out.sample("process_start_time_seconds", {}, process_start_seconds);
  std::string text = out.take();
  // --- What clients pushed (KIP-714), under their own names.
  if (_services.telemetry)
    _services.telemetry->append_prometheus(text, _services.clock_ms ? _services.clock_ms() : 0);
  co_return text;
}

}  // namespace mala::broker
