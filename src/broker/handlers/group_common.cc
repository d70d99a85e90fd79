#include "handlers/group_common.h"

namespace mala::broker::handlers {

coordinator::request_origin request_origin_of(const request_context& ctx, int16_t version) {
  coordinator::request_origin origin;
  origin.client_id = ctx.header.client_id.value_or("");
  std::string host = ctx.connection.peer;
  // "host:port" or "[v6 address]:port".
  if (auto colon = host.rfind(':'); colon != std::string::npos) host.resize(colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  origin.client_host = "/" + host;
  origin.api_version = version;
  return origin;
}

bool partition_exists(const broker_services& services, const std::string& topic, int32_t partition) {
  const auto image = services.metadata->current();
  return find_partition(*image, topic, partition) != nullptr;
}

}  // namespace mala::broker::handlers
