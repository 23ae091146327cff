#include "eval/cluster_sim.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <random>
#include <set>
#include <unordered_map>

#include "eval/support.hpp"
#include "policy/cache_policy.hpp"

namespace warm::eval {
namespace {

struct instance {
  std::unique_ptr<cache_policy> policy;
  std::unordered_map<std::size_t, double> residents;  // catalog index → last use (ms)
  std::uint64_t used = 0;
  std::vector<double> thread_free_ms;    // when each loading thread is next free
  std::multiset<double> loads_ready_ms;  // loads placed here that may still be under way
  std::uint64_t claimed_since_record =
      0;  // bytes placed here since its last record (warm's claims)
  std::uint64_t cold_starts = 0;

  std::uint32_t loads_in_flight(double now_ms) {
    loads_ready_ms.erase(loads_ready_ms.begin(), loads_ready_ms.upper_bound(now_ms));
    return static_cast<std::uint32_t>(loads_ready_ms.size());
  }
};

struct placed {
  static constexpr std::size_t nowhere = std::numeric_limits<std::size_t>::max();
  std::size_t at = nowhere;  // instance holding (or loading) the model
  double ready_ms = 0;       // when its load finishes
};

class cluster_run {
 public:
  cluster_run(const trace& requests, const catalog& models, const cluster_options& options)
      : requests_(requests), models_(models), options_(options) {}

  expected<cluster_result> run() {
    if (auto ok = check(); !ok) return std::move(ok).error();
    for (std::size_t i = 0; i < models_.size(); ++i)
      index_.emplace(models_[i].model, i);
    where_.assign(models_.size(), placed{});
    remembered_.assign(models_.size(), cache_policy::history{});
    auto tuning = options_.tuning;
    tuning.capacity = options_.instance_capacity;
    for (std::size_t i = 0; i < options_.instances; ++i) {
      auto made = make_policy(options_.policy, tuning);
      if (!made) return std::move(made).error();
      instances_.push_back(
          {std::move(*made), {}, 0, std::vector<double>(options_.loading_threads, 0.0), {}, 0, 0});
    }
    records_.resize(options_.instances);

    for (const auto& r : requests_) {
      auto found = index_.find(r.model);
      if (found == index_.end())
        return make_error(errc::invalid_argument, "model '" + r.model + "' is not in the catalog");
      auto m = found->second;
      if (models_[m].bytes > options_.instance_capacity)
        return make_error(errc::invalid_argument,
                          "model '" + r.model + "' (" + std::to_string(models_[m].bytes) +
                              " bytes) is larger than an instance (" +
                              std::to_string(options_.instance_capacity) + " bytes)");
      if (auto ok = serve(m, r.time_ms); !ok) return std::move(ok).error();
    }
    return finish();
  }

 private:
  expected<void> check() const {
    if (options_.instances == 0)
      return make_error(errc::invalid_argument, "a cluster needs at least one instance");
    if (options_.loading_threads == 0)
      return make_error(errc::invalid_argument, "loading threads must be at least 1");
    if (!(options_.record_seconds >= 0) || !std::isfinite(options_.record_seconds))
      return make_error(errc::invalid_argument,
                        "the record interval must be a finite number of seconds >= 0");
    return {};
  }

  expected<void> serve(std::size_t m, double now_ms) {
    ++result_.requests;
    auto& w = where_[m];
    if (w.at != placed::nowhere) {
      auto& inst = instances_[w.at];
      inst.policy->on_access(models_[m].model, detail::at_ms(now_ms), 1);
      inst.residents[m] = now_ms;
      if (w.ready_ms > now_ms) {
        ++result_.waited;
        result_.wait_ms_total += w.ready_ms - now_ms;
      }
      return {};
    }
    return place(m, now_ms);
  }

  // A cold start: rank the instances from their records and load the model on the first that
  // can make room (a model still loading is pinned).
  expected<void> place(std::size_t m, double now_ms) {
    const auto& model = models_[m];
    publish_if_due(now_ms);
    auto views = views_for_placement(now_ms);
    ranking::placement_request request{model.bytes, model.load_ms / 1000};
    auto ranked = ranking::rank_instances(views, request, options_.placement);
    if (ranked.empty()) return make_error(errc::internal, "no instance can hold " + model.model);
    if (options_.placement == ranking::placement_rule::modelmesh) {
      auto shortlist = ranking::modelmesh_shortlist(views, ranked, request);
      if (shortlist > 1) {  // the drawn one first, the rest in order behind it
        auto drawn = ranked.begin() + static_cast<std::ptrdiff_t>(rng_() % shortlist);
        std::rotate(ranked.begin(), drawn, drawn + 1);
      }
    }
    auto loading = [&](const std::string& id) { return where_[index_.at(id)].ready_ms > now_ms; };
    for (auto i : ranked)
      if (make_room(i, m, now_ms, loading)) return load(i, m, now_ms);
    ++result_.forced;
    auto i = ranked.front();
    if (!make_room(i, m, now_ms, [](const std::string&) { return false; }))
      return make_error(errc::internal, options_.policy + " found no victims for " + model.model);
    return load(i, m, now_ms);
  }

