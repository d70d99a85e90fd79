#include "mala/common/assert.h"

#include <gtest/gtest.h>

namespace mala {
namespace {

int checked_half(int n) {
  MALA_ASSERT(n % 2 == 0, "{} is odd", n);
  return n / 2;
}

TEST(assert_test, a_holding_check_returns_and_formats_nothing) {
  EXPECT_EQ(checked_half(8), 4);
}

TEST(assert_test, a_failing_check_logs_the_condition_place_and_detail_and_aborts) {
  EXPECT_DEATH(checked_half(7), "invariant failed: n % 2 == 0 at .*assert_test.cc:[0-9]+: 7 is odd");
}

}  // namespace
}  // namespace mala
