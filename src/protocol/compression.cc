#include "mala/protocol/compression.h"

#include <lz4frame.h>
#include <snappy.h>
#include <zlib.h>
#include <zstd.h>
#include <zstd_errors.h>

#include <algorithm>
#include <bit>
#include <climits>
#include <cstring>
#include <limits>
#include <string>
#include <utility>

namespace mala::protocol {

namespace {

status corrupt(std::string detail) {
  return status::error(error_code::corrupt_message, std::move(detail));
}

status too_large(size_t max_output_bytes) {
  return status::error(error_code::message_too_large,
                       "decompressed data exceeds " + std::to_string(max_output_bytes) + " bytes");
}

// A growing output buffer that never holds more than max + 1 bytes: a decoder may write one byte past the
// bound, which is how "the output would exceed the bound" is detected without decoding (or allocating) more.
class bounded_output {
 public:
  bounded_output(std::vector<uint8_t>& out, size_t max) : _out(out), _max(max) {
    _limit = max == std::numeric_limits<size_t>::max() ? max : max + 1;
    _out.clear();
  }

  // Free space to decode into: at least one byte unless the limit is reached (then exceeded() is true).
  std::span<uint8_t> window() {
    if (_written == _out.size() && _out.size() < _limit) {
      grow_to(std::min(std::max(_written * 2, _written + initial_step), _limit));
    }
    return std::span<uint8_t>(_out).subspan(_written);
  }
  // Room for exactly `n` more bytes (decoders that know their output size up front); false past the bound.
  bool reserve_exact(size_t n) {
    if (n > _max - std::min(_written, _max)) return false;
    if (_out.size() < _written + n) grow_to(_written + n);
    return true;
  }
  uint8_t* cursor() { return _out.data() + _written; }
  void commit(size_t n) { _written += n; }
  bool exceeded() const { return _written > _max; }
  status overflow() const { return too_large(_max); }
  size_t written() const { return _written; }
  void finish() { _out.resize(_written); }

