// Writes one seed file per request definition and version: a v1/v2 request header followed by a fully populated
// sample body, so the fuzzer starts from valid requests of every API instead of discovering the framing itself.
#include <cstdio>
#include <string>
#include <vector>

#include "mala/protocol/message_catalog.h"
#include "mala/protocol/message_samples.h"
#include "mala/protocol/request_header.h"

using namespace mala::protocol;

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: make_seed_corpus DIR\n");
    return 2;
  }
  const std::string dir = argv[1];
  int written = 0;
  for (const auto& info : message_catalog()) {
    if (info.kind != message_kind::request) continue;
    for (int16_t v = info.min_version; v <= info.max_version; ++v) {
      std::vector<uint8_t> body;
      if (!encode_sample(info.name, v, 42u + static_cast<uint32_t>(v), body)) continue;
      std::vector<uint8_t> frame;
      wire_writer w(frame);
      request_header header{info.api_key, v, 7, std::string("seed")};
      encode_request_header(w, header, request_header_version(is_flexible_version(info, v)));
      w.write_raw(body);
      const std::string path = dir + "/" + std::string(info.name) + "-v" + std::to_string(v);
      if (FILE* f = std::fopen(path.c_str(), "wb")) {
        std::fwrite(frame.data(), 1, frame.size(), f);
        std::fclose(f);
        ++written;
      }
    }
  }
  std::printf("wrote %d seeds to %s\n", written, dir.c_str());
  return written > 0 ? 0 : 1;
}
