#include "mala/broker/handler_table.h"

#include <algorithm>

#include "handlers/api_versions.h"
#include "handlers/metadata.h"

namespace mala::broker {

namespace {

// Decodes the request at `version`, runs H::handle, encodes the response body.
template <typename H>
handler_outcome run(request_context& ctx, protocol::wire_reader& body, int16_t version) {
  typename H::request req;
  const auto status = req.decode(body, version);
  if (status != protocol::decode_status::ok) {
    return {handler_outcome::kind::bad_request, {}, status};
  }
  const typename H::response resp = H::handle(ctx, req, version);
  handler_outcome out;
  out.body.reserve(resp.encoded_size(version));
  protocol::wire_writer w(out.body);
  resp.encode(w, version);
  return out;
}

template <typename H>
handler_entry entry(std::string_view name, int16_t advertised_min = H::min_version) {
  static_assert(H::min_version >= H::request::min_version && H::max_version <= H::request::max_version,
                "a handler cannot serve versions its messages do not define");
  int16_t first_flexible = -1;
  for (int16_t v = H::request::min_version; v <= H::request::max_version; ++v) {
    if (H::request::is_flexible(v)) {
      first_flexible = v;
      break;
    }
  }
  return {H::api_key,          name,           H::min_version, H::max_version, advertised_min,
          first_flexible >= 0, first_flexible, &run<H>};
}

}  // namespace

handler_table::handler_table() {
  _entries = {
      entry<handlers::metadata_handler>("Metadata"),
      entry<handlers::api_versions_handler>("ApiVersions"),
  };
  std::sort(_entries.begin(), _entries.end(),
            [](const handler_entry& a, const handler_entry& b) { return a.api_key < b.api_key; });
}

const handler_entry* handler_table::find(int16_t api_key) const {
  for (const auto& e : _entries)
    if (e.api_key == api_key) return &e;
  return nullptr;
}

}  // namespace mala::broker
