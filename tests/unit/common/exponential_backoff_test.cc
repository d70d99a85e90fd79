// exponential_backoff: doubling from the initial delay up to the maximum, back to the initial delay after a
// success, and a maximum below the initial delay taken as the initial delay.
#include <gtest/gtest.h>

#include "mala/common/exponential_backoff.h"

namespace mala {
namespace {

TEST(exponential_backoff, doubles_up_to_the_maximum_and_resets_on_success) {
  exponential_backoff backoff(100, 1000);
  EXPECT_EQ(backoff.after_failure(), 100);
  EXPECT_EQ(backoff.after_failure(), 200);
  EXPECT_EQ(backoff.after_failure(), 400);
  EXPECT_EQ(backoff.after_failure(), 800);
  EXPECT_EQ(backoff.after_failure(), 1000);
  EXPECT_EQ(backoff.after_failure(), 1000);
  backoff.reset();
  EXPECT_EQ(backoff.after_failure(), 100);
  EXPECT_EQ(backoff.after_failure(), 200);
}

TEST(exponential_backoff, a_maximum_below_the_initial_delay_is_the_initial_delay) {
  exponential_backoff backoff(500, 10);
  EXPECT_EQ(backoff.after_failure(), 500);
  EXPECT_EQ(backoff.after_failure(), 500);
}

}  // namespace
}  // namespace mala
