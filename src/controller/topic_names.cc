#include "mala/controller/topic_names.h"

#include <algorithm>

namespace mala::controller {

std::optional<std::string> invalid_topic_name_reason(std::string_view name) {
  constexpr size_t max_name_length = 249;
  const std::string prefix = "Topic name is invalid: ";
  if (name.empty()) return prefix + "the empty string is not allowed";
  if (name == ".") return prefix + "'.' is not allowed";
  if (name == "..") return prefix + "'..' is not allowed";
  if (name.size() > max_name_length) {
    return prefix + "the length of '" + std::string(name) + "' is longer than the max allowed length " +
           std::to_string(max_name_length);
  }
  const bool legal = std::all_of(name.begin(), name.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
           c == '_' || c == '-';
  });
  if (!legal) {
    return prefix + "'" + std::string(name) +
           "' contains one or more characters other than ASCII alphanumerics, '.', '_' and '-'";
  }
  return std::nullopt;
}

bool is_internal_topic(std::string_view name) {
  return name == "__consumer_offsets" || name == "__transaction_state" || name == "__share_group_state";
}

bool has_collision_chars(std::string_view name) {
  return name.find_first_of("._") != std::string_view::npos;
}

std::string unify_collision_chars(std::string name) {
  std::replace(name.begin(), name.end(), '.', '_');
  return name;
}

}  // namespace mala::controller
