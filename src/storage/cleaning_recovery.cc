#include "mala/storage/cleaning_recovery.h"

#include <algorithm>
#include <limits>
#include <map>
#include <set>
#include <string_view>

#include "mala/storage/segment_files.h"

namespace mala::storage {
namespace {

constexpr std::string_view index_suffixes[] = {offset_index_suffix, time_index_suffix, txn_index_suffix};

std::optional<int64_t> index_base(std::string_view name) {
  for (auto suffix : index_suffixes) {
    if (auto base = parse_segment_base_offset(name, suffix)) return base;
  }
  return std::nullopt;
}

// The base offset of a segment file (.log or an index) named `name`, nullopt for any other file.
std::optional<int64_t> segment_base(std::string_view name) {
  if (auto base = parse_segment_base_offset(name, log_suffix)) return base;
  return index_base(name);
}

std::string_view without(std::string_view name, std::string_view suffix) {
  return name.substr(0, name.size() - suffix.size());
}

}  // namespace

swap_recovery_plan plan_swap_recovery(
    const std::vector<std::string>& file_names,
    const std::function<std::optional<int64_t>(const std::string&)>& next_offset_of) {
  swap_recovery_plan plan;
  std::set<std::string> removed;
  auto remove = [&](const std::string& name) {
    if (removed.insert(name).second) plan.remove.push_back(name);
  };
  int64_t min_cleaned = std::numeric_limits<int64_t>::max();
  std::vector<std::pair<std::string, int64_t>> log_swaps;  // name, base
  std::set<int64_t> index_bases_to_drop;
  for (const auto& name : file_names) {
    std::string_view n = name;
    if (n.ends_with(deleted_suffix)) {
      remove(name);
    } else if (n.ends_with(cleaned_suffix)) {
      remove(name);
      if (auto base = segment_base(without(n, cleaned_suffix))) min_cleaned = std::min(min_cleaned, *base);
    } else if (n.ends_with(swap_suffix)) {
      const std::string_view stem = without(n, swap_suffix);
      if (auto base = parse_segment_base_offset(stem, log_suffix)) {
        log_swaps.emplace_back(name, *base);
        index_bases_to_drop.insert(*base);
      } else {
        remove(name);  // an index swap: rebuilt from its log
        if (auto base = index_base(stem)) index_bases_to_drop.insert(*base);
      }
    }
  }

  // Swaps of a group whose .cleaned files were not all renamed yet go with them; a swap log that cannot be
  // read goes too (its group stays as it was).
  std::map<int64_t, int64_t> replaced;  // base -> next offset of each swap that completes
  for (const auto& [name, base] : log_swaps) {
    std::optional<int64_t> next;
    if (base < min_cleaned) next = next_offset_of(name);
    if (!next) {
      remove(name);
      continue;
    }
    replaced[base] = std::max(*next, base + 1);
    plan.renames.emplace_back(name, std::string(without(name, swap_suffix)));
  }
  int64_t min_swap = std::numeric_limits<int64_t>::max();
  int64_t max_swap = std::numeric_limits<int64_t>::min();
  for (const auto& [base, next] : replaced) {
    min_swap = std::min(min_swap, base);
    max_swap = std::max(max_swap, next);
  }
  for (const auto& name : file_names) {
    std::string_view n = name;
    if (n.ends_with(swap_suffix) || n.ends_with(cleaned_suffix) || n.ends_with(deleted_suffix)) continue;
    // The old segments the completed swaps replace, and the indexes of every swapped base offset.
    if (auto base = segment_base(n); base && *base >= min_swap && *base < max_swap) {
      remove(name);
    } else if (auto ib = index_base(n); ib && index_bases_to_drop.contains(*ib)) {
      remove(name);
    }
  }
  return plan;
}

}  // namespace mala::storage
