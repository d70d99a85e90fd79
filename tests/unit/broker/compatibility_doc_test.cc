// docs/compatibility.md lists every API this node serves with its version ranges; this test regenerates that table
// from the handler table and fails (printing the table to paste) when the document is out of date.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "mala/broker/handler_table.h"

namespace mala::broker {
namespace {

std::string served_api_table() {
  std::ostringstream out;
  out << "| API | key | advertised versions | served versions |\n";
  out << "|---|---|---|---|\n";
  handler_table table;
  for (const auto& e : table.entries()) {
    out << "| " << e.name << " | " << e.api_key << " | " << e.advertised_min_version << "-" << e.max_version << " | "
        << e.min_version << "-" << e.max_version << " |\n";
  }
  return out.str();
}

TEST(compatibility_doc, lists_exactly_the_served_apis) {
  std::ifstream in(std::string(MALA_SOURCE_DIR) + "/docs/compatibility.md");
  ASSERT_TRUE(in) << "docs/compatibility.md is missing";
  std::stringstream doc;
  doc << in.rdbuf();
  const std::string expected = served_api_table();
  EXPECT_NE(doc.str().find(expected), std::string::npos)
      << "docs/compatibility.md does not contain the current table of served APIs; expected:\n"
      << expected;
}

}  // namespace
}  // namespace mala::broker
