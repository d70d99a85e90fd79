// OffsetCommit (key 8, v2-9): commits a group's positions into __consumer_offsets (acks=-1 on the home
// shard). Topics or partitions the metadata does not know are answered UNKNOWN_TOPIC_OR_PARTITION without the
// coordinator (KafkaApis.handleOffsetCommitRequest); the coordinator checks the generation and member
// (generation -1: a simple commit, allowed while the group is empty), the metadata size
// (offset.metadata.max.bytes) and v2-v4's retention time.
#pragma once

#include <optional>

#include <asio/awaitable.hpp>

#include "mala/broker/request_context.h"
#include "mala/protocol/messages/offset_commit_request.h"
#include "mala/protocol/messages/offset_commit_response.h"

namespace mala::broker::handlers {

struct offset_commit_handler {
  using request = protocol::offset_commit_request;
  using response = protocol::offset_commit_response;
  static constexpr int16_t api_key = 8;
  static constexpr int16_t min_version = 2;
  static constexpr int16_t max_version = 9;

  static asio::awaitable<std::optional<response>> handle_async(request_context& ctx, request req,
                                                               int16_t version);
};

}  // namespace mala::broker::handlers
