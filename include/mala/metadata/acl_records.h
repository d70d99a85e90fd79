// The metadata log's form of an ACL (AccessControlEntryRecord, proto/AccessControlEntryRecord.msg) both ways:
// what the controller writes for a new ACL and what an image's snapshot writes for each ACL it holds, and the
// binding a replayed record stands for.
//
// Threads: pure functions.
#pragma once

#include <cstdint>

#include "mala/common/uuid.h"
#include "mala/metadata/acl.h"
#include "mala/protocol/messages/access_control_entry_record.h"

namespace mala::metadata {

// Sets an ACL's fields, with Kafka's codes, on any message with the record's field names
// (AccessControlEntryRecord, DeleteAcls' matching ACLs).
template <typename Fields>
void set_acl_fields(Fields& out, const acl_binding& acl) {
  out.resource_type = static_cast<int8_t>(acl.resource_type);
  out.resource_name = acl.resource_name;
  out.pattern_type = static_cast<int8_t>(acl.pattern_type);
  out.principal = acl.principal;
  out.host = acl.host;
  out.operation = static_cast<int8_t>(acl.operation);
  out.permission_type = static_cast<int8_t>(acl.permission);
}

protocol::access_control_entry_record to_access_control_entry_record(const uuid& id, const acl_binding& acl);
acl_binding to_acl_binding(const protocol::access_control_entry_record& record);

}  // namespace mala::metadata
