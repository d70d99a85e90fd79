#include "mala/controller/client_quota_control.h"

#include <netdb.h>
#include <sys/socket.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <map>
#include <set>
#include <string_view>
#include <utility>

namespace mala::controller {

namespace {

enum class quota_value_type { long_type, int_type, double_type };

// QuotaConfig.userAndClientQuotaConfigs() and ipConfigs().
std::optional<quota_value_type> key_type(bool ip, const std::string& key) {
  if (ip) {
    if (key == connection_creation_rate_key) return quota_value_type::int_type;
    return std::nullopt;
  }
  if (key == producer_byte_rate_key || key == consumer_byte_rate_key) return quota_value_type::long_type;
  if (key == request_percentage_key || key == controller_mutation_rate_key)
    return quota_value_type::double_type;
  return std::nullopt;
}

// Kafka's isValidIpEntity: InetAddress.getByName succeeds (an address, or a name that resolves).
bool valid_ip_entity(const std::optional<std::string>& ip) {
  if (!ip) return true;
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  addrinfo* found = nullptr;
  const int rc = ::getaddrinfo(ip->c_str(), nullptr, &hints, &found);
  if (found) ::freeaddrinfo(found);
  return rc == 0;
}

std::string entity_text(const protocol::alter_client_quotas_request::entry_data& entry) {
  // Kafka's ClientQuotaEntity.toString: "ClientQuotaEntity(entries={user=alice})".
  std::string out = "ClientQuotaEntity(entries={";
  bool first = true;
  for (const auto& e : entry.entity) {
    if (!first) out += ", ";
    first = false;
    out += e.entity_type + "=" + (e.entity_name ? *e.entity_name : "null");
  }
  return out + "})";
}

}  // namespace

std::optional<std::string> validate_quota_value(bool entity_has_ip, const std::string& key, double value) {
  const auto type = key_type(entity_has_ip, key);
  if (!type) return "Invalid configuration key " + key;
  if (!(value > 0.0)) return "Quota " + key + " must be greater than 0";
  auto integral = [&]() -> std::optional<std::string> {
    if (std::abs(std::fmod(value, 1.0)) > 1e-6) return key + " cannot be a fractional value.";
    return std::nullopt;
  };
  switch (*type) {
    case quota_value_type::double_type:
      return std::nullopt;
    case quota_value_type::int_type:
      if (value > static_cast<double>(std::numeric_limits<int32_t>::max()))
        return "Proposed value for " + key + " is too large for an INT.";
      return integral();
    case quota_value_type::long_type:
      if (value > static_cast<double>(std::numeric_limits<int64_t>::max()))
        return "Proposed value for " + key + " is too large for a LONG.";
      return integral();
  }
  return std::nullopt;
}

client_quota_alteration alter_client_quotas(const metadata::metadata_image& image,
                                            const protocol::alter_client_quotas_request& request) {
  client_quota_alteration out;
  std::set<metadata::client_quota_entity> seen;
  for (const auto& entry : request.entries) {
    auto& answer = out.response.entries.emplace_back();
    for (const auto& e : entry.entity) answer.entity.push_back({e.entity_type, e.entity_name});
    auto fail = [&answer](std::string message) {
      answer.error_code = to_wire(error_code::invalid_request);
      answer.error_message = std::move(message);
    };
    answer.error_code = 0;
    answer.error_message = std::nullopt;

    // validateEntity: known, distinct types and no empty name.
    metadata::client_quota_entity entity;
    std::optional<std::string> entity_error;
    if (entry.entity.empty()) entity_error = "Invalid empty client quota entity";
    for (const auto& e : entry.entity) {
      if (entity_error) break;
      if (entity.contains(e.entity_type)) {
        entity_error = "Invalid client quota entity, duplicate entity entry " + e.entity_type;
      } else if (e.entity_type != quota_entity_user && e.entity_type != quota_entity_client_id &&
                 e.entity_type != quota_entity_ip) {
        entity_error = "Unhandled client quota entity type: " + e.entity_type;
      } else if (e.entity_name && e.entity_name->empty()) {
        entity_error = "Empty " + e.entity_type + " not supported";
      }
      entity.emplace(e.entity_type, e.entity_name);
    }
    if (entity_error) {
      fail(*entity_error);
      continue;
    }
    if (!seen.insert(entity).second) {
      fail("Ignoring duplicate entity " + entity_text(entry));
      continue;
    }
    // Duplicate keys (Kafka collects the ops into a map first).
    std::map<std::string, std::optional<double>> ops;
    bool duplicate_key = false;
    for (const auto& op : entry.ops) {
      if (!ops.emplace(op.key, op.remove ? std::nullopt : std::optional<double>(op.value)).second) {
        fail("Duplicate quota key " + op.key + " not updating quota for this entity " + entity_text(entry));
        duplicate_key = true;
        break;
      }
    }
    if (duplicate_key) continue;
    // configKeysForEntityType.
    const bool has_ip = entity.contains(quota_entity_ip);
    if (has_ip && entity.size() > 1) {
      fail("Invalid quota entity combination, IP entity shouldnot be combined with User or ClientId");
      continue;
    }
    if (has_ip && !valid_ip_entity(entity.at(quota_entity_ip))) {
      fail(*entity.at(quota_entity_ip) + " is not a valid IP or resolvable host.");
      continue;
    }
    const metadata::client_quota_values* current = image.client_quotas.find(entity);
    record_list records;
    std::optional<std::string> value_error;
    for (const auto& [key, value] : ops) {
      protocol::client_quota_record r;
      for (const auto& [type, name] : entity) r.entity.push_back({type, name});
      r.key = key;
      if (!value) {
        if (current && current->contains(key)) {
          r.remove = true;
          records.push_back(versioned(std::move(r), record_v0));
        }
        continue;
      }
      if (auto error = validate_quota_value(has_ip, key, *value)) {
        value_error = std::move(error);
        break;
      }
      if (current) {
        // Only a change is written.
        const auto it = current->find(key);
        if (it != current->end() && it->second == *value) continue;
      }
      r.value = *value;
      records.push_back(versioned(std::move(r), record_v0));
    }
    if (value_error) {
      fail(*value_error);
      continue;
    }
    for (auto& r : records) out.records.push_back(std::move(r));
  }
  return out;
}

}  // namespace mala::controller
