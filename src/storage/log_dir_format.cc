#include "mala/storage/log_dir_format.h"
#include "mala/storage/checkpoint_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "mala/common/config.h"

namespace mala::storage {

namespace {

// Every refusal of a log dir (unreadable, foreign, inconsistent) is a storage error, as Kafka's start-up
// check fails with a KafkaException naming the dir.
status storage_refusal(std::string message) {
  return status::error(error_code::kafka_storage_error, std::move(message));
}

namespace fs = std::filesystem;

constexpr std::string_view temp_suffix = ".tmp";

std::string errno_text(int err) {
  return std::strerror(err);
}

std::optional<int32_t> parse_int32(std::string_view text) {
  int32_t value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || ec != std::errc{} || end != text.data() + text.size()) return std::nullopt;
  return value;
}

// Kafka's DirectoryId reserves ids whose high 64 bits are zero and low 64 bits are below 100 (UNASSIGNED,
// LOST, MIGRATING, ...); a directory must never get one.
bool reserved_directory_id(const uuid& id) {
  for (size_t i = 0; i < 15; ++i) {
    if (id.bytes[i] != 0) return false;
  }
  return id.bytes[15] < 100;
}

enum class dir_state { missing, empty, formatted };

struct dir_scan {
  dir_state state = dir_state::missing;
  meta_properties meta;
};

// Entries that do not make a dir "in use": a mount point's lost+found, hidden files, and our own temp file
// left by a crash during formatting.
bool ignorable_entry(const std::string& name) {
  return name == "lost+found" || name.starts_with(".") ||
         name == std::string(meta_properties_file_name) + std::string(temp_suffix);
}

result<dir_scan> scan_dir(const std::string& dir) {
  std::error_code ec;
  auto status = fs::status(dir, ec);
  if (ec && ec != std::errc::no_such_file_or_directory)
    return storage_refusal("cannot access log dir " + dir + ": " + ec.message());
  if (!fs::exists(status)) return dir_scan{dir_state::missing, {}};
  if (!fs::is_directory(status)) return storage_refusal("log dir " + dir + " exists but is not a directory");
  auto read = read_meta_properties(dir);
  if (!read.ok()) return read.error();
  auto& meta = read.value();
  if (meta) return dir_scan{dir_state::formatted, *meta};
  fs::directory_iterator it(dir, ec);
  if (ec) return storage_refusal("cannot list log dir " + dir + ": " + ec.message());
  for (; it != fs::directory_iterator(); it.increment(ec)) {
    if (ec) return storage_refusal("cannot list log dir " + dir + ": " + ec.message());
    auto name = it->path().filename().string();
    if (!ignorable_entry(name)) {
      return storage_refusal("log dir " + dir + " is not empty but has no meta.properties (found '" + name +
                             "'); refusing to format it. Use an empty directory or remove its contents.");
    }
  }
  return dir_scan{dir_state::empty, {}};
}

uuid new_directory_id(const std::set<std::string>& taken) {
  while (true) {
    auto id = uuid::random();
    if (!reserved_directory_id(id) && !taken.contains(id.to_string())) return id;
  }
}

}  // namespace

std::string format_meta_properties(const meta_properties& meta) {
  std::string out = "#\n#Written by Mala (Kafka KRaft meta.properties format)\n";
  out += "version=" + std::to_string(meta.version) + "\n";
  if (meta.cluster_id) out += "cluster.id=" + *meta.cluster_id + "\n";
  if (meta.node_id) out += "node.id=" + std::to_string(*meta.node_id) + "\n";
  if (meta.directory_id) out += "directory.id=" + meta.directory_id->to_string() + "\n";
  return out;
}

result<meta_properties> parse_meta_properties(std::string_view text) {
  std::map<std::string, std::string> props;
  for (auto& [key, value] : parse_java_properties(text)) props[key] = value;
  meta_properties meta;
  auto version = props.find("version");
  if (version == props.end()) return storage_refusal("no version");
  auto parsed_version = parse_int32(version->second);
  if (!parsed_version) return storage_refusal("invalid version '" + version->second + "'");
  meta.version = *parsed_version;
  if (auto it = props.find("cluster.id"); it != props.end()) meta.cluster_id = it->second;
  // Kafka's version 0 (ZooKeeper) files call the node id broker.id.
  auto node = props.find("node.id");
  if (node == props.end()) node = props.find("broker.id");
  if (node != props.end()) {
    auto id = parse_int32(node->second);
    if (!id || *id < 0) return storage_refusal("invalid node.id '" + node->second + "'");
    meta.node_id = *id;
  }
  if (auto it = props.find("directory.id"); it != props.end()) {
    auto id = uuid::parse(it->second);
    if (!id) return storage_refusal("invalid directory.id '" + it->second + "'");
    meta.directory_id = *id;
  }
  return meta;
}

