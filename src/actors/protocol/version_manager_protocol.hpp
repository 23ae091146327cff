// What the version manager (actors/version_manager.hpp) is sent: the runtime's configuration and
// status requests, its own timers, the directory watch and the offload's looks. The registry's
// answers come back as the responses to its requests (msg::ask).
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "actors/protocol/common.hpp"
#include "warm/model_repository.hpp"
#include "warm/runtime_types.hpp"
#include "warm/versions.hpp"

namespace warm {

namespace msg {

// Runtime: replace the served models with `config` (checked whole first: a refused one changes
// nothing). Answered once applied (their versions load afterwards).
struct serve_models {
  served_models_config config;
  callback<void> done;
};
// Runtime: every served model's status, by name.
struct served_status {
  callback<std::vector<served_model_status>> done;
};
// Itself: time to look at every served model's directory.
struct poll_versions {};
// The directory watch (or its own timer while a version settles): look at `model` now.
struct look_now {
  std::string model;
};
// The offload: what one look at a served model's directory found.
struct versions_seen {
  std::string model;
  std::uint64_t generation = 0;  // the served model's entry it was made for
  expected<std::vector<version_file>> look{std::vector<version_file>{}};
  std::chrono::nanoseconds now{};
  std::int64_t wall_now_ns = 0;
  bool remote = false;  // the directory was looked for in a remote store (listed)
};
// Itself, after a failed load's back-off: aspire to `model`'s versions again, so the failed one is
// retried.
struct retry_versions {
  std::string model;
  std::uint64_t generation = 0;  // the served model's entry it was made for
};
// Itself, shortly after the registry said vmodel `alias` was still moving to `target`: ask where
// it is now.
struct recheck_alias {
  std::string model;
  std::uint64_t generation = 0;
  std::string alias;
  std::optional<std::uint64_t> target;
};

}  // namespace msg

}  // namespace warm

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(warm::msg::serve_models)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(warm::msg::served_status)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(warm::msg::poll_versions)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(warm::msg::look_now)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(warm::msg::versions_seen)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(warm::msg::retry_versions)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(warm::msg::recheck_alias)
