#include "warm/fault_injection.hpp"

#include <algorithm>
#include <thread>

#include "gpu/host_device.hpp"

namespace warm {

fault_injector::fault_injector(fault_plan plan, std::uint64_t seed) : plan_(plan), random_(seed) {}

void fault_injector::set_plan(const fault_plan& plan) {
  std::lock_guard<std::mutex> lock(mutex_);
  plan_ = plan;
}

fault_plan fault_injector::plan() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return plan_;
}

bool fault_injector::draw(double rate) {
  if (rate <= 0) return false;
  if (rate >= 1) return true;
  return std::uniform_real_distribution<double>(0, 1)(random_) < rate;
}

bool fault_injector::fail_load() {
  std::lock_guard<std::mutex> lock(mutex_);
  bool fail = draw(plan_.load_failure_rate);
  if (fail) ++loads_failed_;
  return fail;
}

bool fault_injector::fail_allocation() {
  std::lock_guard<std::mutex> lock(mutex_);
  bool fail = draw(plan_.allocation_failure_rate);
  if (fail) ++allocations_failed_;
  return fail;
}

std::chrono::milliseconds fault_injector::load_delay() {
  std::lock_guard<std::mutex> lock(mutex_);
  auto lo = plan_.min_load_delay.count(), hi = std::max(plan_.max_load_delay.count(), lo);
  if (hi <= 0) return std::chrono::milliseconds(0);
  return std::chrono::milliseconds(std::uniform_int_distribution<std::int64_t>(lo, hi)(random_));
}

void fault_injector::hold_inferences(std::uint64_t min_batch) {
  std::lock_guard<std::mutex> lock(mutex_);
  hold_from_batch_ = std::max<std::uint64_t>(min_batch, 1);
}

void fault_injector::release_inferences() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    hold_from_batch_ = 0;
  }
  released_.notify_all();
}

std::uint64_t fault_injector::held_inferences() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return held_;
}

void fault_injector::before_inference(std::uint64_t batch) {
  std::unique_lock<std::mutex> lock(mutex_);
  if (hold_from_batch_ == 0 || batch < hold_from_batch_) return;
  ++held_;
  released_.wait(lock, [&] { return hold_from_batch_ == 0; });
  --held_;
}

faulty_loader::faulty_loader(std::shared_ptr<fault_injector> faults,
                             std::shared_ptr<model_loader> inner)
    : faults_(std::move(faults)),
      inner_(inner ? std::move(inner) : std::make_shared<file_loader>()) {}

expected<std::unique_ptr<resident_model>> faulty_loader::load(device& dev,
                                                              const model_location& where,
                                                              memory_reservation reservation,
                                                              load_stats* stats) {
  if (auto delay = faults_->load_delay(); delay.count() > 0) std::this_thread::sleep_for(delay);
  if (faults_->fail_load())
    return make_error(errc::load_failed, "loading " + where.path +
                                             " failed (injected fault)");  // frees the reservation
  return inner_->load(dev, where, std::move(reservation), stats);
}

std::function<expected<std::unique_ptr<device>>(const device_spec&)> faulty_device_factory(
    std::shared_ptr<fault_injector> faults) {
  return [faults](const device_spec& spec) -> expected<std::unique_ptr<device>> {
    if (spec.type != device_spec::kind::host)
      return make_error(errc::unavailable,
                        "fault injection supports host devices only, not " + spec.to_string());
    auto name = spec.partition < 0 ? std::string("host") : "host." + std::to_string(spec.partition);
    host_device_hooks hooks;
    hooks.allocation_fault = [faults] { return faults->fail_allocation(); };
    hooks.before_run = [faults](std::uint64_t batch) { faults->before_inference(batch); };
    return make_host_device(spec.capacity.value_or(std::uint64_t{1} << 30), name, std::move(hooks));
  };
}

}  // namespace warm
