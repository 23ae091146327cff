// kdf — "knapsack over decayed frequency", warm's own policy and the default.
//
// Value. Keeping model i resident saves its load time P_i each time it is requested again. kdf
// predicts that from an exponentially decayed count of its requests, c_i(t) = Σ_k e^{−(t−t_k)/τ}
// (kept across evictions: a model that was popular before it was evicted is still known to be),
// and values the model at v_i = P_i · f(c_i), with f(c) = c, or with a saturating
// f(c) = 1 − e^{−h·c} (evicting a hot model costs about one reload, not one per request).
//
// Time scale. By default τ follows the traffic: τ = memory × T, where T is the cache's
// characteristic time — how long a model evicted from the cache had gone unused (up to the latest
// time the policy was told), a running geometric mean over the victims (the plain mean of the
// first ones, then weight 1/16 each, less in caches of more than 128 models: 8/n). Dense
// traffic evicts models idle for seconds and kdf remembers minutes; traffic with requests hours
// apart evicts models idle for hours and kdf remembers days. The memory itself is chosen online
// among 10, 100 and 300 by miniature simulations of the cache (kdf_tuner.hpp) unless
// policy_options::kdf_memory fixes it; a fixed τ (policy_options::kdf_tau) turns both off. Before
// the first eviction τ is initial_tau. The value is linear by default (h = 0), chosen with the
// other constants on tuning seeds of the broad evaluation (docs/policies.md).
//
// Bursts. A resident used within guard_share × T (3 % of the characteristic time) is in a burst
// of requests, which a count over τ cannot see yet: it is passed over while the other residents
// can free the bytes. Without the guard a large model loaded for a burst was the cheapest victim
// until its count caught up, and was evicted and reloaded within the burst.
//
// Victims. To free B bytes kdf evicts the set of unpinned residents with the least total value
// whose bytes reach B — a knapsack. Candidates come from an index of the residents by linear
// value per byte, P_i·c_i/S_i, whose order decay does not change (keys are logs of the counts
// referred to a fixed time under τ; a use only raises a key, so an entry is re-keyed when a search
// reaches it): the lowest ones until they hold 2·B and number 8, at most 64 (more only when B
// needs them), looking at no more than 256 entries once B is there.
// The knapsack over them is exact up to 12 candidates, else greedy by value per byte, improved by
// any single candidate that frees B alone for less. A decision costs O(k log n) for k candidates
// among n residents, and O(migration_step · log n) more while a migration runs (below).
// Greedy-by-density policies (GDSF, IAM) evict more value than needed when
// sizes differ a lot.
//
// Migration. When the automatic τ has doubled or halved (at most once per n/4 decisions; until
// then the index keeps the older τ's order) every key is computed anew, but not at once (at
// 10,000 residents that held the device actor's thread for 2-5 ms): the index's entries move
// aside, still keyed under the previous τ, and each decision re-keys the lowest migration_step of
// them on their own nodes (no allocation) into the index under the current τ, so a migration ends
// within n / migration_step decisions. An entry inserted, or re-keyed after a use, goes to the
// current τ's index. A search meets both in one pass: the lowest entry not yet moved moves over
// when its key under the current τ comes before the scan's next entry there, or when it was used
// since it was keyed (its place is unknown), and is met at its place there; so the entries not
// yet moved are met in the previous τ's order, each in turn among the moved ones.
//
// Bounded searches. A search re-keys at most max_rekeyed used entries (about a microsecond each
// at 10,000 residents; when τ has drifted far, thousands of them can lie at the bottom of the
// index). Past that it leaves the used entries it meets where they stand, for the next decisions
// to re-key: one whose key computed anew comes after the scan's next entry is passed over, one
// whose key does not is taken at once, and once pass_limit entries have been looked at every one
// is taken where it stands (valued exactly, as every candidate is), so the bytes are found.
//
// Counts. The counts (residents' and departed models') live in a hash map that never rehashes
// all of them at once (3-17 ms at 20,000-85,000 counts on this VM): when full, its counts move to a
// second map with room for twice as many, regrowth_step per lookup or addition, on their own nodes,
// so residents' pointers to their counts stay valid; a lookup consults both meanwhile. The new
// map's bucket array takes a block of memory written a page per call beforehand, since writing
// fresh pages is most of the cost of a large new array.
#pragma once

