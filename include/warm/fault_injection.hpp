// Fault injection for tests, soak runs and drills: a loader that fails a fraction of loads or
// slows them, and host devices whose allocations fail. Both draw from one fault_injector, whose
// plan may change while loads run (a test turns storage "off" and back "on").
//
//   auto faults = std::make_shared<warm::fault_injector>(warm::fault_plan{.load_failure_rate =
//   0.2}); options.loader = std::make_shared<warm::faulty_loader>(faults); options.make_device =
//   warm::faulty_device_factory(faults);
//
// Injected failures carry "(injected fault)" in their message, so nobody mistakes them for real.
//
// A stalled device: hold_inferences(min_batch) makes every inference of at least min_batch rows
// on a faulty device wait, inside the device and with its lease held, until release_inferences();
// tests use it to keep a heavy inference in flight for exactly as long as they need.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <random>

#include "warm/device.hpp"
#include "warm/model_loader.hpp"

namespace warm {

struct fault_plan {
  double load_failure_rate = 0;        // share of loads failing with load_failed, before reading
  double allocation_failure_rate = 0;  // share of device allocations failing as out of memory
  std::chrono::milliseconds min_load_delay{0};  // each load first sleeps a uniform time in
  std::chrono::milliseconds max_load_delay{0};  // [min, max] (a slow disk)
};

// Draws faults from a plan with a seeded generator. Thread-safe.
class fault_injector {
 public:
  explicit fault_injector(fault_plan plan = {}, std::uint64_t seed = 1);

  void set_plan(const fault_plan& plan);
  fault_plan plan() const;

  bool fail_load();
  bool fail_allocation();
  std::chrono::milliseconds load_delay();

  // From now on, inferences with batch >= min_batch wait in before_inference until
  // release_inferences(). Thread-safe.
  void hold_inferences(std::uint64_t min_batch);
  // Lets every waiting inference run and stops holding new ones.
  void release_inferences();
  // Inferences waiting now.
  std::uint64_t held_inferences() const;
  // Called by faulty devices before each inference; blocks while the batch is held.
  void before_inference(std::uint64_t batch);

  std::uint64_t loads_failed() const { return loads_failed_.load(); }
  std::uint64_t allocations_failed() const { return allocations_failed_.load(); }

 private:
  bool draw(double rate);

  mutable std::mutex mutex_;
  fault_plan plan_;
  std::mt19937_64 random_;
  std::condition_variable released_;   // with mutex_
  std::uint64_t hold_from_batch_ = 0;  // 0: nothing held; guarded by mutex_
  std::uint64_t held_ = 0;             // guarded by mutex_
  std::atomic<std::uint64_t> loads_failed_{0};
  std::atomic<std::uint64_t> allocations_failed_{0};
};

// A model_loader that sleeps the plan's delay, fails the plan's share of loads with
// load_failed, and hands the rest to `inner` (default: file_loader).
class faulty_loader final : public model_loader {
 public:
  explicit faulty_loader(std::shared_ptr<fault_injector> faults,
                         std::shared_ptr<model_loader> inner = nullptr);
  expected<std::unique_ptr<resident_model>> load(device& dev, const model_location& where,
                                                 memory_reservation reservation,
                                                 load_stats* stats) override;

 private:
  std::shared_ptr<fault_injector> faults_;
  std::shared_ptr<model_loader> inner_;
};

// A device factory (runtime_options::make_device) making host devices whose allocations fail
// the plan's share of the time and whose inferences wait while held (hold_inferences); CUDA specs
// are refused (unavailable).
std::function<expected<std::unique_ptr<device>>(const device_spec&)> faulty_device_factory(
    std::shared_ptr<fault_injector> faults);

}  // namespace warm
