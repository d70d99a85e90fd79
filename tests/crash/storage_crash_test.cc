// Crash test of the storage engine (issue 3): a child process (storage_crash_child) appends to a partition
// log under load and is killed with SIGKILL at a random moment, 50 times over the same log. After every kill
// the log is reopened here as after an unclean shutdown and must be a prefix of what was appended (every
// batch valid, offsets contiguous from 0, content as generated), must still hold everything the child
// reported as fsynced, and its indexes must agree with its segments. The next child then continues appending
// on the recovered log. Some kills land while the child is still opening (recovering) the log.
//
// The seed is printed; MALA_CRASH_SEED=<n> replays a run (kill timings still depend on the machine's speed).
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <random>
#include <sstream>
#include <thread>

#include "mala/common/logging.h"
#include "storage_test_log.h"

namespace mala::storage::crash_test {
namespace {

using clock_type = std::chrono::steady_clock;

struct child_process {
  pid_t pid = -1;
  int out = -1;  // read end of the child's stdout
  std::string buffer;
};

child_process spawn_child(const fs::path& dir, int flush_every, int64_t recovery_point) {
  int fds[2];
  if (::pipe(fds) != 0) return {};
  pid_t pid = ::fork();
  if (pid == 0) {
    ::dup2(fds[1], STDOUT_FILENO);
    ::close(fds[0]);
    ::close(fds[1]);
    std::string dir_arg = dir.string();
    std::string flush_arg = std::to_string(flush_every);
    std::string rp_arg = std::to_string(recovery_point);
    ::execl(MALA_CRASH_CHILD, MALA_CRASH_CHILD, dir_arg.c_str(), flush_arg.c_str(), rp_arg.c_str(),
            static_cast<char*>(nullptr));
    ::_exit(127);
  }
  ::close(fds[1]);
  return {pid, fds[0], {}};
}

// Reads what the child wrote within `timeout_ms` (until EOF when the child is gone).
void drain(child_process& c, int timeout_ms) {
  auto deadline = clock_type::now() + std::chrono::milliseconds(timeout_ms);
  char buf[4096];
  while (true) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - clock_type::now()).count();
    if (left < 0) left = 0;
    pollfd p{c.out, POLLIN, 0};
    int ready = ::poll(&p, 1, static_cast<int>(left));
    if (ready <= 0) return;
    ssize_t n = ::read(c.out, buf, sizeof buf);
    if (n <= 0) return;  // EOF
    c.buffer.append(buf, static_cast<size_t>(n));
  }
}

struct child_report {
  std::optional<int64_t> opened_at;  // log end offset the child saw after its own recovery
  std::optional<int64_t> flushed;    // last acknowledged-and-fsynced offset
  int flushes = 0;
};

child_report parse_output(const std::string& text) {
  child_report r;
  std::istringstream in(text);
  std::string word;
  int64_t value = 0;
  while (in >> word >> value) {
    if (word == "open") r.opened_at = value;
    if (word == "flushed") {
      r.flushed = value;
      ++r.flushes;
    }
  }
  return r;
}

uint64_t dir_bytes(const fs::path& dir) {
  uint64_t total = 0;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec))
    if (e.is_regular_file()) total += e.file_size();
  return total;
}

