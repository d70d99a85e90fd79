// The committed offsets of the group coordinator (Kafka 4.x's OffsetMetadataManager): OffsetCommit once the
// group accepted the commit, OffsetFetch, OffsetDelete once the group allows it, their records in
// __consumer_offsets (OffsetCommitKey / OffsetCommitValue, tombstones) and their replay at load, and which
// offsets are due to expire (offsets.retention.minutes, OffsetCommit v2-v4's retention time).
//
// Offsets are kept by group, topic and partition for groups of either protocol; the group managers decide
// whether a group may commit, fetch or delete, and which topics its members subscribe to. A commit or a
// deletion changes the offsets only once its records are committed, so that readers see committed data only.
//
// Every deletion of offsets (OffsetDelete, DeleteGroups, the retention check) goes the same way: an
// offset_deletion collects the tombstones and what they delete, the caller may add its own records to the
// batch (a group's tombstones), and write_deletion() appends the batch and forgets the offsets once it is
// committed.
//
// Transactional offsets (TxnOffsetCommit, Kafka's pendingTransactionalOffsets / openTransactionsByGroup) are
// kept apart by producer id until a marker of that producer in the group's partition commits them (each
// becomes the committed offset unless the committed one was written later in the log: a mix of plain and
// transactional commits keeps the latest, which also survives compaction) or aborts them. A tombstone drops
// the pending offsets of its partition too. Pending offsets are never fetched (RequireStable answers
// UNSTABLE_OFFSET_COMMIT), an offset with a pending one does not expire, and a group with an open
// transaction is not deleted by the retention check.
//
// Threads: the group coordinator's (one shard). Internal to src/coordinator.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "coordinator_runtime.h"
#include "mala/common/error_code.h"
#include "mala/coordinator/group_coordinator.h"
#include "mala/coordinator/group_records.h"
#include "mala/protocol/messages/offset_commit_request.h"
#include "mala/protocol/messages/offset_commit_response.h"
#include "mala/protocol/messages/offset_delete_request.h"
#include "mala/protocol/messages/offset_delete_response.h"
#include "mala/protocol/messages/offset_fetch_request.h"
#include "mala/protocol/messages/offset_fetch_response.h"
#include "mala/protocol/messages/txn_offset_commit_request.h"
#include "mala/protocol/messages/txn_offset_commit_response.h"

namespace mala::coordinator {

struct offset_key {
  std::string group;
  std::string topic;
  int32_t partition = 0;
};

// Committed offsets to delete: their tombstones in `records` (where the caller may add its own records, a
// group's tombstones, to the same batch) and what is forgotten once the batch is committed.
struct offset_deletion {
  std::vector<coordinator_record> records;
  std::vector<offset_key> offsets;
  std::vector<std::string> groups;  // every offset of these groups is forgotten

  void add(const std::string& group, const std::string& topic, int32_t partition);
  // Appends `other` (its records after these).
  void add(offset_deletion other);
  bool empty() const { return records.empty(); }
};

class offset_manager {
 public:
  using topic_offsets = std::map<int32_t, committed_offset>;
  using group_offsets = std::map<std::string, topic_offsets>;
  using offset_commit_callback = group_coordinator::offset_commit_callback;
  using offset_delete_callback = group_coordinator::offset_delete_callback;
  using txn_offset_commit_callback = group_coordinator::txn_offset_commit_callback;
  // Whether a member of the group subscribes to the topic (its offsets may not be deleted or expire).
  using subscribed_predicate = std::function<bool(const std::string& topic)>;

  explicit offset_manager(coordinator_runtime& runtime) : _runtime(runtime) {}
  offset_manager(const offset_manager&) = delete;
  offset_manager& operator=(const offset_manager&) = delete;

  const committed_offset* find(const std::string& group, const std::string& topic, int32_t partition) const;
  bool has_offsets(const std::string& group) const { return _offsets.contains(group); }
  const std::map<std::string, group_offsets>& all() const { return _offsets; }
  // How many partitions of the group have a committed offset.
  size_t count(const std::string& group) const;

