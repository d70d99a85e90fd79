// ConfigurationControlManager directly, on a plain image: the resource checks the broker and the controller
// share (check_alter_configs_resources), the configs of a new topic, and both AlterConfigs flavours'
// records and refusals.
#include "mala/controller/configuration_control.h"

#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <vector>

#include "image_writer.h"

namespace mala::controller {
namespace {

using incremental_request = protocol::incremental_alter_configs_request;
using legacy_request = protocol::alter_configs_request;

incremental_request::alter_configs_resource incremental_resource(
    int8_t type, const std::string& name,
    const std::vector<std::tuple<std::string, int8_t, std::optional<std::string>>>& configs) {
  incremental_request::alter_configs_resource r;
  r.resource_type = type;
  r.resource_name = name;
  for (const auto& [key, op, value] : configs) {
    incremental_request::alterable_config c;
    c.name = key;
    c.config_operation = op;
    c.value = value;
    r.configs.push_back(c);
  }
  return r;
}

auto no_local = [](const auto&) -> std::optional<status> { return std::nullopt; };

TEST(check_alter_configs_resources, repeated_resources_keys_and_null_values) {
  std::vector<incremental_request::alter_configs_resource> resources{
      incremental_resource(config_resource_topic, "a", {{"retention.ms", config_op_set, "1"}}),
      incremental_resource(config_resource_topic, "b",
                           {{"x", config_op_set, "1"}, {"x", config_op_set, "2"}}),
      incremental_resource(config_resource_topic, "a", {}),
      incremental_resource(config_resource_topic, "c",
                           {{"x", config_op_set, std::nullopt}, {"y", config_op_set, std::nullopt}}),
      incremental_resource(config_resource_topic, "d", {{"x", config_op_delete, std::nullopt}}),
  };
  const auto verdict = check_alter_configs_resources(resources, alter_configs_check_rules{}, no_local);
  ASSERT_EQ(verdict.size(), 5u);
  ASSERT_TRUE(verdict[0] && verdict[2]);
  EXPECT_EQ(verdict[0]->message, "Each resource must appear at most once.");
  EXPECT_EQ(verdict[2]->message, "Each resource must appear at most once.");
  ASSERT_TRUE(verdict[1]);
  EXPECT_EQ(verdict[1]->code, error_code::invalid_request);
  EXPECT_EQ(verdict[1]->message, "Error due to duplicate config keys");
  ASSERT_TRUE(verdict[3]);
  EXPECT_EQ(verdict[3]->message, "Null value not supported for : x, y");
  EXPECT_FALSE(verdict[4]);  // DELETE carries no value
}

TEST(check_alter_configs_resources, broker_names_and_resource_types_by_who_checks) {
  std::vector<incremental_request::alter_configs_resource> resources{
      incremental_resource(config_resource_broker, "", {}),
      incremental_resource(config_resource_broker, "1", {}),
      incremental_resource(config_resource_broker, "2", {}),
      incremental_resource(config_resource_broker, "x", {}),
      incremental_resource(config_resource_group, "g", {}),
      incremental_resource(config_resource_client_metrics, "m", {}),
      incremental_resource(config_resource_broker_logger, "1", {}),
  };
  // The controller: any node id; groups are unknown to it, client metrics subscriptions it stores.
  auto verdict = check_alter_configs_resources(resources, alter_configs_check_rules{}, no_local);
  EXPECT_FALSE(verdict[0]);
  EXPECT_FALSE(verdict[1]);
  EXPECT_FALSE(verdict[2]);
  ASSERT_TRUE(verdict[3]);
  EXPECT_EQ(verdict[3]->message, "Node id must be an integer, but it is: x");
  ASSERT_TRUE(verdict[4] && verdict[6]);
  EXPECT_EQ(verdict[4]->message, "Unknown resource type 32");
  EXPECT_FALSE(verdict[5]);
  EXPECT_EQ(verdict[6]->message, "Unknown resource type 8");

  // The broker that received the request: its own id only; groups and client metrics go on; BROKER_LOGGER
  // answered locally.
  alter_configs_check_rules broker_rules{.check_broker_names = true, .this_node = 1, .pass_group = true};
  auto local = [](const incremental_request::alter_configs_resource& r) -> std::optional<status> {
    if (r.resource_type != config_resource_broker_logger) return std::nullopt;
    return status::success();
  };
  verdict = check_alter_configs_resources(resources, broker_rules, local);
  EXPECT_FALSE(verdict[0]);
  EXPECT_FALSE(verdict[1]);
  ASSERT_TRUE(verdict[2]);
  EXPECT_EQ(verdict[2]->message, "Unexpected broker id, expected 1, but received 2");
  EXPECT_FALSE(verdict[4]);
  EXPECT_FALSE(verdict[5]);
  ASSERT_TRUE(verdict[6]);
  EXPECT_TRUE(verdict[6]->ok());

  // A request another node forwarded: its names were checked there.
  verdict = check_alter_configs_resources(resources, alter_configs_check_rules{.check_broker_names = false},
                                          no_local);
  EXPECT_FALSE(verdict[3]);
}

TEST(configuration_control, java_integer_parsing) {
  EXPECT_EQ(parse_java_int("42"), 42);
  EXPECT_EQ(parse_java_int("+42"), 42);
  EXPECT_EQ(parse_java_int("-7"), -7);
  EXPECT_EQ(parse_java_int("+-7"), std::nullopt);
  EXPECT_EQ(parse_java_int("2147483648"), std::nullopt);
  EXPECT_EQ(parse_java_int(""), std::nullopt);
  EXPECT_EQ(parse_java_int("1x"), std::nullopt);
  EXPECT_EQ(parse_config_long("2147483648"), 2147483648);
}

TEST(configuration_control, new_topic_configs_refuse_nulls_and_bad_values) {
  using config = protocol::create_topics_request::creatable_topic_config;
  auto ok = new_topic_configs({config{"retention.ms", "5"}, config{"retention.ms", "6"}});
  ASSERT_TRUE(ok.ok());
  EXPECT_EQ(ok->at("retention.ms"), "6");  // the last value wins
  auto nulls = new_topic_configs({config{"a", std::nullopt}, config{"b", std::nullopt}});
  ASSERT_FALSE(nulls.ok());
  EXPECT_EQ(nulls.error().code, error_code::invalid_config);
  EXPECT_EQ(nulls.error().message, "Null value not supported for topic configs: a,b");
  auto bad = new_topic_configs({config{"retention.ms", "abc"}});
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().code, error_code::invalid_config);
}

class configuration_control_test : public ::testing::Test {
 protected:
  void SetUp() override {
    protocol::topic_record t;
    t.name = "t";
    t.topic_id = uuid::random();
    ASSERT_TRUE(_writer.write({versioned(t, record_v0)}).ok());
  }

