// What a log's directory needs after a crash during a clean (Kafka's LogLoader, before segments load): the
// cleaner writes a group's new segment as <base>.log.cleaned (+ .index/.timeindex/.txnindex.cleaned), renames
// the files to .swap, renames the segments they replace to .deleted, and finally drops the .swap suffix. At
// any moment a SIGKILL leaves one of these states, and the plan brings the directory back to either the old
// segments or the new one, never a mix:
// - every .cleaned file goes (the clean had not reached its swap: the old segments are intact);
// - a .swap file whose base offset is at or above the lowest .cleaned base goes too (a swap that was still
//   being prepared: its group's .cleaned files were not all renamed);
// - an index .swap goes, and so do the indexes of its base offset (they are rebuilt when the segment loads);
// - every remaining .swap .log covers [its base, its next offset): the old segment files (.log and indexes,
//   not .swap) with a base offset in that range go, then the .swap .log loses its suffix and its indexes are
//   rebuilt by the load, as Kafka's LogLoader does;
// - .deleted files go (old segments already replaced).
//
// Pure; any thread. The caller lists the directory, and reads a .swap log's next offset (the offset after its
// last batch) with next_offset_of.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace mala::storage {

struct swap_recovery_plan {
  std::vector<std::string> remove;                           // file names to delete
  std::vector<std::pair<std::string, std::string>> renames;  // .swap name -> final name, after the removals
};

// `file_names`: the regular files of one partition directory. `next_offset_of` gets a .swap .log's name and
// returns the offset after its last batch (its base offset when it holds none), nullopt when it cannot be
// read: such a swap is removed with its group, and the old segments stay.
swap_recovery_plan plan_swap_recovery(
    const std::vector<std::string>& file_names,
    const std::function<std::optional<int64_t>(const std::string&)>& next_offset_of);

}  // namespace mala::storage
