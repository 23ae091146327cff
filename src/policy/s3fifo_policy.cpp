#include "policy/s3fifo_policy.hpp"

#include <algorithm>
#include <limits>

namespace warm {

int s3fifo_policy::where(const std::string& model) const {
  auto it = index_.find(model);
  return it == index_.end() ? -1 : it->second->in;
}

unsigned s3fifo_policy::freq(const std::string& model) const {
  auto it = index_.find(model);
  return it == index_.end() ? 0 : it->second->freq;
}

std::uint64_t s3fifo_policy::small_target() const {
  return static_cast<std::uint64_t>(small_share * static_cast<double>(capacity()));
}

void s3fifo_policy::set_capacity(std::uint64_t bytes) {
  capacity_ = bytes;
  trim_ghosts();
}

void s3fifo_policy::push(queue_id q, const std::string& model, std::uint64_t bytes) {
  queues_[q].push_front({model, bytes, q, 0, 0});
  bytes_[q] += bytes;
  index_[model] = queues_[q].begin();
  peak_ = std::max(peak_, bytes_[small] + bytes_[main]);
}

void s3fifo_policy::forget_ghost(const std::string& model) {
  auto it = ghost_index_.find(model);
  if (it == ghost_index_.end()) return;
  ghost_bytes_ -= it->second->bytes;
  ghosts_.erase(it->second);
  ghost_index_.erase(it);
}

void s3fifo_policy::trim_ghosts() {
  auto main_target = capacity() - small_target();
  while (!ghosts_.empty() && ghost_bytes_ > main_target)
    forget_ghost(ghosts_.back().model);
}

void s3fifo_policy::on_insert(const std::string& model, std::uint64_t bytes, double, timestamp) {
  on_remove(model, false);  // re-inserted while resident: start over
  if (in_ghost(model)) {
    forget_ghost(model);
    push(main, model, bytes);
  } else {
    push(small, model, bytes);
  }
  trim_ghosts();
}

void s3fifo_policy::on_access(const std::string& model, timestamp, std::uint64_t count) {
  auto it = index_.find(model);
  if (it == index_.end()) return;
  auto& f = it->second->freq;
  f = static_cast<unsigned>(std::min<std::uint64_t>(max_freq, f + count));
}

void s3fifo_policy::on_remove(const std::string& model, bool evicted) {
  auto it = index_.find(model);
  if (it == index_.end()) return;
  auto e = it->second;
  auto in = e->in;
  auto bytes = e->bytes;
  bytes_[in] -= bytes;
  queues_[in].erase(e);
  index_.erase(it);
  if (evicted && in == small) {  // remembered: a reload within G's reach goes straight to M
    forget_ghost(model);
    ghosts_.push_front({model, bytes});
    ghost_index_[model] = ghosts_.begin();
    ghost_bytes_ += bytes;
    trim_ghosts();
  }
}

std::vector<const s3fifo_policy::entry*> s3fifo_policy::select(
    queue (&q)[2], std::uint64_t (&in)[2], std::uint64_t small_target, std::uint64_t bytes,
    const pinned_fn& pinned, std::uint64_t choice, std::vector<move>* undo) {
  std::vector<const entry*> victims;
  std::uint64_t freed = 0, small_bytes = in[small];
  // Victims stay in their queue, pinned models keep their place: at each queue's old end they
  // gather behind `past`, which the scan never looks behind again (models only join at the new
  // end, so what is behind it stays there).
  queue::iterator past[2] = {q[small].end(), q[main].end()};
  auto oldest = [&](queue_id id) {
    for (auto it = past[id]; it != q[id].begin();) {
      --it;
      if (it->chosen != choice && !pinned(it->model)) return it;
      past[id] = it;
    }
    return q[id].end();
  };
  // Each step chooses a victim, moves a model from S to M or takes one use from a model in M:
  // at most (1 + max_freq) steps per model in M and one more per model in S.
  std::size_t limit = (max_freq + 2) * (q[small].size() + q[main].size()) + 1;
  for (std::size_t step = 0; freed < bytes && step < limit; ++step) {
    auto s = oldest(small), m = oldest(main);
    bool has_s = s != q[small].end(), has_m = m != q[main].end();
    if (!has_s && !has_m) break;
    if (has_s && (small_bytes > small_target || !has_m)) {
      small_bytes -= s->bytes;
      if (s->freq > 0) {  // used since its load: to M's new end, its count spent
        if (undo) undo->push_back({s, std::next(s), small, s->freq});
        s->freq = 0;
        s->in = main;
        in[small] -= s->bytes;
        in[main] += s->bytes;
        q[main].splice(q[main].begin(), q[small], s);
        continue;
      }
      m = s;
    } else if (m->freq > 0) {  // M's second chance: reinserted with one use less
      if (undo) undo->push_back({m, std::next(m), main, m->freq});
      --m->freq;
      q[main].splice(q[main].begin(), q[main], m);
      continue;
    }
    m->chosen = choice;
    victims.push_back(&*m);
    freed += m->bytes;
  }
  return victims;
}

std::vector<std::string> s3fifo_policy::choose_victims(const std::string&, std::uint64_t bytes,
                                                       const pinned_fn& pinned, timestamp) {
  // Nothing to do, or not enough even with nothing pinned: answer nothing, change nothing.
  if (bytes == 0 || bytes_[small] + bytes_[main] < bytes) return {};
  std::vector<move> undo;
  auto chosen = select(queues_, bytes_, small_target(), bytes, pinned, ++choices_, &undo);
  std::uint64_t freed = 0;
  for (auto* e : chosen)
    freed += e->bytes;
  if (freed < bytes) {
    // The unpinned models cannot free enough (every one of them is chosen): put back what the
    // search moved, the last move first, so each model returns to its place and count.
    for (auto it = undo.rbegin(); it != undo.rend(); ++it) {
      auto& e = *it->e;
      if (e.in != it->from) {
        bytes_[e.in] -= e.bytes;
        bytes_[it->from] += e.bytes;
        e.in = it->from;
      }
      e.freq = it->freq;
      queues_[it->from].splice(it->before, queues_[main], it->e);
    }
    return {};
  }
  std::vector<std::string> victims;
  victims.reserve(chosen.size());
  for (auto* e : chosen)
    victims.push_back(e->model);
  return victims;
}

std::vector<cache_policy::ranked> s3fifo_policy::eviction_order(timestamp) const {
  queue copy[2] = {queues_[small], queues_[main]};
  std::uint64_t in[2] = {bytes_[small], bytes_[main]};
  std::vector<ranked> out;
  auto all = std::numeric_limits<std::uint64_t>::max();  // until nothing is left
  auto none = [](const std::string&) { return false; };
  for (auto* e : select(copy, in, small_target(), all, none, choices_ + 1, nullptr))
    out.push_back({e->model, static_cast<double>(index_.at(e->model)->freq)});
  return out;
}

}  // namespace warm
