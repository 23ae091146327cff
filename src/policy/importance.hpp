// mCache's importance scores (prior-art notes): pure math shared by the IAM policy, the
// importance scorer actor and the simulator.
//
//   utility_i = (P_i / S_i) · rate_i        P: load penalty (s), S: bytes on the device,
//                                           rate: requests per second
//   rank_i    = log( #{ j ≠ i : u_i > u_j } + b0 )
//
// An importance heap is the models ordered by rank, least important first (a sorted array is a
// valid min-heap and gives the whole eviction order). It is immutable once built: the scorer
// builds a fresh one (the "shadow heap") and the device swaps it in with one pointer store.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "warm/clock.hpp"

namespace warm {

struct score_input {
  std::string model;
  std::uint64_t bytes = 0;
  double penalty_seconds = 0;
  double rate = 0;  // requests per second
};

double utility(const score_input& in);

struct importance_entry {
  double rank = 0;
  double utility = 0;
  std::string model;
};

struct importance_heap {
  std::vector<importance_entry> entries;  // ascending rank: entries.front() is evicted first
  timestamp built{};
  // The rank a model of this utility would get among the heap's models (for models inserted
  // between rebuilds).
  double rank_of(double utility, double bias) const;
};

// Scores every input and orders them; O(n log n). Ties keep the inputs' order.
std::shared_ptr<const importance_heap> build_importance_heap(std::vector<score_input> inputs,
                                                             double bias, timestamp now);

}  // namespace warm
