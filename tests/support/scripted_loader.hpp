// A model_loader for actor tests: wraps file_loader and lets a test hold loads at a gate, fail
// them on command and see which loads started, in order. Thread-safe (loads run on pool threads).
#pragma once

#include <chrono>
#include <condition_variable>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "warm/model_loader.hpp"

namespace warm::test {

class scripted_loader final : public model_loader {
 public:
  expected<std::unique_ptr<resident_model>> load(device& dev, const model_location& where,
                                                 memory_reservation reservation,
                                                 load_stats* stats) override;

  // Loads block after starting until let_through() admits them (one per call), while held.
  void hold();
  void let_through(int loads = 1);
  void open_gate();  // stop holding; admits every blocked load

  // Loads of `model` (its directory name in the repository) fail with load_failed while set;
  // `on_device` limits it to one device.
  void fail(const std::string& model, bool failing = true, const std::string& on_device = "");

  // Models in the order their loads started (one entry per attempt), and "model@device" pairs.
  std::vector<std::string> started() const;
  std::vector<std::string> attempts() const;
  int loads_of(const std::string& model) const;

  // Waits (up to `limit`) until `count` loads have started; false on timeout.
  bool wait_started(std::size_t count,
                    std::chrono::milliseconds limit = std::chrono::seconds(10)) const;

 private:
  static std::string model_of(const std::string& path);

  mutable std::mutex mutex_;
  mutable std::condition_variable changed_;
  bool holding_ = false;
  int admitted_ = 0;
  std::set<std::pair<std::string, std::string>> failing_;  // (model, device or "")
  std::vector<std::string> started_, attempts_;
  file_loader files_;
};

}  // namespace warm::test
