// What the runtime facade's files (runtime.cpp, runtime_served.cpp) share: runtime_impl, the
// state behind warm::runtime, and promised(), the future form of a callback. Internal to
// src/runtime.
#pragma once

#include "warm/runtime.hpp"

#include <caf/all.hpp>

#include <cstring>
#include <optional>
#include <thread>

#include "actors/device_actor.hpp"
#include "actors/loader_pool.hpp"
#include "actors/registry_actor.hpp"
#include "actors/scorer_actor.hpp"
#include "actors/version_manager.hpp"
#include "actors/watch_hub.hpp"
#include "runtime/batcher.hpp"
#include "runtime/checked_outputs.hpp"
#include "runtime/executor.hpp"
#include "runtime/runtime_actors.hpp"
#include "storage/registry_store.hpp"
#include "warm/backend.hpp"
#include "warm/model_repository.hpp"

#include <atomic>
#include <future>
#include <memory>
#include <mutex>

namespace warm {

// Where weights go to be freed: the reclaimer while it runs, else nowhere (freed by the caller).
struct reclaim_gate {
  std::mutex mutex;
  warm::executor* open = nullptr;
};

struct runtime_impl {
  runtime_options options;
  std::shared_ptr<const clock> time;
  std::vector<std::shared_ptr<device>> devices;
  std::shared_ptr<route_table> routes = std::make_shared<route_table>();
  std::unique_ptr<caf::actor_system_config> config;
  std::unique_ptr<caf::actor_system> system;
  registry_actor registry;
  version_manager_actor versions;  // the served models
  std::shared_ptr<dir_watch>
      watcher;  // wakes it when their directories change (null: polling alone)
  loader_pool_actor pool;
  scorer_actor scorer;  // only when a policy rescores
  watch_hub_actor hub;
  std::atomic<std::uint64_t> next_watch{1};
  std::vector<device_actor> device_actors;
  std::unique_ptr<warm::batcher> batcher;    // the batch queues of the models that batch
  std::unique_ptr<warm::executor> executor;  // runs inferences after a miss
  // One thread freeing weights (munmap, cudaFree) that the actors drop or withdraw; declared after
  // the devices, so it is gone before them. Every weights handle reaches it through reclaim_to,
  // which the runtime closes before stopping it (later drops free inline: no actor runs then).
  std::unique_ptr<warm::executor> reclaimer;
  std::shared_ptr<reclaim_gate> reclaim_to;
  // One thread for the registry's file reads that answer a describe (a large header is parsed
  // there, never on the registry's thread).
  std::unique_ptr<warm::executor> describer;
  // Remote sources: the disk tier's actor (null without one) and the threads its fetches run on.
  tier_actor tier;
  std::unique_ptr<warm::executor> fetcher;
  // The version manager's looks at model directories in S3 (listings): threads of their own, so
  // that a slow or unreachable store never holds the describer's.
  std::unique_ptr<warm::executor> lister;
  std::shared_ptr<runtime_metrics> metrics;
};

namespace runtime_detail {

// A callback that fulfils a future. If every copy of the callback is destroyed without being
// called (a request dropped from a mailbox at shutdown), the future gets `unavailable` instead of
// a broken promise.
template <class T>
inline std::pair<callback<T>, std::future<expected<T>>> promised() {
  struct once {
    std::promise<expected<T>> promise;
    std::atomic<bool> done{false};
    void set(expected<T> r) {
      if (!done.exchange(true)) promise.set_value(std::move(r));
    }
    ~once() { set(make_error(errc::unavailable, "the warm runtime stopped before answering")); }
  };
  auto state = std::make_shared<once>();
  auto future = state->promise.get_future();
  return {[state](expected<T> r) { state->set(std::move(r)); }, std::move(future)};
}

// `done`, answered with the disk tier's view of each status that has a source (mark_tier): the
// tier actor is asked first, from the thread that answers the status, without blocking. A status
// without a source, or an error, is passed on at once. (runtime_inspect.cpp)
callback<model_status> with_tier(const tier_actor& tier, callback<model_status> done);
callback<std::vector<model_status>> with_tier(const tier_actor& tier,
                                              callback<std::vector<model_status>> done);

}  // namespace runtime_detail

}  // namespace warm
