// The cleaner's transaction tracker on hand-made batch headers: aborted data is discardable, committed data
// is not, markers are discardable once no batch of their transaction was seen, and an ABORT marker whose
// batches were seen stays with its aborted transaction listed.
#include "mala/storage/cleaned_transactions.h"

#include <gtest/gtest.h>

namespace mala::storage {
namespace {

namespace proto = mala::protocol;

proto::record_batch_header data(int64_t producer_id, int64_t base, int32_t count, bool transactional = true) {
  proto::record_batch_header h;
  h.base_offset = base;
  h.last_offset_delta = count - 1;
  h.record_count = count;
  h.producer_id = producer_id;
  h.producer_epoch = 0;
  if (transactional) h.attributes = proto::batch_attributes::transactional;
  return h;
}

proto::record_batch_header control(int64_t producer_id, int64_t offset, int32_t count = 1) {
  proto::record_batch_header h = data(producer_id, offset, 1);
  h.record_count = count;
  h.attributes =
      static_cast<int16_t>(proto::batch_attributes::transactional | proto::batch_attributes::control);
  return h;
}

txn_marker marker(int64_t producer_id, txn_marker_type type) {
  return txn_marker{.producer_id = producer_id, .producer_epoch = 0, .type = type, .coordinator_epoch = 0};
}

TEST(cleaned_transactions, aborted_data_goes_committed_data_stays) {
  const aborted_txn aborted{.producer_id = 2, .first_offset = 3, .last_offset = 6, .last_stable_offset = 7};
  cleaned_transactions t({aborted});
  EXPECT_FALSE(t.on_data_batch(data(1, 0, 3)));            // committed transaction of producer 1
  EXPECT_TRUE(t.on_data_batch(data(2, 3, 3)));             // producer 2's aborted transaction
  EXPECT_FALSE(t.on_data_batch(data(-1, 100, 1, false)));  // not transactional
  EXPECT_FALSE(t.on_control_batch(control(2, 6), marker(2, txn_marker_type::abort)));  // its data was seen
  EXPECT_FALSE(t.on_control_batch(control(1, 7), marker(1, txn_marker_type::commit)));
  ASSERT_EQ(t.retained_aborts().size(), 1u);
  EXPECT_EQ(t.retained_aborts()[0], aborted);
  // Producer 2's next transaction is not aborted: its abort ended at the marker.
  EXPECT_FALSE(t.on_data_batch(data(2, 8, 1)));
}

TEST(cleaned_transactions, markers_without_data_left_are_discardable) {
  const aborted_txn aborted{.producer_id = 2, .first_offset = 3, .last_offset = 6, .last_stable_offset = 7};
  cleaned_transactions t({aborted});
  EXPECT_TRUE(t.on_control_batch(control(2, 6), marker(2, txn_marker_type::abort)));
  EXPECT_TRUE(t.on_control_batch(control(1, 7), marker(1, txn_marker_type::commit)));
  EXPECT_TRUE(t.retained_aborts().empty());
  // An emptied control batch goes; one of an unknown type stays.
  EXPECT_TRUE(t.on_control_batch(control(1, 8, 0), std::nullopt));
  EXPECT_FALSE(t.on_control_batch(control(1, 9), std::nullopt));
}

TEST(cleaned_transactions, an_abort_that_started_before_the_walk_still_applies) {
  // The walk starts at offset 10, inside producer 5's aborted transaction (first offset 4).
  const aborted_txn aborted{.producer_id = 5, .first_offset = 4, .last_offset = 20, .last_stable_offset = 21};
  const aborted_txn later{.producer_id = 5, .first_offset = 30, .last_offset = 31, .last_stable_offset = 32};
  cleaned_transactions t({later, aborted});  // any order
  EXPECT_TRUE(t.on_data_batch(data(5, 10, 2)));
  EXPECT_FALSE(t.on_data_batch(data(6, 12, 2)));
  EXPECT_FALSE(t.on_control_batch(control(5, 20), marker(5, txn_marker_type::abort)));
  EXPECT_FALSE(t.on_data_batch(data(5, 25, 2)));  // a committed transaction between the two aborts
  EXPECT_FALSE(t.on_control_batch(control(5, 27), marker(5, txn_marker_type::commit)));
  EXPECT_TRUE(t.on_data_batch(data(5, 30, 1)));
  EXPECT_FALSE(t.on_control_batch(control(5, 31), marker(5, txn_marker_type::abort)));
  ASSERT_EQ(t.retained_aborts().size(), 2u);
  EXPECT_EQ(t.retained_aborts()[0], aborted);
  EXPECT_EQ(t.retained_aborts()[1], later);
}

}  // namespace
}  // namespace mala::storage