#include <memory>
#include <set>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "policy/cache_policy.hpp"

namespace warm {

class kdf_tuner;

class kdf_policy final : public cache_policy {
 public:
  explicit kdf_policy(const policy_options& options);
  ~kdf_policy() override;

  std::string_view name() const override { return "kdf"; }
  void on_insert(const std::string& model, std::uint64_t bytes, double load_seconds,
                 timestamp now) override;
  void on_access(const std::string& model, timestamp now, std::uint64_t count) override;
  void on_remove(const std::string& model, bool evicted) override;
  std::vector<std::string> choose_victims(const std::string& incoming, std::uint64_t bytes,
                                          const pinned_fn& pinned, timestamp now) override;
  std::size_t size() const override { return residents_.size(); }
  // Residents in the index's order (least linear value per byte first), scored by their value.
  std::vector<ranked> eviction_order(timestamp now) const override;

  void set_capacity(std::uint64_t bytes) override;
  double time_scale() const override { return characteristic_time(); }
  void share_time_scale(double seconds) override;
  history remembered(const std::string& model) const override;
  void remember(const std::string& model, const history& h) override;

  // The decay time constant in use, seconds (0: no decay).
  double tau() const;
  // The memory in use (automatic τ = memory × T): fixed, or the tuner's current choice.
  double memory() const;
  // For kdf_tuner's shadow caches: on_access when `model` is resident (true), else nothing
  // (false); a resident's bytes (0 when not resident); every resident.
  bool use_if_resident(const std::string& model, timestamp now, std::uint64_t count);
  std::uint64_t bytes_of(const std::string& model) const;
  std::vector<std::string> resident_models() const;
  // The automatic memory's miniature simulations; null when the memory or τ is fixed.
  const kdf_tuner* tuner() const { return tuner_.get(); }
  // The characteristic time T measured here, seconds; 0 before the first eviction. The automatic
  // τ follows it, or the shared time scale when one is set.
  double characteristic_time() const;
  // Residents whose index keys still use the τ before the latest drift: 0 unless a migration is
  // under way, each decision (a choose_victims call for bytes) moving migration_step of them.
  std::size_t migrating() const { return older_.size(); }
  // Counts still to move to the map of counts that replaces a full one: 0 unless a regrowth is
  // under way, each count looked up or added (an insert, a use of a model not resident, a
  // remember) moving regrowth_step of them. Every count is found meanwhile.
  std::size_t regrowing() const { return moving_.size(); }
  // Models kdf remembers a count of (residents and departed models not yet forgotten).
  std::size_t remembered_models() const { return counts_.size() + moving_.size(); }
  // The work of the latest choose_victims: index entries looked at (at most pass_limit, plus
  // those it takes until the bytes are there), and used entries among them re-keyed (at most
  // max_rekeyed).
  struct search_work {
    std::size_t looked_at = 0;
    std::size_t rekeyed = 0;
  };
  search_work last_search() const { return last_search_; }

  static constexpr double initial_tau = 1200;  // seconds, automatic τ before any eviction
  static constexpr double characteristic_weight = 1.0 / 16;
  static constexpr std::size_t exact_limit = 12;  // candidates solved exactly (2^n subsets)
  static constexpr std::size_t min_candidates = 8;
  static constexpr std::size_t max_candidates = 64;
  static constexpr std::size_t max_scanned = 4 * max_candidates;
  static constexpr std::size_t max_rekeyed = max_scanned;     // used entries re-keyed per search…
  static constexpr std::size_t pass_limit = 4 * max_scanned;  // …then passed over up to here
  static constexpr double faded_count = 0.01;                 // a memory below this is forgotten
  static constexpr std::size_t forget_step = 4;               // counts looked at per insert
  static constexpr double guard_share = 0.03;  // a use within 0.03 T guards a resident
  static constexpr double rebuild_factor = 2;  // τ drift (either way) that migrates the index…
  static constexpr std::size_t rebuild_spacing = 4;   // …after at least residents / 4 decisions,
  static constexpr std::size_t migration_step = 256;  // re-keying this many entries per decision
  static constexpr std::size_t regrowth_step = 8;     // counts moved per count looked up or added

