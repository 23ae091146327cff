// S3-FIFO (Yang et al., "FIFO queues are all you need for cache eviction", SOSP '23): three FIFO
// queues. New models enter a small queue S; a model used while in S moves to the main queue M when
// it reaches S's old end, one not used goes and is remembered in a ghost queue G (id and size, no
// memory); a model whose id is in G when it is loaded again enters M directly. M is a FIFO with
// reinsertion (a 2-bit CLOCK): each resident counts its uses, capped at 3; the oldest of M is
// reinserted at the new end with one use less while it has uses, and evicted at 0. One-hit
// wonders thus leave from S quickly, and M keeps what was used again.
//
// Adapted to whole models, measured in bytes:
//  - S's target is 10 % of the capacity's bytes (M's the other 90 %), G is trimmed (oldest
//    first) so that its bytes stay within M's target;
//  - the capacity is policy_options::capacity, then what set_capacity reports; while it is 0
//    (unknown) the largest total of resident bytes seen stands in for it;
//  - to free `bytes`, victims are taken from S while S's bytes (less the victims already chosen
//    there) exceed its target, or when M has nothing evictable; else from M; until the chosen
//    victims' bytes reach `bytes`. A model must be resident to serve, so there is no admission
//    refusal: every loaded model is inserted (into S, or into M after a ghost hit);
//  - the paper moves a model from S to M when it was "accessed more than once" (Algorithm 1:
//    freq > 1, counting the request that inserted it; libCacheSim's S3FIFOv0: "if accessed").
//    Here the load is the first reference and is not counted, so freq >= 1 (one use after the
//    load, two requests in all) moves it — the same rule. It enters M with freq 0;
//  - victims stay in their queue until the caller on_remove(…, true)s them (a model removed from
//    S then enters G; one removed from M does not, as in the paper); the scan steps past the
//    victims chosen so far and past pinned models, which keep their place and their count;
//  - choose_victims moves models from S to M and spends M's counts as it looks (aging, as srrip
//    and sieve), and answers nothing, changing nothing, when the unpinned models cannot free
//    enough.
// Cost: each step of a choice is O(1) amortized (it steps past the pinned models and the victims
// at a queue's old end once per choice); the steps are the victims, the moves from S to M and the
// counts spent, at most one per count a use added or one move per insert. Whether the unpinned
// models can free enough is known only when every one of them has been looked at: a choice that
// fails puts every model it moved back where it was.
#pragma once

#include <list>
#include <unordered_map>
#include <vector>

#include "policy/cache_policy.hpp"

namespace warm {

class s3fifo_policy final : public cache_policy {
 public:
  static constexpr double small_share = 0.1;  // S's target: this share of the capacity's bytes
  static constexpr unsigned max_freq = 3;     // the use counter's cap (two bits)

  explicit s3fifo_policy(std::uint64_t capacity) : capacity_(capacity) {}

  std::string_view name() const override { return "s3fifo"; }
  void set_capacity(std::uint64_t bytes) override;
  void on_insert(const std::string& model, std::uint64_t bytes, double load_seconds,
                 timestamp now) override;
  void on_access(const std::string& model, timestamp now, std::uint64_t count) override;
  void on_remove(const std::string& model, bool evicted) override;
  std::vector<std::string> choose_victims(const std::string& incoming, std::uint64_t bytes,
                                          const pinned_fn& pinned, timestamp now) override;
  std::size_t size() const override { return index_.size(); }
  // The order choose_victims would evict every resident in with nothing pinned, run on a copy of
  // the queues (the moves it would make are not kept). Score: the model's use count (0–3).
  std::vector<ranked> eviction_order(timestamp now) const override;

  enum queue_id { small, main };
  // Where a resident model is (-1: not resident), its use count, and whether G holds `model`.
  int where(const std::string& model) const;
  unsigned freq(const std::string& model) const;
  bool in_ghost(const std::string& model) const { return ghost_index_.count(model) != 0; }
  std::uint64_t bytes_in(queue_id q) const { return bytes_[q]; }
  std::uint64_t ghost_bytes() const { return ghost_bytes_; }

 private:
  struct entry {
    std::string model;
    std::uint64_t bytes;
    queue_id in;
    unsigned freq = 0;
    std::uint64_t chosen = 0;  // the choice that made it a victim (0: none)
  };
  using queue = std::list<entry>;  // newest first: the old end is back()
  struct ghost {
    std::string model;
    std::uint64_t bytes;
  };

  std::uint64_t capacity() const { return capacity_ ? capacity_ : peak_; }
  std::uint64_t small_target() const;
  void push(queue_id q, const std::string& model, std::uint64_t bytes);
  void forget_ghost(const std::string& model);
  void trim_ghosts();
  // What select changed, to undo it: `e` was at `before` in queue `from` with count `freq`.
  struct move {
    queue::iterator e, before;
    queue_id from;
    unsigned freq;
  };
  // The eviction itself, on `q` (the live queues or a copy) whose bytes are `in` (kept up to
  // date): victims in order until their bytes reach `bytes` or nothing evictable is left, moving
  // models from S to M and spending M's counts; `choice` marks the victims (a value no entry has
  // yet), `undo` (if given) gets every move.
  static std::vector<const entry*> select(queue (&q)[2], std::uint64_t (&in)[2],
                                          std::uint64_t small_target, std::uint64_t bytes,
                                          const pinned_fn& pinned, std::uint64_t choice,
                                          std::vector<move>* undo);

  std::uint64_t capacity_;
  std::uint64_t peak_ = 0;  // the most resident bytes seen: the capacity while it is unknown
  queue queues_[2];
  std::uint64_t bytes_[2] = {0, 0};
  std::unordered_map<std::string, queue::iterator> index_;
  std::list<ghost> ghosts_;  // newest first
  std::unordered_map<std::string, std::list<ghost>::iterator> ghost_index_;
  std::uint64_t ghost_bytes_ = 0;
  std::uint64_t choices_ = 0;  // choose_victims calls: the last `chosen` mark handed out
};

}  // namespace warm
