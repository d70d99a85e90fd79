#include "handlers/acls.h"

#include <string>

#include "mala/common/error_code.h"

namespace mala::broker::handlers {

namespace {
// AclApis' answer without an authorizer.
const std::string no_authorizer_message = "No Authorizer is configured.";
}  // namespace

describe_acls_handler::response describe_acls_handler::handle(request_context&, const request&, int16_t) {
  response resp;
  resp.error_code = to_wire(error_code::security_disabled);
  resp.error_message = no_authorizer_message;
  return resp;
}

create_acls_handler::response create_acls_handler::handle(request_context&, const request& req, int16_t) {
  response resp;
  for (size_t i = 0; i < req.creations.size(); ++i) {
    auto& r = resp.results.emplace_back();
    r.error_code = to_wire(error_code::security_disabled);
    r.error_message = no_authorizer_message;
  }
  return resp;
}

delete_acls_handler::response delete_acls_handler::handle(request_context&, const request& req, int16_t) {
  response resp;
  for (size_t i = 0; i < req.filters.size(); ++i) {
    auto& r = resp.filter_results.emplace_back();
    r.error_code = to_wire(error_code::security_disabled);
    r.error_message = no_authorizer_message;
  }
  return resp;
}

}  // namespace mala::broker::handlers
