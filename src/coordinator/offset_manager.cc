#include "offset_manager.h"

#include <utility>

namespace mala::coordinator {

namespace proto = mala::protocol;

void offset_deletion::add(const std::string& group, const std::string& topic, int32_t partition) {
  records.push_back(offset_commit_tombstone(group, topic, partition));
  offsets.push_back({group, topic, partition});
}

void offset_deletion::add(offset_deletion other) {
  for (auto& r : other.records) records.push_back(std::move(r));
  for (auto& k : other.offsets) offsets.push_back(std::move(k));
  for (auto& g : other.groups) groups.push_back(std::move(g));
}

const committed_offset* offset_manager::find(const std::string& group, const std::string& topic,
                                             int32_t partition) const {
  auto g = _offsets.find(group);
  if (g == _offsets.end()) return nullptr;
  auto t = g->second.find(topic);
  if (t == g->second.end()) return nullptr;
  auto p = t->second.find(partition);
  return p == t->second.end() ? nullptr : &p->second;
}

size_t offset_manager::count(const std::string& group) const {
  auto g = _offsets.find(group);
  if (g == _offsets.end()) return 0;
  size_t n = 0;
  for (const auto& [topic, parts] : g->second) n += parts.size();
  return n;
}

void offset_manager::erase(const std::string& group, const std::string& topic, int32_t partition) {
  // The pending offsets of the partition go too; the transactions stay open (their markers end them).
  if (auto open = _open_transactions.find(group); open != _open_transactions.end()) {
    for (int64_t producer_id : open->second) {
      auto producer = _pending.find(producer_id);
      if (producer == _pending.end()) continue;
      auto g = producer->second.find(group);
      if (g == producer->second.end()) continue;
      auto t = g->second.find(topic);
      if (t == g->second.end()) continue;
      t->second.erase(partition);
      if (t->second.empty()) g->second.erase(t);
    }
  }
  auto g = _offsets.find(group);
  if (g == _offsets.end()) return;
  auto t = g->second.find(topic);
  if (t == g->second.end()) return;
  t->second.erase(partition);
  if (t->second.empty()) g->second.erase(t);
  if (g->second.empty()) _offsets.erase(g);
}

// --- OffsetCommit

namespace {

// Every partition of an OffsetCommit or TxnOffsetCommit request answered `e`.
template <typename Response, typename Request>
Response every_partition_answered(const Request& request, error_code e) {
  Response resp;
  for (const auto& t : request.topics) {
    auto& rt = resp.topics.emplace_back();
    rt.name = t.name;
    for (const auto& p : t.partitions) rt.partitions.push_back({p.partition_index, to_wire(e)});
  }
  return resp;
}

}  // namespace

proto::offset_commit_response offset_manager::commit_error(const proto::offset_commit_request& request,
                                                           error_code e) {
  return every_partition_answered<proto::offset_commit_response>(request, e);
}

namespace {

// A commit's offsets as they become visible, in the order of their records in the batch.
struct offset_to_apply {
  std::string topic;
  int32_t partition;
  committed_offset value;
};

// The records of a commit (OffsetCommit or TxnOffsetCommit, whose topics have the same fields) and the answer
// of each partition: metadata above offset.metadata.max.bytes is refused, the others get a record.
template <typename RequestTopics, typename ResponseTopics>
std::vector<coordinator_record> commit_records(const std::string& gid, const RequestTopics& topics,
                                               int64_t now_ms, std::optional<int64_t> expire,
                                               size_t max_metadata, ResponseTopics& answer,
                                               std::vector<offset_to_apply>& to_apply) {
  std::vector<coordinator_record> records;
  for (const auto& t : topics) {
    auto& rt = answer.emplace_back();
    rt.name = t.name;
    for (const auto& p : t.partitions) {
      auto& rp = rt.partitions.emplace_back();
      rp.partition_index = p.partition_index;
      if (p.committed_metadata && p.committed_metadata->size() > max_metadata) {
        rp.error_code = to_wire(error_code::offset_metadata_too_large);
        continue;
      }
      rp.error_code = to_wire(error_code::none);
      const std::string metadata = p.committed_metadata.value_or("");
      proto::offset_commit_value v;
      v.offset = p.committed_offset;
      v.leader_epoch = p.committed_leader_epoch;
      v.metadata = metadata;
      v.commit_timestamp = now_ms;
      v.expire_timestamp = expire.value_or(-1);
      records.push_back(offset_commit_record(gid, t.name, p.partition_index, v));
      committed_offset c;
      c.offset = p.committed_offset;
      if (p.committed_leader_epoch >= 0) c.leader_epoch = p.committed_leader_epoch;
      c.metadata = metadata;
      c.commit_timestamp_ms = now_ms;
      c.expire_timestamp_ms = expire;
      to_apply.push_back({t.name, p.partition_index, std::move(c)});
    }
  }
  return records;
}

// Appends a commit's records (as `producer`'s transactional batch when set); once they are committed,
// `before_apply` runs, each offset gets its record's log offset and goes to `apply`, and `done` answers. An
// append error reaches every partition that was to be written, as append_error_to_client_error says.
template <typename Response>
void write_commit(coordinator_runtime& runtime, const std::string& gid,
                  std::vector<coordinator_record> records, std::optional<transactional_producer> producer,
                  Response resp, std::vector<offset_to_apply> to_apply, std::function<void()> before_apply,
                  std::function<void(Response)> done, std::function<void(offset_to_apply)> apply) {
  if (records.empty()) return done(std::move(resp));
  runtime.write(
      runtime.partition_of(gid), std::move(records), producer,
      [resp = std::move(resp), to_apply = std::move(to_apply), before_apply = std::move(before_apply),
       done = std::move(done), apply = std::move(apply)](error_code e, int64_t first_offset) mutable {
        if (e != error_code::none) {
          const auto client_error = to_wire(append_error_to_client_error(e));
          for (auto& t : resp.topics) {
            for (auto& p : t.partitions) {
              if (p.error_code == to_wire(error_code::none)) p.error_code = client_error;
            }
          }
          return done(std::move(resp));
        }
        before_apply();
        for (auto& a : to_apply) {
          a.value.record_offset = first_offset++;
          apply(std::move(a));
        }
        done(std::move(resp));
      });
}

}  // namespace

void offset_manager::commit(proto::offset_commit_request request, std::function<void()> before_apply,
                            offset_commit_callback done) {
  const std::string gid = request.group_id;
  const int64_t now_ms = _runtime.now();
  std::optional<int64_t> expire;
  if (request.retention_time_ms != -1) expire = now_ms + request.retention_time_ms;

  proto::offset_commit_response resp;
  std::vector<offset_to_apply> to_apply;
  auto records =
      commit_records(gid, request.topics, now_ms, expire,
                     static_cast<size_t>(_runtime.config().offset_metadata_max_bytes), resp.topics, to_apply);
  write_commit<proto::offset_commit_response>(
      _runtime, gid, std::move(records), std::nullopt, std::move(resp), std::move(to_apply),
      std::move(before_apply), std::move(done),
      [this, gid](offset_to_apply a) { _offsets[gid][a.topic][a.partition] = std::move(a.value); });
}

// --- TxnOffsetCommit and markers

proto::txn_offset_commit_response offset_manager::txn_commit_error(
    const proto::txn_offset_commit_request& request, error_code e) {
  return every_partition_answered<proto::txn_offset_commit_response>(request, e);
}

void offset_manager::commit_transactional(proto::txn_offset_commit_request request,
                                          std::optional<uint64_t> verification_guard,
                                          std::function<void()> before_apply,
                                          txn_offset_commit_callback done) {
  const std::string gid = request.group_id;
  const transactional_producer producer{request.producer_id, request.producer_epoch, verification_guard};
  proto::txn_offset_commit_response resp;
  std::vector<offset_to_apply> to_apply;
  // No retention time: TxnOffsetCommit has none (OffsetAndMetadata.fromRequest leaves the expiry empty).
  auto records =
      commit_records(gid, request.topics, _runtime.now(), std::nullopt,
                     static_cast<size_t>(_runtime.config().offset_metadata_max_bytes), resp.topics, to_apply);
  write_commit<proto::txn_offset_commit_response>(
      _runtime, gid, std::move(records), producer, std::move(resp), std::move(to_apply),
      std::move(before_apply), std::move(done), [this, gid, producer](offset_to_apply a) {
        add_pending(producer.producer_id, gid, a.topic, a.partition, std::move(a.value));
      });
}

void offset_manager::add_pending(int64_t producer_id, const std::string& group, const std::string& topic,
                                 int32_t partition, committed_offset value) {
  _pending[producer_id][group][topic][partition] = std::move(value);
  _open_transactions[group].insert(producer_id);
}

void offset_manager::complete_transaction(int32_t partition, int64_t producer_id, bool commit) {
  auto producer = _pending.find(producer_id);
  if (producer == _pending.end()) return;  // nothing of this producer here (a retried marker, or no offsets)
  auto& by_group = producer->second;
  for (auto g = by_group.begin(); g != by_group.end();) {
    const std::string& group = g->first;
    if (_runtime.partition_of(group) != partition) {
      ++g;
      continue;
    }
    if (auto open = _open_transactions.find(group); open != _open_transactions.end()) {
      open->second.erase(producer_id);
      if (open->second.empty()) _open_transactions.erase(open);
    }
    if (commit) {
      for (auto& [topic, parts] : g->second) {
        for (auto& [p, pending] : parts) {
          // The latest write in the log wins: a plain commit written after the transactional one stays.
          const committed_offset* current = find(group, topic, p);
          if (!current || pending.record_offset > current->record_offset) {
            _offsets[group][topic][p] = std::move(pending);
          }
        }
      }
    }
    g = by_group.erase(g);
  }
  if (by_group.empty()) _pending.erase(producer);
}

const committed_offset* offset_manager::find_pending(int64_t producer_id, const std::string& group,
                                                     const std::string& topic, int32_t partition) const {
  auto producer = _pending.find(producer_id);
  if (producer == _pending.end()) return nullptr;
  auto g = producer->second.find(group);
  if (g == producer->second.end()) return nullptr;
  auto t = g->second.find(topic);
  if (t == g->second.end()) return nullptr;
  auto p = t->second.find(partition);
  return p == t->second.end() ? nullptr : &p->second;
}

bool offset_manager::has_pending(const std::string& group, const std::string& topic,
                                 int32_t partition) const {
  auto open = _open_transactions.find(group);
  if (open == _open_transactions.end()) return false;
  for (int64_t producer_id : open->second) {
    if (find_pending(producer_id, group, topic, partition)) return true;
  }
  return false;
}

// --- OffsetFetch

proto::offset_fetch_response::offset_fetch_response_group offset_manager::fetch(
    const proto::offset_fetch_request::offset_fetch_request_group& request, bool group_exists,
    bool require_stable) const {
  proto::offset_fetch_response::offset_fetch_response_group out;
  out.group_id = request.group_id;
  const group_offsets* committed = nullptr;
  if (group_exists) {
    auto it = _offsets.find(request.group_id);
    if (it != _offsets.end()) committed = &it->second;
  }
  auto fill = [](auto& p, const committed_offset* c) {
    if (c) {
      p.committed_offset = c->offset;
      p.committed_leader_epoch = c->leader_epoch.value_or(-1);
      p.metadata = c->metadata;
    } else {
      p.committed_offset = -1;
      p.committed_leader_epoch = -1;
      p.metadata = "";
    }
    p.error_code = to_wire(error_code::none);
  };
  // RequireStable (KIP-447): a partition whose offset an open transaction may still change answers
  // UNSTABLE_OFFSET_COMMIT, and the consumer asks again.
  auto unstable = [&](auto& p, const std::string& topic) {
    if (!require_stable || !has_pending(request.group_id, topic, p.partition_index)) return false;
    fill(p, nullptr);
    p.error_code = to_wire(error_code::unstable_offset_commit);
    return true;
  };
  if (!request.topics) {
    // Every committed partition of the group (kafka-consumer-groups --describe asks so).
    if (!committed) return out;
    for (const auto& [topic, parts] : *committed) {
      auto& t = out.topics.emplace_back();
      t.name = topic;
      for (const auto& [partition, c] : parts) {
        auto& p = t.partitions.emplace_back();
        p.partition_index = partition;
        if (!unstable(p, topic)) fill(p, &c);
      }
    }
    return out;
  }
  for (const auto& rt : *request.topics) {
    auto& t = out.topics.emplace_back();
    t.name = rt.name;
    const topic_offsets* parts = nullptr;
    if (committed) {
      auto it = committed->find(rt.name);
      if (it != committed->end()) parts = &it->second;
    }
    for (int32_t index : rt.partition_indexes) {
      auto& p = t.partitions.emplace_back();
      p.partition_index = index;
      if (unstable(p, rt.name)) continue;
      const committed_offset* c = nullptr;
      if (parts) {
        auto it = parts->find(index);
        if (it != parts->end()) c = &it->second;
      }
      fill(p, c);
    }
  }
  return out;
}

// --- Deletion

void offset_manager::delete_offsets(const proto::offset_delete_request& request,
                                    const subscribed_predicate& subscribed, offset_delete_callback done) {
  const std::string& gid = request.group_id;
  proto::offset_delete_response resp;
  offset_deletion deletion;
  for (const auto& t : request.topics) {
    auto& rt = resp.topics.emplace_back();
    rt.name = t.name;
    const bool is_subscribed = subscribed(t.name);
    for (const auto& p : t.partitions) {
      rt.partitions.push_back(
          {p.partition_index,
           to_wire(is_subscribed ? error_code::group_subscribed_to_topic : error_code::none)});
      // A tombstone also for a partition with only pending transactional offsets (it drops them).
      if (!is_subscribed &&
          (find(gid, t.name, p.partition_index) || has_pending(gid, t.name, p.partition_index)))
        deletion.add(gid, t.name, p.partition_index);
    }
  }
  if (deletion.empty()) return done(std::move(resp));
  write_deletion(_runtime.partition_of(gid), std::move(deletion),
                 [resp = std::move(resp), done = std::move(done)](error_code e) mutable {
                   if (e != error_code::none) {
                     proto::offset_delete_response failed;
                     failed.error_code = to_wire(append_error_to_client_error(e));
                     return done(std::move(failed));
                   }
                   done(std::move(resp));
                 });
}

offset_deletion offset_manager::select_all(const std::string& group) const {
  offset_deletion out;
  if (auto it = _offsets.find(group); it != _offsets.end()) {
    for (const auto& [topic, parts] : it->second) {
      for (const auto& [partition, c] : parts) out.add(group, topic, partition);
    }
  }
  // Partitions with only pending transactional offsets get a tombstone too (deleteAllOffsets).
  if (auto open = _open_transactions.find(group); open != _open_transactions.end()) {
    std::set<std::pair<std::string, int32_t>> pending_only;
    for (int64_t producer_id : open->second) {
      auto producer = _pending.find(producer_id);
      if (producer == _pending.end()) continue;
      auto g = producer->second.find(group);
      if (g == producer->second.end()) continue;
      for (const auto& [topic, parts] : g->second) {
        for (const auto& [partition, c] : parts) {
          if (!find(group, topic, partition)) pending_only.emplace(topic, partition);
        }
      }
    }
    for (const auto& [topic, partition] : pending_only) out.add(group, topic, partition);
  }
  out.groups.push_back(group);
  return out;
}

offset_deletion offset_manager::select_expired(const std::string& group,
                                               const subscribed_predicate& subscribed,
                                               const std::function<int64_t(const committed_offset&)>& base,
                                               int64_t now_ms) const {
  offset_deletion out;
  auto it = _offsets.find(group);
  if (it == _offsets.end()) return out;
  const int64_t retention_ms = _runtime.config().offsets_retention_ms;
  for (const auto& [topic, parts] : it->second) {
    if (subscribed(topic)) continue;
    for (const auto& [partition, c] : parts) {
      // Not while a transaction may still commit a new offset for the partition.
      if (has_pending(group, topic, partition)) continue;
      const bool expired =
          c.expire_timestamp_ms ? now_ms >= *c.expire_timestamp_ms : now_ms - base(c) >= retention_ms;
      if (expired) out.add(group, topic, partition);
    }
  }
  return out;
}

void offset_manager::write_deletion(int32_t partition, offset_deletion deletion,
                                    std::function<void(error_code)> done) {
  auto records = std::move(deletion.records);
  deletion.records.clear();
  _runtime.write(partition, std::move(records),
                 [this, deletion = std::move(deletion), done = std::move(done)](error_code e) {
                   if (e == error_code::none) apply(deletion);
                   done(e);
                 });
}

void offset_manager::apply(const offset_deletion& deletion) {
  for (const auto& k : deletion.offsets) erase(k.group, k.topic, k.partition);
  for (const auto& g : deletion.groups) _offsets.erase(g);
}

// --- Load

void offset_manager::replay(const offset_commit_entry& entry, int64_t record_offset, int64_t producer_id) {
  const auto& key = entry.key;
  if (!entry.value) {
    erase(key.group, key.topic, key.partition);
    return;
  }
  const auto& v = *entry.value;
  committed_offset c;
  c.offset = v.offset;
  if (v.leader_epoch >= 0) c.leader_epoch = v.leader_epoch;
  c.metadata = v.metadata;
  c.commit_timestamp_ms = v.commit_timestamp;
  if (entry.value_version == 1 && v.expire_timestamp >= 0) c.expire_timestamp_ms = v.expire_timestamp;
  c.record_offset = record_offset;
  if (producer_id != -1) return add_pending(producer_id, key.group, key.topic, key.partition, std::move(c));
  _offsets[key.group][key.topic][key.partition] = std::move(c);
}

void offset_manager::forget_partition(int32_t partition) {
  const auto of_partition = [&](const std::string& group) {
    return _runtime.partition_of(group) == partition;
  };
  for (auto it = _offsets.begin(); it != _offsets.end();) {
    it = of_partition(it->first) ? _offsets.erase(it) : std::next(it);
  }
  for (auto it = _open_transactions.begin(); it != _open_transactions.end();) {
    it = of_partition(it->first) ? _open_transactions.erase(it) : std::next(it);
  }
  for (auto producer = _pending.begin(); producer != _pending.end();) {
    auto& by_group = producer->second;
    for (auto g = by_group.begin(); g != by_group.end();)
      g = of_partition(g->first) ? by_group.erase(g) : std::next(g);
    producer = by_group.empty() ? _pending.erase(producer) : std::next(producer);
  }
}

}  // namespace mala::coordinator