result<std::optional<meta_properties>> read_meta_properties(const std::string& dir) {
  auto path = fs::path(dir) / meta_properties_file_name;
  std::error_code ec;
  if (!fs::exists(path, ec)) {
    if (ec && ec != std::errc::no_such_file_or_directory)
      return storage_refusal("cannot access " + path.string() + ": " + ec.message());
    return std::optional<meta_properties>{};
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) return storage_refusal("cannot read " + path.string() + ": " + errno_text(errno));
  std::ostringstream contents;
  contents << in.rdbuf();
  if (in.bad()) return storage_refusal("cannot read " + path.string());
  auto parsed = parse_meta_properties(contents.str());
  if (!parsed.ok()) return storage_refusal("invalid " + path.string() + ": " + parsed.error().message);
  return std::optional<meta_properties>{parsed.value()};
}

status write_meta_properties(const std::string& dir, const meta_properties& meta) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return storage_refusal("cannot create log dir " + dir + ": " + ec.message());
  if (auto st =
          write_file_atomically(fs::path(dir) / meta_properties_file_name, format_meta_properties(meta));
      !st.ok()) {
    return st;
  }
  return status::success();
}

namespace {

result<log_dirs_identity> format_or_check(const std::vector<std::string>& dirs, int32_t node_id,
                                          std::optional<std::string> configured_cluster_id) {
  if (dirs.empty()) return storage_refusal("no log dirs configured");
  if (configured_cluster_id) {
    auto id = uuid::parse(*configured_cluster_id);
    if (!id || id->is_zero())
      return storage_refusal("configured cluster.id '" + *configured_cluster_id + "' is not a valid uuid");
  }

  std::vector<dir_scan> scans;
  std::optional<std::string> cluster_id;
  std::string cluster_id_source;  // the dir (or config) the cluster id was first seen in, for messages
  std::map<std::string, std::string> directory_ids;  // id -> dir
  for (const auto& dir : dirs) {
    auto scan = scan_dir(dir);
    if (!scan.ok()) return scan.error();
    auto& s = scan.value();
    if (s.state == dir_state::formatted) {
      const auto& meta = s.meta;
      auto where = (fs::path(dir) / meta_properties_file_name).string();
      if (meta.version == 0) {
        return storage_refusal(
            where +
            " has version 0 (written by a ZooKeeper-mode Kafka broker); Mala runs in KRaft "
            "mode only and needs version 1");
      }
      if (meta.version != 1)
        return storage_refusal(where + " has unsupported version " + std::to_string(meta.version));
      if (!meta.cluster_id || meta.cluster_id->empty()) return storage_refusal(where + " has no cluster.id");
      if (!meta.node_id) return storage_refusal(where + " has no node.id");
      if (*meta.node_id != node_id) {
        return storage_refusal(
            "Stored node id " + std::to_string(*meta.node_id) + " in " + where +
            " doesn't match configured node.id " + std::to_string(node_id) +
            ". If you moved your data, make sure your configured node id matches. If you "
            "intend to create a new node, you should remove all data in your data directories.");
      }
      if (configured_cluster_id && *meta.cluster_id != *configured_cluster_id) {
        return storage_refusal("Invalid cluster.id in " + where + ": the configured cluster.id is " +
                               *configured_cluster_id + " but the directory belongs to cluster " +
                               *meta.cluster_id);
      }
      if (cluster_id && *cluster_id != *meta.cluster_id) {
        return storage_refusal("Invalid cluster.id in " + where + ". Expected " + *cluster_id + " (from " +
                               cluster_id_source + "), but read " + *meta.cluster_id);
      }
      if (!cluster_id) {
        cluster_id = meta.cluster_id;
        cluster_id_source = where;
      }
      if (meta.directory_id) {
        auto text = meta.directory_id->to_string();
        if (reserved_directory_id(*meta.directory_id))
          return storage_refusal(where + " has a reserved directory.id " + text);
        auto [it, inserted] = directory_ids.emplace(text, dir);
        if (!inserted)
          return storage_refusal("log dirs " + it->second + " and " + dir + " have the same directory.id " +
                                 text);
      }
    }
    scans.push_back(std::move(s));
  }

  if (!cluster_id) cluster_id = configured_cluster_id ? *configured_cluster_id : uuid::random().to_string();
  std::set<std::string> taken;
  for (const auto& [id, dir] : directory_ids) taken.insert(id);

  log_dirs_identity identity{*cluster_id, node_id, {}};
  for (size_t i = 0; i < dirs.size(); ++i) {
    auto& s = scans[i];
    log_dir_identity entry{dirs[i], {}, false};
    if (s.state == dir_state::formatted && s.meta.directory_id) {
      entry.directory_id = *s.meta.directory_id;
    } else {
      // New dir, or a version-1 file from before KIP-858: give it a directory id, as Kafka does at start-up.
      meta_properties meta{1, *cluster_id, node_id, new_directory_id(taken)};
      taken.insert(meta.directory_id->to_string());
      if (auto st = write_meta_properties(dirs[i], meta); !st.ok()) return st;
      entry.directory_id = *meta.directory_id;
      entry.formatted_now = s.state != dir_state::formatted;
    }
    identity.dirs.push_back(std::move(entry));
  }
  return identity;
}

}  // namespace

result<log_dirs_identity> format_or_check_log_dirs(const std::vector<std::string>& dirs, int32_t node_id,
                                                   std::optional<std::string> configured_cluster_id) {
  return format_or_check(dirs, node_id, std::move(configured_cluster_id));
}

}  // namespace mala::storage
