#include "mala/storage/segment_files.h"

#include <algorithm>
#include <charconv>
#include <cstdio>

namespace mala::storage {

namespace {

// Digits only, nothing else: from_chars alone would accept a leading '-'.
template <typename Int>
std::optional<Int> parse_digits(std::string_view text) {
  if (text.empty()) return std::nullopt;
  for (char c : text) {
    if (c < '0' || c > '9') return std::nullopt;
  }
  Int value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc{} || end != text.data() + text.size()) return std::nullopt;
  return value;
}

}  // namespace

std::string offset_file_stem(int64_t base_offset) {
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%020lld", static_cast<long long>(base_offset));
  return buffer;
}

std::filesystem::path segment_file_path(const std::filesystem::path& dir, int64_t base_offset,
                                        std::string_view suffix) {
  std::string name = offset_file_stem(base_offset);
  name.append(suffix);
  return dir / name;
}

std::optional<int64_t> parse_segment_base_offset(std::string_view file_name, std::string_view suffix) {
  if (file_name.size() <= suffix.size() || !file_name.ends_with(suffix)) return std::nullopt;
  // Kafka writes 20 digits and parses the digits before the first '.', so accept any digit count that fits.
  return parse_digits<int64_t>(file_name.substr(0, file_name.size() - suffix.size()));
}

std::string partition_dir_name(std::string_view topic, int32_t partition) {
  std::string name(topic);
  name += '-';
  name += std::to_string(partition);
  return name;
}

std::optional<topic_partition> parse_partition_dir_name(std::string_view name) {
  // The partition follows the last '-': topic names may contain '-' themselves, partition numbers may not.
  const size_t dash = name.rfind('-');
  if (dash == std::string_view::npos || dash == 0) return std::nullopt;
  auto partition = parse_digits<int32_t>(name.substr(dash + 1));
  if (!partition) return std::nullopt;
  return topic_partition{std::string(name.substr(0, dash)), *partition};
}

std::optional<topic_partition> parse_suffixed_partition_dir_name(std::string_view name,
                                                                 std::string_view suffix) {
  constexpr size_t unique_length = 32;
  if (!name.ends_with(suffix) || name.size() < suffix.size() + unique_length + 1) return std::nullopt;
  name.remove_suffix(suffix.size());
  const auto unique = name.substr(name.size() - unique_length);
  if (!std::all_of(unique.begin(), unique.end(),
                   [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); }))
    return std::nullopt;
  name.remove_suffix(unique_length);
  if (!name.ends_with('.')) return std::nullopt;
  name.remove_suffix(1);
  return parse_partition_dir_name(name);
}

}  // namespace mala::storage
