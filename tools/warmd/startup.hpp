// warmd's start from its configuration (config.hpp): the fronts' options, the code policy, the
// runtime's options and the model runtimes it attaches. Each answers invalid_argument with the
// message warmd prints as a usage error, and logs its warnings.
#pragma once

#include <cstddef>
#include <memory>
#include <optional>

#include "config.hpp"
#include "http/http_front.hpp"
#include "net/tls.hpp"
#include "service.hpp"
#include "warm/error.hpp"
#include "warm/runtime.hpp"
#if WARM_HAVE_GRPC
#include "grpc/grpc_front.hpp"
#endif

namespace warm::warmd {

// The fronts as the flags describe them: where each listens, its limits, timeouts, token and
// TLS, sharing one failed-login limiter.
struct front_plan {
#if WARM_HAVE_GRPC
  std::optional<grpc_front::front_options> grpc;  // --grpc
#endif
  std::optional<http::front_options> http;       // --http
  service_options service;                       // Cap'n Proto (--listen)
  std::shared_ptr<const net::tls_material> tls;  // every TCP front's; null: no TLS
  std::size_t connections = 0;  // descriptors the HTTP and gRPC fronts may hold at once
};
expected<front_plan> plan_fronts(const config& c);

// Where TorchScript code runs (warm::set_code_policy): in a sandboxed runtime, described by a
// sandboxed helper (--describe-helper, else warm-runtime beside warmd), unless --in-process-code.
expected<void> set_code_policy_from(const config& c);

// The runtime's options: repositories (checked, like the state directory), devices and their
// policies, loads, failures, batching, version polling.
expected<runtime_options> runtime_options_from(const config& c);

// Starts each --runtime (a model runtime) and attaches it to `options` as a device. Call it with
// the stop signals blocked: the links' threads must not take them.
expected<void> attach_model_runtimes(const config& c, runtime_options& options);

}  // namespace warm::warmd
