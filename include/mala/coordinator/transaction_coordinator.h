// The transaction coordinator (Kafka 4.x's TransactionCoordinator + TransactionStateManager +
// TransactionMarkerChannelManager's bookkeeping): the transactional ids of this node's __transaction_state
// partitions, their producer ids and epochs, and the two-phase commit of their transactions.
//
// State: every transactional id belongs to one partition of __transaction_state (transaction_records.h);
// this node coordinates the ids of the partitions it leads. A partition is loading (its log is replayed:
// requests get COORDINATOR_LOAD_IN_PROGRESS) or active, under a coordinator epoch (the partition's leader
// epoch when this node became its leader); others answer NOT_COORDINATOR.
//
// Persistence: every transition is a record of __transaction_state appended through the
// transaction_log_writer (acks=-1) and adopted once committed (transaction_metadata.h). A completion whose
// partition was reloaded or moved meanwhile (another coordinator epoch) answers NOT_COORDINATOR and changes
// nothing.
//
// Commit and abort: EndTxn writes PrepareCommit / PrepareAbort and answers as soon as that record is
// committed; the markers then go to the leaders of every partition of the transaction through the
// txn_marker_sender, retried (after marker_retry_backoff_ms) until each is written, and CompleteCommit /
// CompleteAbort is written last. A partition whose topic is gone is dropped from the markers. A coordinator
// that loads a partition finishes the Prepare* transactions it finds there. Transactions open longer than
// their timeout are aborted (every transaction.abort.timed.out.transaction.cleanup.interval.ms), and ids idle
// longer than transactional.id.expiration.ms removed (tombstones).
//
// Transactions v2 (KIP-890 part 2, EndTxn v5+): every commit and abort bumps the producer epoch, returned to
// the client; the markers carry the bumped epoch.
//
// Time: the coordinator keeps deadlines (marker retries, the periodic checks) and does nothing on its own:
// the owner calls run_expired_timers() when next_deadline() has passed and is told of earlier deadlines
// through the deadline listener.
//
// Threads: one thread, the home shard's. Callbacks (answers, writer and sender completions) run on it, never
// from inside the call that started them.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <vector>

#include "mala/common/error_code.h"
#include "mala/common/result.h"
#include "mala/coordinator/group_records.h"
#include "mala/coordinator/keyed_timer.h"
#include "mala/coordinator/transaction_metadata.h"

namespace spdlog {
class logger;
}

