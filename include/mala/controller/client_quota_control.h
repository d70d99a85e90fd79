// Kafka's ClientQuotaControlManager: AlterClientQuotas validated and turned into ClientQuotaRecords, and the
// quota keys each entity type takes (QuotaConfig). The image holds the quotas
// (metadata_image::client_quotas); this manager only writes.
//
// Validation as Kafka's: an entity is a non-empty set of distinct types among user, client-id and ip
// (INVALID_REQUEST "Unhandled client quota entity type: x", "Invalid empty client quota entity", "Empty user
// not supported", duplicate types); ip combines with nothing else and must be an address or a resolvable
// name; user/client-id take producer_byte_rate, consumer_byte_rate (LONG), request_percentage,
// controller_mutation_rate (DOUBLE), ip takes connection_creation_rate (INT); values must be > 0 and integral
// for the integral keys; a key named twice for one entity, or an entity named twice in a request, is
// INVALID_REQUEST. A removal of a key that is not set writes nothing; a value equal to the current one writes
// nothing. The whole request is one batch.
//
// Threads: the controller's (shard 0).
#pragma once

#include <optional>
#include <string>

#include "mala/controller/controller_records.h"
#include "mala/metadata/metadata_image.h"
#include "mala/protocol/messages/alter_client_quotas_request.h"
#include "mala/protocol/messages/alter_client_quotas_response.h"

namespace mala::controller {

// Kafka's ClientQuotaEntity type names and QuotaConfig keys.
inline constexpr const char* quota_entity_user = "user";
inline constexpr const char* quota_entity_client_id = "client-id";
inline constexpr const char* quota_entity_ip = "ip";
inline constexpr const char* producer_byte_rate_key = "producer_byte_rate";
inline constexpr const char* consumer_byte_rate_key = "consumer_byte_rate";
inline constexpr const char* request_percentage_key = "request_percentage";
inline constexpr const char* controller_mutation_rate_key = "controller_mutation_rate";
inline constexpr const char* connection_creation_rate_key = "connection_creation_rate";

// The records and per-entity answers of an AlterClientQuotas against `image`: entries answer in request
// order, each with its entity as sent.
struct client_quota_alteration {
  record_list records;
  protocol::alter_client_quotas_response response;
};
client_quota_alteration alter_client_quotas(const metadata::metadata_image& image,
                                            const protocol::alter_client_quotas_request& request);

// Kafka's ClientQuotaControlManager.validateQuotaKeyValue on its own, for `entity_has_ip`
// (connection_creation_rate) or user/client-id keys. Empty when valid, else the INVALID_REQUEST message.
std::optional<std::string> validate_quota_value(bool entity_has_ip, const std::string& key, double value);

}  // namespace mala::controller
