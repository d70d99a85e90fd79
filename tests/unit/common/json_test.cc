// The bounded JSON parser: RFC 8259 values, escapes and surrogate pairs, integer reads, and every limit and
// malformation refused with the offset, never the text.
#include "mala/common/json.h"

#include <gtest/gtest.h>

#include <string>

namespace mala::json {
namespace {

TEST(json, parses_values) {
  auto v = parse(R"( {"a": [1, -2.5e3, true, false, null], "b": {"c": "d"}, "e": ""} )");
  ASSERT_TRUE(v.ok()) << v.error().message;
  const auto* a = v->find("a")->as_array();
  ASSERT_NE(a, nullptr);
  ASSERT_EQ(a->size(), 5u);
  EXPECT_EQ((*a)[0].as_int64(), 1);
  EXPECT_DOUBLE_EQ((*a)[1].as_number()->as_double, -2500);
  EXPECT_EQ((*a)[1].as_int64(), -2500);
  EXPECT_TRUE(*(*a)[2].as_bool());
  EXPECT_FALSE(*(*a)[3].as_bool());
  EXPECT_TRUE((*a)[4].is_null());
  EXPECT_EQ(*v->find("b")->find("c")->as_string(), "d");
  EXPECT_EQ(*v->find("e")->as_string(), "");
  EXPECT_EQ(v->find("missing"), nullptr);
  EXPECT_EQ(v->find("e")->find("x"), nullptr);  // not an object
}

TEST(json, integers_beyond_doubles_keep_their_text) {
  auto v = parse("[9007199254740993, 1.5, 1e400]");
  ASSERT_TRUE(v.ok());
  EXPECT_EQ((*v->as_array())[0].as_int64(), 9007199254740993);
  EXPECT_FALSE((*v->as_array())[1].as_int64());
  EXPECT_FALSE((*v->as_array())[2].as_int64());
}

TEST(json, decodes_escapes_to_utf8) {
  auto v = parse(R"("a\"b\\c\/d\b\f\n\r\t\u00e9\u20ac\ud83d\ude00")");
  ASSERT_TRUE(v.ok()) << v.error().message;
  EXPECT_EQ(*v->as_string(), "a\"b\\c/d\b\f\n\r\t\xC3\xA9\xE2\x82\xAC\xF0\x9F\x98\x80");
}

TEST(json, refuses_malformed_documents) {
  for (const char* bad : {"",
                          "{",
                          "[1,]",
                          "{\"a\"}",
                          "{\"a\":1,}",
                          "01",
                          "1.",
                          "-",
                          "1e",
                          "tru",
                          "\"\\x\"",
                          "\"\\ud800\"",
                          "\"\\udc00\"",
                          "\"\\u12\"",
                          "\"a\nb\"",
                          "{\"a\":1 \"b\":2}",
                          "[1] 2",
                          "{\"a\":1,\"a\":2}",
                          "'a'",
                          "\"unterminated"}) {
    auto v = parse(bad);
    EXPECT_FALSE(v.ok()) << bad;
    if (!v.ok()) {
      EXPECT_EQ(v.error().code, error_code::invalid_request);
    }
  }
}

TEST(json, limits_hold_before_anything_grows) {
  limits bounds;
  bounds.max_depth = 3;
  EXPECT_TRUE(parse("[[[1]]]", bounds).ok());
  EXPECT_FALSE(parse("[[[[1]]]]", bounds).ok());
  EXPECT_FALSE(parse(std::string(100000, '['), {}).ok());  // deep nesting: refused, no stack overflow
  bounds = {};
  bounds.max_elements = 4;
  EXPECT_TRUE(parse("[1,2,3]", bounds).ok());
  EXPECT_FALSE(parse("[1,2,3,4]", bounds).ok());
  bounds = {};
  bounds.max_bytes = 8;
  auto big = parse("\"123456789\"", bounds);
  ASSERT_FALSE(big.ok());
  EXPECT_EQ(big.error().message.find("123456789"), std::string::npos);
}

}  // namespace
}  // namespace mala::json
