#include "mala/replication/waiter_list.h"

#include <utility>

namespace mala::replication {

void waiter_list::add(uint64_t id, int64_t key, waiter_callback callback) {
  _waiters.emplace(id, waiter{key, std::move(callback)});
}

bool waiter_list::cancel(uint64_t id) {
  return _waiters.erase(id) > 0;
}

std::vector<waiter_callback> waiter_list::take_up_to(int64_t up_to) {
  std::vector<waiter_callback> out;
  for (auto it = _waiters.begin(); it != _waiters.end();) {
    if (it->second.key <= up_to) {
      out.push_back(std::move(it->second.callback));
      it = _waiters.erase(it);
    } else {
      ++it;
    }
  }
  return out;
}

std::vector<waiter_callback> waiter_list::take_all() {
  std::vector<waiter_callback> out;
  out.reserve(_waiters.size());
  for (auto& [id, w] : _waiters) out.push_back(std::move(w.callback));
  _waiters.clear();
  return out;
}

}  // namespace mala::replication
