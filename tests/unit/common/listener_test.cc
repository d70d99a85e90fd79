#include "mala/common/listener.h"

#include <gtest/gtest.h>

namespace mala {
namespace {

template <typename T>
T ok(result<T> r) {
  if (!r.ok()) ADD_FAILURE() << r.error().message;
  return r.ok() ? std::move(r.value()) : T{};
}

template <typename T>
std::string fails(result<T> r) {
  EXPECT_FALSE(r.ok());
  if (r.ok()) return "";
  EXPECT_EQ(r.error().code, error_code::invalid_config);
  return r.error().message;
}

TEST(listener_test, parses_kafka_listener_list) {
  auto l = ok(parse_listeners("PLAINTEXT://:9092,CONTROLLER://127.0.0.1:9093, internal://[::1]:19092"));
  ASSERT_EQ(l.size(), 3u);
  EXPECT_EQ(l[0], (listener_endpoint{"PLAINTEXT", "", 9092}));
  EXPECT_EQ(l[1], (listener_endpoint{"CONTROLLER", "127.0.0.1", 9093}));
  EXPECT_EQ(l[2],
            (listener_endpoint{"INTERNAL", "::1", 19092}));  // names upper-cased, as ListenerName.normalised
}

TEST(listener_test, empty_list_and_hostnames) {
  EXPECT_TRUE(ok(parse_listeners("  ")).empty());
  auto l = ok(parse_listeners("EXTERNAL://broker-1.example.com:0"));
  ASSERT_EQ(l.size(), 1u);
  EXPECT_EQ(l[0].host, "broker-1.example.com");
  EXPECT_EQ(l[0].port, 0);  // ephemeral
}

TEST(listener_test, rejects_bad_listeners) {
  EXPECT_NE(fails(parse_listeners("PLAINTEXT://localhost")).find("missing port"), std::string::npos);
  EXPECT_NE(fails(parse_listeners("PLAINTEXT://localhost:")).find("missing port"), std::string::npos);
  EXPECT_NE(fails(parse_listeners("PLAINTEXT://localhost:65536")).find("invalid port"), std::string::npos);
  EXPECT_NE(fails(parse_listeners("PLAINTEXT://localhost:-1")).find("invalid port"), std::string::npos);
  EXPECT_NE(fails(parse_listeners("PLAINTEXT://localhost:90a")).find("invalid port"), std::string::npos);
  EXPECT_NE(fails(parse_listeners("localhost:9092")).find("NAME://host:port"), std::string::npos);
  EXPECT_NE(fails(parse_listeners("://:9092")).find("invalid listener name"), std::string::npos);
  EXPECT_NE(fails(parse_listeners("PLAINTEXT://::1:9092")).find("brackets"), std::string::npos);
  EXPECT_NE(fails(parse_listeners("PLAINTEXT://[::1:9092")).find("unterminated"), std::string::npos);
  EXPECT_NE(fails(parse_listeners("PLAINTEXT://[::1]9092")).find("missing port"), std::string::npos);
  EXPECT_NE(fails(parse_listeners("A://:1,a://:2")).find("used twice"), std::string::npos);
  EXPECT_NE(fails(parse_listeners("A://:1,,B://:2")).find("empty listener"), std::string::npos);
}

TEST(listener_test, formats_listeners_back) {
  EXPECT_EQ(format_listener({"PLAINTEXT", "", 9092, security_protocol::plaintext}), "PLAINTEXT://:9092");
  EXPECT_EQ(format_listener({"X", "::1", 1, security_protocol::ssl}), "X://[::1]:1");
}

TEST(listener_test, security_protocol_map) {
  auto m = ok(parse_security_protocol_map("PLAINTEXT:PLAINTEXT, controller:plaintext,EXT:SASL_SSL"));
  ASSERT_EQ(m.size(), 3u);
  EXPECT_EQ(m[1], (listener_protocol_mapping{"CONTROLLER", security_protocol::plaintext}));
  EXPECT_EQ(m[2].protocol, security_protocol::sasl_ssl);
  EXPECT_NE(fails(parse_security_protocol_map("A:TLS")).find("invalid security protocol"), std::string::npos);
  EXPECT_NE(fails(parse_security_protocol_map("A")).find("LISTENER_NAME:SECURITY_PROTOCOL"),
            std::string::npos);
  EXPECT_NE(fails(parse_security_protocol_map("A:SSL,a:SSL")).find("mapped twice"), std::string::npos);
  EXPECT_EQ(to_string(security_protocol::sasl_plaintext), "SASL_PLAINTEXT");
}

TEST(listener_test, quorum_voters) {
  auto v = ok(parse_quorum_voters("1@localhost:9093, 2@[::1]:9095,3@10.0.0.3:9097"));
  ASSERT_EQ(v.size(), 3u);
  EXPECT_EQ(v[0], (quorum_voter{1, "localhost", 9093}));
  EXPECT_EQ(v[1], (quorum_voter{2, "::1", 9095}));
  EXPECT_EQ(v[2], (quorum_voter{3, "10.0.0.3", 9097}));
  EXPECT_TRUE(ok(parse_quorum_voters("")).empty());
  EXPECT_NE(fails(parse_quorum_voters("localhost:9093")).find("id@host:port"), std::string::npos);
  EXPECT_NE(fails(parse_quorum_voters("x@localhost:9093")).find("invalid voter id"), std::string::npos);
  EXPECT_NE(fails(parse_quorum_voters("-1@localhost:9093")).find("invalid voter id"), std::string::npos);
  EXPECT_NE(fails(parse_quorum_voters("1@localhost")).find("missing port"), std::string::npos);
  EXPECT_NE(fails(parse_quorum_voters("1@:9093")).find("missing host"), std::string::npos);
  EXPECT_NE(fails(parse_quorum_voters("1@h:0")).find("invalid port"), std::string::npos);
  EXPECT_NE(fails(parse_quorum_voters("1@h:70000")).find("invalid port"), std::string::npos);
  EXPECT_NE(fails(parse_quorum_voters("1@a:1,1@b:2")).find("appears twice"), std::string::npos);
}

TEST(listener_test, bootstrap_servers) {
  auto s = ok(parse_host_ports("localhost:9093,[fe80::1]:9095"));
  ASSERT_EQ(s.size(), 2u);
  EXPECT_EQ(s[1], (host_port{"fe80::1", 9095}));
  EXPECT_NE(fails(parse_host_ports("localhost")).find("missing port"), std::string::npos);
}

}  // namespace
}  // namespace mala
