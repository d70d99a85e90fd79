// AlterClientQuotas as Kafka's ClientQuotaControlManager validates it, the ClientQuotaRecords it writes, how
// the image applies them (ClientQuotasDelta) and snapshots them (image_to_records).
#include "mala/controller/client_quota_control.h"

#include <gtest/gtest.h>

#include "image_writer.h"
#include "mala/metadata/image_records.h"

namespace mala::controller {
namespace {

using request = protocol::alter_client_quotas_request;

request::entry_data entry(std::vector<std::pair<std::string, std::optional<std::string>>> entity,
                          std::vector<std::tuple<std::string, double, bool>> ops) {
  request::entry_data e;
  for (auto& [type, name] : entity) e.entity.push_back({type, name});
  for (auto& [key, value, remove] : ops) e.ops.push_back({key, value, remove});
  return e;
}

// Alters against the writer's image and writes what it returns; the answers' error codes.
std::vector<int16_t> alter(image_writer& writer, std::vector<request::entry_data> entries) {
  request req;
  req.entries = std::move(entries);
  auto result = alter_client_quotas(*writer.image(), req);
  EXPECT_TRUE(writer.write(result.records).ok());
  std::vector<int16_t> codes;
  for (const auto& e : result.response.entries) codes.push_back(e.error_code);
  return codes;
}

metadata::client_quota_entity user(std::optional<std::string> name) {
  return {{"user", std::move(name)}};
}

TEST(client_quota_control, sets_changes_and_removes_quotas_of_users_clients_and_defaults) {
  image_writer writer;
  EXPECT_TRUE(writer.image()->client_quotas.empty());
  EXPECT_EQ(
      alter(writer, {entry({{"user", "alice"}}, {{"producer_byte_rate", 1024, false}}),
                     entry({{"client-id", std::nullopt}}, {{"consumer_byte_rate", 2048, false}}),
                     entry({{"user", "alice"}, {"client-id", "app"}},
                           {{"request_percentage", 12.5, false}, {"controller_mutation_rate", 3, false}})}),
      (std::vector<int16_t>{0, 0, 0}));
  const auto& quotas = writer.image()->client_quotas;
  ASSERT_NE(quotas.find(user("alice")), nullptr);
  EXPECT_EQ(quotas.find(user("alice"))->at("producer_byte_rate"), 1024);
  EXPECT_EQ(quotas.find({{"client-id", std::nullopt}})->at("consumer_byte_rate"), 2048);
  EXPECT_EQ(quotas.find({{"user", "alice"}, {"client-id", "app"}})->size(), 2u);
  EXPECT_EQ(writer.batches.size(), 1u);
  EXPECT_EQ(writer.batches[0].size(), 4u);

  // The same value again writes nothing; a removal of an unset key neither.
  EXPECT_EQ(alter(writer, {entry({{"user", "alice"}},
                                 {{"producer_byte_rate", 1024, false}, {"consumer_byte_rate", 0, true}})}),
            (std::vector<int16_t>{0}));
  EXPECT_EQ(writer.batches.size(), 1u);

  // Removing the last key removes the entity.
  EXPECT_EQ(alter(writer, {entry({{"user", "alice"}}, {{"producer_byte_rate", 0, true}})}),
            (std::vector<int16_t>{0}));
  EXPECT_EQ(writer.image()->client_quotas.find(user("alice")), nullptr);

  // A snapshot carries the quotas and rebuilds the same image.
  auto records = metadata::image_to_records(*writer.image());
  metadata::metadata_delta delta(nullptr);
  size_t quota_records = 0;
  for (const auto& r : records) {
    if (std::holds_alternative<protocol::client_quota_record>(r.record)) ++quota_records;
    ASSERT_TRUE(delta.apply(r.record).ok());
  }
  EXPECT_EQ(quota_records, 3u);
  EXPECT_EQ(delta.build()->client_quotas, writer.image()->client_quotas);
}

TEST(client_quota_control, refuses_what_kafka_refuses) {
  image_writer writer;
  const int16_t invalid = to_wire(error_code::invalid_request);
  request req;
  req.entries = {
      entry({}, {{"producer_byte_rate", 1, false}}),                              // empty entity
      entry({{"group", "g"}}, {{"producer_byte_rate", 1, false}}),                // unknown type
      entry({{"user", ""}}, {{"producer_byte_rate", 1, false}}),                  // empty name
      entry({{"user", "a"}, {"user", "b"}}, {{"producer_byte_rate", 1, false}}),  // duplicate type
      entry({{"user", "u"}}, {{"producer_byte_rate", 1.5, false}}),               // fractional LONG
      entry({{"user", "v"}}, {{"producer_byte_rate", 0, false}}),                 // not > 0
      entry({{"user", "w"}}, {{"connection_creation_rate", 1, false}}),           // ip key for a user
      entry({{"ip", "127.0.0.1"}, {"user", "x"}}, {{"connection_creation_rate", 1, false}}),  // ip combined
      entry({{"ip", "127.0.0.1"}}, {{"producer_byte_rate", 1, false}}),  // user key for an ip
      entry({{"user", "y"}},
            {{"producer_byte_rate", 1, false}, {"producer_byte_rate", 2, false}}),  // dup key
      entry({{"client-id", "c"}}, {{"request_percentage", 0.5, false}}),            // fine (DOUBLE)
      entry({{"client-id", "c"}}, {{"request_percentage", 0.7, false}}),            // duplicate entity
      entry({{"ip", "127.0.0.2"}}, {{"connection_creation_rate", 10, false}}),      // fine
  };
  auto result = alter_client_quotas(*writer.image(), req);
  ASSERT_EQ(result.response.entries.size(), req.entries.size());
  for (size_t i = 0; i < req.entries.size(); ++i) {
    const bool ok = i == 10 || i == 12;
    EXPECT_EQ(result.response.entries[i].error_code, ok ? 0 : invalid) << "entry " << i;
    EXPECT_EQ(result.response.entries[i].entity.size(), req.entries[i].entity.size());
  }
  EXPECT_EQ(result.response.entries[4].error_message, "producer_byte_rate cannot be a fractional value.");
  EXPECT_EQ(result.response.entries[1].error_message, "Unhandled client quota entity type: group");
  EXPECT_EQ(result.records.size(), 2u);  // only the valid entities are written
}

TEST(client_quota_control, validate_quota_value_follows_the_key_types) {
  EXPECT_FALSE(validate_quota_value(false, "producer_byte_rate", 1048576));
  EXPECT_TRUE(validate_quota_value(false, "producer_byte_rate", 1e30));  // too large for a LONG
  EXPECT_FALSE(validate_quota_value(false, "request_percentage", 0.25));
  EXPECT_TRUE(validate_quota_value(true, "connection_creation_rate", 3e9));  // too large for an INT
  EXPECT_TRUE(validate_quota_value(false, "nonsense", 1));
}

}  // namespace
}  // namespace mala::controller