// Cuts the last segment's .log at a random point at or after the bytes holding offsets below `durable`, and
// sometimes appends random garbage there. Returns what it did, for the round's log line.
std::string simulate_power_loss(const fs::path& dir, int64_t durable, std::mt19937_64& rng) {
  std::optional<int64_t> last;
  // A child killed early may not have created the partition dir yet: nothing was written, nothing to lose.
  if (!fs::is_directory(dir)) return "-";
  for (const auto& e : fs::directory_iterator(dir))
    if (auto base = parse_segment_base_offset(e.path().filename().string(), log_suffix))
      last = std::max(last.value_or(*base), *base);
  if (!last) return "-";
  const fs::path path = segment_file_path(dir, *last, log_suffix);
  auto data = read_whole_file(path);
  // The durable boundary: the end of the last batch whose offsets are all below `durable`.
  size_t boundary = 0;
  proto::batch_splitter splitter(data);
  while (auto batch = splitter.next()) {
    if (proto::parse_batch_header(*batch)->next_offset() > durable) break;
    boundary = splitter.position();
  }
  if (boundary >= data.size()) return "-";
  const size_t cut = boundary + rng() % (data.size() - boundary + 1);
  data.resize(cut);
  std::string what = "cut " + std::to_string(cut);
  if (rng() % 2 == 0) {
    size_t garbage = 1 + rng() % 6000;
    for (size_t i = 0; i < garbage; ++i) data.push_back(static_cast<uint8_t>(rng()));
    what += "+" + std::to_string(garbage) + " garbage";
  }
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(data.data()), static_cast<std::streamsize>(data.size()));
  return what;
}

