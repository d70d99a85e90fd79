// CreateAcls and DeleteAcls on the active controller (Kafka's AclControlManager): new ACLs are validated
// (metadata/acl.h: invalid_new_acl, INVALID_REQUEST per creation), an ACL equal to an existing one (or to an
// earlier creation of the same request) writes nothing and succeeds, every other gets a random id that no
// ACL has and an AccessControlEntryRecord; a deletion filter (invalid_acl_filter: INVALID_REQUEST) removes
// every ACL it matches with a RemoveAccessControlEntryRecord, an ACL matched by several filters once, and
// lists it in each filter's result. All records of a request are one batch (at most
// max_records_per_user_op). Authorization (ALTER on the cluster) is the broker handler's business.
//
// Threads: the controller's.
#pragma once

#include "mala/controller/controller_records.h"
#include "mala/protocol/messages/create_acls_request.h"
#include "mala/protocol/messages/create_acls_response.h"
#include "mala/protocol/messages/delete_acls_request.h"
#include "mala/protocol/messages/delete_acls_response.h"

namespace mala::controller {

protocol::create_acls_response create_acls(metadata_writer& writer,
                                           const protocol::create_acls_request& request);
protocol::delete_acls_response delete_acls(metadata_writer& writer,
                                           const protocol::delete_acls_request& request);

}  // namespace mala::controller
