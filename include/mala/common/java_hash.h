// Java's hash of a string and Kafka's Utils.abs, for the placements that must agree with Apache Kafka's: the
// __consumer_offsets partition of a group, the replica fetcher of a partition (num.replica.fetchers).
//
// Pure functions; any thread.
#pragma once

#include <cstdint>
#include <string_view>

namespace mala {

// java.lang.String.hashCode() of the string whose UTF-8 bytes are `s`: s[0]*31^(n-1) + ... + s[n-1] over
// UTF-16 code units, in 32-bit two's complement arithmetic. Characters beyond the BMP count as their two
// surrogates; bytes that are not valid UTF-8 count as U+FFFD, as Java's decoder replaces them.
int32_t java_string_hash(std::string_view s);

// Kafka's Utils.abs: |n|, except that Integer.MIN_VALUE maps to 0 (not to itself).
inline int32_t kafka_abs(int32_t n) {
  return n == INT32_MIN ? 0 : (n < 0 ? -n : n);
}

}  // namespace mala