  bool make_room(std::size_t i, std::size_t m, double now_ms, const pinned_fn& pinned) {
    auto& inst = instances_[i];
    const auto& model = models_[m];
    if (inst.used + model.bytes <= options_.instance_capacity) return true;
    auto victims = inst.policy->choose_victims(model.model,
                                               inst.used + model.bytes - options_.instance_capacity,
                                               pinned, detail::at_ms(now_ms));
    if (victims.empty()) return false;
    for (auto& v : victims) {
      auto vi = index_.at(v);
      remembered_[vi] = inst.policy->remembered(v);  // carried by the model's record
      inst.policy->on_remove(v, true);
      inst.residents.erase(vi);
      inst.used -= models_[vi].bytes;
      where_[vi] = placed{};
      ++result_.evictions;
    }
    return true;
  }

  expected<void> load(std::size_t i, std::size_t m, double now_ms) {
    auto& inst = instances_[i];
    const auto& model = models_[m];
    auto thread = std::min_element(inst.thread_free_ms.begin(), inst.thread_free_ms.end());
    double ready = std::max(now_ms, *thread) + model.load_ms;
    *thread = ready;
    inst.loads_ready_ms.insert(ready);
    inst.policy->remember(model.model, remembered_[m]);
    inst.policy->on_insert(model.model, model.bytes, model.load_ms / 1000, detail::at_ms(now_ms));
    inst.residents[m] = now_ms;
    inst.used += model.bytes;
    inst.claimed_since_record += model.bytes;
    ++inst.cold_starts;
    where_[m] = {i, ready};
    ++result_.cold_starts;
    ++result_.waited;
    result_.load_ms_total += model.load_ms;
    result_.wait_ms_total += ready - now_ms;
    return {};
  }

  // Every instance republishes its record when the interval has passed (every placement when it
  // is 0), as the cluster's instances do to etcd.
  void publish_if_due(double now_ms) {
    if (published_ && now_ms < next_record_ms_) return;
    share_time_scale();
    for (std::size_t i = 0; i < instances_.size(); ++i)
      records_[i] = record_of(i, now_ms);
    published_ = true;
    next_record_ms_ = now_ms + options_.record_seconds * 1000;
  }

  // The instances' policies agree on one time scale, the geometric mean of those they measured
  // (as each reads the others' from their records), so that their values compare.
  void share_time_scale() {
    double log_sum = 0;
    std::size_t known = 0;
    for (auto& inst : instances_)
      if (double t = inst.policy->time_scale(); t > 0) log_sum += std::log(t), ++known;
    if (known == 0) return;
    double shared = std::exp(log_sum / static_cast<double>(known));
    for (auto& inst : instances_)
      inst.policy->share_time_scale(shared);
  }

  ranking::instance_view record_of(std::size_t i, double now_ms) {
    auto& inst = instances_[i];
    ranking::instance_view v;
    v.capacity = options_.instance_capacity;
    v.used = inst.used;
    v.models = static_cast<std::uint32_t>(inst.residents.size());
    v.loads_in_flight = inst.loads_in_flight(now_ms);
    v.loading_threads = options_.loading_threads;
    double least_recent = now_ms;
    for (auto& [model, last] : inst.residents)
      least_recent = std::min(least_recent, last);
    v.idle_seconds = (now_ms - least_recent) / 1000;
    v.candidates = ranking::eviction_candidates(
        *inst.policy, [&](const std::string& id) { return models_[index_.at(id)].bytes; },
        detail::at_ms(now_ms));
    inst.claimed_since_record = 0;
    return v;
  }

  // warm's placement adds its claims since each record; ModelMesh's sees the records alone.
  std::vector<ranking::instance_view> views_for_placement(double now_ms) {
    auto views = records_;
    if (options_.placement == ranking::placement_rule::warm)
      for (std::size_t i = 0; i < views.size(); ++i) {
        views[i].reserved = instances_[i].claimed_since_record;
        views[i].loads_in_flight = instances_[i].loads_in_flight(now_ms);
      }
    return views;
  }

  cluster_result finish() {
    auto& r = result_;
    r.policy = options_.policy;
    r.placement = std::string(ranking::to_string(options_.placement));
    r.instances = options_.instances;
    r.instance_capacity = options_.instance_capacity;
    r.hit_ratio = r.requests
                      ? static_cast<double>(r.requests - r.waited) / static_cast<double>(r.requests)
                      : 0;
    r.wait_ms_per_request = r.requests ? r.wait_ms_total / static_cast<double>(r.requests) : 0;
    std::uint64_t most = 0;
    for (auto& inst : instances_)
      most = std::max(most, inst.cold_starts);
    r.max_share =
        r.cold_starts ? static_cast<double>(most) / static_cast<double>(r.cold_starts) : 0;
    return r;
  }

  const trace& requests_;
  const catalog& models_;
  const cluster_options& options_;
  std::unordered_map<std::string, std::size_t> index_;
  std::vector<placed> where_;
  std::vector<cache_policy::history> remembered_;  // what its last instance's policy remembered
  std::vector<instance> instances_;
  std::vector<ranking::instance_view> records_;
  bool published_ = false;
  double next_record_ms_ = 0;
  std::mt19937_64 rng_{options_.seed};
  cluster_result result_;
};

}  // namespace

expected<cluster_result> simulate_cluster(const trace& requests, const catalog& models,
                                          const cluster_options& options) {
  return cluster_run(requests, models, options).run();
}

}  // namespace warm::eval
