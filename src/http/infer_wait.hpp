// An inference waited for on the front's own thread (internal to src/http), answered as
// v2::wait(rt.infer(request), limit) answers it but without a promise and future: a hit, which the
// runtime answers inline before infer() returns, costs no future's shared state, no call_once and
// no futex; a miss, answered later from another thread, is waited for on a condition variable.
#pragma once

#include <chrono>
#include <functional>

#include "warm/error.hpp"
#include "warm/runtime_types.hpp"

namespace warm {
class runtime;
}

namespace warm::http {

// Calls `start` with a callback and answers what the callback is given, or timeout ("no answer
// within 300 s", as v2::wait words it) when nothing came within `limit`; a later answer is then
// dropped. When every copy of the callback is destroyed uncalled (a request the runtime dropped
// at shutdown), unavailable at once. The callback may be called on this thread inside `start`
// (answered without waiting) or on any other, once; it never blocks. Blocks the calling thread,
// which must not be the one that would answer.
expected<infer_result> wait_for_answer(const std::function<void(callback<infer_result>)>& start,
                                       std::chrono::milliseconds limit);

// wait_for_answer of rt.infer(request, ...).
expected<infer_result> infer_and_wait(runtime& rt, infer_request request,
                                      std::chrono::milliseconds limit);

}  // namespace warm::http
