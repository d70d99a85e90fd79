#include "handlers/transaction_common.h"

#include <memory>
#include <optional>

#include <asio/steady_timer.hpp>
#include <asio/this_coro.hpp>

#include "handlers/admin_common.h"
#include "handlers/allocate_producer_ids.h"
#include "handlers/data_path.h"
#include "mala/broker/producer_id_allocator.h"
#include "mala/controller/quorum_controller.h"

namespace mala::broker::handlers {

asio::awaitable<bool> ensure_producer_id_block(request_context& ctx) {
  const auto& services = ctx.services;
  auto* allocator = services.producer_ids;
  if (!allocator || (!services.controller && !services.controller_link)) co_return false;
  const bool needs_block =
      co_await on_home_shard(services, [allocator] { return allocator->remaining() <= 0; });
  if (!needs_block) co_return true;
  const int32_t node_id = services.node_id;
  allocate_producer_ids_handler::request allocate;
  allocate.broker_id = node_id;
  const auto image = services.metadata->current();
  auto self = image->brokers.find(node_id);
  allocate.broker_epoch = self == image->brokers.end() ? -1 : self->second.epoch;
  auto answer = co_await on_controller<allocate_producer_ids_handler::response>(
      ctx, allocate, 0, [&allocate](controller::quorum_controller& c) {
        return allocate_producer_ids_handler::allocate_on_controller(c, allocate);
      });
  if (!answer.ok() || answer.response->error_code != 0) co_return false;
  const controller::producer_id_block block{node_id, answer.response->producer_id_start,
                                            answer.response->producer_id_len};
  co_return co_await on_home_shard(services, [allocator, block] { return allocator->install(block).ok(); });
}

}  // namespace mala::broker::handlers

namespace mala::broker::handlers {

error_code verification_error_for_write(error_code e, bool abortable_known) {
  switch (e) {
    case error_code::producer_fenced:
      return error_code::invalid_producer_epoch;
    case error_code::transaction_abortable:
      return abortable_known ? e : error_code::invalid_txn_state;
    case error_code::cluster_authorization_failed:
      return error_code::invalid_txn_state;
    case error_code::concurrent_transactions:
    case error_code::network_exception:
    case error_code::request_timed_out:
    case error_code::coordinator_load_in_progress:
    case error_code::coordinator_not_available:
    case error_code::not_coordinator:
      return error_code::not_enough_replicas;
    default:
      return e;
  }
}

asio::awaitable<txn_verification_answer> verify_with_coordinator(
    const broker_services& services, txn_verification_request request,
    std::chrono::steady_clock::time_point deadline) {
  auto run = [&services, request = std::move(request),
              deadline]() mutable -> asio::awaitable<txn_verification_answer> {
    auto executor = co_await asio::this_coro::executor;
    answer_slot<txn_verification_answer> slot(executor);
    auto answer = slot.callback();
    auto timer = std::make_shared<asio::steady_timer>(executor);
    timer->expires_at(deadline);
    timer->async_wait([answer, n = request.partitions.size()](const std::error_code& ec) {
      if (!ec) answer(txn_verification_answer(n, error_code::not_enough_replicas));
    });
    services.transaction_verifier(std::move(request), [answer, timer](txn_verification_answer got) {
      timer->cancel();
      answer(std::move(got));
    });
    co_return co_await slot.wait();
  };
  co_return co_await on_home_shard_async(services, std::move(run));
}

}  // namespace mala::broker::handlers
