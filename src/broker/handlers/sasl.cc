#include "handlers/sasl.h"

namespace mala::broker::handlers {

sasl_handshake_handler::response sasl_handshake_handler::handle(request_context&, const request&, int16_t) {
  response resp;
  resp.error_code = to_wire(error_code::illegal_sasl_state);
  return resp;
}

sasl_authenticate_handler::response sasl_authenticate_handler::handle(request_context&, const request&,
                                                                      int16_t) {
  response resp;
  resp.error_code = to_wire(error_code::illegal_sasl_state);
  resp.error_message = "SaslAuthenticate request received after successful authentication";
  return resp;
}

}  // namespace mala::broker::handlers
