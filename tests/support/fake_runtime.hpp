// A model runtime (schemas/runtime.capnp) that answers as a test sets it, served on a Unix
// socket from a thread of its own: what warmd does with a runtime's odd or hostile answers,
// without a process to start. warmd's side connects with runtime_link_options::socket.
//
// It loads any model as dense [16 → 8] ("input" F32 [-1, 16] → "output" F32 [-1, 8], batched),
// answering `measured` bytes, and answers inferences of zeros as `infer_answer` says. The knobs
// are atomics a test may change at any time; the counters are read the same way.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

namespace warm::test {

class fake_runtime {
 public:
  enum class answer {
    correct,      // [batch, 8] F32
    extra_row,    // [batch + 1, 8] F32, with its data
    overflowing,  // "output" F64 of shape [2^61] and no data: 2^61 x 8 bytes wraps to 0
  };

  // Listens on `socket` (a path) before it returns. Throws std::runtime_error when it cannot.
  explicit fake_runtime(std::string socket);
  // Stops serving (connections close) and joins its thread.
  ~fake_runtime();
  fake_runtime(const fake_runtime&) = delete;
  fake_runtime& operator=(const fake_runtime&) = delete;

  const std::string& socket() const { return socket_; }

  // ---- what it answers ----
  std::atomic<std::uint64_t> capacity{64 * 1024};
  std::atomic<std::uint32_t> loading_threads{1};
  std::atomic<std::uint64_t> measured{544};  // a load's bytes
  std::atomic<answer> infer_answer{answer::correct};
  // status.loaded lists this many ids ("orphan#N") besides the models it holds.
  std::atomic<std::uint64_t> orphans{0};
  // status.rssBytes = base_rss + the loaded models' `measured` + extra_rss; 0 when measure_rss
  // is false. status.baseRssBytes = base_rss.
  std::atomic<bool> measure_rss{true};
  std::atomic<std::uint64_t> base_rss{std::uint64_t{8} << 20};
  std::atomic<std::uint64_t> extra_rss{0};
  // Each unload is answered this many milliseconds after it arrives (0: at once).
  std::atomic<std::uint32_t> unload_delay_ms{0};

  // ---- what it saw ----
  std::atomic<std::uint64_t> statuses{0};
  std::atomic<std::uint64_t> loads{0};
  std::atomic<std::uint64_t> unloads{0};
  std::atomic<std::uint64_t> unloads_at_once{0};       // unloads arrived and not yet answered
  std::atomic<std::uint64_t> most_unloads_at_once{0};  // the most of those at any time
  std::atomic<std::uint64_t> inferences{0};
  std::atomic<std::uint64_t> held{0};  // models it holds now

  class server;

 private:
  struct thread_state;
  std::string socket_;
  std::unique_ptr<thread_state> thread_;
};

}  // namespace warm::test
