#include "copies.hpp"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <future>
#include <map>
#include <mutex>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "node/membership.hpp"
#include "placer.hpp"
#include "warm/runtime.hpp"

namespace warm::warmd {

namespace {

using steady = std::chrono::steady_clock;

std::int64_t steady_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(steady::now().time_since_epoch())
      .count();
}
std::int64_t unix_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace

struct copy_scaler::impl {
  options o;
  node::queue_meter meter{std::max(o.rule.sustain_ms, o.rule.cool_ms)};
  std::atomic<std::uint64_t> added{0}, dropped{0};

  std::mutex mutex;
  std::condition_variable wake;
  bool stopping = false;
  std::thread thread;  // last: started once the rest is ready

  // The scaler's thread only.
  std::map<std::string, std::int64_t>
      not_before;  // steady ms before which a model is not judged again
  std::int64_t next_drop_check = 0;

  explicit impl(options opts) : o(std::move(opts)) {}

  void run() {
    auto next = steady::now();
    std::unique_lock<std::mutex> lock(mutex);
    for (;;) {
      next += o.tick;
      if (wake.wait_until(lock, next, [&] { return stopping; })) break;
      lock.unlock();
      tick();
      lock.lock();
      next = std::max(next, steady::now() - o.tick);  // a slow tick is not made up for
    }
  }

  void tick() {
    auto answer = o.rt->inspect();
    if (answer.wait_for(std::chrono::seconds(2)) != std::future_status::ready) return;
    auto state = answer.get();
    if (!state) return;
    std::vector<std::pair<std::string, std::uint32_t>> resident;
    std::map<std::string, std::uint64_t> bytes;
    for (const auto& d : state->devices)
      for (const auto& r : d.resident) {
        resident.emplace_back(r.model, r.in_flight);
        bytes[r.model] = r.bytes;
      }
    const auto now = steady_ms();
    meter.sample(now, resident);
    for (auto it = not_before.begin(); it != not_before.end();)
      it = bytes.count(it->first) ? std::next(it) : not_before.erase(it);

    std::vector<std::string> judged;  // hot ones, then cool ones when the cluster is full
    for (const auto& [model, size] : bytes)
      if (auto q = meter.mean(model, o.rule.sustain_ms); q && *q >= o.rule.add_queue)
        judged.push_back(model);
    const bool drops = now >= next_drop_check;
    if (judged.empty() && !drops) return;
    auto members = o.membership->members();
    const bool full = node::cluster_is_full(members, o.rule.full_fraction);
    if (drops) {
      next_drop_check = now + 1000;
      if (full)
        for (const auto& [model, size] : bytes)
          if (copies_of(members, model) >= 2 && meter.mean(model, o.rule.cool_ms))
            judged.push_back(model);
    }
    for (const auto& model : judged)
      judge(model, bytes[model], members, full, now);
  }

  // Live instances holding `model`, not draining, this one counted (its record may lag).
  static std::uint32_t copies_of(const std::vector<node::member>& members,
                                 const std::string& model) {
    std::uint32_t n = 1;
    for (const auto& m : members)
      if (!m.self && !m.record.draining && m.record.holds(model)) ++n;
    return n;
  }

  void judge(const std::string& model, std::uint64_t size, const std::vector<node::member>& members,
             bool full, std::int64_t now) {
    if (auto it = not_before.find(model); it != not_before.end() && now < it->second) return;
    auto read = o.placing->copies_of(model);
    if (!read) {
      not_before[model] = now + 1000;
      return;
    }
    node::copy_view v;
    v.copies = copies_of(members, model);
    for (const auto& m : members)
      if (!m.self && !m.record.draining && !m.record.holds(model) && !m.record.is_loading(model))
        ++v.room;
    v.recent = meter.mean(model, o.rule.sustain_ms);
    v.slow = meter.mean(model, o.rule.cool_ms);
    v.last_change_ms = read->last ? read->last->changed_unix_ms : 0;
    v.cluster_full = full;
    v.now_ms = unix_ms();
    const int change = node::decide_copies(o.rule, v);
    if (change == 0) {
      // Within the settle time: not again before it ends (no etcd read every tick).
      const auto settled = v.last_change_ms + o.rule.settle_ms - v.now_ms;
      not_before[model] = now + std::clamp<std::int64_t>(settled, 250, o.rule.settle_ms);
      return;
    }
    not_before[model] = now + o.rule.settle_ms;
    placer::copies_basis basis{read->revision, v.copies};
    if (change > 0) {
      auto asked = o.placing->add_copies(model, size, static_cast<std::size_t>(change), basis);
      added += asked;
      if (asked > 0 && o.note)
        o.note(
            fmt::format("copies: {} queues {:.1f} requests per copy ({} cop{}); {} more asked for",
                        model, *v.recent, v.copies, v.copies == 1 ? "y" : "ies", asked));
      return;
    }
    if (!o.placing->drop_copy(model, basis)) return;
    ++dropped;
    if (o.note)
      o.note(
          fmt::format("copies: the cluster is full and {} cooled; dropping its copy here ({} left)",
                      model, v.copies - 1));
    o.rt->unload(model, [log = o.log, model](expected<void> r) {
      if (!r && log)
        log("copies: cannot unload the dropped copy of " + model + ": " + r.error().to_string());
    });
  }
};

expected<std::unique_ptr<copy_scaler>> copy_scaler::start(options o) {
  if (auto ok = node::check_copy_rule(o.rule); !ok) return std::move(ok).error();
  if (!o.rt || !o.membership || !o.placing)
    return make_error(errc::invalid_argument,
                      "copies need the runtime, the membership and the placer");
  if (o.tick.count() <= 0)
    return make_error(errc::invalid_argument, "copies: the tick must be positive");
  auto i = std::make_unique<impl>(std::move(o));
  auto* raw = i.get();
  if (raw->o.rule.add_queue > 0) i->thread = std::thread([raw] { raw->run(); });
  return std::unique_ptr<copy_scaler>(new copy_scaler(std::move(i)));
}

copy_scaler::copy_scaler(std::unique_ptr<impl> i) : impl_(std::move(i)) {}

copy_scaler::~copy_scaler() {
  {
    std::lock_guard<std::mutex> lock(impl_->mutex);
    impl_->stopping = true;
  }
  impl_->wake.notify_all();
  if (impl_->thread.joinable()) impl_->thread.join();
}

std::uint64_t copy_scaler::added() const {
  return impl_->added;
}
std::uint64_t copy_scaler::dropped() const {
  return impl_->dropped;
}

}  // namespace warm::warmd