  // Every partition of the request answered `e`.
  static protocol::offset_commit_response commit_error(const protocol::offset_commit_request& request,
                                                       error_code e);
  // Writes the commit of a group that accepted it (metadata above offset.metadata.max.bytes is refused per
  // partition). Once committed, `before_apply` runs (the group may have to come back) and the offsets are
  // visible; an append error reaches each partition as append_error_to_client_error says.
  void commit(protocol::offset_commit_request request, std::function<void()> before_apply,
              offset_commit_callback done);
  // The group's committed offsets as OffsetFetch answers them (v8+ shape; topics nullopt = every committed
  // partition; partitions without a commit get offset -1). A group that does not exist has no offsets. With
  // `require_stable`, a partition with a pending transactional offset answers UNSTABLE_OFFSET_COMMIT.
  protocol::offset_fetch_response::offset_fetch_response_group fetch(
      const protocol::offset_fetch_request::offset_fetch_request_group& request, bool group_exists,
      bool require_stable = false) const;
  // OffsetDelete of a group that allows it: the partitions of topics the group subscribes to answer
  // GROUP_SUBSCRIBED_TO_TOPIC, the others lose their offset.
  void delete_offsets(const protocol::offset_delete_request& request, const subscribed_predicate& subscribed,
                      offset_delete_callback done);

  // Every offset of the group (DeleteGroups).
  offset_deletion select_all(const std::string& group) const;
  // The group's offsets due to expire at `now_ms` (none of a subscribed topic): at their own expire timestamp
  // (OffsetCommit v2-v4), otherwise offsets.retention.minutes after `base` of the offset.
  offset_deletion select_expired(const std::string& group, const subscribed_predicate& subscribed,
                                 const std::function<int64_t(const committed_offset&)>& base,
                                 int64_t now_ms) const;
  // Appends the deletion's records to `partition`; once they are committed the offsets are forgotten, then
  // `done` runs with the append's error (nothing is forgotten on error).
  void write_deletion(int32_t partition, offset_deletion deletion, std::function<void(error_code)> done);

  // --- Transactions
  // Every partition of the request answered `e`.
  static protocol::txn_offset_commit_response txn_commit_error(
      const protocol::txn_offset_commit_request& request, error_code e);
  // Writes the TxnOffsetCommit of a group that accepted it as the producer's transactional batch (metadata
  // above offset.metadata.max.bytes is refused per partition). Once committed, `before_apply` runs and the
  // offsets are pending for the producer; an append error reaches each partition as
  // append_error_to_client_error says. `verification_guard` goes with the write (transactional_producer).
  void commit_transactional(protocol::txn_offset_commit_request request,
                            std::optional<uint64_t> verification_guard, std::function<void()> before_apply,
                            txn_offset_commit_callback done);
  // A marker of `producer_id` in `partition`'s log (written or replayed): the producer's pending offsets of
  // that partition's groups become committed (commit) or are dropped.
  void complete_transaction(int32_t partition, int64_t producer_id, bool commit);
  const committed_offset* find_pending(int64_t producer_id, const std::string& group,
                                       const std::string& topic, int32_t partition) const;
  // Whether an open transaction holds a pending offset for the partition (hasPendingTransactionalOffsets).
  bool has_pending(const std::string& group, const std::string& topic, int32_t partition) const;
  // Whether a producer's transaction wrote offsets of the group and has not ended yet.
  bool has_open_transactions(const std::string& group) const { return _open_transactions.contains(group); }

  // Load: one OffsetCommit record (a tombstone erases) found at `record_offset`, from a transactional batch
  // of `producer_id` (pending until its marker) or a plain one (producer_id -1).
  void replay(const offset_commit_entry& entry, int64_t record_offset, int64_t producer_id = -1);
  // Unload: the offsets of the groups of that partition are forgotten.
  void forget_partition(int32_t partition);

 private:
  // A tombstone's effect: the committed offset and every pending one of the partition are gone.
  void erase(const std::string& group, const std::string& topic, int32_t partition);
  void apply(const offset_deletion& deletion);
  void add_pending(int64_t producer_id, const std::string& group, const std::string& topic, int32_t partition,
                   committed_offset value);

  coordinator_runtime& _runtime;
  std::map<std::string, group_offsets> _offsets;
  // Transactional offsets by producer id, then group; and the producers with pending offsets by group.
  std::map<int64_t, std::map<std::string, group_offsets>> _pending;
  std::map<std::string, std::set<int64_t>> _open_transactions;
};

}  // namespace mala::coordinator
