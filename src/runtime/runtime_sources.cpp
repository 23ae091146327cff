#include "runtime/runtime_sources.hpp"

#include <caf/all.hpp>

#include <future>

#include "actors/tier_actor.hpp"
#include "sources/http_store.hpp"
#include "sources/remote_header.hpp"
#include "sources/s3_store.hpp"

namespace warm {
namespace {

// Asks the tier for a copy and waits for it (on a thread that may block).
expected<tier_copy> acquire(const tier_actor& tier, sources::remote_model model, copy_mode mode) {
  auto promise = std::make_shared<std::promise<expected<tier_copy>>>();
  auto answer = promise->get_future();
  // Answered unavailable if the tier stops with the request in its mailbox.
  auto done = std::make_shared<bool>(false);
  std::shared_ptr<void> guard(nullptr, [promise, done](void*) {
    if (!*done) promise->set_value(make_error(errc::unavailable, "the disk tier stopped"));
  });
  caf::anon_send(tier, msg::acquire_copy{std::move(model),
                                         [promise, done, guard](expected<tier_copy> r) {
                                           *done = true;
                                           promise->set_value(std::move(r));
                                         },
                                         mode});
  guard.reset();
  return answer.get();
}

}  // namespace

expected<runtime_sources> start_sources(caf::actor_system& system, const runtime_options& options,
                                        const std::vector<std::string>& remote_roots,
                                        std::uint64_t device_bytes, const clock& time,
                                        std::shared_ptr<runtime_metrics> metrics) {
  const auto& o = options.sources;
  if (o.fetch_streams < 1 || o.fetch_streams > 64)
    return invalid_input("fetch streams must be 1..64");
  if (o.fetch_part_bytes < (64 << 10)) return invalid_input("a fetch part must be at least 64 KiB");
  if (o.fetch_threads < 1 || o.fetch_threads > 64)
    return invalid_input("fetch threads must be 1..64");
  auto env = sources::process_environment();
  auto credentials = sources::find_credentials(env, sources::local_files());
  if (!credentials) return std::move(credentials).error();
  sources::s3_options s3;
  s3.endpoint = o.s3_endpoint;
  s3.region = sources::find_region(o.s3_region, env);
  s3.credentials = std::move(*credentials);
  s3.ca_file = o.ca_file;
  auto s3_store = sources::make_s3_store(std::move(s3));
  if (!s3_store) return std::move(s3_store).error();
  sources::remote_stores stores;
  stores.s3 = std::move(*s3_store);
  stores.http = sources::make_http_store({o.ca_file});
  stores.fetch.streams = o.fetch_streams;
  stores.fetch.part_bytes = o.fetch_part_bytes;
  auto remote = sources::remote_repository::create(remote_roots, std::move(stores));
  if (!remote) return std::move(remote).error();

  const auto dir = o.cache_dir.empty() ? options.state_dir + "/tier" : o.cache_dir;
  const auto bytes = o.cache_bytes ? o.cache_bytes : 2 * device_bytes;
  auto open = [dir, bytes, policy = options.policy, &time]() -> expected<sources::disk_tier> {
    auto tier = sources::disk_tier::open(dir, bytes, policy, time);
    if (!tier)
      return make_error(tier.error().code, "the disk tier at " + dir + ": " + tier.error().message);
    return tier;
  };
  tier_config config;
  // Opened now when remote sources are configured, so that a tier that cannot be used stops the
  // start; else at the first remote registration.
  if (!remote_roots.empty() || !o.cache_dir.empty()) {
    auto tier = open();
    if (!tier) return std::move(tier).error();
    config.tier = std::make_unique<sources::disk_tier>(std::move(*tier));
  }
  config.open = open;

  runtime_sources out;
  out.fetcher = std::make_unique<executor>(o.fetch_threads);
  auto shared_remote = std::make_shared<const sources::remote_repository>(std::move(*remote));
  config.remote = shared_remote;
  out.remote = shared_remote;
  config.metrics = std::move(metrics);
  config.fetch_on = [fetcher = out.fetcher.get()](std::function<void()> task) {
    fetcher->submit(std::move(task));
  };
  out.tier = spawn_tier(system, std::move(config));
  out.locate = [tier = out.tier, shared_remote](
                   const std::string& path,
                   std::optional<std::uint64_t> version) -> expected<tier_copy> {
    auto model = shared_remote->resolve(path, version);
    if (!model) return std::move(model).error();
    auto held = acquire(tier, *model, copy_mode::held_only);
    if (held || held.error().code != errc::not_found) return held;
    // TorchScript is described from its whole archive; a small file is as cheap to fetch whole.
    if (kind_of_file(model->name) != "dense" || model->object.size <= sources::header_first_look)
      return acquire(tier, *model, copy_mode::committed);
    auto header = sources::fetch_header(*shared_remote, *model);
    if (!header) return std::move(header).error();
    // Its path is the object's URL (never opened locally); reads go through the arrival.
    tier_copy copy;
    copy.where = sources::copy_location(*model, model->object.url.to_string());
    copy.where.arriving = std::move(*header);
    return copy;
  };
  out.materialize = [tier = out.tier, follow = o.follow_fetch](
                        const model_location& where, copy_mode mode) -> expected<tier_copy> {
    if (!follow && mode == copy_mode::arriving) mode = copy_mode::committed;
    auto url = sources::parse_object_url(where.source);
    if (!url) return std::move(url).error();
    sources::remote_model model;
    model.object.url = std::move(*url);
    // Any copy the tier holds will do (a version's file is not meant to change; one fetched since
    // the registration is the newer). None: fetched after a fresh look at the object.
    model.object.size = where.source_bytes;
    const auto slash = where.path.rfind('/');
    model.name = slash == std::string::npos ? where.path : where.path.substr(slash + 1);
    model.version = where.version;
    return acquire(tier, std::move(model), mode);
  };
  return out;
}

}  // namespace warm
