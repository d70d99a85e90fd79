// The file work a segment leaves to the file worker (log_segment.h): renames, unlinks, index trims, a
// truncation's cuts and aborted-transaction index writes, run once by whichever thread gets to it first.
#include "mala/storage/log_segment.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <mutex>

#include "file_io.h"
#include "mala/storage/transaction_index.h"

namespace mala::storage {

void deferred_file_work::run() {
  (void)finish();
}

status deferred_file_work::finish() {
  std::lock_guard lock(_mutex);
  if (!_done) run_locked();
  return _result;
}

std::optional<status> deferred_file_work::result_if_done() {
  std::unique_lock lock(_mutex, std::try_to_lock);
  if (!lock.owns_lock() || !_done) return std::nullopt;
  return _result;
}

void deferred_file_work::run_locked() {
  _done = true;
  // Their failures are their segments' to report; a rename that depended on one fails here too.
  status earlier_failure;
  for (auto& earlier : _before) {
    if (auto r = earlier->finish(); !r.ok() && earlier_failure.ok()) earlier_failure = r;
  }
  _before.clear();
  // An entry is written at its place in the file: after a failed write (of an earlier entry, or the files'
  // renames) none is, so that no hole would read back as an entry.
  if (!_txn_writes.empty() && !earlier_failure.ok()) {
    _result = earlier_failure;
    return;
  }
  for (const auto& write : _txn_writes) {
    if (auto st = write_aborted_txn_entry(write); !st.ok()) {
      _result = st;
      return;
    }
  }
  for (const auto& r : _renames) {
    if (::rename(r.from.c_str(), r.to.c_str()) != 0) {
      if (errno == ENOENT && r.may_be_missing) continue;
      _result = detail::io_error("cannot rename", r.from, errno);
      return;
    }
  }
  for (const auto& path : _unlinks) {
    if (::unlink(path.c_str()) != 0 && errno != ENOENT && _result.ok())
      _result = detail::io_error("cannot delete", path, errno);
  }
  for (const auto& t : _trims) {
    if (t.truncation && !earlier_failure.ok()) {
      // The file may not be under this name: appends after the cut would leave the stale tail behind them.
      _result = earlier_failure;
      return;
    }
    const int fd = ::open(t.path.c_str(), O_RDWR | O_CLOEXEC);
    if (fd < 0) {
      if (errno == ENOENT && !t.truncation) continue;  // the segment went meanwhile (deleted, a clean)
      _result = detail::io_error("cannot open", t.path, errno);
      return;
    }
    const int cut = detail::truncate_file(fd, t.length, t.path);
    const int err = errno;
    ::close(fd);
    if (cut != 0) {
      _result = detail::io_error("cannot cut", t.path, err);
      return;
    }
  }
}

}  // namespace mala::storage
