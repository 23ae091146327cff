// Cap'n Proto calls the RPC benchmarks share (defined in rpc_bench.cpp).
#pragma once

#include <string>

#include "benches.hpp"
#include "warm.capnp.h"

namespace warm::bench {

// Fills an infer request exactly as a client of warm would: one F32 input.
void fill_infer_request(rpc::InferRequest::Builder out, const std::string& target,
                        const tensor& input);

// `clients` threads, each with its own connection to unix:`path`, calling Warm.infer on `target`
// in a closed loop for `seconds`, started together once every one has made one call. An answer
// that is not a cache hit is a failure (the model must be resident where it is served).
phase_result run_rpc_phase(const std::string& path, int clients, double seconds,
                           const std::string& target, const tensor& input);

}  // namespace warm::bench