 private:
  struct decayed {
    double value = 0;
    timestamp at{};
    bool resident = false;  // a resident's count is never forgotten
  };
  struct resident {
    std::uint64_t bytes = 0;
    double penalty = 0;
    double log_density = 0;    // log(penalty / bytes), part of every key
    decayed* count = nullptr;  // into counts_ or moving_ (a node's address never changes)
    timestamp last_use{};
    double key = 0;  // its place in index_…
    std::uint64_t sequence = 0;
    decayed keyed;  // …computed from this count (a use since makes the key stale)
  };
  // Residents by key, then by when they were keyed, pointing at their residents_ element.
  using resident_entry = std::pair<const std::string, resident>;
  using index_entry = std::tuple<double, std::uint64_t, resident_entry*>;
  using index_type = std::set<index_entry>;
  struct candidate {
    const std::string* model;
    std::uint64_t bytes;
    double value;
  };

  double decayed_count(const decayed& d, timestamp now) const;
  double value_of(const resident& r, timestamp now) const;
  // Forgets the counts of models not resident that decayed below faded_count, forget_step of
  // them per insert: a sweep over the counts that resumes where the last insert left it, so no
  // decision pays for a pass over every model ever seen (at 10,000 residents such a pass took
  // about 20 ms of the device actor's thread). A whole sweep takes counts / forget_step inserts,
  // during which at most as many counts are added: the memory of models that come and go (or
  // are unregistered) stays bounded.
  void forget_faded();
  // The count of `model` (counts_ or, during a regrowth, moving_), or null.
  decayed* find_count(const std::string& model);
  const decayed* find_count(const std::string& model) const;
  // The count of `model`, added (zero) when it has none. Moves the next regrowth_step counts of a
  // regrowth under way first, and starts one instead of letting counts_ rehash: no call moves
  // more than regrowth_step counts.
  decayed& count_of(const std::string& model);
  // Moves up to regrowth_step counts from moving_ to counts_ (their nodes: addresses unchanged),
  // forgetting those of departed models that faded on the way.
  void regrow_step();
  // Readies block_ for counts_'s next regrowth: allocates it once counts_ is half full, then
  // writes one page of it per call.
  void ready_block();
  // The index key of a resident: log of its linear value per byte referred to time 0 under τ.
  double key_of(const resident& r) const;
  // Starts a migration when the automatic τ has drifted by rebuild_factor (no sooner than
  // residents / rebuild_spacing decisions after the last one), and moves the next migration_step
  // entries of the one under way. Once per decision.
  void migrate_index();
  // The index that holds `r` (indexed): older_ when its key uses the previous τ, else index_.
  index_type& index_of(const resident& r);
  // Keys the resident of `node` (extracted from either index) under its current count and the
  // current τ, and puts it in index_; returns where.
  index_type::iterator place(index_type::node_type node);
  // (Re)places `entry` (a residents_ element) in index_ under its current count; returns where.
  index_type::iterator reindex(resident_entry& entry);
  // The least-value subset of `cands` whose bytes reach `bytes`, in ascending value.
  static std::vector<std::string> knapsack(std::vector<candidate> cands, std::uint64_t bytes);

