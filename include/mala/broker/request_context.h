// What a handler gets besides its decoded request: the request header, the connection it came on, and the
// node-wide services it may use. A handler runs on the connection's shard.
#pragma once

#include <cstdint>

#include "mala/metadata/metadata_image.h"
#include "mala/net/request_dispatcher.h"
#include "mala/protocol/request_header.h"

namespace mala::broker {

class handler_table;

// Node-wide services shared by every handler; outlives the server.
struct broker_services {
  int32_t node_id = -1;
  metadata::metadata_cache* metadata = nullptr;
  const handler_table* handlers = nullptr;
};

struct request_context {
  const protocol::request_header& header;
  net::connection_info& connection;
  const broker_services& services;
};

}  // namespace mala::broker