TEST(storage_crash, sigkill_during_appends_never_loses_fsynced_data) {
  mala::set_log_level("error");
  uint64_t seed = std::random_device{}();
  if (const char* s = std::getenv("MALA_CRASH_SEED")) seed = std::strtoull(s, nullptr, 10);
  std::printf("storage_crash seed: %llu (replay with MALA_CRASH_SEED=%llu)\n",
              static_cast<unsigned long long>(seed), static_cast<unsigned long long>(seed));
  std::mt19937_64 rng(seed);
  const fs::path root = fs::temp_directory_path() /
                        ("mala-crash-test-" + std::to_string(seed) + "-" + std::to_string(::getpid()));
  const fs::path dir = root / "crash-0";
  fs::create_directories(root);

  log_config config;  // as the child's
  config.segment_bytes = 256 * 1024;
  config.index_interval_bytes = 4096;
  config.segment_index_bytes = 64 * 1024;
  config.max_message_bytes = 1024 * 1024;

  constexpr int rounds = 50;
  constexpr uint64_t reset_bytes = 32u << 20;  // start over when the log grows past this (keeps rounds quick)
  int64_t durable =
      0;  // every offset below this must survive: acknowledged by a child or flushed by our close
  int resets = 0, early_kills = 0, total_flushes = 0, segments_seen = 0;
  int64_t cut_bytes = 0;
  auto started = clock_type::now();

  for (int round = 0; round < rounds && !HasFailure(); ++round) {
    SCOPED_TRACE("round " + std::to_string(round) + ", seed " + std::to_string(seed));
    const int flush_every = 1 + static_cast<int>(rng() % 8);
    const bool early = rng() % 5 == 0;  // kill while the child may still be opening / recovering
    const int delay_ms = early ? static_cast<int>(rng() % 15) : 5 + static_cast<int>(rng() % 120);
    const int64_t child_recovery_point = (rng() % 2 == 0) ? 0 : durable;

    auto child = spawn_child(dir, flush_every, child_recovery_point);
    ASSERT_GT(child.pid, 0);
    if (early) {
      ++early_kills;
      std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms));
    } else {
      // Wait for the child's recovery to finish ("open N"), then let it append for a while.
      auto deadline = clock_type::now() + std::chrono::seconds(20);
      while (!parse_output(child.buffer).opened_at && clock_type::now() < deadline) drain(child, 10);
      drain(child, delay_ms);
    }
    ::kill(child.pid, SIGKILL);
    int wstatus = 0;
    ::waitpid(child.pid, &wstatus, 0);
    drain(child, 1000);
    ::close(child.out);
    ASSERT_TRUE(WIFSIGNALED(wstatus) && WTERMSIG(wstatus) == SIGKILL)
        << "child exited on its own (status " << wstatus << "); output: " << child.buffer;
    auto report = parse_output(child.buffer);
    if (!early) {
      ASSERT_TRUE(report.opened_at) << "child never opened the log; output: " << child.buffer;
    }
    if (report.opened_at) {
      // The child's recovery must not have dropped anything we proved durable either.
      EXPECT_GE(*report.opened_at, durable);
    }
    total_flushes += report.flushes;
    if (report.flushed) durable = std::max(durable, *report.flushed);

    // SIGKILL keeps everything already written in the page cache, so in a third of the rounds we also play
    // power loss: what was not fsynced may be gone (the last segment cut anywhere after the durable bytes) or
    // half-written (random bytes after the cut).
    std::string power_loss = "-";
    if (rng() % 3 == 0) power_loss = simulate_power_loss(dir, durable, rng);

    // Reopen here, unclean; recovery point: 0 (rescan everything) or the durable offset (what a checkpoint
    // would say), alternately.
    log_open_options options;
    options.clean_shutdown = false;
    options.recovery_point = (round % 2 == 0) ? 0 : durable;
    auto opened = partition_log::open(dir, {"crash", 0}, config, options);
    ASSERT_TRUE(opened.ok()) << opened.error().message;
    auto& log = **opened;
    cut_bytes += log.recovery_report().truncated_bytes;
    EXPECT_EQ(log.log_start_offset(), 0);
    EXPECT_GE(log.log_end_offset(), durable) << "acknowledged-and-fsynced data lost";

    auto reads = check_reads(log);
    EXPECT_TRUE(reads.ok()) << "reads after recovery:\n" << reads.describe();
    auto files = check_files(dir);
    EXPECT_TRUE(files.ok()) << "files after recovery:\n" << files.describe();
    if (files.batches > 0) {
      EXPECT_EQ(files.start_offset, 0);
      EXPECT_EQ(files.end_offset, log.log_end_offset());
    }
    segments_seen = std::max(segments_seen, static_cast<int>(files.segments));

    // A few point reads through the sparse index.
    std::uniform_int_distribution<int64_t> pick(0, std::max<int64_t>(0, log.log_end_offset() - 1));
    for (int i = 0; i < 20 && log.log_end_offset() > 0; ++i) {
      int64_t target = pick(rng);
      auto r = log.read(target, 1, log.log_end_offset(), true);
      ASSERT_TRUE(r.ok() && r->data && r->data->size > 0) << "read(" << target << ")";
      auto bytes = r->data->file->read(r->data->position, r->data->size);
      ASSERT_TRUE(bytes.ok());
      auto header = protocol::parse_batch_header(*bytes);
      ASSERT_TRUE(header);
      EXPECT_LE(header->base_offset, target);
      EXPECT_GE(header->last_offset(), target);
      EXPECT_EQ(check_batch(*bytes), "");
    }

    std::printf(
        "round %2d: flush every %d, %s kill after %3d ms: child acked %lld (%d flushes), power loss %s, "
        "recovered to %lld, %lld bytes cut, %lld segments, %lld index entries\n",
        round, flush_every, early ? "early" : "     ", delay_ms,
        static_cast<long long>(report.flushed.value_or(-1)), report.flushes, power_loss.c_str(),
        static_cast<long long>(log.log_end_offset()),
        static_cast<long long>(log.recovery_report().truncated_bytes), static_cast<long long>(files.segments),
        static_cast<long long>(files.offset_index_entries));

    // Our close flushes everything, so the next child must find at least this much.
    ASSERT_TRUE(log.close().ok());
    durable = log.log_end_offset();
    opened->reset();
    if (dir_bytes(dir) > reset_bytes) {
      fs::remove_all(dir);
      durable = 0;
      ++resets;
    }
  }
  auto elapsed = std::chrono::duration_cast<std::chrono::milliseconds>(clock_type::now() - started).count();
  std::printf(
      "storage_crash: %d rounds (%d early kills), %d acknowledged flushes, %lld bytes cut by recovery, up "
      "to %d segments, %d restarts from empty, %lld ms\n",
      rounds, early_kills, total_flushes, static_cast<long long>(cut_bytes), segments_seen, resets,
      static_cast<long long>(elapsed));
  if (!HasFailure()) fs::remove_all(root);
}

}  // namespace
}  // namespace mala::storage::crash_test
