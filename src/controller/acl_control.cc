#include "mala/controller/acl_control.h"

#include <array>
#include <set>
#include <string>
#include <utility>

#include "mala/metadata/acl.h"
#include "mala/metadata/acl_records.h"

namespace mala::controller {

using metadata::acl_binding;
using metadata::acl_filter;

namespace {

acl_binding binding_of(const protocol::create_acls_request__acl_creation& c) {
  acl_binding acl;
  acl.resource_type = metadata::to_acl_resource_type(c.resource_type);
  acl.resource_name = c.resource_name;
  acl.pattern_type = metadata::to_acl_pattern_type(c.resource_pattern_type);
  acl.principal = c.principal;
  acl.host = c.host;
  acl.operation = metadata::to_acl_operation(c.operation);
  acl.permission = metadata::to_acl_permission(c.permission_type);
  return acl;
}

acl_filter filter_of(const protocol::delete_acls_request__delete_acls_filter& f) {
  acl_filter filter;
  filter.resource_type = metadata::to_acl_resource_type(f.resource_type_filter);
  filter.resource_name = f.resource_name_filter;
  filter.pattern_type = metadata::to_acl_pattern_type(f.pattern_type_filter);
  filter.principal = f.principal_filter;
  filter.host = f.host_filter;
  filter.operation = metadata::to_acl_operation(f.operation);
  filter.permission = metadata::to_acl_permission(f.permission_type);
  return filter;
}

}  // namespace

protocol::create_acls_response create_acls(metadata_writer& writer,
                                           const protocol::create_acls_request& request) {
  const auto& acls = writer.image()->acls.by_id;
  const bool cidr_supported =
      writer.image()->feature_level("metadata.version") >= metadata::cidr_acl_metadata_version;
  std::set<acl_binding> existing;
  for (const auto& [id, acl] : acls) existing.insert(acl);
  std::set<std::array<uint8_t, 16>> ids_taken;
  record_list records;
  protocol::create_acls_response resp;
  std::vector<size_t> written;  // results that depend on the write
  for (const auto& c : request.creations) {
    auto& result = resp.results.emplace_back();
    acl_binding acl = binding_of(c);
    if (auto invalid = metadata::invalid_new_acl(acl)) {
      result.error_code = to_wire(error_code::invalid_request);
      result.error_message = std::move(*invalid);
      continue;
    }
    if (auto host = metadata::invalid_acl_host(acl.host, cidr_supported)) {
      result.error_code =
          to_wire(host->unsupported_version ? error_code::unsupported_version : error_code::invalid_request);
      result.error_message = std::move(host->message);
      continue;
    }
    result.error_message = std::nullopt;
    written.push_back(resp.results.size() - 1);
    if (!existing.insert(acl).second) continue;
    // AclControlManager.newAclId: a random id no ACL has.
    uuid id;
    do {
      id = uuid::random();
    } while (acls.contains(id) || !ids_taken.insert(id.bytes).second);
    records.push_back(versioned(metadata::to_access_control_entry_record(id, acl), record_v0));
  }
  if (records.empty()) return resp;
  const api_error outcome =
      write_user_operation(writer, records, records.size() > max_records_per_user_op, false);
  if (!outcome.ok()) {
    for (size_t i : written) {
      resp.results[i].error_code = to_wire(outcome.code);
      resp.results[i].error_message = outcome.message;
    }
  }
  return resp;
}

protocol::delete_acls_response delete_acls(metadata_writer& writer,
                                           const protocol::delete_acls_request& request) {
  const auto& acls = writer.image()->acls.by_id;
  std::set<std::array<uint8_t, 16>> removed;
  record_list records;
  protocol::delete_acls_response resp;
  std::vector<size_t> written;
  for (const auto& f : request.filters) {
    auto& result = resp.filter_results.emplace_back();
    const acl_filter filter = filter_of(f);
    if (auto invalid = metadata::invalid_acl_filter(filter)) {
      result.error_code = to_wire(error_code::invalid_request);
      result.error_message = std::move(*invalid);
      continue;
    }
    result.error_message = std::nullopt;
    written.push_back(resp.filter_results.size() - 1);
    for (const auto& [id, acl] : acls) {
      if (!metadata::matches(filter, acl)) continue;
      auto& m = result.matching_acls.emplace_back();
      m.error_message = std::nullopt;
      metadata::set_acl_fields(m, acl);
      if (removed.insert(id.bytes).second) {
        protocol::remove_access_control_entry_record r;
        r.id = id;
        records.push_back(versioned(std::move(r), record_v0));
      }
    }
  }
  if (records.empty()) return resp;
  if (records.size() > max_records_per_user_op) {
    // AclControlManager: BoundedListTooLongException for the filter that went past the bound.
    for (size_t i : written) {
      resp.filter_results[i].error_code = to_wire(error_code::invalid_request);
      resp.filter_results[i].error_message = "Cannot remove more than " +
                                             std::to_string(max_records_per_user_op) +
                                             " acls in a single delete operation.";
      resp.filter_results[i].matching_acls.clear();
    }
    return resp;
  }
  const api_error outcome = write_user_operation(writer, records, false, false);
  if (!outcome.ok()) {
    for (size_t i : written) {
      resp.filter_results[i].error_code = to_wire(outcome.code);
      resp.filter_results[i].error_message = outcome.message;
      resp.filter_results[i].matching_acls.clear();
    }
  }
  return resp;
}

}  // namespace mala::controller
