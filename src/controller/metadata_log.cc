#include "mala/controller/metadata_log.h"

#include "mala/storage/metadata_partition.h"

namespace mala::controller {

std::filesystem::path metadata_log_partition_dir(const std::filesystem::path& metadata_log_dir) {
  return storage::metadata_partition_dir(metadata_log_dir);
}

}  // namespace mala::controller
