// How much memory the HTTP front's request decoding may hold at once, across every connection:
// each inference body takes an estimate of what decoding it costs (its tensors, and the doubles
// of data that came before its shape) before it is decoded, and gives it back when its tensors
// are gone. A body that does not fit waits for others to finish, up to a deadline; so 32
// clients sending 64 MiB bodies at once are decoded a few at a time instead of all together.
//
// Thread-safe (the front's worker threads); a wait blocks only its own thread.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>

namespace warm::http {

class decode_budget {
 public:
  // `bytes`: the memory all decodes together may hold (> 0).
  explicit decode_budget(std::uint64_t bytes) : capacity_(bytes) {}

  // Holds `bytes` of the budget until destroyed (or moved from).
  class ticket {
   public:
    ticket() = default;
    ticket(ticket&& o) noexcept : budget_(o.budget_), bytes_(o.bytes_) { o.budget_ = nullptr; }
    ticket& operator=(ticket&& o) noexcept;
    ~ticket() { release(); }
    explicit operator bool() const { return budget_ != nullptr; }

   private:
    friend class decode_budget;
    ticket(decode_budget* budget, std::uint64_t bytes) : budget_(budget), bytes_(bytes) {}
    void release();
    decode_budget* budget_ = nullptr;
    std::uint64_t bytes_ = 0;
  };

  // A ticket for `bytes` once that much is free, waiting at most `wait`; an empty ticket when the
  // wait ran out. A request larger than the whole budget gets it when nothing else holds any
  // (it is never refused for its size alone: the body limits bound that).
  ticket acquire(std::uint64_t bytes, std::chrono::milliseconds wait);

  std::uint64_t held() const;  // bytes held now (tests, metrics)

  // What decoding a body costs at most, as acquire should be asked: 4 bytes per byte of JSON
  // (an FP64 element or a double per number of at least two characters, "0,"), plus the binary
  // part as it is.
  static std::uint64_t estimate(std::uint64_t json_bytes, std::uint64_t binary_bytes) {
    return 4 * json_bytes + binary_bytes;
  }

 private:
  const std::uint64_t capacity_;
  mutable std::mutex mutex_;
  std::condition_variable freed_;
  std::uint64_t held_ = 0;
};

}  // namespace warm::http
