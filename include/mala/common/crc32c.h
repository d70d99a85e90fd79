// CRC-32C (Castagnoli, reflected polynomial 0x82F63B78), the checksum of Kafka's record batch v2: the broker
// checks it on every produced batch and on log recovery, so it sits on the data path and uses the CPU's crc32
// instruction.
//
// Pure functions, no shared mutable state after the one-time CPU feature check (a function-local static):
// safe to call from any thread or shard concurrently.
#pragma once

#include <cstdint>
#include <span>

namespace mala {

// CRC-32C of data, with the standard pre/post inversion: crc32c("123456789") == 0xE3069283.
uint32_t crc32c(std::span<const uint8_t> data);

// Continues a finished CRC over more bytes: crc32c_extend(crc32c(a), b) == crc32c(a ++ b). crc32c_extend(0,
// x) is crc32c(x).
uint32_t crc32c_extend(uint32_t crc, std::span<const uint8_t> data);

namespace crc32c_detail {
// The two implementations crc32c_extend chooses between, exposed for tests and benchmarks.
// True when the CPU has SSE4.2 (crc32) and PCLMULQDQ, i.e. when extend_hardware may be called.
bool hardware_available();
uint32_t extend_hardware(uint32_t crc, std::span<const uint8_t> data);
// Slicing-by-8 table implementation; works everywhere.
uint32_t extend_portable(uint32_t crc, std::span<const uint8_t> data);
}  // namespace crc32c_detail

}  // namespace mala
