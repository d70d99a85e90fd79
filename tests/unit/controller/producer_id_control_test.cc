// AllocateProducerIds (ProducerIdControlManager): consecutive blocks for registered brokers of the right
// epoch, STALE_BROKER_EPOCH otherwise, nothing written when it fails.
#include "mala/controller/producer_id_control.h"

#include <gtest/gtest.h>

#include "image_writer.h"

namespace mala::controller {
namespace {

void register_broker(image_writer& writer, int32_t id, int64_t epoch) {
  protocol::register_broker_record r;
  r.broker_id = id;
  r.broker_epoch = epoch;
  r.incarnation_id = uuid::random();
  ASSERT_TRUE(writer.write({versioned(r, register_broker_record_version)}).ok());
}

TEST(producer_id_control, blocks_follow_each_other) {
  image_writer writer;
  register_broker(writer, 1, 7);
  auto first = allocate_producer_ids(writer, 1, 7);
  ASSERT_TRUE(first.ok()) << first.error().message;
  EXPECT_EQ(first->assigned_broker_id, 1);
  EXPECT_EQ(first->first_id, 0);
  EXPECT_EQ(first->size, producer_id_block_size);
  auto second = allocate_producer_ids(writer, 1, 7);
  ASSERT_TRUE(second.ok());
  EXPECT_EQ(second->first_id, producer_id_block_size);
  EXPECT_EQ(writer.image()->next_producer_id, 2 * producer_id_block_size);
}

TEST(producer_id_control, unknown_broker_or_epoch_is_stale) {
  image_writer writer;
  register_broker(writer, 1, 7);
  const size_t batches = writer.batches.size();
  auto unknown = allocate_producer_ids(writer, 2, 7);
  ASSERT_FALSE(unknown.ok());
  EXPECT_EQ(unknown.error().code, error_code::stale_broker_epoch);
  EXPECT_EQ(unknown.error().message, "No broker registration found for broker id 2");
  auto stale = allocate_producer_ids(writer, 1, 6);
  ASSERT_FALSE(stale.ok());
  EXPECT_EQ(stale.error().message, "Expected broker epoch 7, but got broker epoch 6");
  EXPECT_EQ(writer.batches.size(), batches);
}

TEST(producer_id_control, a_failed_write_hands_out_nothing) {
  image_writer writer;
  register_broker(writer, 1, 7);
  writer.fail_writes = true;
  auto r = allocate_producer_ids(writer, 1, 7);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, error_code::not_controller);
  EXPECT_EQ(writer.image()->next_producer_id, 0);
}

}  // namespace
}  // namespace mala::controller
