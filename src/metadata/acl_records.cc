#include "mala/metadata/acl_records.h"

namespace mala::metadata {

protocol::access_control_entry_record to_access_control_entry_record(const uuid& id, const acl_binding& acl) {
  protocol::access_control_entry_record r;
  r.id = id;
  set_acl_fields(r, acl);
  return r;
}

acl_binding to_acl_binding(const protocol::access_control_entry_record& record) {
  acl_binding acl;
  acl.resource_type = to_acl_resource_type(record.resource_type);
  acl.resource_name = record.resource_name;
  acl.pattern_type = to_acl_pattern_type(record.pattern_type);
  acl.principal = record.principal;
  acl.host = record.host;
  acl.operation = to_acl_operation(record.operation);
  acl.permission = to_acl_permission(record.permission_type);
  return acl;
}

}  // namespace mala::metadata
