// broker_lifecycle's explanation of a registration refused with UNSUPPORTED_VERSION (whose answer carries no
// message): the finalized features outside the broker's ranges, and the kafka-features.sh downgrade that lets
// it register, as a Kafka 4.4 cluster formatted with its defaults (share.version 2, streams.version 1) needs.
#include "mala/broker/broker_lifecycle.h"

#include <gtest/gtest.h>

namespace mala::broker {
namespace {

TEST(broker_lifecycle, names_the_finalized_features_a_registration_does_not_support) {
  protocol::broker_registration_request registration;
  registration.features.push_back({"metadata.version", 7, 33});
  registration.features.push_back({"group.version", 0, 1});
  EXPECT_EQ(unsupported_finalized_features(registration, {{"metadata.version", 33}, {"group.version", 1}}),
            "");
  EXPECT_EQ(unsupported_finalized_features(
                registration, {{"metadata.version", 33}, {"share.version", 2}, {"streams.version", 1}}),
            "share.version 2 (this broker supports 0-0); streams.version 1 (this broker supports 0-0). Mala "
            "does not implement those levels; lower them before moving the cluster to Mala: "
            "kafka-features.sh --bootstrap-server <broker> downgrade --feature share.version=0 --feature "
            "streams.version=0");
  EXPECT_EQ(unsupported_finalized_features(registration, {{"metadata.version", 34}}),
            "metadata.version 34 (this broker supports 7-33). Mala does not implement those levels; lower "
            "them before moving the cluster to Mala: kafka-features.sh --bootstrap-server <broker> downgrade "
            "--feature metadata.version=33");
}

}  // namespace
}  // namespace mala::broker
