#include "mala/storage/cleaned_transactions.h"

#include <algorithm>

namespace mala::storage {

cleaned_transactions::cleaned_transactions(std::vector<aborted_txn> aborted) : _pending(std::move(aborted)) {
  std::stable_sort(_pending.begin(), _pending.end(), [](const aborted_txn& a, const aborted_txn& b) {
    return a.first_offset < b.first_offset;
  });
}

void cleaned_transactions::start_aborts_up_to(int64_t offset) {
  for (; _next < _pending.size() && _pending[_next].first_offset <= offset; ++_next) {
    // A producer has one transaction at a time: an entry already ongoing for it stays.
    _aborting.try_emplace(_pending[_next].producer_id, ongoing_abort{_pending[_next], false});
  }
}

bool cleaned_transactions::on_data_batch(const protocol::record_batch_header& batch) {
  start_aborts_up_to(batch.last_offset());
  if (!batch.is_transactional()) return false;
  if (auto it = _aborting.find(batch.producer_id); it != _aborting.end()) {
    it->second.batch_seen = true;
    return true;
  }
  _committing.insert(batch.producer_id);
  return false;
}

bool cleaned_transactions::on_control_batch(const protocol::record_batch_header& batch,
                                            const std::optional<txn_marker>& marker) {
  start_aborts_up_to(batch.last_offset());
  if (batch.record_count == 0) return true;
  if (!marker) return false;
  if (marker->is_commit()) return _committing.erase(batch.producer_id) == 0;
  auto it = _aborting.find(batch.producer_id);
  if (it == _aborting.end()) return true;
  const ongoing_abort ended = it->second;
  _aborting.erase(it);
  if (!ended.batch_seen) return true;
  _retained.push_back(ended.txn);
  return false;
}

}  // namespace mala::storage
