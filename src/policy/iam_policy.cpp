#include "policy/iam_policy.hpp"

#include <unordered_set>

namespace warm {

iam_policy::iam_policy(const policy_options& options)
    : options_(options), live_(build_importance_heap({}, options.iam_bias, timestamp{})) {}

iam_policy::rate_state& iam_policy::rates_of(const std::string& model) {
  auto it = rates_.find(model);
  if (it == rates_.end())
    it = rates_.emplace(model, rate_state{rate_meter(options_.rate_tau), 0, {}}).first;
  return it->second;
}

double iam_policy::rate(const std::string& model, timestamp now) {
  auto& r = rates_of(model);
  if (options_.iam_rate == "window") {
    auto horizon = now - std::chrono::duration_cast<timestamp::duration>(options_.rate_window);
    while (!r.window.empty() && r.window.front().first < horizon)
      r.window.pop_front();
    std::uint64_t n = 0;
    for (auto& [t, c] : r.window)
      n += c;
    return static_cast<double>(n) / options_.rate_window.count();
  }
  r.ewma.sample(r.count, now);
  return r.ewma.per_second();
}

void iam_policy::on_insert(const std::string& model, std::uint64_t bytes, double load_seconds,
                           timestamp now) {
  residents_[model] = {bytes, load_seconds};
  on_access(model, now, 1);  // the request that missed
  score_input in{model, bytes, load_seconds, rate(model, now)};
  fresh_.set(model, live_->rank_of(utility(in), options_.iam_bias), bytes);
}

void iam_policy::on_access(const std::string& model, timestamp now, std::uint64_t count) {
  auto& r = rates_of(model);
  r.count += count;
  if (options_.iam_rate == "window")
    r.window.push_back({now, count});
  else
    r.ewma.sample(r.count, now);
}

void iam_policy::on_remove(const std::string& model, bool) {
  residents_.erase(model);
  fresh_.erase(model);
}

std::vector<score_input> iam_policy::score_inputs(timestamp now) {
  std::vector<score_input> inputs;
  inputs.reserve(residents_.size());
  for (auto& [model, r] : residents_)
    inputs.push_back({model, r.bytes, r.penalty, rate(model, now)});
  return inputs;
}

void iam_policy::swap_scores(std::shared_ptr<const importance_heap> heap) {
  live_ = std::move(heap);
  live_head_ = 0;
  std::unordered_set<std::string> scored;
  for (auto& e : live_->entries)
    scored.insert(e.model);
  for (auto& model : fresh_.in_order())
    if (scored.count(model)) fresh_.erase(model);
}

std::vector<std::string> iam_policy::choose_victims(const std::string&, std::uint64_t bytes,
                                                    const pinned_fn& pinned, timestamp now) {
  if (options_.rescore_period.count() > 0 &&
      now - live_->built >=
          std::chrono::duration_cast<timestamp::duration>(options_.rescore_period))
    swap_scores(build_importance_heap(score_inputs(now), options_.iam_bias, now));

  // Merge the live heap (skipping models gone or re-inserted since it was built) with the fresh
  // inserts, lowest rank first. A model once gone from the heap's view stays gone until the next
  // swap (a re-insert goes to fresh_), so the scan starts past those seen before.
  const auto& entries = live_->entries;
  auto in_heap = [&](const importance_entry& e) {
    return residents_.count(e.model) && !fresh_.contains(e.model);
  };
  while (live_head_ < entries.size() && !in_heap(entries[live_head_]))
    ++live_head_;
  std::size_t h = live_head_;
  auto f = fresh_.begin();
  std::vector<std::string> victims;
  std::uint64_t freed = 0;
  while (freed < bytes) {
    while (h < entries.size() && (!in_heap(entries[h]) || pinned(entries[h].model)))
      ++h;
    while (f != fresh_.end() && pinned(fresh_.model_at(f)))
      ++f;
    bool have_h = h < entries.size(), have_f = f != fresh_.end();
    if (!have_h && !have_f) return {};
    const std::string* model;
    if (have_h && (!have_f || entries[h].rank <= fresh_.key_at(f)))
      model = &entries[h++].model;
    else
      model = &fresh_.model_at(f++);
    victims.push_back(*model);
    freed += residents_.at(*model).bytes;
  }
  return victims;
}

std::vector<cache_policy::ranked> iam_policy::eviction_order(timestamp) const {
  std::vector<ranked> out;
  auto fresh = fresh_.entries();
  std::size_t f = 0;
  for (auto& e : live_->entries) {
    if (!residents_.count(e.model) || fresh_.contains(e.model)) continue;
    while (f < fresh.size() && fresh[f].second < e.rank)
      out.push_back({fresh[f].first, fresh[f].second}), ++f;
    out.push_back({e.model, e.rank});
  }
  for (; f < fresh.size(); ++f)
    out.push_back({fresh[f].first, fresh[f].second});
  return out;
}

}  // namespace warm
