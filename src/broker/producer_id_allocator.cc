#include "mala/broker/producer_id_allocator.h"

#include <limits>
#include <string>

namespace mala::broker {

status producer_id_allocator::install(const controller::producer_id_block& b) {
  if (_next < _end) return status::success();  // another request installed one meanwhile
  if (b.first_id < 0 || b.size <= 0 || b.first_id > std::numeric_limits<int64_t>::max() - b.size) {
    return status::error(error_code::unknown_server_error, "producer id block with an invalid range: first " +
                                                               std::to_string(b.first_id) + ", size " +
                                                               std::to_string(b.size));
  }
  if (b.first_id < _end) {
    return status::error(error_code::unknown_server_error,
                         "producer id block starting at " + std::to_string(b.first_id) +
                             " is not above the previous block (ending at " + std::to_string(_end) + ")");
  }
  _next = b.first_id;
  _end = b.first_id + b.size;
  return status::success();
}

result<int64_t> producer_id_allocator::next_id(const block_source& fetch_block) {
  if (_next >= _end) {
    auto block = fetch_block();
    if (!block) return block.error();
    if (auto st = install(block.value()); !st.ok()) return st;
  }
  return _next++;
}

}  // namespace mala::broker
