#include "policy/kdf_policy.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <utility>

#include "policy/kdf_tuner.hpp"

namespace warm {

namespace {

double seconds_between(timestamp from, timestamp to) {
  return std::chrono::duration<double>(to - from).count();
}
double seconds_since_epoch(timestamp t) {
  return std::chrono::duration<double>(t.time_since_epoch()).count();
}

}  // namespace

kdf_policy::kdf_policy(const policy_options& options)
    : auto_tau_(!options.kdf_tau.has_value()),
      fixed_tau_(options.kdf_tau ? options.kdf_tau->count() : 0),
      memory_(options.kdf_memory.value_or(0)),
      horizon_(options.kdf_horizon),
      index_tau_(auto_tau_ ? initial_tau : fixed_tau_) {
  if (auto_tau_ && !options.kdf_memory) tuner_ = std::make_unique<kdf_tuner>(options);
}

kdf_policy::~kdf_policy() = default;

double kdf_policy::memory() const {
  return tuner_ ? tuner_->memory() : memory_;
}

void kdf_policy::set_capacity(std::uint64_t bytes) {
  if (tuner_) tuner_->set_capacity(bytes);
}

double kdf_policy::characteristic_time() const {
  return victims_seen_ > 0 ? characteristic_ : 0;
}

double kdf_policy::tau() const {
  if (!auto_tau_) return fixed_tau_;
  if (shared_characteristic_ > 0) return memory() * shared_characteristic_;
  return victims_seen_ > 0 ? memory() * characteristic_ : initial_tau;
}

double kdf_policy::decayed_count(const decayed& d, timestamp now) const {
  double t = tau();
  if (t <= 0) return d.value;
  double dt = seconds_between(d.at, now);
  return dt <= 0 ? d.value : d.value * std::exp(-dt / t);
}

double kdf_policy::value_of(const resident& r, timestamp now) const {
  double n = decayed_count(*r.count, now);
  if (horizon_ > 0) n = 1 - std::exp(-n * horizon_);
  return n * r.penalty;
}

double kdf_policy::key_of(const resident& r) const {
  double key = r.log_density + std::log(r.count->value);
  if (index_tau_ > 0) key += seconds_since_epoch(r.count->at) / index_tau_;
  return key;
}

void kdf_policy::migrate_index() {
  ++decisions_since_rebuild_;
  if (older_.empty()) {
    double t = tau();
    if (t == index_tau_ ||
        (t > 0 && index_tau_ > 0 && std::abs(std::log(t / index_tau_)) < std::log(rebuild_factor)))
      return;
    // A migration re-keys every resident: at most once per size / rebuild_spacing decisions.
    if (decisions_since_rebuild_ * rebuild_spacing < residents_.size()) return;
    decisions_since_rebuild_ = 0;
    index_tau_ = t;
    // Every entry now holds a key under the previous τ: they wait in older_ (their sequences are
    // all below current_from_) until moved back.
    older_.swap(index_);
    current_from_ = sequence_ + 1;
  }
  // The next migration_step entries, lowest first, re-keyed on their own nodes (no allocation):
  // the migration ends within older_.size() / migration_step decisions of its start.
  for (std::size_t n = 0; n < migration_step && !older_.empty(); ++n)
    place(older_.extract(older_.begin()));
}

kdf_policy::index_type& kdf_policy::index_of(const resident& r) {
  return r.sequence >= current_from_ ? index_ : older_;
}

kdf_policy::index_type::iterator kdf_policy::place(index_type::node_type node) {
  auto& entry = *std::get<2>(node.value());
  auto& r = entry.second;
  r.key = key_of(r);
  r.keyed = *r.count;
  r.sequence = ++sequence_;
  node.value() = {r.key, r.sequence, &entry};
  return index_.insert(std::move(node)).position;
}

kdf_policy::index_type::iterator kdf_policy::reindex(resident_entry& entry) {
  auto& r = entry.second;
  if (r.sequence != 0) return place(index_of(r).extract({r.key, r.sequence, &entry}));
  r.key = key_of(r);
  r.keyed = *r.count;
  r.sequence = ++sequence_;
  return index_.insert({r.key, r.sequence, &entry}).first;
}

std::vector<std::string> kdf_policy::knapsack(std::vector<candidate> cands, std::uint64_t bytes) {
  std::uint64_t available = 0;
  for (auto& c : cands)
    available += c.bytes;
  if (available < bytes) return {};
  // Lower value per byte first; ids break ties, so the hash maps' order never shows.
  auto denser = [](const candidate& a, const candidate& b) {
    double da = a.value / static_cast<double>(a.bytes), db = b.value / static_cast<double>(b.bytes);
    return da != db ? da > db : *a.model > *b.model;
  };
  std::vector<candidate> chosen;
  if (cands.size() <= exact_limit) {
    // Exact: the subset with the least value that frees enough; ties free fewer bytes.
    std::sort(cands.begin(), cands.end(),
              [&](const candidate& a, const candidate& b) { return denser(b, a); });
    double best_value = std::numeric_limits<double>::infinity();
    std::uint64_t best_bytes = 0;
    std::uint32_t best = 0;
    // Every non-empty subset in Gray-code order: each differs from the last by one candidate, so
    // its bytes and value follow by one addition. Values are summed afresh for a subset that may
    // win, so rounding in the running sum never decides a tie.
    std::uint64_t b = 0;
    double running = 0;
    for (std::uint32_t k = 1, set = 0; k < (1u << cands.size()); ++k) {
      std::uint32_t flip = k & (~k + 1);  // the lowest set bit of k
      set ^= flip;
      auto i = static_cast<std::size_t>(__builtin_ctz(flip));
      if (set & flip)
        b += cands[i].bytes, running += cands[i].value;
      else
        b -= cands[i].bytes, running -= cands[i].value;
      if (b < bytes || running > best_value * (1 + 1e-9) + 1e-12) continue;
      double v = 0;
      for (std::size_t j = 0; j < cands.size(); ++j)
        if (set & (1u << j)) v += cands[j].value;
      if (v < best_value || (v == best_value && b < best_bytes) ||
          (v == best_value && b == best_bytes && set < best))
        best_value = v, best_bytes = b, best = set;
    }
    for (std::size_t i = 0; i < cands.size(); ++i)
      if (best & (1u << i)) chosen.push_back(cands[i]);
  } else {
    // Greedy by value per byte (a heap: O(n + k log n) for k victims), then any single model
    // that frees enough alone for less value.
    std::vector<candidate> heap = cands;
    std::make_heap(heap.begin(), heap.end(), denser);
    double greedy_value = 0;
    std::uint64_t freed = 0;
    while (freed < bytes) {
      std::pop_heap(heap.begin(), heap.end(), denser);
      chosen.push_back(heap.back());
      heap.pop_back();
      freed += chosen.back().bytes;
      greedy_value += chosen.back().value;
    }
    for (auto& c : cands)
      if (c.bytes >= bytes && c.value < greedy_value) {
        greedy_value = c.value;
        chosen = {c};
      }
  }
  std::sort(chosen.begin(), chosen.end(), [](const candidate& a, const candidate& b) {
    return a.value != b.value ? a.value < b.value : *a.model < *b.model;
  });
  std::vector<std::string> victims;
  for (auto& c : chosen)
    victims.push_back(*c.model);
  return victims;
}

void kdf_policy::on_access(const std::string& model, timestamp now, std::uint64_t count) {
  if (use_if_resident(model, now, count)) return;
  latest_ = std::max(latest_, now);
  auto& c = count_of(model);
  c.value = decayed_count(c, now) + static_cast<double>(count);
  c.at = std::max(c.at, now);
}

bool kdf_policy::use_if_resident(const std::string& model, timestamp now, std::uint64_t count) {
  auto r = residents_.find(model);
  if (r == residents_.end()) return false;
  latest_ = std::max(latest_, now);
  auto& c = *r->second.count;
  c.value = decayed_count(c, now) + static_cast<double>(count);
  c.at = std::max(c.at, now);
  r->second.last_use = std::max(r->second.last_use, now);
  if (tuner_) tuner_->on_request(model, r->second.bytes, r->second.penalty, now, count);
  // A use only raises the key: the index is corrected when a scan reaches the entry.
  return true;
}

std::uint64_t kdf_policy::bytes_of(const std::string& model) const {
  auto r = residents_.find(model);
  return r == residents_.end() ? 0 : r->second.bytes;
}

std::vector<std::string> kdf_policy::resident_models() const {
  std::vector<std::string> out;
  out.reserve(residents_.size());
  for (auto& entry : residents_)
    out.push_back(entry.first);
  return out;
}

void kdf_policy::share_time_scale(double seconds) {
  shared_characteristic_ = seconds > 0 && std::isfinite(seconds) ? seconds : 0;
}

cache_policy::history kdf_policy::remembered(const std::string& model) const {
  auto* c = find_count(model);
  if (c == nullptr) return {};
  return {c->value, c->at};
}

void kdf_policy::remember(const std::string& model, const history& h) {
  if (residents_.count(model) || !(h.count > 0)) return;
  auto& c = count_of(model);
  auto at = std::max(c.at, h.at);
  c.value = std::max(decayed_count(c, at), decayed_count({h.count, h.at}, at));
  c.at = at;
}

kdf_policy::decayed* kdf_policy::find_count(const std::string& model) {
  return const_cast<decayed*>(std::as_const(*this).find_count(model));
}

const kdf_policy::decayed* kdf_policy::find_count(const std::string& model) const {
  if (auto it = counts_.find(model); it != counts_.end()) return &it->second;
  if (moving_.empty()) return nullptr;
  auto it = moving_.find(model);
  return it == moving_.end() ? nullptr : &it->second;
}

kdf_policy::decayed& kdf_policy::count_of(const std::string& model) {
  regrow_step();
  ready_block();
  if (auto* c = find_count(model)) return *c;
  bool full = static_cast<double>(counts_.size() + 1) >
              counts_.max_load_factor() * static_cast<double>(counts_.bucket_count());
  if (full && !moving_.empty()) {
    // Never reached (see below); were it, the rest moves now and counts_ rehashes as it must.
    while (!moving_.empty())
      regrow_step();
  } else if (full) {
    // One more would rehash every count at once (several ms at 40,000 models): they move over
    // regrowth_step per call instead, into a map with room for twice as many. moving_ is empty
    // here: it empties within counts_.size() / regrowth_step calls of a regrowth's start, long
    // before counts_ (then with room for twice as many) reaches its limit again.
    moving_.swap(counts_);
    counts_ = counts_map(moving_.get_allocator());
    counts_.reserve(2 * moving_.size() + 2);  // its array from block_ once that is ready
    block_->release();                        // (not taken: too small or not ready)
    forget_buckets_ = 0;                      // the sweep starts again in the new map
  }
  return counts_.emplace(model, decayed{}).first->second;
}

void kdf_policy::regrow_step() {
  for (std::size_t n = 0; n < regrowth_step && !moving_.empty(); ++n) {
    auto it = moving_.begin();
    // On the way the count is looked at as the forgetting sweep would.
    const decayed& c = it->second;
    if (!c.resident && decayed_count(c, latest_) < faded_count)
      moving_.erase(it);
    else
      counts_.insert(moving_.extract(it));
  }
  if (moving_.empty() && moving_.bucket_count() > 1)
    counts_map(moving_.get_allocator()).swap(moving_);
}

void kdf_policy::ready_block() {
  if (!moving_.empty()) return;
  if (block_->data == nullptr) {
    double limit = counts_.max_load_factor() * static_cast<double>(counts_.bucket_count());
    if (static_cast<double>(counts_.size()) < limit / 2) return;
    // The next array: room for 2 · limit + 2 counts, rounded up to a prime number of buckets
    // (a few per cent more): a quarter more is enough.
    auto bytes = static_cast<std::size_t>((2 * limit + 2) * 1.25) * sizeof(void*);
    if (bytes < bucket_block::least) return;
    block_->data = ::operator new(bytes);
    block_->bytes = bytes;
    // A regrowth starts limit / 2 or more calls from now: far more than the pages to write.
  }
  if (block_->ready < block_->bytes) {
    auto n = std::min(bucket_block::page, block_->bytes - block_->ready);
    std::memset(static_cast<char*>(block_->data) + block_->ready, 0, n);
    block_->ready += n;
  }
}

void kdf_policy::forget_faded() {
  // Every count is a resident's.
  if (counts_.size() + moving_.size() <= residents_.size()) return;
  auto it = forget_buckets_ == counts_.bucket_count() ? forget_cursor_ : counts_.begin();
  for (std::size_t n = 0; n < forget_step; ++n) {
    if (it == counts_.end()) {
      it = counts_.begin();
      if (it == counts_.end()) break;
    }
    if (!it->second.resident && decayed_count(it->second, latest_) < faded_count)
      it = counts_.erase(it);
    else
      ++it;
  }
  forget_cursor_ = it;
  forget_buckets_ = counts_.bucket_count();
}

void kdf_policy::on_insert(const std::string& model, std::uint64_t bytes, double load_seconds,
                           timestamp now) {
  on_remove(model, false);
  forget_faded();
  auto& entry = *residents_.emplace(model, resident{}).first;
  auto& r = entry.second;
  r.bytes = std::max<std::uint64_t>(bytes, 1);
  r.penalty = std::max(load_seconds, 1e-9);
  r.log_density = std::log(r.penalty) - std::log(static_cast<double>(r.bytes));
  r.count = &count_of(model);
  r.count->resident = true;
  r.last_use = now;
  latest_ = std::max(latest_, now);
  r.count->value = decayed_count(*r.count, now) + 1;  // the request that loaded it
  r.count->at = std::max(r.count->at, now);
  reindex(entry);
  if (tuner_) {
    tuner_->on_residents(residents_.size());
    tuner_->on_request(model, r.bytes, r.penalty, now, 1);
  }
}

void kdf_policy::on_remove(const std::string& model, bool evicted) {
  auto it = residents_.find(model);
  if (it == residents_.end()) return;
  auto& r = it->second;
  index_of(r).erase({r.key, r.sequence, &*it});
  if (evicted) {
    // The victim's idle time, as of the latest time told, feeds the characteristic time.
    double idle = std::max(seconds_between(r.last_use, latest_), 1e-3);
    // Each victim moves the mean by 1/16, or by 1/(n/8) with n residents above 128: the
    // characteristic time of a large cache is an average over a share of its turnover. The
    // first victims are averaged plainly (weight 1/k for the k-th), so the mean settles fast.
    ++victims_seen_;
    double weight =
        std::max(1.0 / static_cast<double>(victims_seen_),
                 std::min(characteristic_weight, 8.0 / static_cast<double>(residents_.size() + 1)));
    log_characteristic_ += weight * (std::log(idle) - log_characteristic_);
    characteristic_ = std::exp(log_characteristic_);
  }
  r.count->resident = false;
  residents_.erase(it);
}

std::vector<std::string> kdf_policy::choose_victims(const std::string&, std::uint64_t bytes,
                                                    const pinned_fn& pinned, timestamp now) {
  latest_ = std::max(latest_, now);
  if (bytes == 0) return {};
  if (auto_tau_) migrate_index();
  // Residents used within guard_share × T are in a burst of requests: passed over (kept aside)
  // while the others can free the bytes. The scan looks at most max_scanned entries once the
  // bytes are there, so a cache where most residents are busy costs no more than that, and
  // re-keys at most max_rekeyed (below).
  const double guard =
      guard_share * (shared_characteristic_ > 0 ? shared_characteristic_ : characteristic_time());
  std::vector<candidate> cands, guarded;
  std::uint64_t gathered = 0, guarded_bytes = 0;
  std::size_t scanned = 0;
  auto consider = [&](const resident_entry& entry) {
    const auto& [model, r] = entry;
    if (pinned(model)) return;
    if (guard > 0 && seconds_between(r.last_use, latest_) < guard) {
      guarded.push_back({&model, r.bytes, value_of(r, now)});
      guarded_bytes += r.bytes;
      return;
    }
    cands.push_back({&model, r.bytes, value_of(r, now)});
    gathered += r.bytes;
  };
  auto stale = [](const resident& r) {
    return r.count->value != r.keyed.value || r.count->at != r.keyed.at;
  };
  // While the index migrates, the entries not yet moved (older_, keyed under the previous τ) are
  // met in the same pass: older_'s lowest moves to index_ when its key under the current τ comes
  // before the scan's next entry there, or is unknown to it (used since keyed), and is then the
  // next entry (taken at once when it falls behind what the scan has passed).
  auto it = index_.begin();
  auto old = older_.begin();
  double passed = -std::numeric_limits<double>::infinity();  // the key of the last entry met
  auto older_first = [&](double key) {
    return old != older_.end() && key_of(std::get<2>(*old)->second) < key;
  };
  // Re-keying a used entry moves it in the index (about a microsecond at 10,000 residents). After
  // max_rekeyed of them, a search leaves the used entries it meets where they stand, for the next
  // decisions: one whose key, computed anew, comes after the scan's next entry is passed over
  // (where a re-key would have sent it), one whose key does not is taken at once; and once
  // pass_limit entries have been looked at, every one is taken where it stands, so the bytes are
  // found within a bounded scan even when thousands of entries were used since they were keyed.
  std::size_t rekeyed = 0;
  auto leave = [&](const resident& r) {  // true: passed over, left unmoved
    return rekeyed >= max_rekeyed && scanned <= pass_limit && it != index_.end() &&
           key_of(r) >= std::get<0>(*it);
  };
  while (it != index_.end() || old != older_.end()) {
    bool enough = gathered >= 2 * bytes && cands.size() >= min_candidates;
    if (enough || (cands.size() >= max_candidates && gathered >= bytes)) break;
    if (old != older_.end()) {
      auto& entry = *std::get<2>(*old);
      bool used = stale(entry.second);
      if (used || it == index_.end() || older_first(std::get<0>(*it))) {
        ++old;
        scanned += used;  // met as a stale entry of index_ is
        if (used && rekeyed >= max_rekeyed) {
          // Left in older_ (the migration moves it): passed over, or taken at once.
          if (!leave(entry.second)) consider(entry);
          continue;
        }
        rekeyed += used;
        auto placed = reindex(entry);
        if (it == index_.end() || *placed < *it) {
          if (entry.second.key >= passed)
            it = placed;
          else
            consider(entry);
        }
        continue;
      }
    }
    if (++scanned > max_scanned && gathered + guarded_bytes >= bytes) break;
    auto& entry = *std::get<2>(*it);
    const auto& r = entry.second;
    passed = r.key;
    ++it;
    if (stale(r) && rekeyed >= max_rekeyed) {
      if (leave(r)) continue;
    } else if (stale(r)) {
      // Used since it was keyed: move it to its place. A scan still ahead meets it there; one
      // that has passed that place (its key fell: τ moved since it was keyed) takes it now.
      ++rekeyed;
      auto placed = reindex(entry);
      if (it != index_.end() && index_entry{r.key, r.sequence, &entry} > *it) continue;
      if (r.key >= passed && older_first(r.key)) {
        it = placed;  // older_'s lowest comes first
        continue;
      }
    }
    consider(entry);
  }
  last_search_ = {scanned, rekeyed};
  // Not enough without the busy ones: they join, least value per byte first, until enough.
  for (std::size_t i = 0; gathered < bytes && i < guarded.size(); ++i) {
    cands.push_back(guarded[i]);
    gathered += guarded[i].bytes;
  }
  return knapsack(std::move(cands), bytes);
}

std::vector<cache_policy::ranked> kdf_policy::eviction_order(timestamp now) const {
  // The index's order with every key brought up to date under the current τ (as a scan or the
  // migration would), without changing it.
  std::vector<std::tuple<double, std::uint64_t, const std::string*>> order;  // key, sequence, id
  for (auto& [model, r] : residents_) {
    bool stale =
        r.sequence < current_from_ || r.count->value != r.keyed.value || r.count->at != r.keyed.at;
    order.emplace_back(stale ? key_of(r) : r.key, stale ? ~0ull : r.sequence, &model);
  }
  std::sort(order.begin(), order.end(), [](auto& a, auto& b) {
    return std::get<0>(a) != std::get<0>(b)   ? std::get<0>(a) < std::get<0>(b)
           : std::get<1>(a) != std::get<1>(b) ? std::get<1>(a) < std::get<1>(b)
                                              : *std::get<2>(a) < *std::get<2>(b);
  });
  std::vector<ranked> out;
  for (auto& [key, sequence, id] : order)
    out.push_back({*id, value_of(residents_.at(*id), now)});
  return out;
}

}  // namespace warm
