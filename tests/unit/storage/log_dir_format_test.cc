#include "mala/storage/log_dir_format.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <random>

#include "mala/common/config.h"

namespace mala::storage {
namespace {

namespace fs = std::filesystem;

class log_dir_format_test : public ::testing::Test {
 protected:
  void SetUp() override {
    _root = fs::temp_directory_path() / ("mala-log-dir-test-" + std::to_string(std::random_device{}()));
    fs::create_directories(_root);
  }
  void TearDown() override { fs::remove_all(_root); }
  std::string dir(const std::string& name) const { return (_root / name).string(); }
  static log_dirs_identity ok(result<log_dirs_identity> r) {
    if (!r.ok()) ADD_FAILURE() << r.error().message;
    return r.ok() ? r.value() : log_dirs_identity{};
  }
  static std::string fails(result<log_dirs_identity> r) {
    EXPECT_FALSE(r.ok());
    if (r.ok()) return "";
    EXPECT_EQ(r.error().code, error_code::kafka_storage_error);
    return r.error().message;
  }
  static void write_file(const std::string& path, const std::string& text) { std::ofstream(path) << text; }
  static meta_properties read(const std::string& d) {
    auto r = read_meta_properties(d);
    EXPECT_TRUE(r.ok());
    auto* m = r.ok() ? &r.value() : nullptr;
    EXPECT_TRUE(m && m->has_value());
    return m && *m ? **m : meta_properties{};
  }

