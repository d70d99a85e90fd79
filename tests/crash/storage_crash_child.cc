// The victim of the storage crash test (storage_crash_test.cc): opens one partition log (always as after an
// unclean shutdown, so every start is a recovery), then appends generated batches (storage_test_log.h) as
// fast as it can, calling flush() every `flush_every` batches. After each flush it writes the flushed log end
// offset to stdout with one write() (no stdio buffering): everything below that offset was acknowledged and
// fsynced, and must survive the SIGKILL the driver sends at a random moment.
//
// Usage: storage_crash_child <partition dir> <flush every N batches> [<recovery point>]
// Exit: runs until killed; 2 on bad usage, 3 when open/append/flush fails (the message goes to stderr).
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "mala/common/logging.h"
#include "storage_test_log.h"

namespace {

void write_line(const std::string& line) {
  std::string out = line + "\n";
  // One write() of a short line to a pipe is atomic (< PIPE_BUF), so the driver never sees half a number.
  ssize_t n = ::write(STDOUT_FILENO, out.data(), out.size());
  (void)n;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace mala::storage;
  if (argc < 3) {
    std::fprintf(stderr, "usage: %s <partition dir> <flush every N batches> [<recovery point>]\n", argv[0]);
    return 2;
  }
  mala::set_log_level("warn");
  const std::filesystem::path dir = argv[1];
  const int flush_every = std::max(1, std::atoi(argv[2]));

  log_config config;
  config.segment_bytes = 256 * 1024;
  config.index_interval_bytes = 4096;
  config.segment_index_bytes = 64 * 1024;
  config.max_message_bytes = 1024 * 1024;
  log_open_options options;
  options.clean_shutdown = false;
  options.recovery_point = argc > 3 ? std::atoll(argv[3]) : 0;

  auto opened = partition_log::open(dir, {"crash", 0}, config, options);
  if (!opened) {
    std::fprintf(stderr, "open failed: %s\n", opened.error().message.c_str());
    return 3;
  }
  auto& log = **opened;
  write_line("open " + std::to_string(log.log_end_offset()));

  for (int64_t appended = 0;; ++appended) {
    auto batch = crash_test::make_batch(log.log_end_offset());
    auto r = log.append_as_leader(batch, 0);
    if (!r) {
      std::fprintf(stderr, "append failed at %lld: %s\n", static_cast<long long>(log.log_end_offset()),
                   r.error().message.c_str());
      return 3;
    }
    if ((appended + 1) % flush_every == 0) {
      if (auto st = log.flush(); !st.ok()) {
        std::fprintf(stderr, "flush failed: %s\n", st.message.c_str());
        return 3;
      }
      write_line("flushed " + std::to_string(log.log_end_offset()));
    }
  }
}