  image_writer _writer;
  int _follow_ups = 0;
  configuration_control _configs{_writer, 1, nullptr,
                                 [this](const metadata::metadata_image&, record_list&) { ++_follow_ups; }};
};

TEST_F(configuration_control_test, incremental_changes_write_config_records) {
  incremental_request request;
  request.resources.push_back(incremental_resource(
      config_resource_topic, "t",
      {{"retention.ms", config_op_set, "1000"}, {"cleanup.policy", config_op_append, "compact"}}));
  auto response = _configs.incremental_alter_configs(request);
  ASSERT_EQ(response.responses.size(), 1u);
  EXPECT_EQ(response.responses[0].error_code, 0);
  EXPECT_EQ(response.responses[0].error_message, std::nullopt);
  const auto* configs = _writer.image()->find_configs(metadata::config_resource_type::topic, "t");
  ASSERT_NE(configs, nullptr);
  EXPECT_EQ(configs->at("retention.ms"), "1000");
  EXPECT_EQ(configs->at("cleanup.policy"), "delete,compact");
  EXPECT_EQ(_follow_ups, 1);

  // SUBTRACT, then DELETE.
  request.resources[0] = incremental_resource(
      config_resource_topic, "t",
      {{"cleanup.policy", config_op_subtract, "delete"}, {"retention.ms", config_op_delete, std::nullopt}});
  response = _configs.incremental_alter_configs(request);
  EXPECT_EQ(response.responses[0].error_code, 0);
  configs = _writer.image()->find_configs(metadata::config_resource_type::topic, "t");
  EXPECT_EQ(configs->at("cleanup.policy"), "compact");
  EXPECT_FALSE(configs->contains("retention.ms"));
}

TEST_F(configuration_control_test, refusals_write_nothing) {
  const size_t batches = _writer.batches.size();
  incremental_request request;
  request.resources.push_back(
      incremental_resource(config_resource_topic, "missing", {{"retention.ms", config_op_set, "1"}}));
  request.resources.push_back(
      incremental_resource(config_resource_topic, "t", {{"retention.ms", config_op_append, "1"}}));
  request.resources.push_back(
      incremental_resource(config_resource_broker, "", {{"log.dirs", config_op_set, "/x"}}));
  auto response = _configs.incremental_alter_configs(request);
  ASSERT_EQ(response.responses.size(), 3u);
  EXPECT_EQ(response.responses[0].error_code, to_wire(error_code::unknown_topic_or_partition));
  EXPECT_EQ(response.responses[0].error_message, "The topic 'missing' does not exist.");
  EXPECT_EQ(response.responses[1].error_code, to_wire(error_code::invalid_config));
  EXPECT_EQ(response.responses[1].error_message,
            "Can't APPEND to key retention.ms because its type is not LIST.");
  EXPECT_EQ(response.responses[2].error_code, to_wire(error_code::invalid_request));
  EXPECT_EQ(response.responses[2].error_message, "Cannot update these configs dynamically: Set(log.dirs)");
  EXPECT_EQ(_writer.batches.size(), batches);
}

// CLIENT_METRICS subscriptions (kafka-client-metrics.sh --alter / --delete): stored as ConfigRecords,
// checked whole after the change, list operations on `metrics` and `match`, and gone once every key is.
TEST_F(configuration_control_test, client_metrics_subscriptions_are_stored_and_checked) {
  incremental_request request;
  request.resources.push_back(incremental_resource(
      config_resource_client_metrics, "sub",
      {{"metrics", config_op_set, "org.apache.kafka.producer."}, {"interval.ms", config_op_set, "1000"}}));
  auto response = _configs.incremental_alter_configs(request);
  ASSERT_EQ(response.responses.size(), 1u);
  EXPECT_EQ(response.responses[0].error_code, 0);
  const auto* configs = _writer.image()->find_configs(metadata::config_resource_type::client_metrics, "sub");
  ASSERT_NE(configs, nullptr);
  EXPECT_EQ(configs->at("metrics"), "org.apache.kafka.producer.");
  EXPECT_EQ(configs->at("interval.ms"), "1000");

  request.resources[0] = incremental_resource(config_resource_client_metrics, "sub",
                                              {{"metrics", config_op_append, "org.apache.kafka.consumer."}});
  EXPECT_EQ(_configs.incremental_alter_configs(request).responses[0].error_code, 0);
  configs = _writer.image()->find_configs(metadata::config_resource_type::client_metrics, "sub");
  EXPECT_EQ(configs->at("metrics"), "org.apache.kafka.producer.,org.apache.kafka.consumer.");

  const size_t batches = _writer.batches.size();
  request.resources[0] =
      incremental_resource(config_resource_client_metrics, "sub", {{"interval.ms", config_op_set, "50"}});
  response = _configs.incremental_alter_configs(request);
  EXPECT_EQ(response.responses[0].error_code, to_wire(error_code::invalid_request));
  EXPECT_EQ(response.responses[0].error_message,
            "Invalid value 50 for interval.ms, interval must be between 100 and 3600000 (1 hour)");
  request.resources[0] =
      incremental_resource(config_resource_client_metrics, "sub", {{"match", config_op_set, "rack=x"}});
  EXPECT_EQ(_configs.incremental_alter_configs(request).responses[0].error_code,
            to_wire(error_code::invalid_config));
  request.resources[0] =
      incremental_resource(config_resource_client_metrics, "sub", {{"interval.ms", config_op_append, "1"}});
  EXPECT_EQ(_configs.incremental_alter_configs(request).responses[0].error_code,
            to_wire(error_code::invalid_config));
  EXPECT_EQ(_writer.batches.size(), batches);

  request.resources[0] = incremental_resource(
      config_resource_client_metrics, "sub",
      {{"metrics", config_op_delete, std::nullopt}, {"interval.ms", config_op_delete, std::nullopt}});
  EXPECT_EQ(_configs.incremental_alter_configs(request).responses[0].error_code, 0);
  EXPECT_EQ(_writer.image()->find_configs(metadata::config_resource_type::client_metrics, "sub"), nullptr);
}

// KIP-1066: cordoned.log.dirs is dynamic per broker only, a list without repeats, "*" alone.
TEST_F(configuration_control_test, cordoned_log_dirs_are_per_broker) {
  protocol::feature_level_record mv;
  mv.name = "metadata.version";
  mv.feature_level = 33;
  ASSERT_TRUE(_writer.write({versioned(mv, record_v0)}).ok());
  auto alter = [this](const std::string& broker, const std::string& value) {
    incremental_request request;
    request.resources.push_back(
        incremental_resource(config_resource_broker, broker, {{"cordoned.log.dirs", config_op_set, value}}));
    return _configs.incremental_alter_configs(request).responses.at(0);
  };
  EXPECT_EQ(alter("2", "*").error_code, 0);
  EXPECT_EQ(
      _writer.image()->find_configs(metadata::config_resource_type::broker, "2")->at("cordoned.log.dirs"),
      "*");
  const auto cluster = alter("", "*");
  EXPECT_EQ(cluster.error_code, to_wire(error_code::invalid_request));
  EXPECT_EQ(cluster.error_message,
            "Cannot update these configs at default cluster level, broker id must be specified: "
            "Set(cordoned.log.dirs)");
  EXPECT_EQ(alter("2", "/a,/a").error_message,
            "Configuration 'cordoned.log.dirs' values must not be duplicated.");
  EXPECT_EQ(alter("2", "*,/a").error_message,
            "When cordoned.log.dirs is set to *, it must not contain other values");
}

// An SSL listener's key and trust stores change per broker (Kafka's reconfigurable SSL configs); not at the
// cluster default, and not the listener's other TLS settings.
TEST_F(configuration_control_test, listener_key_stores_are_dynamic_per_broker) {
  incremental_request request;
  request.resources.push_back(incremental_resource(
      config_resource_broker, "1", {{"listener.name.ssl.ssl.keystore.location", config_op_set, "/new.pem"}}));
  request.resources.push_back(incremental_resource(
      config_resource_broker, "", {{"listener.name.ssl.ssl.keystore.location", config_op_set, "/new.pem"}}));
  auto response = _configs.incremental_alter_configs(request);
  ASSERT_EQ(response.responses.size(), 2u);
  EXPECT_EQ(response.responses[0].error_code, 0) << response.responses[0].error_message.value_or("");
  EXPECT_EQ(response.responses[1].error_code, to_wire(error_code::invalid_request));
  EXPECT_EQ(response.responses[1].error_message,
            "Cannot update these configs at default cluster level, broker id must be specified: "
            "Set(listener.name.ssl.ssl.keystore.location)");
  incremental_request other;
  other.resources.push_back(incremental_resource(
      config_resource_broker, "1", {{"listener.name.ssl.ssl.client.auth", config_op_set, "required"}}));
  response = _configs.incremental_alter_configs(other);
  ASSERT_EQ(response.responses.size(), 1u);
  EXPECT_EQ(response.responses[0].error_code, to_wire(error_code::invalid_request));
  const auto* configs = _writer.image()->find_configs(metadata::config_resource_type::broker, "1");
  ASSERT_NE(configs, nullptr);
  EXPECT_EQ(configs->at("listener.name.ssl.ssl.keystore.location"), "/new.pem");
}

TEST_F(configuration_control_test, a_failed_write_answers_every_resource) {
  _writer.fail_writes = true;
  incremental_request request;
  request.resources.push_back(
      incremental_resource(config_resource_topic, "t", {{"retention.ms", config_op_set, "1"}}));
  request.resources.push_back(incremental_resource(config_resource_group, "g", {}));
  auto response = _configs.incremental_alter_configs(request);
  ASSERT_EQ(response.responses.size(), 2u);
  for (const auto& r : response.responses) EXPECT_EQ(r.error_code, to_wire(error_code::not_controller));
}

TEST_F(configuration_control_test, legacy_alter_configs_replaces_every_override) {
  incremental_request first;
  first.resources.push_back(
      incremental_resource(config_resource_topic, "t", {{"retention.ms", config_op_set, "1"}}));
  _configs.incremental_alter_configs(first);

  legacy_request request;
  auto& resource = request.resources.emplace_back();
  resource.resource_type = config_resource_topic;
  resource.resource_name = "t";
  auto& c = resource.configs.emplace_back();
  c.name = "segment.ms";
  c.value = "60000";
  auto response = _configs.alter_configs(request);
  EXPECT_EQ(response.responses.at(0).error_code, 0);
  const auto* configs = _writer.image()->find_configs(metadata::config_resource_type::topic, "t");
  ASSERT_NE(configs, nullptr);
  EXPECT_EQ(configs->size(), 1u);
  EXPECT_EQ(configs->at("segment.ms"), "60000");
}

TEST_F(configuration_control_test, broker_thread_pools_may_at_most_halve_or_double) {
  EXPECT_TRUE(_configs.validate_broker_configs("", {{"num.io.threads", "16"}}).ok());
  const api_error e = _configs.validate_broker_configs("", {{"num.io.threads", "17"}});
  EXPECT_EQ(e.code, error_code::invalid_request);
  EXPECT_EQ(e.message,
            "Dynamic thread count update validation failed for num.io.threads=17, value should not be "
            "greater than double the current value 8");
}

}  // namespace
}  // namespace mala::controller
