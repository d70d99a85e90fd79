#include "handlers/find_coordinator.h"

#include "mala/common/error_code.h"

namespace mala::broker::handlers {

namespace {
constexpr const char* not_available_message = "The coordinator is not available.";
}  // namespace

find_coordinator_handler::response find_coordinator_handler::handle(request_context& /*ctx*/, const request& req,
                                                                    int16_t version) {
  response resp;
  if (version < 4) {
    resp.error_code = to_wire(error_code::coordinator_not_available);
    resp.error_message = not_available_message;
    resp.node_id = -1;
    resp.host = "";
    resp.port = -1;
    return resp;
  }
  for (const auto& key : req.coordinator_keys) {
    auto& c = resp.coordinators.emplace_back();
    c.key = key;
    c.node_id = -1;
    c.host = "";
    c.port = -1;
    c.error_code = to_wire(error_code::coordinator_not_available);
    c.error_message = not_available_message;
  }
  return resp;
}

}  // namespace mala::broker::handlers
