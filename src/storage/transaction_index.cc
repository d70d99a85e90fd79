#include "mala/storage/transaction_index.h"

#include <fcntl.h>
#include <unistd.h>

#include "big_endian.h"
#include "file_io.h"

namespace mala::storage {

std::string encode_aborted_txn(const aborted_txn& txn) {
  std::string out;
  out.reserve(aborted_txn_entry_size);
  detail::append_be<int16_t>(out, aborted_txn_version);
  detail::append_be<int64_t>(out, txn.producer_id);
  detail::append_be<int64_t>(out, txn.first_offset);
  detail::append_be<int64_t>(out, txn.last_offset);
  detail::append_be<int64_t>(out, txn.last_stable_offset);
  return out;
}

result<std::vector<aborted_txn>> decode_aborted_txns(std::span<const uint8_t> bytes) {
  std::vector<aborted_txn> out;
  out.reserve(bytes.size() / aborted_txn_entry_size);
  for (size_t pos = 0; pos + aborted_txn_entry_size <= bytes.size(); pos += aborted_txn_entry_size) {
    const auto version = detail::read_be<int16_t>(bytes, pos);
    if (version != aborted_txn_version) {
      return status::error(error_code::corrupt_message, "aborted transaction entry of unknown version " +
                                                            std::to_string(version) + " at byte " +
                                                            std::to_string(pos));
    }
    out.push_back({.producer_id = detail::read_be<int64_t>(bytes, pos + 2),
                   .first_offset = detail::read_be<int64_t>(bytes, pos + 10),
                   .last_offset = detail::read_be<int64_t>(bytes, pos + 18),
                   .last_stable_offset = detail::read_be<int64_t>(bytes, pos + 26)});
  }
  return out;
}

namespace {

result<std::vector<aborted_txn>> read_entries(const std::string& path) {
  auto contents = detail::read_file_if_exists(path);
  if (!contents) return contents.error();
  if (!*contents) return std::vector<aborted_txn>{};
  const auto& text = **contents;
  auto decoded = decode_aborted_txns(
      std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(text.data()), text.size()));
  if (!decoded) return status::error(error_code::corrupt_message, path + ": " + decoded.error().message);
  return decoded;
}

}  // namespace

result<std::vector<aborted_txn>> txn_index_source::read() const {
  if (entries) return *entries;
  return read_entries(path);
}

status write_aborted_txn_entry(const transaction_index::entry_write& write) {
  const int fd = ::open(write.path.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) return detail::io_error("cannot open", write.path, errno);
  const bool written = detail::pwrite_all(fd, reinterpret_cast<const uint8_t*>(write.bytes.data()),
                                          write.bytes.size(), write.position, write.path);
  const int err = errno;
  ::close(fd);
  if (!written) return detail::io_error("cannot write", write.path, err);
  return status::success();
}

txn_index_source transaction_index::source() const {
  txn_index_source out;
  if (_loaded) out.entries = _entries;
  out.path = _path;
  return out;
}

status transaction_index::load() {
  if (_loaded) return status::success();
  auto read = read_entries(_path);
  if (!read) return read.error();
  _entries = std::move(*read);
  _file_entries = static_cast<int64_t>(_entries.size());
  _loaded = true;
  return status::success();
}

void transaction_index::mark_empty() {
  _entries.clear();
  _file_entries = 0;
  _loaded = true;
}

result<std::optional<transaction_index::entry_write>> transaction_index::prepare_append(
    const aborted_txn& txn) {
  if (!_loaded) {
    return status::error(error_code::unknown_server_error,
                         _path + ": the aborted transaction index was not loaded before an append");
  }
  if (txn.last_offset < _base_offset) {
    return status::error(error_code::corrupt_message,
                         _path + ": aborted transaction ending at " + std::to_string(txn.last_offset) +
                             " is below the segment's base offset " + std::to_string(_base_offset));
  }
  if (!_entries.empty() && txn.last_offset <= _entries.back().last_offset)
    return std::optional<entry_write>{};
  entry_write write{_path, _file_entries * static_cast<int64_t>(aborted_txn_entry_size),
                    encode_aborted_txn(txn)};
  _entries.push_back(txn);
  ++_file_entries;
  _dirty = true;
  return std::optional<entry_write>{std::move(write)};
}

status transaction_index::append(const aborted_txn& txn) {
  if (auto st = load(); !st.ok()) return st;
  auto prepared = prepare_append(txn);
  if (!prepared) return prepared.error();
  if (!*prepared) return status::success();
  return write_aborted_txn_entry(**prepared);
}

status transaction_index::truncate_to(int64_t offset) {
  if (auto st = load(); !st.ok()) return st;
  const auto length = truncate_to_later(offset);
  if (!length) return status::success();
  const int fd = ::open(_path.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) return detail::io_error("cannot open", _path, errno);
  const int truncated = detail::truncate_file(fd, *length, _path);
  const int err = errno;
  ::close(fd);
  if (truncated != 0) return detail::io_error("cannot truncate", _path, err);
  return status::success();
}

std::optional<int64_t> transaction_index::truncate_to_later(int64_t offset) {
  size_t keep = _entries.size();
  while (keep > 0 && _entries[keep - 1].last_offset >= offset) --keep;
  if (keep == _entries.size()) return std::nullopt;
  _entries.resize(keep);
  _file_entries = static_cast<int64_t>(keep);
  _dirty = true;
  return static_cast<int64_t>(keep * aborted_txn_entry_size);
}

result<bool> transaction_index::collect(int64_t fetch_offset, int64_t upper_bound,
                                        std::vector<aborted_txn>& out) {
  if (auto st = load(); !st.ok()) return st;
  return collect_aborted_txns(_entries, fetch_offset, upper_bound, out);
}

bool collect_aborted_txns(std::span<const aborted_txn> entries, int64_t fetch_offset, int64_t upper_bound,
                          std::vector<aborted_txn>& out) {
  for (const auto& txn : entries) {
    if (txn.last_offset >= fetch_offset && txn.first_offset < upper_bound) out.push_back(txn);
    if (txn.last_stable_offset >= upper_bound) return true;
  }
  return false;
}

result<std::vector<aborted_txn>> transaction_index::entries() {
  if (auto st = load(); !st.ok()) return st;
  return _entries;
}

status transaction_index::flush() {
  if (!_dirty) return status::success();
  const int fd = ::open(_path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) return status::success();
    return detail::io_error("cannot open", _path, errno);
  }
  const int synced = detail::sync_file(fd, _path);
  const int err = errno;
  ::close(fd);
  if (synced != 0) return detail::io_error("cannot sync", _path, err);
  _dirty = false;
  return status::success();
}

}  // namespace mala::storage
