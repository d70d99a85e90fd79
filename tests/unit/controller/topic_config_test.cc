// Kafka's topic config table: names, types and ranges as LogConfig defines them, ConfigDef's error messages
// for each kind of bad value, the checks across keys, Java's list parsing, and the resolution order (topic
// override, dynamic per-broker, dynamic cluster-wide, static, default) with DescribeConfigs sources.
#include "mala/controller/topic_config.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <string>

namespace mala::controller {
namespace {

std::string message_of(std::string_view name, const std::optional<std::string>& value) {
  auto st = validate_topic_config(name, value);
  EXPECT_FALSE(st.ok()) << name << "=" << value.value_or("null") << " was accepted";
  EXPECT_EQ(st.code, error_code::invalid_config);
  return st.message;
}

void expect_valid(std::string_view name, const std::string& value) {
  auto st = validate_topic_config(name, value);
  EXPECT_TRUE(st.ok()) << name << "=" << value << ": " << st.message;
}

TEST(topic_config, table_is_sorted_and_searchable) {
  auto keys = topic_config_keys();
  ASSERT_GE(keys.size(), 30u);
  EXPECT_TRUE(
      std::is_sorted(keys.begin(), keys.end(), [](const auto& a, const auto& b) { return a.name < b.name; }));
  for (const auto& k : keys) EXPECT_EQ(find_topic_config_key(k.name), &k);
  EXPECT_EQ(find_topic_config_key("no.such.config"), nullptr);
  EXPECT_EQ(find_topic_config_key(""), nullptr);
}

TEST(topic_config, kafka_names_types_defaults_and_synonyms) {
  struct expected {
    std::string_view name;
    config_type type;
    std::string_view default_value;
    std::string_view synonym;
  };
  const expected cases[] = {
      {"cleanup.policy", config_type::list, "delete", "log.cleanup.policy"},
      {"retention.ms", config_type::int64, "604800000", "log.retention.ms"},
      {"retention.bytes", config_type::int64, "-1", "log.retention.bytes"},
      {"segment.bytes", config_type::int32, "1073741824", "log.segment.bytes"},
      {"segment.ms", config_type::int64, "604800000", "log.roll.ms"},
      {"max.message.bytes", config_type::int32, "1048588", "message.max.bytes"},
      {"min.insync.replicas", config_type::int32, "1", "min.insync.replicas"},
      {"min.cleanable.dirty.ratio", config_type::float64, "0.5", "log.cleaner.min.cleanable.ratio"},
      {"unclean.leader.election.enable", config_type::boolean, "false", "unclean.leader.election.enable"},
      {"compression.type", config_type::string, "producer", "compression.type"},
      {"message.timestamp.type", config_type::string, "CreateTime", "log.message.timestamp.type"},
      {"leader.replication.throttled.replicas", config_type::list, "", ""},
      {"remote.storage.enable", config_type::boolean, "false", ""},
  };
  for (const auto& c : cases) {
    const topic_config_key* key = find_topic_config_key(c.name);
    ASSERT_NE(key, nullptr) << c.name;
    EXPECT_EQ(key->type, c.type) << c.name;
    EXPECT_EQ(key->default_value, c.default_value) << c.name;
    EXPECT_EQ(key->server_default_property, c.synonym) << c.name;
  }
}

TEST(topic_config, unknown_names_and_null_values) {
  EXPECT_EQ(message_of("retention.minutes", "1"), "Unknown topic config name: retention.minutes");
  EXPECT_EQ(message_of("retention.ms", std::nullopt),
            "Null value not supported for topic configs: retention.ms");
}

TEST(topic_config, numbers_parse_as_java_does) {
  expect_valid("retention.ms", "86400000");
  expect_valid("retention.ms", " -1 ");
  expect_valid("retention.ms", "+5");
  expect_valid("retention.bytes", "-12345");  // no lower bound: negative means unlimited
  EXPECT_EQ(message_of("retention.ms", "abc"),
            "Invalid value abc for configuration retention.ms: Not a number of type LONG");
  EXPECT_EQ(message_of("retention.ms", "1.5"),
            "Invalid value 1.5 for configuration retention.ms: Not a number of type LONG");
  EXPECT_EQ(message_of("retention.ms", ""),
            "Invalid value  for configuration retention.ms: Not a number of type LONG");
  EXPECT_EQ(message_of("max.message.bytes", "3000000000"),
            "Invalid value 3000000000 for configuration max.message.bytes: Not a number of type INT");
  EXPECT_EQ(message_of("min.cleanable.dirty.ratio", "half"),
            "Invalid value half for configuration min.cleanable.dirty.ratio: Not a number of type DOUBLE");
  expect_valid("min.cleanable.dirty.ratio", "0.25");
}

TEST(topic_config, ranges_follow_log_config) {
  EXPECT_EQ(message_of("retention.ms", "-2"),
            "Invalid value -2 for configuration retention.ms: Value must be at least -1");
  EXPECT_EQ(message_of("segment.bytes", "1000"),
            "Invalid value 1000 for configuration segment.bytes: Value must be at least 1048576");
  expect_valid("segment.bytes", "1048576");
  EXPECT_EQ(message_of("min.insync.replicas", "0"),
            "Invalid value 0 for configuration min.insync.replicas: Value must be at least 1");
  EXPECT_EQ(message_of("min.cleanable.dirty.ratio", "1.5"),
            "Invalid value 1.5 for configuration min.cleanable.dirty.ratio: Value must be no more than 1");
  EXPECT_EQ(message_of("compression.lz4.level", "18"),
            "Invalid value 18 for configuration compression.lz4.level: Value must be no more than 17");
  expect_valid("compression.gzip.level", "-1");
  expect_valid("compression.gzip.level", "9");
  EXPECT_EQ(message_of("compression.gzip.level", "0"),
            "Invalid value 0 for configuration compression.gzip.level: Value must be between 1 and 9 or "
            "equal to -1");
}

TEST(topic_config, booleans_strings_and_lists) {
  expect_valid("preallocate", "TRUE");
  expect_valid("preallocate", "false");
  EXPECT_EQ(message_of("preallocate", "yes"),
            "Invalid value yes for configuration preallocate: Expected value to be either true or false");
  expect_valid("compression.type", "zstd");
  EXPECT_EQ(
      message_of("compression.type", "brotli"),
      "Invalid value brotli for configuration compression.type: String must be one of: uncompressed, zstd, "
      "lz4, snappy, gzip, producer");
  EXPECT_FALSE(
      validate_topic_config("message.timestamp.type", "createtime").ok());  // case-sensitive, as Kafka
  expect_valid("cleanup.policy", "compact,delete");
  expect_valid("cleanup.policy", " compact , delete ");
  EXPECT_EQ(message_of("cleanup.policy", "compact,forever"),
            "Invalid value compact,forever for configuration cleanup.policy: String must be one of: compact, "
            "delete");
  expect_valid("leader.replication.throttled.replicas", "*");
  expect_valid("leader.replication.throttled.replicas", "0:1,1:2");
  expect_valid("follower.replication.throttled.replicas", "");
  EXPECT_FALSE(validate_topic_config("follower.replication.throttled.replicas", "0-1").ok());
}

TEST(topic_config, checks_across_keys) {
  EXPECT_TRUE(validate_topic_configs({}).ok());
  EXPECT_TRUE(
      validate_topic_configs({{"min.compaction.lag.ms", "10"}, {"max.compaction.lag.ms", "20"}}).ok());
  auto lag = validate_topic_configs({{"min.compaction.lag.ms", "30"}, {"max.compaction.lag.ms", "20"}});
  EXPECT_EQ(lag.code, error_code::invalid_config);
  EXPECT_EQ(lag.message,
            "conflict topic config setting min.compaction.lag.ms (30) > max.compaction.lag.ms (20)");
  auto remote = validate_topic_configs({{"remote.storage.enable", "true"}});
  EXPECT_EQ(remote.code, error_code::invalid_config);
  EXPECT_EQ(
      remote.message,
      "Tiered Storage functionality is disabled in the broker. Topic cannot be configured with remote log "
      "storage.");
  EXPECT_TRUE(validate_topic_configs({{"remote.storage.enable", "false"}}).ok());
  // LogConfig.validateNames runs before any value is parsed.
  auto names_first = validate_topic_configs({{"aaa.unknown", "1"}, {"retention.ms", "abc"}});
  EXPECT_EQ(names_first.message, "Unknown topic config name: aaa.unknown");
  auto names_first_2 = validate_topic_configs({{"cleanup.policy", "nope"}, {"zzz.unknown", "1"}});
  EXPECT_EQ(names_first_2.message, "Unknown topic config name: zzz.unknown");
}

TEST(topic_config, validate_config_value_serves_broker_keys_too) {
  topic_config_key short_key;
  short_key.name = "some.short";
  short_key.type = config_type::int16;
  short_key.min = 1;
  EXPECT_TRUE(validate_config_value(short_key, "3").ok());
  EXPECT_EQ(validate_config_value(short_key, "40000").message,
            "Invalid value 40000 for configuration some.short: Not a number of type SHORT");
  EXPECT_EQ(validate_config_value(short_key, "0").message,
            "Invalid value 0 for configuration some.short: Value must be at least 1");
}

TEST(topic_config, java_list_parsing) {
  EXPECT_TRUE(parse_config_list("").empty());
  EXPECT_TRUE(parse_config_list("   ").empty());
  EXPECT_EQ(parse_config_list("a"), (std::vector<std::string>{"a"}));
  EXPECT_EQ(parse_config_list(" a , b ,c "), (std::vector<std::string>{"a", "b", "c"}));
  EXPECT_EQ(parse_config_list("a,,b"), (std::vector<std::string>{"a", "", "b"}));
  EXPECT_EQ(join_config_list({"compact", "delete"}), "compact,delete");
  EXPECT_EQ(join_config_list({}), "");
}

const effective_topic_config& find(const std::vector<effective_topic_config>& all, std::string_view name) {
  auto it = std::find_if(all.begin(), all.end(), [&](const auto& e) { return e.key->name == name; });
  EXPECT_NE(it, all.end()) << name;
  return *it;
}

TEST(topic_config, resolve_follows_kafka_precedence_and_reports_sources) {
  metadata::metadata_image image;
  using metadata::config_resource;
  using metadata::config_resource_type;
  image.configs[config_resource{config_resource_type::topic, "orders"}] = {{"retention.ms", "1000"}};
  image.configs[config_resource{config_resource_type::broker, "1"}] = {{"log.segment.bytes", "2097152"},
                                                                       {"log.retention.ms", "5"}};
  image.configs[config_resource{config_resource_type::broker, ""}] = {{"log.segment.bytes", "4194304"},
                                                                      {"log.cleanup.policy", "compact"}};
  image.configs[config_resource{config_resource_type::broker, "2"}] = {{"min.insync.replicas", "2"}};
  const std::map<std::string, std::string> static_file{{"log.retention.bytes", "1000000"},
                                                       {"log.cleanup.policy", "delete"}};
  static_broker_config_lookup lookup = [&](std::string_view p) -> std::optional<std::string> {
    auto it = static_file.find(std::string(p));
    if (it == static_file.end()) return std::nullopt;
    return it->second;
  };

  auto all = resolve_topic_configs(image, "orders", 1, lookup);
  EXPECT_EQ(all.size(), topic_config_keys().size());
  auto check = [&](std::string_view name, const std::string& value, config_source_id source) {
    const auto& e = find(all, name);
    EXPECT_EQ(e.value, value) << name;
    EXPECT_EQ(e.source, source) << name;
  };
  check("retention.ms", "1000", config_source_id::dynamic_topic_config);       // beats broker "1"'s 5
  check("segment.bytes", "2097152", config_source_id::dynamic_broker_config);  // beats the cluster default
  check("cleanup.policy", "compact",
        config_source_id::dynamic_default_broker_config);  // beats the static file
  check("retention.bytes", "1000000", config_source_id::static_broker_config);
  check("min.insync.replicas", "1", config_source_id::default_config);  // broker "2" is another node
  check("leader.replication.throttled.replicas", "", config_source_id::default_config);

  // Another topic sees no topic override; another node sees no per-broker value.
  auto other = resolve_topic_configs(image, "payments", 2, lookup);
  EXPECT_EQ(find(other, "retention.ms").source, config_source_id::default_config);
  EXPECT_EQ(find(other, "min.insync.replicas").value, "2");
  EXPECT_EQ(find(other, "min.insync.replicas").source, config_source_id::dynamic_broker_config);
  EXPECT_EQ(find(other, "segment.bytes").value, "4194304");

  // A topic not in the image yet, with its creation overrides.
  const metadata::config_map creation{{"segment.ms", "60000"}};
  auto fresh = resolve_topic_configs(image, &creation, 1, nullptr);
  EXPECT_EQ(find(fresh, "segment.ms").value, "60000");
  EXPECT_EQ(find(fresh, "segment.ms").source, config_source_id::dynamic_topic_config);
  EXPECT_EQ(find(fresh, "retention.bytes").source, config_source_id::default_config);  // no static lookup
  EXPECT_EQ(find(fresh, "retention.bytes").value, "-1");
}

}  // namespace
}  // namespace mala::controller
