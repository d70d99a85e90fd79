#include "mala/storage/checkpoint_file.h"

#include "file_io.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstring>
#include <optional>

namespace mala::storage {

namespace {

namespace fs = std::filesystem;

template <typename T>
std::optional<T> parse_number(std::string_view text) {
  T value{};
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || ec != std::errc{} || end != text.data() + text.size()) return std::nullopt;
  return value;
}

// Lines as Java's BufferedReader.readLine sees them: split on \n, a trailing \r dropped, no empty last line
// for a file ending in a newline.
std::vector<std::string_view> split_lines(std::string_view text) {
  std::vector<std::string_view> lines;
  while (!text.empty()) {
    auto nl = text.find('\n');
    auto line = text.substr(0, nl);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    lines.push_back(line);
    if (nl == std::string_view::npos) break;
    text.remove_prefix(nl + 1);
  }
  return lines;
}

// Whitespace-separated fields (Kafka's offset checkpoint splits on \s+).
std::vector<std::string_view> split_fields(std::string_view line) {
  std::vector<std::string_view> fields;
  size_t i = 0;
  auto is_space = [](char c) { return c == ' ' || c == '\t'; };
  while (i < line.size()) {
    while (i < line.size() && is_space(line[i])) ++i;
    size_t start = i;
    while (i < line.size() && !is_space(line[i])) ++i;
    if (i > start) fields.push_back(line.substr(start, i - start));
  }
  return fields;
}

status malformed(const fs::path& path, size_t line_number, std::string_view line) {
  return status::error(error_code::kafka_storage_error, "malformed line " + std::to_string(line_number) +
                                                            " in checkpoint file " + path.string() + ": '" +
                                                            std::string(line) + "'");
}

// Kafka's CheckpointFile framing: version line, count line, entries. An empty file (or one cut after the
// version line) reads as no entries, as in Kafka's CheckpointReadBuffer.
template <typename Entry, typename Parse>
result<std::vector<Entry>> read_checkpoint(const fs::path& path, Parse parse_entry) {
  auto contents = detail::read_file_if_exists(path);
  if (!contents) return contents.error();
  if (!contents->has_value()) return std::vector<Entry>{};
  auto lines = split_lines(**contents);
  std::vector<Entry> entries;
  if (lines.empty()) return entries;
  auto version = parse_number<int32_t>(lines[0]);
  if (!version) return malformed(path, 1, lines[0]);
  if (*version != 0) {
    return status::error(error_code::kafka_storage_error, "unrecognised version " + std::to_string(*version) +
                                                              " (expected 0) in checkpoint file " +
                                                              path.string());
  }
  if (lines.size() < 2) return entries;
  auto count = parse_number<int32_t>(lines[1]);
  if (!count || *count < 0) return malformed(path, 2, lines[1]);
  for (size_t i = 2; i < lines.size(); ++i) {
    std::optional<Entry> entry = parse_entry(lines[i]);
    if (!entry) return malformed(path, i + 1, lines[i]);
    entries.push_back(std::move(*entry));
  }
  if (entries.size() != static_cast<size_t>(*count)) {
    return status::error(error_code::kafka_storage_error, "expected " + std::to_string(*count) +
                                                              " entries in checkpoint file " + path.string() +
                                                              " but found " + std::to_string(entries.size()));
  }
  return entries;
}

}  // namespace

status write_file_atomically(const fs::path& path, std::string_view contents, file_sync sync) {
  fs::path temp = path;
  temp += ".tmp";
  int fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return detail::io_error("cannot create", temp, errno);
  bool ok =
      detail::write_all(fd, contents, temp) && (sync == file_sync::later || detail::sync_file(fd, temp) == 0);
  int err = errno;
  ::close(fd);
  if (!ok) {
    ::unlink(temp.c_str());
    return detail::io_error("cannot write", temp, err);
  }
  if (::rename(temp.c_str(), path.c_str()) != 0) {
    err = errno;
    ::unlink(temp.c_str());
    return detail::io_error("cannot rename " + temp.string() + " to", path, err);
  }
  if (sync == file_sync::later) return status::success();
  // The rename is durable only once the directory entry is.
  auto dir = path.parent_path();
  return detail::fsync_dir(dir.empty() ? fs::path(".") : dir);
}

