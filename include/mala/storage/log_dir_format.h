// Log-directory identity, as `kafka-storage format` writes it and a Kafka node checks it at start-up: every
// log dir holds a `meta.properties` (Java properties) with version=1, node.id, cluster.id and, since
// Kafka 3.7 (KIP-858), a directory.id unique to that dir.
//
// Mala formats on first start instead of needing a separate format step: an empty or missing dir is formatted
// with the node's cluster id (from any already formatted dir, else the configured cluster.id, else a new
// random one). Anything inconsistent (another node's or another cluster's data) refuses to start, naming the
// dir.
//
// Runs once at start-up on the main thread, before any shard starts; blocking file I/O, no shared state.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "mala/common/result.h"
#include "mala/common/uuid.h"

namespace mala::storage {

inline constexpr std::string_view meta_properties_file_name = "meta.properties";

// The contents of one meta.properties. Fields are optional because old or foreign files may lack them.
struct meta_properties {
  int32_t version = 1;
  std::optional<std::string> cluster_id;
  std::optional<int32_t> node_id;
  std::optional<uuid> directory_id;
  friend bool operator==(const meta_properties&, const meta_properties&) = default;
};

// Java properties text with Kafka's keys (version, cluster.id, node.id, directory.id).
std::string format_meta_properties(const meta_properties& meta);
// Parses meta.properties text; a refusal (kafka_storage_error) names what is wrong (missing/invalid version,
// node.id, directory.id).
result<meta_properties> parse_meta_properties(std::string_view text);

// Reads `<dir>/meta.properties`: nullopt when the file does not exist.
result<std::optional<meta_properties>> read_meta_properties(const std::string& dir);
// Writes `<dir>/meta.properties` atomically: temp file, fsync, rename, fsync of the directory. Creates `dir`
// if needed.
status write_meta_properties(const std::string& dir, const meta_properties& meta);

struct log_dir_identity {
  std::string path;
  uuid directory_id;
  bool formatted_now = false;  // true when this start wrote its meta.properties
};

struct log_dirs_identity {
  std::string cluster_id;
  int32_t node_id = -1;
  std::vector<log_dir_identity> dirs;  // in the order of `dirs`
};

// Checks every log dir and formats the empty or missing ones. Refuses (error message naming the dir) when a
// dir is not empty but has no meta.properties, when a meta.properties is unreadable or of version 0
// (ZooKeeper mode), when its node.id differs from `node_id`, when cluster ids differ between dirs or from
// `configured_cluster_id`, or when two dirs share a directory.id. A version-1 file without directory.id
// (written before Kafka 3.7) gets one added. A refusal is kafka_storage_error.
result<log_dirs_identity> format_or_check_log_dirs(const std::vector<std::string>& dirs, int32_t node_id,
                                                   std::optional<std::string> configured_cluster_id);

}  // namespace mala::storage