 private:
  // Reserves before resizing so the vector's own growth policy (which may double) never allocates past the
  // limit.
  void grow_to(size_t size) {
    if (size > _out.capacity()) _out.reserve(std::min(std::max(size, _out.capacity() * 2), _limit));
    _out.resize(size);
  }
  static constexpr size_t initial_step = size_t{64} << 10;
  std::vector<uint8_t>& _out;
  size_t _max;
  size_t _limit;
  size_t _written = 0;
};

uint32_t load_be32(const uint8_t* p) {
  return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | uint32_t{p[3]};
}

void append_be32(std::vector<uint8_t>& out, uint32_t v) {
  out.push_back(static_cast<uint8_t>(v >> 24));
  out.push_back(static_cast<uint8_t>(v >> 16));
  out.push_back(static_cast<uint8_t>(v >> 8));
  out.push_back(static_cast<uint8_t>(v));
}

// ---------------------------------------------------------------------------------------------------------------
// gzip (zlib with a gzip wrapper: windowBits 15 + 16).

constexpr int gzip_window_bits = 15 + 16;

std::vector<uint8_t> gzip_compress(std::span<const uint8_t> data) {
  z_stream zs{};
  // Kafka's compression.gzip.level defaults to zlib's default level (KIP-390).
  if (deflateInit2(&zs, Z_DEFAULT_COMPRESSION, Z_DEFLATED, gzip_window_bits, 8, Z_DEFAULT_STRATEGY) != Z_OK) {
    return {};
  }
  std::vector<uint8_t> out(deflateBound(&zs, static_cast<uLong>(data.size())));
  zs.next_out = out.data();
  zs.avail_out = static_cast<uInt>(std::min<size_t>(out.size(), UINT_MAX));
  size_t fed = 0;
  int rc = Z_OK;
  while (rc == Z_OK) {
    if (zs.avail_in == 0 && fed < data.size()) {
      const size_t chunk = std::min<size_t>(data.size() - fed, UINT_MAX);
      zs.next_in = const_cast<Bytef*>(data.data() + fed);  // zlib's API is not const-correct; it only reads
      zs.avail_in = static_cast<uInt>(chunk);
      fed += chunk;
    }
    rc = deflate(&zs, fed == data.size() ? Z_FINISH : Z_NO_FLUSH);
  }
  const size_t produced = zs.total_out;
  deflateEnd(&zs);
  if (rc != Z_STREAM_END) return {};
  out.resize(produced);
  return out;
}

status gzip_decompress(std::span<const uint8_t> data, bounded_output& out) {
  if (data.size() > UINT_MAX) return corrupt("gzip input too large");
  z_stream zs{};
  if (inflateInit2(&zs, gzip_window_bits) != Z_OK) return corrupt("gzip: inflateInit2 failed");
  struct guard {
    z_stream* zs;
    ~guard() { inflateEnd(zs); }
  } cleanup{&zs};
  zs.next_in = const_cast<Bytef*>(data.data());
  zs.avail_in = static_cast<uInt>(data.size());
  for (;;) {
    auto free = out.window();
    if (free.empty()) return out.overflow();
    zs.next_out = free.data();
    zs.avail_out = static_cast<uInt>(std::min<size_t>(free.size(), UINT_MAX));
    const uInt before = zs.avail_out;
    const int rc = inflate(&zs, Z_NO_FLUSH);
    out.commit(before - zs.avail_out);
    if (out.exceeded()) return out.overflow();
    if (rc == Z_STREAM_END) {
      if (zs.avail_in == 0) return status::success();
      // Another gzip member follows (Java's GZIPInputStream reads concatenated members too).
      if (inflateReset(&zs) != Z_OK) return corrupt("gzip: inflateReset failed");
      continue;
    }
    if (rc == Z_OK) continue;
    if (rc == Z_BUF_ERROR && zs.avail_in > 0) continue;  // output full: grow and go on
    if (rc == Z_BUF_ERROR) return corrupt("gzip stream truncated");
    return corrupt(std::string("gzip: ") + (zs.msg ? zs.msg : "inflate failed"));
  }
}

// ---------------------------------------------------------------------------------------------------------------
// snappy: xerial snappy-java framing (what the Java client writes) or one raw block (what librdkafka writes).

constexpr uint8_t xerial_magic[] = {0x82, 'S', 'N', 'A', 'P', 'P', 'Y', 0x00};
// magic, int32 version, int32 minimum compatible version.
constexpr size_t xerial_header_size = sizeof(xerial_magic) + 8;
constexpr uint32_t xerial_version = 1;
constexpr uint32_t xerial_min_compatible_version = 1;
// snappy-java's default block size; the Java client keeps it (SnappyOutputStream's default).
constexpr size_t xerial_block_size = size_t{32} << 10;

bool starts_with_xerial_magic(std::span<const uint8_t> data) {
  return data.size() >= sizeof(xerial_magic) &&
         std::memcmp(data.data(), xerial_magic, sizeof(xerial_magic)) == 0;
}

std::vector<uint8_t> snappy_compress(std::span<const uint8_t> data) {
  std::vector<uint8_t> out(std::begin(xerial_magic), std::end(xerial_magic));
  append_be32(out, xerial_version);
  append_be32(out, xerial_min_compatible_version);
  for (size_t pos = 0; pos < data.size(); pos += xerial_block_size) {
    const size_t n = std::min(xerial_block_size, data.size() - pos);
    const size_t length_at = out.size();
    out.resize(length_at + 4 + snappy::MaxCompressedLength(n));
    size_t compressed = 0;
    snappy::RawCompress(reinterpret_cast<const char*>(data.data() + pos), n,
                        reinterpret_cast<char*>(out.data() + length_at + 4), &compressed);
    out.resize(length_at + 4 + compressed);
    out[length_at] = static_cast<uint8_t>(compressed >> 24);
    out[length_at + 1] = static_cast<uint8_t>(compressed >> 16);
    out[length_at + 2] = static_cast<uint8_t>(compressed >> 8);
    out[length_at + 3] = static_cast<uint8_t>(compressed);
  }
  return out;
}

// One raw snappy block. The declared length is checked against the bound before anything is allocated.
status snappy_block(std::span<const uint8_t> block, bounded_output& out) {
  const auto* src = reinterpret_cast<const char*>(block.data());
  size_t length = 0;
  if (!snappy::GetUncompressedLength(src, block.size(), &length)) return corrupt("snappy: bad block header");
  if (!out.reserve_exact(length)) return out.overflow();
  if (!snappy::RawUncompress(src, block.size(), reinterpret_cast<char*>(out.cursor()))) {
    return corrupt("snappy: malformed block");
  }
  out.commit(length);
  return status::success();
}

status snappy_decompress(std::span<const uint8_t> data, bounded_output& out) {
  if (!starts_with_xerial_magic(data)) return snappy_block(data, out);
  size_t pos = 0;
  while (pos < data.size()) {
    const auto rest = data.subspan(pos);
    // snappy-java reads a stream header again where one stream was appended to another.
    if (starts_with_xerial_magic(rest)) {
      if (rest.size() < xerial_header_size) return corrupt("snappy: truncated xerial header");
      pos += xerial_header_size;
      continue;
    }
    if (rest.size() < 4) return corrupt("snappy: truncated xerial chunk length");
    const uint32_t length = load_be32(rest.data());
    if (length > rest.size() - 4) return corrupt("snappy: xerial chunk longer than the data");
    pos += 4;
    if (length == 0) continue;
    if (auto st = snappy_block(data.subspan(pos, length), out); !st.ok()) return st;
    pos += length;
  }
  return status::success();
}

// ---------------------------------------------------------------------------------------------------------------
// lz4 frame format.

std::vector<uint8_t> lz4_compress(std::span<const uint8_t> data) {
  // As the Java client's Lz4BlockOutputStream: 64 KiB independent blocks (its reader decodes each block on
  // its own), no block checksum, no content checksum, no content size.
  LZ4F_preferences_t prefs;
  std::memset(&prefs, 0, sizeof(prefs));
  prefs.frameInfo.blockSizeID = LZ4F_max64KB;
  prefs.frameInfo.blockMode = LZ4F_blockIndependent;
  prefs.frameInfo.contentChecksumFlag = LZ4F_noContentChecksum;
  prefs.frameInfo.blockChecksumFlag = LZ4F_noBlockChecksum;
  std::vector<uint8_t> out(LZ4F_compressFrameBound(data.size(), &prefs));
  const size_t n = LZ4F_compressFrame(out.data(), out.size(), data.data(), data.size(), &prefs);
  if (LZ4F_isError(n)) return {};
  out.resize(n);
  return out;
}

status lz4_decompress(std::span<const uint8_t> data, bounded_output& out) {
  LZ4F_dctx* dctx = nullptr;
  if (LZ4F_isError(LZ4F_createDecompressionContext(&dctx, LZ4F_VERSION))) return corrupt("lz4: no context");
  struct guard {
    LZ4F_dctx* d;
    ~guard() { LZ4F_freeDecompressionContext(d); }
  } cleanup{dctx};
  size_t pos = 0;
  for (;;) {
    auto free = out.window();
    if (free.empty()) return out.overflow();
    size_t produced = free.size();
    size_t consumed = data.size() - pos;
    const size_t hint = LZ4F_decompress(dctx, free.data(), &produced, data.data() + pos, &consumed, nullptr);
    if (LZ4F_isError(hint)) return corrupt(std::string("lz4: ") + LZ4F_getErrorName(hint));
    pos += consumed;
    out.commit(produced);
    if (out.exceeded()) return out.overflow();
    if (hint == 0) {
      // A frame ended; the context is ready for another one (concatenated frames).
      if (pos == data.size()) return status::success();
      continue;
    }
    if (consumed == 0 && produced == 0) return corrupt("lz4 frame truncated");
  }
}

// ---------------------------------------------------------------------------------------------------------------
// zstd.

// Kafka's compression.zstd.level default (KIP-390), zstd's own default.
constexpr int zstd_level = 3;

// The streaming decoder allocates the window the frame header asks for, before producing any output, so the
// window is bounded too: at least 8 MiB (2^23, what zstd levels up to 19 use for data of unknown size), more
// for larger output bounds, never past zstd's default limit of 2^27 (what librdkafka and zstd-jni accept).
int zstd_window_log_max(size_t max_output_bytes) {
  const int wanted = static_cast<int>(std::bit_width(max_output_bytes));
  return std::clamp(wanted, 23, 27);
}

std::vector<uint8_t> zstd_compress(std::span<const uint8_t> data) {
  std::vector<uint8_t> out(ZSTD_compressBound(data.size()));
  const size_t n = ZSTD_compress(out.data(), out.size(), data.data(), data.size(), zstd_level);
  if (ZSTD_isError(n)) return {};
  out.resize(n);
  return out;
}

status zstd_decompress(std::span<const uint8_t> data, bounded_output& out, size_t max_output_bytes) {
  if (data.empty()) return corrupt("zstd: empty input");
  ZSTD_DCtx* dctx = ZSTD_createDCtx();
  if (dctx == nullptr) return corrupt("zstd: no context");
  struct guard {
    ZSTD_DCtx* d;
    ~guard() { ZSTD_freeDCtx(d); }
  } cleanup{dctx};
  ZSTD_DCtx_setParameter(dctx, ZSTD_d_windowLogMax, zstd_window_log_max(max_output_bytes));
  ZSTD_inBuffer in{data.data(), data.size(), 0};
  for (;;) {
    auto free = out.window();
    if (free.empty()) return out.overflow();
    ZSTD_outBuffer o{free.data(), free.size(), 0};
    const size_t before_in = in.pos;
    const size_t rc = ZSTD_decompressStream(dctx, &o, &in);
    if (ZSTD_isError(rc)) {
      if (ZSTD_getErrorCode(rc) == ZSTD_error_frameParameter_windowTooLarge) {
        return status::error(error_code::message_too_large,
                             "zstd: frame window exceeds the decompression bound");
      }
      return corrupt(std::string("zstd: ") + ZSTD_getErrorName(rc));
    }
    out.commit(o.pos);
    if (out.exceeded()) return out.overflow();
    if (rc == 0 && in.pos == in.size) return status::success();  // last frame complete and flushed
    // Input used up while the decoder still had room to write: it needs more input than there is.
    if (in.pos == in.size && o.pos < o.size) return corrupt("zstd frame truncated");
    if (in.pos == before_in && o.pos == 0) return corrupt("zstd: no progress");
  }
}

status copy_bounded(std::span<const uint8_t> data, bounded_output& out) {
  if (!out.reserve_exact(data.size())) return out.overflow();
  if (!data.empty()) std::memcpy(out.cursor(), data.data(), data.size());
  out.commit(data.size());
  return status::success();
}

}  // namespace

std::vector<uint8_t> compress(compression_codec codec, std::span<const uint8_t> data) {
  switch (codec) {
    case compression_codec::none:
      return {data.begin(), data.end()};
    case compression_codec::gzip:
      return gzip_compress(data);
    case compression_codec::snappy:
      return snappy_compress(data);
    case compression_codec::lz4:
      return lz4_compress(data);
    case compression_codec::zstd:
      return zstd_compress(data);
  }
  return {};
}

status decompress_into(compression_codec codec, std::span<const uint8_t> data, size_t max_output_bytes,
                       std::vector<uint8_t>& out) {
  bounded_output sink(out, max_output_bytes);
  status st;
  switch (codec) {
    case compression_codec::none:
      st = copy_bounded(data, sink);
      break;
    case compression_codec::gzip:
      st = gzip_decompress(data, sink);
      break;
    case compression_codec::snappy:
      st = snappy_decompress(data, sink);
      break;
    case compression_codec::lz4:
      st = lz4_decompress(data, sink);
      break;
    case compression_codec::zstd:
      st = zstd_decompress(data, sink, max_output_bytes);
      break;
    default:
      st = corrupt("unknown compression codec " + std::to_string(static_cast<int>(codec)));
      break;
  }
  if (!st.ok()) return st;
  sink.finish();
  return status::success();
}

result<std::vector<uint8_t>> decompress(compression_codec codec, std::span<const uint8_t> data,
                                        size_t max_output_bytes) {
  std::vector<uint8_t> out;
  auto st = decompress_into(codec, data, max_output_bytes, out);
  if (!st.ok()) return st;
  return out;
}

}  // namespace mala::protocol
