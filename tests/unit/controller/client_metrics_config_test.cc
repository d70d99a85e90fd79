#include "mala/controller/client_metrics_config.h"

#include <gtest/gtest.h>

namespace mala::controller {
namespace {

TEST(client_metrics_config, parses_a_subscription) {
  auto s = parse_client_metrics_configs(
      "sub", {{"metrics", "org.apache.kafka.producer., org.apache.kafka.consumer."},
              {"interval.ms", "1000"},
              {"match", "client_id=app-.*, client_software_name=apache-kafka-java"}});
  ASSERT_TRUE(s.ok()) << s.error().message;
  EXPECT_EQ(s->name, "sub");
  EXPECT_EQ(s->metrics,
            (std::vector<std::string>{"org.apache.kafka.producer.", "org.apache.kafka.consumer."}));
  EXPECT_EQ(s->interval_ms, 1000);
  ASSERT_EQ(s->match.size(), 2u);
  EXPECT_TRUE(s->matches({{"client_id", "app-1"}, {"client_software_name", "apache-kafka-java"}}));
  // Java's Matcher.matches: the whole value.
  EXPECT_FALSE(s->matches({{"client_id", "my-app-1"}, {"client_software_name", "apache-kafka-java"}}));
  EXPECT_FALSE(s->matches({{"client_id", "app-1"}}));  // an attribute the client lacks does not match
  EXPECT_FALSE(s->matches({{"client_id", "app-" + std::string(2000, 'x')},
                           {"client_software_name", "apache-kafka-java"}}));  // too long to try

  auto defaults = parse_client_metrics_configs("d", {});
  ASSERT_TRUE(defaults.ok());
  EXPECT_EQ(defaults->interval_ms, client_metrics_default_interval_ms);
  EXPECT_TRUE(defaults->metrics.empty());
  EXPECT_TRUE(defaults->matches({}));  // no match entry: every client
}

TEST(client_metrics_config, refuses_what_kafka_refuses) {
  struct refusal {
    std::string name;
    metadata::config_map configs;
    error_code code;
    std::string message;
  };
  const std::vector<refusal> cases{
      {"", {}, error_code::invalid_request, "Subscription name can't be empty"},
      {"s", {{"metric", "a"}}, error_code::invalid_request, "Unknown client metrics configuration: metric"},
      {"s",
       {{"interval.ms", "abc"}},
       error_code::invalid_config,
       "Invalid value abc for configuration interval.ms: Not a number of type INT"},
      {"s",
       {{"interval.ms", "99"}},
       error_code::invalid_request,
       "Invalid value 99 for interval.ms, interval must be between 100 and 3600000 (1 hour)"},
      {"s",
       {{"interval.ms", "3600001"}},
       error_code::invalid_request,
       "Invalid value 3600001 for interval.ms, interval must be between 100 and 3600000 (1 hour)"},
      {"s",
       {{"metrics", "a,a"}},
       error_code::invalid_config,
       "Configuration 'metrics' values must not be duplicated."},
      {"s",
       {{"metrics", "a,,b"}},
       error_code::invalid_config,
       "Configuration 'metrics' values must not be empty."},
      {"s",
       {{"match", "client_id"}},
       error_code::invalid_config,
       "Illegal client matching pattern: client_id"},
      {"s",
       {{"match", "client_id=a=b"}},
       error_code::invalid_config,
       "Illegal client matching pattern: client_id=a=b"},
      {"s", {{"match", "rack=a"}}, error_code::invalid_config, "Illegal client matching pattern: rack=a"},
      {"s",
       {{"match", "client_id=(a"}},
       error_code::invalid_config,
       "Illegal client matching pattern: client_id=(a"},
  };
  for (const auto& c : cases) {
    auto r = parse_client_metrics_configs(c.name, c.configs);
    ASSERT_FALSE(r.ok()) << c.message;
    EXPECT_EQ(r.error().code, c.code) << c.message;
    EXPECT_EQ(r.error().message, c.message);
  }
}

}  // namespace
}  // namespace mala::controller