namespace mala::coordinator {

struct transaction_coordinator_config {
  int32_t state_log_partitions = 50;       // transaction.state.log.num.partitions
  int32_t max_timeout_ms = 900'000;        // transaction.max.timeout.ms
  int64_t id_expiration_ms = 604'800'000;  // transactional.id.expiration.ms
  int64_t abort_timed_out_interval_ms =
      10'000;  // transaction.abort.timed.out.transaction.cleanup.interval.ms
  int64_t remove_expired_interval_ms =
      3'600'000;                          // transaction.remove.expired.transaction.cleanup.interval.ms
  int32_t offsets_topic_partitions = 50;  // where AddOffsetsToTxn's group lives
  int64_t marker_retry_backoff_ms = 100;
  int64_t complete_retry_backoff_ms = 100;
};

// Appends one record to a partition of __transaction_state with acks=-1. `done` runs exactly once, never
// from inside append(): NONE once committed, else the append's error.
class transaction_log_writer {
 public:
  virtual ~transaction_log_writer() = default;
  virtual void append(int32_t partition, coordinator_record record, int32_t timeout_ms,
                      std::function<void(error_code)> done) = 0;
};

// One transaction's markers (WriteTxnMarkers' WritableTxnMarker).
struct txn_marker_request {
  int64_t producer_id = no_producer_id;
  int16_t producer_epoch = no_producer_epoch;
  bool commit = false;
  int32_t coordinator_epoch = 0;
  int16_t transaction_version = 0;
  std::vector<txn_partition> partitions;
};
struct txn_marker_result {
  txn_partition partition;
  error_code error = error_code::none;
  // The topic or partition no longer exists in the metadata: no marker will ever be written there.
  bool partition_gone = false;
};

// Writes markers at the partitions' leaders. `done` runs exactly once, never from inside send(), with one
// result per partition asked for.
class txn_marker_sender {
 public:
  virtual ~txn_marker_sender() = default;
  virtual void send(txn_marker_request request, std::function<void(std::vector<txn_marker_result>)> done) = 0;
};

struct producer_id_and_epoch {
  int64_t producer_id = no_producer_id;
  int16_t producer_epoch = no_producer_epoch;
};
struct init_producer_id_result {
  error_code error = error_code::none;
  producer_id_and_epoch producer;
};
struct end_txn_result {
  error_code error = error_code::none;
  producer_id_and_epoch producer;
};

struct transaction_description {
  error_code error = error_code::none;
  std::string transactional_id;
  transaction_state state = transaction_state::empty;
  int32_t timeout_ms = 0;
  int64_t start_timestamp_ms = -1;
  int64_t producer_id = no_producer_id;
  int16_t producer_epoch = no_producer_epoch;
  std::set<txn_partition> partitions;
};

struct transaction_listing {
  std::string transactional_id;
  int64_t producer_id = no_producer_id;
  transaction_state state = transaction_state::empty;
};
struct list_transactions_filter {
  std::vector<std::string> states;  // names; empty: every state
  std::vector<int64_t> producer_ids;
  int64_t duration_ms = -1;               // open longer than this (-1: any)
  std::optional<std::string> id_pattern;  // a regular expression matching the whole id
};
struct list_transactions_result {
  error_code error = error_code::none;
  std::vector<std::string> unknown_state_filters;
  std::vector<transaction_listing> transactions;
};

class transaction_coordinator {
 public:
  using init_callback = std::function<void(init_producer_id_result)>;
  using error_callback = std::function<void(error_code)>;
  using end_callback = std::function<void(end_txn_result)>;
  // A fresh producer id (from this broker's block); fails when none is at hand.
  using producer_id_source = std::function<result<int64_t>()>;

  transaction_coordinator(transaction_coordinator_config config, transaction_log_writer& writer,
                          txn_marker_sender& markers, producer_id_source producer_ids,
                          std::function<int64_t()> clock_ms);
  ~transaction_coordinator();
  transaction_coordinator(const transaction_coordinator&) = delete;
  transaction_coordinator& operator=(const transaction_coordinator&) = delete;

  const transaction_coordinator_config& config() const { return _config; }
  // The partition counts of the existing internal topics (placement follows them).
  void set_state_log_partitions(int32_t partitions) { _config.state_log_partitions = partitions; }
  void set_offsets_topic_partitions(int32_t partitions) { _config.offsets_topic_partitions = partitions; }
  // The finalized transaction.version: the value version of new records (0 or 1) and the version internal
  // aborts (timeouts, fencing) follow.
  void set_transaction_version(int16_t version) { _transaction_version = version; }
  int16_t transaction_version() const { return _transaction_version; }
  int32_t partition_for(std::string_view transactional_id) const;

  // --- Partitions
  void begin_loading(int32_t partition, int32_t coordinator_epoch);
  // One record of the partition's log, in offset order; undecodable records are skipped (error returned).
  status replay(int32_t partition, std::span<const uint8_t> key,
                std::optional<std::span<const uint8_t>> value);
  // The replay reached the log end: the partition serves, and its Prepare* transactions get their markers.
  void complete_loading(int32_t partition);
  void unload(int32_t partition);
  bool is_owned(int32_t partition) const;
  std::optional<int32_t> coordinator_epoch(int32_t partition) const;
  std::vector<int32_t> owned_partitions() const;