  bool auto_tau_;
  double fixed_tau_;  // seconds; 0 = no decay (when not automatic)
  double memory_;     // automatic τ = memory × T (when no tuner)
  std::unique_ptr<kdf_tuner> tuner_;
  double horizon_;  // 0 = linear value
  double log_characteristic_ = 0;
  double characteristic_ = 0;         // exp(log_characteristic_): T in seconds, for every τ
  double shared_characteristic_ = 0;  // seconds; 0 = follow the own
  std::uint64_t victims_seen_ = 0;
  double index_tau_;  // the τ the index keys use
  std::size_t decisions_since_rebuild_ = 0;
  timestamp latest_{};  // the latest time any call told: a victim's idle time is measured to it
  // Models seen, kept across evictions until faded: every count is in exactly one of counts_ and
  // moving_. counts_ never rehashes: when one more count would take it past its load limit, its
  // counts become moving_ and counts_ starts anew with room for twice as many; each count_of call
  // moves regrowth_step of them back (on their own nodes, so residents' pointers stay valid), and
  // moving_ is empty again before counts_ can fill (n counts move within n / regrowth_step calls,
  // which add at most as many).
  // The block of memory that the array of buckets of counts_'s next regrowth takes: allocated
  // when counts_ is half full, its pages written one per count_of call, so the new array is
  // never fresh memory. The first write to a fresh page is what makes a large array slow (about
  // 10 µs a page on this VM: zeroing a fresh array of 20,000 buckets took 0.7 ms, of 350,000
  // 9 ms).
  struct bucket_block {
    static constexpr std::size_t page = 4096;
    static constexpr std::size_t least = 16 * page;  // smaller arrays come from the heap
    void* data = nullptr;
    std::size_t bytes = 0;  // allocated
    std::size_t ready = 0;  // written so far
    bucket_block() = default;
    bucket_block(const bucket_block&) = delete;
    bucket_block& operator=(const bucket_block&) = delete;
    ~bucket_block() { release(); }
    void release() {
      ::operator delete(data);
      data = nullptr;
      bytes = ready = 0;
    }
  };
  // The maps of counts allocate from the heap, but for an array of at least bucket_block::least
  // bytes that the block's written pages hold: it takes the block. Freed with ::operator delete
  // either way.
  template <class T>
  struct counts_allocator {
    using value_type = T;
    bucket_block* block;
    explicit counts_allocator(bucket_block* b) noexcept : block(b) {}
    template <class U>
    counts_allocator(const counts_allocator<U>& other) noexcept : block(other.block) {}
    T* allocate(std::size_t n) {
      std::size_t bytes = n * sizeof(T);
      if (bytes >= bucket_block::least && block->data != nullptr && bytes <= block->ready) {
        void* taken = block->data;
        block->data = nullptr;
        block->bytes = block->ready = 0;
        return static_cast<T*>(taken);
      }
      return static_cast<T*>(::operator new(bytes));
    }
    void deallocate(T* p, std::size_t) noexcept { ::operator delete(p); }
    friend bool operator==(const counts_allocator& a, const counts_allocator& b) {
      return a.block == b.block;
    }
    friend bool operator!=(const counts_allocator& a, const counts_allocator& b) {
      return a.block != b.block;
    }
  };
  using counts_map =
      std::unordered_map<std::string, decayed, std::hash<std::string>, std::equal_to<std::string>,
                         counts_allocator<std::pair<const std::string, decayed>>>;
  std::unique_ptr<bucket_block> block_ = std::make_unique<bucket_block>();
  counts_map counts_{counts_map::allocator_type(block_.get())};
  counts_map moving_{counts_map::allocator_type(block_.get())};
  // Where the forgetting sweep goes on in counts_, valid while counts_ has this many buckets (it
  // starts again from the beginning when counts_ starts anew; moving_'s counts are looked at as
  // they move).
  counts_map::iterator forget_cursor_;
  std::size_t forget_buckets_ = 0;
  std::unordered_map<std::string, resident> residents_;
  // Every resident is in exactly one of these: index_ (keys under index_tau_) when its sequence is
  // current_from_ or above, else older_ (keys under the τ before; empty but during a migration).
  index_type index_;
  index_type older_;
  std::uint64_t current_from_ = 0;
  std::uint64_t sequence_ = 0;
  search_work last_search_;
};

}  // namespace warm
