#include "mala/controller/scram_control.h"

#include <map>
#include <optional>
#include <set>

#include "mala/security/scram.h"

namespace mala::controller {

namespace {

struct refusal {
  error_code code;
  std::string message;
};

std::optional<refusal> validate_name_and_mechanism(const std::string& name, int8_t mechanism) {
  if (name.empty()) return refusal{error_code::unacceptable_credential, "Username must not be empty"};
  if (security::scram_mechanism_from_type(mechanism) == security::scram_mechanism::unknown) {
    return refusal{error_code::unsupported_sasl_mechanism, "Unknown SCRAM mechanism"};
  }
  return std::nullopt;
}

}  // namespace

scram_alteration alter_user_scram_credentials(const metadata::metadata_image& image,
                                              const protocol::alter_user_scram_credentials_request& request) {
  using deletion = protocol::alter_user_scram_credentials_request::scram_credential_deletion;
  using upsertion = protocol::alter_user_scram_credentials_request::scram_credential_upsertion;
  std::map<std::string, const deletion*> deletions;
  std::map<std::string, const upsertion*> upsertions;
  std::map<std::string, refusal> refused;
  const refusal twice{error_code::duplicate_resource,
                      "A user credential cannot be altered twice in the same request"};

  for (const auto& d : request.deletions) {
    if (refused.contains(d.name)) continue;
    if (deletions.erase(d.name) > 0) {
      refused.emplace(d.name, twice);
      continue;
    }
    if (auto bad = validate_name_and_mechanism(d.name, d.mechanism)) {
      refused.emplace(d.name, *bad);
    } else if (!image.find_scram_credential(d.name, d.mechanism)) {
      refused.emplace(d.name, refusal{error_code::resource_not_found,
                                      "Attempt to delete a user credential that does not exist"});
    } else {
      deletions.emplace(d.name, &d);
    }
  }
  for (const auto& u : request.upsertions) {
    if (refused.contains(u.name)) continue;
    if (deletions.erase(u.name) > 0 || upsertions.erase(u.name) > 0) {
      refused.emplace(u.name, twice);
      continue;
    }
    if (auto bad = validate_name_and_mechanism(u.name, u.mechanism)) {
      refused.emplace(u.name, *bad);
    } else if (u.iterations < security::scram_min_iterations) {
      refused.emplace(u.name, refusal{error_code::unacceptable_credential, "Too few iterations"});
    } else if (u.iterations > security::scram_max_iterations) {
      refused.emplace(u.name, refusal{error_code::unacceptable_credential, "Too many iterations"});
    } else {
      upsertions.emplace(u.name, &u);
    }
  }

  scram_alteration out;
  auto succeeded = [&out](const std::string& user) {
    auto& r = out.response.results.emplace_back();
    r.user = user;
    r.error_message = std::nullopt;
  };
  for (const auto& [name, d] : deletions) {
    protocol::remove_user_scram_credential_record record;
    record.name = name;
    record.mechanism = d->mechanism;
    out.records.push_back(versioned(std::move(record), record_v0));
    succeeded(name);
  }
  for (const auto& [name, u] : upsertions) {
    const auto mechanism = security::scram_mechanism_from_type(u->mechanism);
    const auto credential =
        security::scram_credential_from_salted(mechanism, u->salt, u->salted_password, u->iterations);
    protocol::user_scram_credential_record record;
    record.name = name;
    record.mechanism = u->mechanism;
    record.salt = credential.salt;
    record.stored_key = credential.stored_key;
    record.server_key = credential.server_key;
    record.iterations = credential.iterations;
    out.records.push_back(versioned(std::move(record), record_v0));
    succeeded(name);
  }
  for (const auto& [name, why] : refused) {
    auto& r = out.response.results.emplace_back();
    r.user = name;
    r.error_code = to_wire(why.code);
    r.error_message = why.message;
  }
  return out;
}

protocol::describe_user_scram_credentials_response describe_user_scram_credentials(
    const metadata::metadata_image& image, const protocol::describe_user_scram_credentials_request& request) {
  // user -> named more than once
  std::map<std::string, bool> users;
  if (!request.users || request.users->empty()) {
    for (const auto& [user, credentials] : image.scram_credentials) users.emplace(user, false);
  } else {
    for (const auto& u : *request.users) {
      auto [it, inserted] = users.emplace(u.name, false);
      if (!inserted) it->second = true;
    }
  }
  protocol::describe_user_scram_credentials_response out;
  out.error_message = std::nullopt;
  for (const auto& [user, duplicate] : users) {
    auto& result = out.results.emplace_back();
    result.user = user;
    result.error_message = std::nullopt;
    if (duplicate) {
      result.error_code = to_wire(error_code::duplicate_resource);
      result.error_message =
          "Cannot describe SCRAM credentials for the same user twice in a single request: " + user;
      continue;
    }
    auto it = image.scram_credentials.find(user);
    if (it == image.scram_credentials.end() || it->second.empty()) {
      result.error_code = to_wire(error_code::resource_not_found);
      result.error_message = "Attempt to describe a user credential that does not exist: " + user;
      continue;
    }
    for (const auto& [mechanism, credential] : it->second) {
      auto& info = result.credential_infos.emplace_back();
      info.mechanism = mechanism;
      info.iterations = credential.iterations;
    }
  }
  return out;
}

}  // namespace mala::controller
