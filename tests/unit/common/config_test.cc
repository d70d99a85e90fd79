#include "mala/common/config.h"
#include "mala/common/tls_settings.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <random>

namespace mala {
namespace {

namespace fs = std::filesystem;

// A small valid combined-mode node; tests append or override keys.
constexpr std::string_view base_yaml = R"(
node.id: 1
process.roles: broker,controller
listeners: PLAINTEXT://:9092,CONTROLLER://:9093
controller.listener.names: CONTROLLER
controller.quorum.voters: 1@localhost:9093
log.dirs: /tmp/mala-test
)";

node_config load_ok(std::string_view yaml, const std::vector<std::string>& overrides = {},
                    config_format format = config_format::yaml) {
  auto r = node_config::load_from_string(yaml, format, overrides);
  if (!r.ok()) {
    ADD_FAILURE() << r.error().message;
    return std::move(node_config::load(nullptr, {}).value());
  }
  return std::move(r.value());
}

// A refused configuration as the tests check it: the key its message starts with ("key: ..."; empty for a
// file-level problem) and the message after it.
struct refusal {
  std::string key;
  std::string message;
};

refusal load_error(std::string_view yaml, const std::vector<std::string>& overrides = {},
                   config_format format = config_format::yaml) {
  auto r = node_config::load_from_string(yaml, format, overrides);
  EXPECT_FALSE(r.ok()) << "expected the configuration to be refused";
  if (r.ok()) return {};
  EXPECT_EQ(r.error().code, error_code::invalid_config);
  const std::string& message = r.error().message;
  const size_t colon = message.find(": ");
  const bool keyed = colon != std::string::npos && message.substr(0, colon).find(' ') == std::string::npos;
  if (!keyed) return {std::string(), message};
  return {message.substr(0, colon), message.substr(colon + 2)};
}

// Loading base_yaml with `overrides` fails on `key`, and the message names it.
void expect_refused(const std::vector<std::string>& overrides, std::string_view key) {
  auto err = load_error(base_yaml, overrides);
  EXPECT_EQ(err.key, key) << err.message;
  EXPECT_NE(err.message.find(key), std::string::npos) << err.message;
}

TEST(config_test, embedded_default_is_a_working_single_node) {
  auto r = node_config::load(nullptr, {});
  ASSERT_TRUE(r.ok()) << r.error().message;
  const auto& c = r.value();
  EXPECT_TRUE(c.warnings().empty());
  EXPECT_EQ(c.node_id(), 1);
  EXPECT_TRUE(c.has_role("broker"));
  EXPECT_TRUE(c.has_role("controller"));
  ASSERT_EQ(c.listeners().size(), 2u);
  EXPECT_EQ(c.listeners()[0], (listener_config{"PLAINTEXT", "", 9092, security_protocol::plaintext}));
  EXPECT_EQ(c.listeners()[1], (listener_config{"CONTROLLER", "", 9093, security_protocol::plaintext}));
  ASSERT_EQ(c.advertised_listeners().size(), 1u);
  EXPECT_EQ(c.advertised_listeners()[0],
            (listener_config{"PLAINTEXT", "localhost", 9092, security_protocol::plaintext}));
  ASSERT_EQ(c.controller_listeners().size(), 1u);
  EXPECT_EQ(c.controller_listeners()[0].port, 9093);
  EXPECT_EQ(c.inter_broker_listener_name(), "PLAINTEXT");
  ASSERT_EQ(c.quorum_voters().size(), 1u);
  EXPECT_EQ(c.quorum_voters()[0], (quorum_voter{1, "localhost", 9093}));
  EXPECT_EQ(c.log_dirs(), std::vector<std::string>{"/tmp/mala-logs"});
  EXPECT_EQ(c.num_partitions(), 1);
  EXPECT_EQ(c.offsets_topic_replication_factor(), 1);
  EXPECT_EQ(c.shards(), 0);
  EXPECT_EQ(c.log_level(), "info");
  EXPECT_FALSE(c.cluster_id().has_value());
  EXPECT_NE(embedded_default_config().find("node.id: 1"), std::string_view::npos);
}

// KIP-1066 (KafkaConfig.validateCordonedLogDirs): entries of log.dirs, or "*" alone.
TEST(config_test, cordoned_log_dirs_are_log_dirs_or_all) {
  EXPECT_EQ(load_ok(base_yaml, {"cordoned.log.dirs=/tmp/mala-test"}).get_list("cordoned.log.dirs"),
            std::optional(std::vector<std::string>{"/tmp/mala-test"}));
  load_ok(base_yaml, {"cordoned.log.dirs=*"});
  auto missing = load_error(base_yaml, {"cordoned.log.dirs=/tmp/mala-test,/elsewhere,/x"});
  EXPECT_EQ(missing.key, "cordoned.log.dirs");
  EXPECT_EQ(missing.message,
            "All entries in cordoned.log.dirs must be present in log.dirs or log.dir. Missing entries : "
            "/elsewhere,/x");
  auto star = load_error(base_yaml, {"cordoned.log.dirs=*,/tmp/mala-test"});
  EXPECT_EQ(star.message, "When cordoned.log.dirs is set to *, it must not contain other values");
}

TEST(config_test, cluster_files_load) {
  for (int n = 1; n <= 3; ++n) {
    fs::path path =
        fs::path(MALA_SOURCE_DIR) / "config" / "cluster" / ("node-" + std::to_string(n) + ".yaml");
    auto r = node_config::load(&path, {});
    ASSERT_TRUE(r.ok()) << r.error().message;
    const auto& c = r.value();
    EXPECT_TRUE(c.warnings().empty());
    EXPECT_EQ(c.node_id(), n);
    EXPECT_EQ(c.quorum_voters().size(), 3u);
    EXPECT_EQ(c.log_dirs(), std::vector<std::string>{"/tmp/mala-cluster/node-" + std::to_string(n)});
    EXPECT_EQ(c.min_insync_replicas(), 2);
    EXPECT_EQ(c.advertised_listeners().at(0).port, 9090 + 2 * n);
  }
  fs::path server = fs::path(MALA_SOURCE_DIR) / "config" / "server.yaml";
  EXPECT_TRUE(node_config::load(&server, {}).ok());
}

TEST(config_test, defaults_match_kafka) {
  auto c = load_ok(base_yaml);
  EXPECT_EQ(c.socket_request_max_bytes(), 104857600);
  EXPECT_EQ(c.connections_max_idle_ms(), 600000);
  EXPECT_EQ(c.message_max_bytes(), 1048588);
  EXPECT_EQ(c.log_segment_bytes(), 1073741824);
  EXPECT_EQ(c.num_io_threads(), 8);
  EXPECT_EQ(c.num_network_threads(), 3);
  EXPECT_EQ(c.log_index_interval_bytes(), 4096);
  EXPECT_EQ(c.log_index_size_max_bytes(), 10485760);
  EXPECT_EQ(c.log_retention_bytes(), -1);
  EXPECT_EQ(c.log_cleanup_policy(), std::vector<std::string>{"delete"});
  EXPECT_FALSE(c.unclean_leader_election_enable());
  EXPECT_TRUE(c.auto_create_topics_enable());
  EXPECT_EQ(c.replica_lag_time_max_ms(), 30000);
  EXPECT_EQ(c.replica_fetch_max_bytes(), 1048576);
  EXPECT_EQ(c.replica_fetch_wait_max_ms(), 500);
  EXPECT_EQ(c.offsets_topic_num_partitions(), 50);
  EXPECT_EQ(c.offsets_topic_replication_factor(), 3);
  EXPECT_EQ(c.offsets_retention_minutes(), 10080);
  EXPECT_EQ(c.group_initial_rebalance_delay_ms(), 3000);
  EXPECT_EQ(c.group_max_size(), 2147483647);
  EXPECT_EQ(c.broker_heartbeat_interval_ms(), 2000);
  EXPECT_EQ(c.broker_session_timeout_ms(), 9000);
  EXPECT_EQ(c.controller_quorum_election_timeout_ms(), 1000);
  EXPECT_EQ(c.controller_quorum_fetch_timeout_ms(), 2000);
  EXPECT_EQ(c.controller_quorum_election_backoff_max_ms(), 1000);
  EXPECT_EQ(c.metadata_log_max_record_bytes_between_snapshots(), 20971520);
  EXPECT_EQ(c.transaction_state_log_replication_factor(), 3);
  EXPECT_EQ(c.transaction_state_log_min_isr(), 2);
  EXPECT_FALSE(c.broker_rack().has_value());
  // No advertised.listeners: the listeners minus the controller ones, as Kafka advertises to clients.
  ASSERT_EQ(c.advertised_listeners().size(), 1u);
  EXPECT_EQ(c.advertised_listeners()[0].name, "PLAINTEXT");
}

TEST(config_test, yaml_flat_nested_and_sequence_forms_agree) {
  auto flat =
      load_ok(std::string(base_yaml) + "log.retention.hours: 5\nlog.cleanup.policy: compact,delete\n");
  auto nested = load_ok(R"(
node:
  id: 1
process:
  roles: [broker, controller]
listeners:
  - PLAINTEXT://:9092
  - CONTROLLER://:9093
controller:
  listener.names: CONTROLLER
  quorum:
    voters: ["1@localhost:9093"]
log:
  dirs: [/tmp/mala-test]
  retention: {hours: 5}
  cleanup.policy:
    - compact
    - delete
)");
  EXPECT_EQ(flat.all_values(), nested.all_values());
  EXPECT_EQ(nested.log_retention_ms(), 5 * 3600 * 1000);
  EXPECT_EQ(nested.log_cleanup_policy(), (std::vector<std::string>{"compact", "delete"}));
  EXPECT_EQ(nested.listeners().size(), 2u);
}

TEST(config_test, yaml_null_means_default_and_duplicates_are_refused) {
  auto c = load_ok(std::string(base_yaml) + "num.partitions:\n");
  EXPECT_EQ(c.num_partitions(), 1);
  auto err = load_error(std::string(base_yaml) + "log:\n  dirs: /elsewhere\n");
  EXPECT_EQ(err.key, "log.dirs");
  EXPECT_EQ(load_error("- a\n- b\n").key, "");
  EXPECT_NE(load_error("node.id: [1\n").message.find("YAML"), std::string::npos);
}

TEST(config_test, java_properties_parsing) {
  auto p = parse_java_properties(
      "# comment\n"
      "  ! another comment\n"
      "\n"
      "a=1\n"
      "b = two words \n"
      "c:3\n"
      "d 4\n"
      "listeners=PLAINTEXT://:9092,\\\n"
      "          CONTROLLER://:9093\n"
      "e=\\\n"
      "# not a comment inside a continuation\n"
      "f=tab\\there\\u0041\n"
      "g\\=h=x\n"
      "empty=\n"
      "bare\n"
      "path=C:\\\\dir\r\n"
      "last=1\\");
  std::vector<std::pair<std::string, std::string>> expected = {
      {"a", "1"},
      {"b", "two words "},
      {"c", "3"},
      {"d", "4"},
      {"listeners", "PLAINTEXT://:9092,CONTROLLER://:9093"},
      {"e", "# not a comment inside a continuation"},
      {"f",
       "tab\there"
       "A"},
      {"g=h", "x"},
      {"empty", ""},
      {"bare", ""},
      {"path", "C:\\dir"},
      {"last", "1"},
  };
  EXPECT_EQ(p, expected);
}

TEST(config_test, properties_file_loads) {
  auto path = fs::temp_directory_path() /
              ("mala-config-test-" + std::to_string(std::random_device{}()) + ".properties");
  std::ofstream(path) << "process.roles=broker,controller\n"
                         "node.id=3\n"
                         "controller.quorum.voters=3@localhost:9093\n"
                         "listeners=PLAINTEXT://:9092,\\\n"
                         "    CONTROLLER://:9093\n"
                         "controller.listener.names=CONTROLLER\n"
                         "# Kafka's stock server.properties keys\n"
                         "num.recovery.threads.per.data.dir=1\n"
                         "socket.send.buffer.bytes=102400\n"
                         "log.dirs=/tmp/a,/tmp/b\n";
  auto r = node_config::load(&path, {"num.partitions=4"});
  fs::remove(path);
  ASSERT_TRUE(r.ok()) << r.error().message;
  const auto& c = r.value();
  EXPECT_EQ(c.node_id(), 3);
  EXPECT_EQ(c.listeners().size(), 2u);
  EXPECT_EQ(c.log_dirs(), (std::vector<std::string>{"/tmp/a", "/tmp/b"}));
  EXPECT_EQ(c.num_partitions(), 4);
  EXPECT_TRUE(c.warnings().empty());

  fs::path missing = "/nonexistent/mala.yaml";
  auto err = node_config::load(&missing, {}).error();
  EXPECT_NE(err.message.find("/nonexistent/mala.yaml"), std::string::npos);
}

TEST(config_test, overrides_win_and_are_reported) {
  auto c = load_ok(std::string(base_yaml) + "num.partitions: 3\n",
                   {"num.partitions=6", "log.dirs=/x,/y", "num.partitions=7", "broker.rack= r1 "});
  EXPECT_EQ(c.num_partitions(), 7);
  EXPECT_EQ(c.log_dirs(), (std::vector<std::string>{"/x", "/y"}));
  EXPECT_EQ(c.broker_rack(), "r1");
  auto all = c.all_values();
  EXPECT_EQ(all.at("num.partitions").value, "7");
  EXPECT_EQ(all.at("num.partitions").source, config_source::override_value);
  EXPECT_EQ(all.at("node.id").source, config_source::file);
  EXPECT_EQ(all.at("num.io.threads").source, config_source::default_value);
  EXPECT_EQ(all.at("num.io.threads").value, "8");
  EXPECT_FALSE(all.at("log.retention.ms").value.has_value());
  EXPECT_EQ(all.size(), known_config_keys().size());
  EXPECT_EQ(load_error(base_yaml, {"num.partitions"}).message.find("key=value") != std::string::npos, true);
}

TEST(config_test, unknown_keys_warn) {
  auto c = load_ok(std::string(base_yaml) + "compression.typo: lz4\n", {"made.up=1"});
  ASSERT_EQ(c.warnings().size(), 2u);
  EXPECT_NE(c.warnings()[0].find("compression.typo"), std::string::npos);
  EXPECT_NE(c.warnings()[1].find("made.up"), std::string::npos);
  EXPECT_NE(c.warnings()[1].find("override"), std::string::npos);
}

TEST(config_test, generic_getters) {
  auto c = load_ok(base_yaml);
  EXPECT_EQ(c.get_int("num.partitions"), 1);
  EXPECT_EQ(c.get_long("connections.max.idle.ms"), 600000);
  EXPECT_EQ(c.get_bool("delete.topic.enable"), true);
  EXPECT_EQ(c.get_string("log.level"), "info");
  EXPECT_EQ(c.get_list("process.roles"), (std::vector<std::string>{"broker", "controller"}));
  EXPECT_FALSE(c.get_int("connections.max.idle.ms").has_value());  // a long, not an int
  EXPECT_FALSE(c.get_int("no.such.key").has_value());
  EXPECT_FALSE(c.get_long("log.retention.ms").has_value());  // null
}

TEST(config_test, time_unit_chains_resolve_like_kafka) {
  EXPECT_EQ(load_ok(base_yaml).log_retention_ms(), 168LL * 3600 * 1000);
  EXPECT_EQ(load_ok(base_yaml, {"log.retention.hours=1"}).log_retention_ms(), 3600LL * 1000);
  EXPECT_EQ(load_ok(base_yaml, {"log.retention.hours=1", "log.retention.minutes=2"}).log_retention_ms(),
            120000);
  EXPECT_EQ(load_ok(base_yaml, {"log.retention.minutes=2", "log.retention.ms=5"}).log_retention_ms(), 5);
  EXPECT_EQ(load_ok(base_yaml, {"log.retention.ms=-1"}).log_retention_ms(), -1);
  EXPECT_EQ(load_ok(base_yaml, {"log.retention.hours=-5"}).log_retention_ms(), -1);
  expect_refused({"log.retention.ms=0"}, "log.retention.ms");
  expect_refused({"log.retention.minutes=0"}, "log.retention.minutes");
  EXPECT_EQ(load_ok(base_yaml).log_roll_ms(), 168LL * 3600 * 1000);
  EXPECT_EQ(load_ok(base_yaml, {"log.roll.hours=2"}).log_roll_ms(), 2LL * 3600 * 1000);
  EXPECT_EQ(load_ok(base_yaml, {"log.roll.hours=2", "log.roll.ms=100"}).log_roll_ms(), 100);
  EXPECT_EQ(load_ok(base_yaml).log_flush_interval_ms(), INT64_MAX);
  EXPECT_EQ(load_ok(base_yaml, {"log.flush.interval.ms=1000"}).log_flush_interval_ms(), 1000);
  EXPECT_EQ(load_ok(base_yaml, {"log.dirs="}).log_dirs(),
            std::vector<std::string>{"/tmp/mala-logs"});  // log.dir
}

TEST(config_test, refuses_bad_types_and_ranges) {
  expect_refused({"node.id=abc"}, "node.id");
  expect_refused({"node.id=-1"}, "node.id");
  expect_refused({"node.id=2147483648"}, "node.id");
  expect_refused({"num.partitions=0"}, "num.partitions");
  expect_refused({"auto.create.topics.enable=yes"}, "auto.create.topics.enable");
  expect_refused({"offsets.topic.replication.factor=40000"}, "offsets.topic.replication.factor");
  expect_refused({"connections.max.idle.ms=1.5"}, "connections.max.idle.ms");
  expect_refused({"log.segment.bytes=1000"}, "log.segment.bytes");
  expect_refused({"log.cleanup.policy=delete,archive"}, "log.cleanup.policy");
  expect_refused({"log.dirs=/a,,/b"}, "log.dirs");
  expect_refused({"log.dirs=/a,/a"}, "log.dirs");
  expect_refused({"log.level=verbose"}, "log.level");
  expect_refused({"mala.shards=-1"}, "mala.shards");
  expect_refused({"cluster.id=not-a-uuid"}, "cluster.id");
  expect_refused({"replica.fetch.wait.max.ms=40000"}, "replica.fetch.wait.max.ms");
  auto err = load_error(base_yaml, {"num.partitions=x"});
  EXPECT_EQ(err.message, "Invalid value 'x' for configuration num.partitions: Not a number of type int");
}

TEST(config_test, refuses_missing_required_and_bad_roles) {
  auto err = load_error("process.roles: broker,controller\nlisteners: CONTROLLER://:9093\n");
  EXPECT_EQ(err.key, "node.id");
  EXPECT_NE(err.message.find("Missing required configuration"), std::string::npos);
  expect_refused({"process.roles="}, "process.roles");
  expect_refused({"process.roles=broker,zookeeper"}, "process.roles");
  expect_refused({"process.roles=broker,broker"}, "process.roles");
}

TEST(config_test, refuses_bad_listeners) {
  expect_refused({"listeners=PLAINTEXT://:9092,CONTROLLER://localhost"}, "listeners");
  expect_refused({"listeners=PLAINTEXT://:9092,CONTROLLER://:99999"}, "listeners");
  expect_refused({"listeners=PLAINTEXT://:9092,plaintext://:9094,CONTROLLER://:9093"}, "listeners");
  expect_refused({"listeners=PLAINTEXT://:9092,CONTROLLER://:9092"}, "listeners");  // same port
  // One IPv4 and one IPv6 listener may share a port (KIP-797).
  load_ok(base_yaml,
          {"listeners=PLAINTEXT://127.0.0.1:9092,V6://[::1]:9092,CONTROLLER://:9093",
           "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,V6:PLAINTEXT,CONTROLLER:PLAINTEXT"});
  // A listener name without a security protocol.
  expect_refused({"listeners=PLAINTEXT://:9092,INTERNAL://:9094,CONTROLLER://:9093"}, "listeners");
  // An explicit map must name the controller listener too (the implicit CONTROLLER:PLAINTEXT applies only to
  // the default map).
  expect_refused({"listener.security.protocol.map=PLAINTEXT:PLAINTEXT"}, "listeners");
  expect_refused({"process.roles=broker", "node.id=4", "listeners=PLAINTEXT://:9092",
                  "listener.security.protocol.map=PLAINTEXT:PLAINTEXT"},
                 "controller.listener.names");
  expect_refused({"listener.security.protocol.map=PLAINTEXT:TLS"}, "listener.security.protocol.map");
}

// Every security protocol is served (SASL_SSL is TLS with SASL on top); what Mala cannot provide stops the
// start: a SASL_SSL listener without a key store, SASL on controller listeners (Mala's own clients do not
// speak it), SASL settings beyond the mechanisms and JAAS users.
TEST(config_test, refuses_security_it_cannot_provide) {
  for (const char* protocol : {"SSL", "SASL_SSL"}) {
    auto err =
        load_error(base_yaml, {"listeners=PLAINTEXT://:9092,INTERNAL://:9094,CONTROLLER://:9093",
                               std::string("listener.security.protocol.map=PLAINTEXT:PLAINTEXT,INTERNAL:") +
                                   protocol + ",CONTROLLER:PLAINTEXT"});
    EXPECT_EQ(err.key, "ssl.keystore.location") << err.message;
    EXPECT_NE(err.message.find("INTERNAL"), std::string::npos) << err.message;
  }
  auto sasl_ssl = load_ok(base_yaml, {"listeners=PLAINTEXT://:9092,SASL_SSL://:9094,CONTROLLER://:9093",
                                      "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,SASL_SSL:SASL_SSL,"
                                      "CONTROLLER:PLAINTEXT",
                                      "ssl.keystore.location=/k.pem"});
  EXPECT_EQ(sasl_ssl.listeners()[1].protocol, security_protocol::sasl_ssl);
  // A broker-only node that reaches the controllers over SASL (its credentials: security/sasl_client.h).
  load_ok(base_yaml, {"process.roles=broker", "node.id=4", "listeners=PLAINTEXT://:9092",
                      "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:SASL_PLAINTEXT"});
  // Controllers and brokers over TLS are accepted (the node's own settings of those listeners).
  load_ok(base_yaml, {"process.roles=broker", "node.id=4", "listeners=PLAINTEXT://:9092",
                      "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:SSL"});
  load_ok(base_yaml, {"listeners=SSL://:9092,CONTROLLER://:9093",
                      "listener.security.protocol.map=SSL:SSL,CONTROLLER:SSL",
                      "inter.broker.listener.name=SSL", "ssl.keystore.location=/k.pem"});
  for (const char* key : {"sasl.kerberos.service.name", "listener.name.external.sasl.login.class",
                          "listener.name.external.sasl.server.max.receive.size"}) {
    auto err = load_error(base_yaml, {std::string(key) + "=x"});
    EXPECT_EQ(err.key, key) << err.message;
    EXPECT_NE(err.message.find("does not support"), std::string::npos) << err.message;
  }
  // SASL_PLAINTEXT listeners and the SASL keys Mala serves load (security/sasl_settings.h checks their
  // values).
  auto sasl = load_ok(
      base_yaml, {"listeners=PLAINTEXT://:9092,INTERNAL://:9094,CONTROLLER://:9093",
                  "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,INTERNAL:SASL_PLAINTEXT,"
                  "CONTROLLER:PLAINTEXT",
                  "sasl.enabled.mechanisms=PLAIN", "listener.name.internal.sasl.enabled.mechanisms=PLAIN",
                  "listener.name.internal.plain.sasl.jaas.config=x required;"});
  EXPECT_EQ(sasl.listeners()[1].protocol, security_protocol::sasl_plaintext);
  EXPECT_EQ(sasl.listener_setting("INTERNAL", "plain.sasl.jaas.config"), "x required;");
  EXPECT_EQ(sasl.listener_setting("internal", "sasl.enabled.mechanisms"), "PLAIN");
  EXPECT_FALSE(sasl.listener_setting("PLAINTEXT", "sasl.enabled.mechanisms"));
  // A SASL controller listener, and OAUTHBEARER's validator settings per listener, load too.
  auto oauth = load_ok(
      base_yaml, {"listeners=PLAINTEXT://:9092,INTERNAL://:9094,CONTROLLER://:9093",
                  "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,INTERNAL:SASL_PLAINTEXT,"
                  "CONTROLLER:SASL_PLAINTEXT",
                  "sasl.mechanism.controller.protocol=PLAIN",
                  "listener.name.internal.oauthbearer.sasl.server.callback.handler.class=x.Handler",
                  "listener.name.internal.oauthbearer.sasl.oauthbearer.jwks.endpoint.url=file:///k.json",
                  "listener.name.internal.sasl.oauthbearer.expected.audience=kafka",
                  "sasl.oauthbearer.clock.skew.seconds=5"});
  EXPECT_EQ(oauth.listener_setting("INTERNAL", "oauthbearer.sasl.oauthbearer.jwks.endpoint.url"),
            "file:///k.json");
  EXPECT_EQ(oauth.get_int("sasl.oauthbearer.clock.skew.seconds"), 5);
  auto unknown = load_ok(base_yaml, {"listener.name.internal.oauthbearer.sasl.oauthbearer.no.such.key=1"});
  EXPECT_FALSE(unknown.warnings().empty());
  // Other unknown keys stay warnings, as before.
  auto ok = load_ok(base_yaml, {"listener.name.internal.max.connections=5"});
  EXPECT_FALSE(ok.warnings().empty());
}

// The PLAINTEXT listener for brokers, an SSL one for clients.
const std::vector<std::string> ssl_listener = {
    "listeners=PLAINTEXT://:9092,SSL://:9094,CONTROLLER://:9093",
    "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,SSL:SSL,CONTROLLER:PLAINTEXT"};

std::vector<std::string> with_ssl(std::vector<std::string> extra) {
  auto all = ssl_listener;
  all.insert(all.end(), extra.begin(), extra.end());
  return all;
}

TEST(config_test, ssl_listener_settings) {
  auto config = load_ok(base_yaml, with_ssl({"ssl.keystore.location=/etc/k.pem", "ssl.client.auth=required",
                                             "ssl.truststore.location=/etc/ca.pem",
                                             "ssl.principal.mapping.rules=RULE:^CN=(.*?),.*$/$1/,DEFAULT"}));
  auto ssl = std::find_if(config.listeners().begin(), config.listeners().end(),
                          [](auto& l) { return l.name == "SSL"; });
  ASSERT_NE(ssl, config.listeners().end());
  EXPECT_EQ(ssl->protocol, security_protocol::ssl);
  auto tls = tls_settings_for(config, "SSL");
  EXPECT_EQ(tls.keystore_location, "/etc/k.pem");
  EXPECT_EQ(tls.keystore_type, "PEM");
  EXPECT_EQ(tls.truststore_location, "/etc/ca.pem");
  EXPECT_EQ(tls.client_auth, ssl_client_auth::required);
  EXPECT_EQ(tls.enabled_protocols, (std::vector<std::string>{"TLSv1.2", "TLSv1.3"}));
  EXPECT_EQ(tls.endpoint_identification_algorithm, "https");
  EXPECT_EQ(tls.key_name("ssl.keystore.location"), "ssl.keystore.location");
  // Passwords are hidden as Kafka's.
  auto hidden =
      load_ok(base_yaml, with_ssl({"ssl.keystore.location=/etc/k.p12", "ssl.keystore.password=s3cret"}));
  EXPECT_EQ(tls_settings_for(hidden, "SSL").keystore_type, "PKCS12");  // from the file name
  EXPECT_EQ(tls_settings_for(hidden, "SSL").keystore_password, "s3cret");
  EXPECT_EQ(hidden.all_values().at("ssl.keystore.password").value, "[hidden]");

  // A listener's override wins over the listener-less key, and is named in errors.
  auto overridden = load_ok(base_yaml, with_ssl({"ssl.keystore.location=/etc/k.pem",
                                                 "listener.name.ssl.ssl.keystore.location=/etc/ssl-k.pem",
                                                 "listener.name.ssl.ssl.client.auth=requested"}));
  auto o = tls_settings_for(overridden, "SSL");
  EXPECT_EQ(o.keystore_location, "/etc/ssl-k.pem");
  EXPECT_EQ(o.client_auth, ssl_client_auth::requested);
  EXPECT_EQ(o.key_name("ssl.keystore.location"), "listener.name.ssl.ssl.keystore.location");
  EXPECT_TRUE(overridden.warnings().empty());
  // An ssl.* setting without an SSL listener is accepted (and unused), as Kafka's.
  load_ok(base_yaml, {"ssl.keystore.location=/etc/k.pem"});
}

TEST(config_test, refuses_bad_ssl_settings) {
  auto refused = [](std::vector<std::string> extra, std::string_view key, std::string_view says = "") {
    auto err = load_error(base_yaml, with_ssl(std::move(extra)));
    EXPECT_EQ(err.key, key) << err.message;
    EXPECT_NE(err.message.find(says), std::string::npos) << err.message;
  };
  refused({}, "ssl.keystore.location", "required");
  refused({"listener.name.ssl.ssl.keystore.type=PEM"}, "ssl.keystore.location", "required");
  refused({"ssl.keystore.location=/k.jks", "ssl.keystore.type=JKS"}, "ssl.keystore.type", "JKS");
  refused({"ssl.keystore.location=/k", "listener.name.ssl.ssl.keystore.type=JKS"},
          "listener.name.ssl.ssl.keystore.type", "JKS");
  refused({"ssl.keystore.location=/k", "ssl.truststore.type=JKS"}, "ssl.truststore.type", "JKS");
  refused({"ssl.keystore.certificate.chain=x"}, "ssl.keystore.key", "required");
  refused({"ssl.keystore.location=/k", "ssl.keystore.key=x", "ssl.keystore.certificate.chain=y"},
          "ssl.keystore.location", "both");
  auto bad_value = load_error(base_yaml, with_ssl({"ssl.keystore.location=/k", "ssl.client.auth=sometimes"}));
  EXPECT_NE(bad_value.message.find("ssl.client.auth"), std::string::npos) << bad_value.message;
  refused({"ssl.keystore.location=/k", "listener.name.ssl.ssl.client.auth=sometimes"},
          "listener.name.ssl.ssl.client.auth");
  refused({"ssl.keystore.location=/k", "ssl.enabled.protocols=SSLv3"}, "ssl.enabled.protocols", "SSLv3");
  refused({"ssl.keystore.location=/k", "ssl.principal.mapping.rules=RULE:^CN=(.*$/$1/"},
          "ssl.principal.mapping.rules", "Invalid rule");
}

TEST(config_test, refuses_bad_advertised_listeners) {
  expect_refused({"advertised.listeners=OTHER://localhost:9092"}, "advertised.listeners");
  expect_refused({"advertised.listeners=PLAINTEXT://0.0.0.0:9092"}, "advertised.listeners");
  expect_refused({"advertised.listeners=PLAINTEXT://h:9092,CONTROLLER://h:9093"}, "advertised.listeners");
  expect_refused({"advertised.listeners=PLAINTEXT://h"}, "advertised.listeners");
  // Every listener a controller listener: nothing to advertise to clients.
  expect_refused({"listeners=CONTROLLER://:9093"}, "advertised.listeners");
  auto c = load_ok(base_yaml, {"advertised.listeners=PLAINTEXT://[2001:db8::1]:19092"});
  EXPECT_EQ(c.advertised_listeners()[0].host, "2001:db8::1");
  EXPECT_EQ(format_listener(c.advertised_listeners()[0]), "PLAINTEXT://[2001:db8::1]:19092");
}

TEST(config_test, controller_requirements_follow_kafka) {
  // A controller needs a listener named in controller.listener.names.
  expect_refused({"controller.listener.names=",
                  "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT"},
                 "controller.listener.names");
  expect_refused({"controller.listener.names=CTRL",
                  "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT,CTRL:PLAINTEXT"},
                 "controller.listener.names");
  // And must be one of the voters.
  expect_refused({"controller.quorum.voters=2@localhost:9093"}, "controller.quorum.voters");
  expect_refused({"controller.quorum.voters="}, "controller.quorum.voters");
  expect_refused({"controller.quorum.voters=1@localhost"}, "controller.quorum.voters");
  expect_refused({"controller.quorum.bootstrap.servers=localhost"}, "controller.quorum.bootstrap.servers");
  // KIP-853: bootstrap servers instead of static voters.
  auto dynamic =
      load_ok(base_yaml, {"controller.quorum.voters=", "controller.quorum.bootstrap.servers=localhost:9093"});
  EXPECT_EQ(dynamic.quorum_bootstrap_servers(), (std::vector<host_port>{{"localhost", 9093}}));

  // Controller only: only controller listeners, no advertised.listeners.
  load_ok(base_yaml, {"process.roles=controller", "listeners=CONTROLLER://:9093"});
  expect_refused({"process.roles=controller"}, "listeners");
  expect_refused(
      {"process.roles=controller", "listeners=CONTROLLER://:9093", "advertised.listeners=CONTROLLER://h:1"},
      "advertised.listeners");

  // Broker only: not a voter, controller listener not among listeners but mapped.
  auto broker = load_ok(base_yaml, {"process.roles=broker", "node.id=4", "listeners=PLAINTEXT://:9092"});
  EXPECT_TRUE(broker.controller_listeners().empty());
  EXPECT_EQ(broker.controller_listener_names(), std::vector<std::string>{"CONTROLLER"});
  expect_refused({"process.roles=broker", "listeners=PLAINTEXT://:9092"}, "node.id");
  expect_refused({"process.roles=broker", "node.id=4"}, "controller.listener.names");
}

TEST(config_test, inter_broker_listener) {
  auto c = load_ok(
      base_yaml,
      {"listeners=PLAINTEXT://:9092,REPLICATION://:9094,CONTROLLER://:9093",
       "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,REPLICATION:PLAINTEXT,CONTROLLER:PLAINTEXT",
       "inter.broker.listener.name=replication"});
  EXPECT_EQ(c.inter_broker_listener_name(), "REPLICATION");
  expect_refused({"inter.broker.listener.name=NOPE"}, "inter.broker.listener.name");
  expect_refused({"inter.broker.listener.name=CONTROLLER"}, "inter.broker.listener.name");
  expect_refused({"inter.broker.listener.name=PLAINTEXT", "security.inter.broker.protocol=PLAINTEXT"},
                 "inter.broker.listener.name");
  expect_refused({"security.inter.broker.protocol=SSL"}, "inter.broker.listener.name");  // no SSL listener
}

TEST(config_test, key_table_covers_the_documented_keys) {
  for (std::string_view name : {"node.id",
                                "process.roles",
                                "listeners",
                                "advertised.listeners",
                                "listener.security.protocol.map",
                                "inter.broker.listener.name",
                                "controller.listener.names",
                                "controller.quorum.voters",
                                "controller.quorum.bootstrap.servers",
                                "controller.quorum.election.timeout.ms",
                                "controller.quorum.fetch.timeout.ms",
                                "controller.quorum.election.backoff.max.ms",
                                "log.dirs",
                                "log.dir",
                                "num.partitions",
                                "default.replication.factor",
                                "min.insync.replicas",
                                "auto.create.topics.enable",
                                "socket.request.max.bytes",
                                "connections.max.idle.ms",
                                "num.network.threads",
                                "num.io.threads",
                                "message.max.bytes",
                                "log.segment.bytes",
                                "log.roll.ms",
                                "log.roll.hours",
                                "log.retention.ms",
                                "log.retention.minutes",
                                "log.retention.hours",
                                "log.retention.bytes",
                                "log.index.interval.bytes",
                                "log.index.size.max.bytes",
                                "log.flush.interval.messages",
                                "log.flush.interval.ms",
                                "log.cleanup.policy",
                                "unclean.leader.election.enable",
                                "replica.lag.time.max.ms",
                                "replica.fetch.max.bytes",
                                "replica.fetch.wait.max.ms",
                                "replica.fetch.min.bytes",
                                "num.replica.fetchers",
                                "offsets.topic.num.partitions",
                                "offsets.topic.replication.factor",
                                "offsets.retention.minutes",
                                "group.initial.rebalance.delay.ms",
                                "group.max.size",
                                "broker.heartbeat.interval.ms",
                                "broker.session.timeout.ms",
                                "broker.rack",
                                "metadata.log.max.record.bytes.between.snapshots",
                                "auto.leader.rebalance.enable",
                                "delete.topic.enable",
                                "transaction.state.log.replication.factor",
                                "transaction.state.log.min.isr",
                                "cluster.id",
                                "mala.shards",
                                "log.level"}) {
    const auto* key = find_config_key(name);
    ASSERT_NE(key, nullptr) << name;
    EXPECT_FALSE(key->doc.empty()) << name;
  }
  EXPECT_EQ(describe_valid_values(*find_config_key("num.partitions")), "[1,...]");
  EXPECT_EQ(describe_valid_values(*find_config_key("process.roles")), "[broker, controller]");
  EXPECT_EQ(to_string(find_config_key("connections.max.idle.ms")->type), "long");
  EXPECT_EQ(to_string(find_config_key("listeners")->update_mode), "per-broker");
  auto keys = known_config_keys();
  EXPECT_TRUE(std::is_sorted(keys.begin(), keys.end(), [](auto& a, auto& b) { return a.name < b.name; }));
}

}  // namespace
}  // namespace mala

namespace mala {
namespace {

TEST(config_test, every_key_is_documented) {
  std::ifstream in(std::filesystem::path(MALA_SOURCE_DIR) / "docs" / "configuration.md");
  ASSERT_TRUE(in.good());
  std::string docs((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  for (const auto& key : known_config_keys()) {
    EXPECT_NE(docs.find("| `" + std::string(key.name) + "` |"), std::string::npos)
        << key.name << " is missing from docs/configuration.md";
  }
}

}  // namespace
}  // namespace mala
