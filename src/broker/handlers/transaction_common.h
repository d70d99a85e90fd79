// Pieces shared by the transaction handlers (InitProducerId, AddPartitionsToTxn, AddOffsetsToTxn, EndTxn,
// DescribeTransactions, ListTransactions): the hop to the transaction coordinator on the home shard, the
// producer id block it draws new ids from, and Kafka's version downgrade of PRODUCER_FENCED.
//
// Threads: the coroutines resume the caller on its own shard.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <utility>

#include <asio/awaitable.hpp>

#include "handlers/group_common.h"
#include "mala/broker/request_context.h"
#include "mala/common/error_code.h"
#include "mala/coordinator/transaction_coordinator.h"

namespace mala::broker::handlers {

// Runs fn(coordinator, answer) on the home shard and resumes with the coordinator's answer.
// services.transactions must be set.
template <typename T, typename Fn>
asio::awaitable<T> call_transaction_coordinator(const broker_services& services, Fn fn) {
  auto* txns = services.transactions;
  // A named callable (GCC bug 100611: a prvalue argument of a coroutine may be destroyed twice).
  auto call = [txns, fn = std::move(fn)](std::function<void(T)> answer) mutable {
    fn(*txns, std::move(answer));
  };
  co_return co_await call_on_home_shard<T>(services, std::move(call));
}

// Makes sure this broker holds unused producer ids (a block from the active controller through
// AllocateProducerIds when the current one is used up). false when none could be had.
asio::awaitable<bool> ensure_producer_id_block(request_context& ctx);

// Kafka answers PRODUCER_FENCED only from `first_version` of an API on; older clients get
// INVALID_PRODUCER_EPOCH (KafkaApis' downgrade).
inline error_code fenced_for_version(error_code e, int16_t version, int16_t first_version) {
  return e == error_code::producer_fenced && version < first_version ? error_code::invalid_producer_epoch : e;
}

// KIP-890: the error a data write (Produce, TxnOffsetCommit) answers for the coordinator's verdict on its
// partition (AddPartitionsToTxnManager, then ReplicaManager): PRODUCER_FENCED is INVALID_PRODUCER_EPOCH;
// TRANSACTION_ABORTABLE stays for versions that know it (`abortable_known`), else INVALID_TXN_STATE; the
// errors of a verification that could not finish (CONCURRENT_TRANSACTIONS, NETWORK_EXCEPTION, the
// coordinator's load / availability / ownership, a timeout) are NOT_ENOUGH_REPLICAS, retriable for every
// producer without a metadata refresh.
error_code verification_error_for_write(error_code e, bool abortable_known);

// Asks the transaction coordinator through services.transaction_verifier (which must be set) from any shard;
// resumes on the caller's shard with one code per partition, NOT_ENOUGH_REPLICAS for all when no answer came
// by `deadline` (the answer, when it comes, is dropped).
asio::awaitable<txn_verification_answer> verify_with_coordinator(
    const broker_services& services, txn_verification_request request,
    std::chrono::steady_clock::time_point deadline);

}  // namespace mala::broker::handlers