status write_offset_checkpoint(const fs::path& path, const offset_checkpoint& offsets) {
  std::string out = "0\n" + std::to_string(offsets.size()) + "\n";
  for (const auto& [tp, offset] : offsets) {
    out += tp.topic;
    out += ' ';
    out += std::to_string(tp.partition);
    out += ' ';
    out += std::to_string(offset);
    out += '\n';
  }
  return write_file_atomically(path, out);
}

result<offset_checkpoint> read_offset_checkpoint(const fs::path& path) {
  using entry = std::pair<topic_partition, int64_t>;
  auto entries = read_checkpoint<entry>(path, [](std::string_view line) -> std::optional<entry> {
    auto fields = split_fields(line);
    if (fields.size() != 3) return std::nullopt;
    auto partition = parse_number<int32_t>(fields[1]);
    auto offset = parse_number<int64_t>(fields[2]);
    if (!partition || !offset) return std::nullopt;
    return entry{topic_partition{std::string(fields[0]), *partition}, *offset};
  });
  if (!entries) return entries.error();
  offset_checkpoint out;
  for (auto& [tp, offset] : *entries) out[tp] = offset;
  return out;
}

status write_epoch_checkpoint(const fs::path& path, const std::vector<epoch_entry>& entries, file_sync sync) {
  std::string out = "0\n" + std::to_string(entries.size()) + "\n";
  for (const auto& e : entries) {
    out += std::to_string(e.epoch);
    out += ' ';
    out += std::to_string(e.start_offset);
    out += '\n';
  }
  return write_file_atomically(path, out, sync);
}

result<std::vector<epoch_entry>> read_epoch_checkpoint(const fs::path& path) {
  return read_checkpoint<epoch_entry>(path, [](std::string_view line) -> std::optional<epoch_entry> {
    auto fields = split_fields(line);
    if (fields.size() != 2) return std::nullopt;
    auto epoch = parse_number<int32_t>(fields[0]);
    auto offset = parse_number<int64_t>(fields[1]);
    if (!epoch || !offset) return std::nullopt;
    return epoch_entry{*epoch, *offset};
  });
}

status write_partition_metadata(const fs::path& dir, const uuid& topic_id) {
  return write_file_atomically(dir / partition_metadata_file,
                               "version: 0\ntopic_id: " + topic_id.to_string() + "\n", file_sync::later);
}

result<std::optional<uuid>> read_partition_metadata(const fs::path& dir) {
  auto path = dir / partition_metadata_file;
  auto contents = detail::read_file_if_exists(path);
  if (!contents) return contents.error();
  if (!contents->has_value()) return std::optional<uuid>{};
  auto lines = split_lines(**contents);
  // Kafka's PartitionMetadataReadBuffer: "version: 0" then "topic_id: <uuid>", each split on ": ".
  auto value_of = [&](size_t n, std::string_view key) -> std::optional<std::string_view> {
    if (n >= lines.size()) return std::nullopt;
    auto line = lines[n];
    auto sep = line.find(": ");
    if (sep == std::string_view::npos || line.substr(0, sep) != key) return std::nullopt;
    return line.substr(sep + 2);
  };
  auto bad = [&](size_t n) {
    std::string line = n < lines.size() ? std::string(lines[n]) : std::string("<missing>");
    return status::error(error_code::kafka_storage_error, "malformed line " + std::to_string(n + 1) + " in " +
                                                              path.string() + ": '" + line + "'");
  };
  auto version = value_of(0, "version");
  if (!version) return bad(0);
  auto version_number = parse_number<int32_t>(*version);
  if (!version_number) return bad(0);
  if (*version_number != 0) {
    return status::error(error_code::kafka_storage_error,
                         "unrecognised version " + std::to_string(*version_number) + " in " + path.string());
  }
  auto topic_id = value_of(1, "topic_id");
  if (!topic_id) return bad(1);
  auto id = uuid::parse(*topic_id);
  if (!id) return bad(1);
  return std::optional<uuid>{*id};
}

}  // namespace mala::storage