  fs::path _root;
};

TEST_F(log_dir_format_test, formats_missing_and_empty_dirs_with_one_cluster_id) {
  fs::create_directories(dir("empty"));
  auto id = ok(format_or_check_log_dirs({dir("missing"), dir("empty")}, 7, std::nullopt));
  EXPECT_EQ(id.node_id, 7);
  EXPECT_TRUE(uuid::parse(id.cluster_id).has_value());
  ASSERT_EQ(id.dirs.size(), 2u);
  EXPECT_TRUE(id.dirs[0].formatted_now);
  EXPECT_TRUE(id.dirs[1].formatted_now);
  EXPECT_NE(id.dirs[0].directory_id, id.dirs[1].directory_id);
  for (const auto& d : id.dirs) {
    auto meta = read(d.path);
    EXPECT_EQ(meta.version, 1);
    EXPECT_EQ(meta.node_id, 7);
    EXPECT_EQ(meta.cluster_id, id.cluster_id);
    EXPECT_EQ(meta.directory_id, d.directory_id);
  }
  EXPECT_FALSE(fs::exists(dir("missing") + "/meta.properties.tmp"));

  // A restart finds the same identity and writes nothing.
  auto again = ok(format_or_check_log_dirs({dir("missing"), dir("empty")}, 7, std::nullopt));
  EXPECT_EQ(again.cluster_id, id.cluster_id);
  EXPECT_FALSE(again.dirs[0].formatted_now);
  EXPECT_EQ(again.dirs[1].directory_id, id.dirs[1].directory_id);
}

TEST_F(log_dir_format_test, uses_configured_cluster_id) {
  auto cluster = uuid::random().to_string();
  auto id = ok(format_or_check_log_dirs({dir("a")}, 1, cluster));
  EXPECT_EQ(id.cluster_id, cluster);
  EXPECT_EQ(read(dir("a")).cluster_id, cluster);
  auto other = uuid::random().to_string();
  auto message = fails(format_or_check_log_dirs({dir("a")}, 1, other));
  EXPECT_NE(message.find(dir("a")), std::string::npos) << message;
  EXPECT_NE(message.find("cluster.id"), std::string::npos) << message;
  EXPECT_NE(fails(format_or_check_log_dirs({dir("b")}, 1, std::string("not-a-uuid"))).find("cluster.id"),
            std::string::npos);
}

TEST_F(log_dir_format_test, new_dir_joins_existing_cluster) {
  auto first = ok(format_or_check_log_dirs({dir("a")}, 2, std::nullopt));
  auto both = ok(format_or_check_log_dirs({dir("a"), dir("b")}, 2, std::nullopt));
  EXPECT_EQ(both.cluster_id, first.cluster_id);
  EXPECT_FALSE(both.dirs[0].formatted_now);
  EXPECT_TRUE(both.dirs[1].formatted_now);
  EXPECT_EQ(read(dir("b")).cluster_id, first.cluster_id);
}

TEST_F(log_dir_format_test, refuses_other_node_id) {
  ok(format_or_check_log_dirs({dir("a")}, 1, std::nullopt));
  auto message = fails(format_or_check_log_dirs({dir("a")}, 2, std::nullopt));
  EXPECT_NE(message.find(dir("a")), std::string::npos) << message;
  EXPECT_NE(message.find("node id 1"), std::string::npos) << message;
}

TEST_F(log_dir_format_test, refuses_dirs_of_different_clusters) {
  ok(format_or_check_log_dirs({dir("a")}, 1, std::nullopt));
  ok(format_or_check_log_dirs({dir("b")}, 1, std::nullopt));
  auto message = fails(format_or_check_log_dirs({dir("a"), dir("b")}, 1, std::nullopt));
  EXPECT_NE(message.find(dir("b")), std::string::npos) << message;
  EXPECT_NE(message.find("Invalid cluster.id"), std::string::npos) << message;
}

TEST_F(log_dir_format_test, refuses_non_empty_unformatted_dir) {
  fs::create_directories(dir("used"));
  write_file(dir("used") + "/topic-0", "");
  auto message = fails(format_or_check_log_dirs({dir("used")}, 1, std::nullopt));
  EXPECT_NE(message.find(dir("used")), std::string::npos) << message;
  EXPECT_FALSE(fs::exists(dir("used") + "/meta.properties"));
  // lost+found and hidden files do not count.
  fs::create_directories(dir("mount/lost+found"));
  write_file(dir("mount") + "/.lock", "");
  ok(format_or_check_log_dirs({dir("mount")}, 1, std::nullopt));
}

TEST_F(log_dir_format_test, refuses_zookeeper_and_broken_files) {
  fs::create_directories(dir("zk"));
  write_file(dir("zk") + "/meta.properties",
             "version=0\nbroker.id=1\ncluster.id=" + uuid::random().to_string());
  EXPECT_NE(fails(format_or_check_log_dirs({dir("zk")}, 1, std::nullopt)).find("version 0"),
            std::string::npos);
  fs::create_directories(dir("bad"));
  write_file(dir("bad") + "/meta.properties", "node.id=1\n");
  EXPECT_NE(fails(format_or_check_log_dirs({dir("bad")}, 1, std::nullopt)).find(dir("bad")),
            std::string::npos);
  EXPECT_NE(fails(format_or_check_log_dirs({dir("bad")}, 1, std::nullopt)).find("no version"),
            std::string::npos);
  write_file(dir("file"), "x");
  EXPECT_NE(fails(format_or_check_log_dirs({dir("file")}, 1, std::nullopt)).find("not a directory"),
            std::string::npos);
}

TEST_F(log_dir_format_test, adds_directory_id_to_pre_kip_858_file) {
  auto cluster = uuid::random().to_string();
  fs::create_directories(dir("old"));
  write_file(dir("old") + "/meta.properties",
             "#\n#Tue Jan 02 10:00:00 UTC 2024\nnode.id=3\nversion=1\ncluster.id=" + cluster + "\n");
  auto id = ok(format_or_check_log_dirs({dir("old")}, 3, std::nullopt));
  EXPECT_EQ(id.cluster_id, cluster);
  EXPECT_FALSE(id.dirs[0].formatted_now);
  EXPECT_EQ(read(dir("old")).directory_id, id.dirs[0].directory_id);
}

TEST_F(log_dir_format_test, refuses_duplicate_directory_ids) {
  auto cluster = uuid::random().to_string();
  auto dir_id = uuid::random().to_string();
  for (auto name : {"a", "b"}) {
    fs::create_directories(dir(name));
    write_file(dir(name) + "/meta.properties",
               "version=1\nnode.id=1\ncluster.id=" + cluster + "\ndirectory.id=" + dir_id + "\n");
  }
  EXPECT_NE(fails(format_or_check_log_dirs({dir("a"), dir("b")}, 1, std::nullopt)).find("same directory.id"),
            std::string::npos);
}

TEST(meta_properties_test, round_trips) {
  meta_properties meta{1, uuid::random().to_string(), 5, uuid::random()};
  auto text = format_meta_properties(meta);
  auto parsed = parse_meta_properties(text);
  ASSERT_TRUE(parsed.ok());
  EXPECT_EQ(parsed.value(), meta);
  // Kafka's Properties.store form with comments and key order of its own.
  auto kafka = parse_meta_properties(
      "#\n#Thu Feb 01 12:00:00 UTC 2024\nnode.id=1\ndirectory.id=" + meta.directory_id->to_string() +
      "\nversion=1\ncluster.id=" + *meta.cluster_id + "\n");
  ASSERT_TRUE(kafka.ok());
  EXPECT_EQ(kafka.value().node_id, 1);
}

}  // namespace
}  // namespace mala::storage
