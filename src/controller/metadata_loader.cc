#include "mala/controller/metadata_loader.h"

#include <cstdlib>
#include <string>
#include <utility>

#include "mala/common/assert.h"
#include "mala/common/logging.h"
#include "mala/controller/metadata_snapshot.h"
#include "mala/metadata/metadata_delta.h"

namespace mala::controller {

metadata_loader::metadata_loader(raft::raft_node& node, quorum_controller* controller,
                                 metadata::metadata_image_ptr base, metadata_loader_hooks hooks)
    : _node(node), _log(node), _controller(controller), _image(std::move(base)), _hooks(std::move(hooks)) {
  load_latest_snapshot();
  _snapshots_installed = _node.snapshots_installed();
  _node.add_listener([this] { update(); });
}

void metadata_loader::load_latest_snapshot() {
  auto log = subsystem_logger("controller");
  auto id = _node.log().latest_snapshot();
  if (!id || id->offset <= _next_offset) return;
  auto payload = _node.log().read_snapshot(*id);
  // Applying the records after it to an older image would give this node a view no other node has.
  MALA_ASSERT(payload, "metadata snapshot {}-{} cannot be read", id->offset, id->epoch);
  auto image = load_snapshot_image(*payload, *id, _image->cluster_id);
  // Every node must agree on the state: a snapshot that does not load stops the node rather than serving a
  // wrong image.
  MALA_ASSERT(image.ok(), "metadata snapshot {}-{} does not load: {}", id->offset, id->epoch,
              image.ok() ? std::string() : image.error().message);
  auto loaded = std::make_shared<metadata::metadata_image>(**image);
  loaded->controller_id = _image->controller_id;
  loaded->kraft_version = _image->kraft_version;
  _image = std::move(loaded);
  _next_offset = id->offset;
  _bytes_since_snapshot = 0;
  log->info("metadata loaded from snapshot {}-{}: {} broker(s), {} topic(s)", id->offset, id->epoch,
            _image->brokers.size(), _image->topics.size());
  if (_hooks.publish) _hooks.publish(_image);
}

void metadata_loader::maybe_write_snapshot() {
  if (_bytes_since_snapshot < _hooks.max_bytes_between_snapshots || _next_offset <= 0) return;
  const auto last = _node.log().read(_next_offset - 1, 1);
  if (last.empty() || last.front().offset != _next_offset - 1) return;
  const raft::offset_and_epoch id{_next_offset, last.front().epoch};
  std::vector<raft::control_record> raft_records;
  // KIP-853: the voter set in effect at the snapshot's end (a later VotersRecord stays in the log).
  if (const auto voters = _node.voter_set_before(id.offset); voters && !voters->empty())
    raft_records = raft::voter_set_control_records(*voters);
  // The image is immutable: the payload is built on the raft node's blocking thread, with the file I/O.
  auto size = std::make_shared<size_t>(0);
  auto build = [image = _image, id, timestamp = _hooks.clock_ms ? _hooks.clock_ms() : 0,
                raft_records = std::move(raft_records), size]() -> result<std::vector<uint8_t>> {
    auto payload =
        build_snapshot_payload(*image, id, timestamp, storage::max_metadata_batch_bytes, raft_records);
    if (payload.ok()) *size = payload->size();
    return payload;
  };
  auto done = [id, size](bool stored) {
    if (stored) {
      subsystem_logger("controller")
          ->info("metadata snapshot {}-{} written ({} bytes)", id.offset, id.epoch, *size);
    }
  };
  if (_node.create_snapshot(id, std::move(build), std::move(done))) _bytes_since_snapshot = 0;
}

void metadata_loader::update() {
  // A controller write made from a hook (activation bootstraps the cluster) comes back here through the
  // node's listener: finish the current pass first, then go round again.
  if (_updating) {
    _again = true;
    return;
  }
  _updating = true;
  do {
    _again = false;
    apply_committed();
  } while (_again);
  _updating = false;
}

void metadata_loader::apply_committed() {
  auto log = subsystem_logger("controller");
  if (_node.snapshots_installed() != _snapshots_installed) {
    // The leader sent a snapshot: it replaces everything applied so far.
    _snapshots_installed = _node.snapshots_installed();
    _next_offset = 0;
    load_latest_snapshot();
  }
  const auto& state = _node.state();
  const int64_t high_watermark = state.high_watermark();
  bool changed = false;
  if (high_watermark > _next_offset) {
    metadata::metadata_delta delta(_image);
    int64_t applied_to = _next_offset;
    auto replayed = _log.replay_range(
        _next_offset, high_watermark,
        [&](const metadata::versioned_metadata_record& r, int64_t offset, int32_t epoch) {
          if (auto a = delta.apply(r.record, offset, epoch); !a.ok()) {
            // A committed record every node must apply: skipping it would split
            // the nodes' views. Kafka's loader logs and goes on (a fault handler).
            log->error("metadata record at offset {} not applied: {}", offset, a.message);
          }
          applied_to = offset + 1;
          _bytes_since_snapshot +=
              static_cast<int64_t>(metadata::encode_metadata_record(r.record, r.version).size());
          return status::success();
        });
    if (!replayed.ok()) log->error("metadata log replay: {}", replayed.error().message);
    // Entries that are not records (leader_change) still move the position; a write whose end is not yet
    // committed waits (applied whole, later), so does a metadata transaction. A committed entry that does
    // not decode is logged and passed over (every node passes over the same entry), so the loader never
    // stalls.
    _next_offset = replayed.ok() ? replayed->next_offset : applied_to + 1;
    _open_transaction = replayed.ok() && replayed->open_transaction;
    auto next = std::move(delta).build();
    if (next != _image) {
      _image = std::move(next);
      changed = true;
    }
  }
  const int32_t leader = state.leader_id();
  const int16_t kraft_version = _node.kraft_version();
  if (_image->controller_id != leader || _image->kraft_version != kraft_version) {
    auto copy = std::make_shared<metadata::metadata_image>(*_image);
    copy->controller_id = leader;
    copy->kraft_version = kraft_version;
    _image = std::move(copy);
    changed = true;
  }
  if (changed && _hooks.publish) _hooks.publish(_image);
  maybe_write_snapshot();

  if (_controller) {
    // A log that ends inside a metadata transaction the previous leader left open counts as read: the new
    // active controller aborts that transaction first (Kafka's QuorumController on activation).
    const bool leads = state.current_role() == raft::role::leader &&
                       high_watermark > state.epoch_start_offset() &&
                       (_next_offset >= high_watermark || _open_transaction);
    if (leads && !_controller->active()) {
      log->info("node {} is the active controller in epoch {} (metadata offset {}{})",
                _node.state().node_id(), state.epoch(), _next_offset - 1,
                _open_transaction ? ", aborting the metadata transaction left open after it" : "");
      if (_controller->activate(_image, _open_transaction) && _hooks.on_activation)
        _hooks.on_activation(true);
    } else if (!leads && _controller->active() && state.current_role() != raft::role::leader) {
      log->info("node {} is no longer the active controller (epoch {}, leader {})", _node.state().node_id(),
                state.epoch(), leader);
      _controller->deactivate(_image);
      if (_hooks.on_activation) _hooks.on_activation(false);
    }
  }
  if (high_watermark != _last_high_watermark) {
    _last_high_watermark = high_watermark;
    if (_hooks.on_commit) _hooks.on_commit(high_watermark);
  }
}

}  // namespace mala::controller