  // --- Producer APIs
  // InitProducerId with a transactional id. `expected` is the producer's current id and epoch (v3+), if any.
  void init_producer_id(const std::string& transactional_id, int32_t timeout_ms,
                        std::optional<producer_id_and_epoch> expected, init_callback done);
  // AddPartitionsToTxn (client form, or a broker's implicit add under transactions v2).
  void add_partitions(const std::string& transactional_id, int64_t producer_id, int16_t producer_epoch,
                      std::set<txn_partition> partitions, int16_t client_transaction_version,
                      error_callback done);
  // AddOffsetsToTxn: the group's __consumer_offsets partition joins the transaction.
  void add_offsets(const std::string& transactional_id, int64_t producer_id, int16_t producer_epoch,
                   const std::string& group_id, error_callback done);
  // AddPartitionsToTxn VerifyOnly (KIP-890 part 1): per partition NONE when it is in the transaction,
  // TRANSACTION_ABORTABLE when not; or one error for all.
  std::vector<std::pair<txn_partition, error_code>> verify_partitions(
      const std::string& transactional_id, int64_t producer_id, int16_t producer_epoch,
      const std::vector<txn_partition>& partitions) const;
  // EndTxn. `client_transaction_version` is 2 for EndTxn v5+, else 0.
  void end_transaction(const std::string& transactional_id, int64_t producer_id, int16_t producer_epoch,
                       bool commit, int16_t client_transaction_version, end_callback done);

  // --- Administration
  transaction_description describe(const std::string& transactional_id) const;
  list_transactions_result list(const list_transactions_filter& filter) const;

  // --- Time
  void set_deadline_listener(std::function<void(int64_t)> listener) {
    _timers.set_listener(std::move(listener));
  }
  std::optional<int64_t> next_deadline() const { return _timers.next_deadline(); }
  void run_expired_timers();
  // The periodic checks, also callable directly (tests).
  void abort_timed_out_transactions();
  void remove_expired_transactional_ids();

 private:
  struct partition_entry {
    bool loading = true;
    int32_t coordinator_epoch = 0;
    std::map<std::string, transaction_metadata> transactions;
  };
  // A transaction whose markers are being written.
  struct marker_completion {
    int32_t partition = 0;
    int32_t coordinator_epoch = 0;
    txn_marker_request markers;  // partitions: those still to write
    transaction_transition complete;
  };

  int64_t now() const { return _clock(); }
  // The metadata of an id, or NOT_COORDINATOR / COORDINATOR_LOAD_IN_PROGRESS.
  result<transaction_metadata*> find(const std::string& transactional_id);
  const partition_entry* active_entry(int32_t partition) const;
  bool still_owned(int32_t partition, int32_t coordinator_epoch) const;
  transaction_metadata* lookup(int32_t partition, int32_t coordinator_epoch,
                               const std::string& transactional_id);
  // Appends `t` for `transactional_id` and adopts it once written; `done` gets the client-facing error.
  void write_transition(const std::string& transactional_id, int32_t partition, int32_t coordinator_epoch,
                        transaction_transition t, error_callback done);
  void end_transaction_internal(const std::string& transactional_id, int64_t producer_id,
                                int16_t producer_epoch, bool commit, bool from_client,
                                int16_t client_transaction_version, end_callback done);
  void clear_unstarted_fence(const std::string& transactional_id);
  // After Prepare*: markers to the partitions, then Complete*.
  void begin_markers(const std::string& transactional_id, int32_t partition, int32_t coordinator_epoch,
                     transaction_metadata& txn);
  void send_markers(const std::string& transactional_id);
  void on_marker_results(const std::string& transactional_id, int32_t coordinator_epoch,
                         std::vector<txn_marker_result> results);
  void write_complete(const std::string& transactional_id);
  void schedule_periodic();

  transaction_coordinator_config _config;
  transaction_log_writer& _writer;
  txn_marker_sender& _markers;
  producer_id_source _producer_ids;
  std::function<int64_t()> _clock;
  int16_t _transaction_version = 2;
  keyed_timer _timers;
  std::map<int32_t, partition_entry> _partitions;
  std::map<std::string, marker_completion> _completions;
  std::shared_ptr<bool> _alive = std::make_shared<bool>(true);
  std::shared_ptr<spdlog::logger> _log;
};

}  // namespace mala::coordinator
