#include "cluster/cluster_mode.hpp"

#include <unistd.h>

#include <caf/all.hpp>

#include <algorithm>
#include <filesystem>
#include <future>

#include <spdlog/spdlog.h>

#include "cluster/copy_scaler.hpp"
#include "cluster/membership.hpp"
#include "cluster/migration.hpp"
#include "cluster/miss_placement.hpp"
#include "cluster/peers.hpp"
#include "cluster/placer.hpp"
#include "cluster/relay.hpp"
#include "metrics/text_format.hpp"
#include "runtime/runtime_actors.hpp"

namespace warm::cluster {

expected<std::string> advertised_address(const std::string& advertise,
                                         const std::vector<std::string>& listen) {
  if (!advertise.empty()) return advertise;
  if (listen.empty())
    return make_error(errc::invalid_argument, "--cluster needs --advertise or a --listen address");
  auto address = listen.front();
  if (address.rfind("unix:", 0) == 0) {
    std::filesystem::path path = address.substr(5);
    if (path.is_relative())
      address = "unix:" + (std::filesystem::current_path() / path).lexically_normal().string();
  }
  return address;
}

// What a joined instance runs, in the order it is stopped (reverse of declaration below).
struct cluster_mode::parts {
  caf::actor_system* system = nullptr;
  std::unique_ptr<kv_store> store;
  cluster_counters counters;
  std::unique_ptr<peer_client> peers;
  std::unique_ptr<membership> members;
  placer_actor placer;
  copy_scaler_actor copies;  // null with copies off, and once draining
  placement_claims::options claims;
  // How the membership's watch reaches the placer when an instance goes: set once the placer
  // exists, cleared before it stops.
  struct adoption_hook {
    std::mutex mutex;
    placer_actor placer;
  };
  std::shared_ptr<adoption_hook> adopter = std::make_shared<adoption_hook>();
};

namespace {

void log_warning(const std::string& line) {
  spdlog::warn("{}", line);
}

// Waits until every given actor has ended.
template <class... Actors>
void wait_for(caf::actor_system& system, const Actors&... actors) {
  caf::scoped_actor self{system};
  self->wait_for(actors...);
}

}  // namespace

expected<std::unique_ptr<cluster_mode>> cluster_mode::start(cluster_options c, runtime& rt) {
  auto p = std::make_unique<parts>();
  p->system = actors_of(rt).system;
  membership_options o;
  o.endpoints = c.etcd.endpoints;
  o.etcd_access = c.etcd;
  o.cluster = c.cluster;
  o.instance = c.instance;
  if (o.instance.empty()) {
    char host[256] = {};
    if (::gethostname(host, sizeof host - 1) != 0 || host[0] == '\0')
      return make_error(errc::invalid_argument, "cannot read the host name: give --instance");
    o.instance = host;
  }
  if (c.address.empty())
    return make_error(errc::invalid_argument, "the cluster needs this instance's address");
  o.address = c.address;
  o.version = c.version;
  o.lease_ttl = c.lease_ttl;
  o.inspect = [&rt](callback<inspection> done) { rt.inspect(std::move(done)); };
  o.log = log_warning;
  o.note = [](const std::string& line) { spdlog::info("{}", line); };
  o.gone = [adopter = p->adopter](const instance_record& r) {
    std::lock_guard<std::mutex> lock(adopter->mutex);
    if (adopter->placer) caf::anon_send(adopter->placer, msg::instance_gone{r.hot});
  };
  const auto name = o.cluster;
  const auto instance = o.instance;
  auto root = cluster_root(name);
  if (!root) return std::move(root).error();
  if (c.copies.add_queue > 0)
    if (auto ok = check_copy_rule(c.copies); !ok) return std::move(ok).error();

  peer_client::options po;
  po.token = c.token;
  po.tls = c.tls;
  po.fallback = [&rt](infer_request request, callback<infer_result> done) {
    rt.infer(std::move(request), std::move(done));
  };
  po.log = log_warning;
  auto peers = peer_client::start(std::move(po));
  if (!peers) return std::move(peers).error();
  p->peers = std::move(*peers);
  auto etcd_client = etcd::client::connect(c.etcd);
  if (!etcd_client) return std::move(etcd_client).error();
  p->store = etcd_store(std::move(*etcd_client));
  auto m = membership::start(std::move(o));
  if (!m) return std::move(m).error();
  p->members = std::move(*m);

  p->claims.store = p->store.get();
  p->claims.root = *root;
  p->claims.instance = instance;
  p->claims.counters = &p->counters;
  placer_config pl;
  pl.claims = p->claims;
  pl.rt = &rt;
  pl.members = p->members.get();
  pl.peers = p->peers.get();
  pl.log = log_warning;
  auto placer = spawn_placer(*p->system, std::move(pl));
  if (!placer) return std::move(placer).error();
  p->placer = *placer;
  if (c.copies.add_queue > 0) {
    copy_scaler_config co;
    co.rule = c.copies;
    co.claims = p->claims;
    co.members = p->members.get();
    co.peers = p->peers.get();
    co.inspect = [&rt](callback<inspection> done) { rt.inspect(std::move(done)); };
    co.unload = [&rt](const std::string& model, callback<void> done) {
      rt.unload(model, std::move(done));
    };
    co.log = log_warning;
    co.note = [](const std::string& line) { spdlog::info("{}", line); };
    auto copies = spawn_copy_scaler(*p->system, std::move(co));
    if (!copies) {
      caf::anon_send(p->placer, msg::stop_placing{});
      wait_for(*p->system, p->placer);
      return std::move(copies).error();
    }
    p->copies = *copies;
  }
  {
    std::lock_guard<std::mutex> lock(p->adopter->mutex);
    p->adopter->placer = p->placer;
  }
  spdlog::info("cluster {}: instance {} at {}, etcd {}", name, instance, c.address,
               fmt::join(c.etcd.endpoints, ","));
  auto mode = std::unique_ptr<cluster_mode>(new cluster_mode(name, rt, std::move(p)));
  mode->token_ = std::move(c.token);
  mode->tls_ = std::move(c.tls);
  return mode;
}

cluster_mode::cluster_mode(std::string name, runtime& rt, std::unique_ptr<parts> p)
    : name_(std::move(name)), rt_(rt), parts_(std::move(p)) {}

void cluster_mode::drain(std::chrono::seconds budget) {
  const auto started = std::chrono::steady_clock::now();
  parts* p = nullptr;
  copy_scaler_actor copies;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    p = parts_.get();  // only leave() ends them, on this (the main) thread
    if (p) copies = std::exchange(p->copies, copy_scaler_actor{});
  }
  if (!p) return;
  if (copies) {  // a leaving instance adds and drops no copies
    caf::anon_send(copies, msg::stop_scaling{});
    wait_for(*p->system, copies);
  }
  p->members->set_draining(true);
  caf::anon_send(p->placer, msg::start_draining{});
  if (budget.count() == 0) return;
  auto answer = rt_.inspect();
  if (answer.wait_for(std::chrono::seconds(2)) != std::future_status::ready) {
    spdlog::warn(
        "drain: the runtime did not answer an inspection within 2 s; leaving without loading "
        "models elsewhere");
    return;
  }
  auto state = answer.get();
  if (!state)
    return spdlog::warn("drain: cannot inspect the runtime: {}", state.error().to_string());
  std::vector<migrant> models;
  for (auto& m : recent_models(*state, 15 * 60))
    models.push_back({std::move(m.model), m.bytes});
  if (models.empty()) return spdlog::info("drain: no recent model to load elsewhere");
  auto claims_options = p->claims;
  claims_options.warn = log_warning;
  placement_claims claims(std::move(claims_options));
  auto moved = migrate(claims, *p->members, *p->peers, models, started + budget, log_warning);
  spdlog::info(
      "drain: {} recent model(s): {} loaded on other instances, {} already there, {} failed or "
      "unfinished, {} with nowhere to go ({:.1f} s)",
      models.size(), moved.loaded, moved.elsewhere, moved.failed, moved.unplaced,
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count());
}

bool cluster_mode::forward(const std::string& model, infer_request& request,
                           callback<infer_result>& done) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!parts_) return false;  // left the cluster: serve everything here
  auto& p = *parts_;
  const auto holders = p.members->holders(model);  // by name
  const auto* best = choose_holder(
      holders, [&p](const std::string& address) { return p.peers->in_flight(address); });
  if (best)
    p.peers->infer(best->address, std::move(request), std::move(done));  // returns at once
  else
    caf::anon_send(p.placer, msg::place_miss{model, std::move(request),
                                             once_callback<infer_result>(std::move(done))});
  return true;
}

std::string cluster_mode::relay_address(
    const std::string& model,
    const std::function<std::uint32_t(const std::string&)>& requests) const {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!parts_) return {};
  const auto holders = parts_->members->holders(model);
  for (const auto& h : holders)
    if (h.self) return {};
  const auto* best = choose_holder(holders, [&](const std::string& address) {
    return requests(address) + parts_->peers->in_flight(address);
  });
  return best ? best->address : std::string();
}

void cluster_mode::relayed(bool answered) {
  ++(answered ? relay_answered_ : relay_fell_back_);
}

std::function<decltype(rpc::server_options::relay)(kj::AsyncIoProvider&)>
cluster_mode::relay_factory() {
  return [this](kj::AsyncIoProvider& io) -> decltype(rpc::server_options::relay) {
    auto relay =
        std::make_shared<rpc_relay>(io, *this, token_, tls_, std::chrono::seconds(60), log_warning);
    return [relay](rpc::infer_context context, std::function<kj::Promise<void>()> serve_here) {
      return relay->infer(context, std::move(serve_here));
    };
  };
}

cluster_mode::~cluster_mode() {
  leave();
}

void cluster_mode::leave() {
  std::unique_ptr<parts> p;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    p = std::move(parts_);
  }
  if (!p) return;
  {
    std::lock_guard<std::mutex> lock(p->adopter->mutex);
    p->adopter->placer = nullptr;
  }
  if (p->copies) caf::anon_send(p->copies, msg::stop_scaling{});
  caf::anon_send(p->placer, msg::stop_placing{});  // what waits for placement is served here
  if (p->copies)
    wait_for(*p->system, p->placer, p->copies);
  else
    wait_for(*p->system, p->placer);
  // Forwards the placer made may still answer: kept until the peers go.
  p->peers.reset();    // forwards still in flight are answered unavailable
  p->members.reset();  // revokes the lease (it waits on etcd)
}

void cluster_mode::info(callback<cluster_info> done) const {
  cluster_info out;
  out.enabled = true;
  out.name = name_;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (parts_) {
      auto s = parts_->members->status();
      out.instance = s.instance;
      out.joined = s.joined;
      out.last_error = s.last_error;
      out.endpoints = s.endpoints;
      for (const auto& m : s.members) {
        cluster_instance x;
        x.name = m.record.name;
        x.address = m.record.address;
        x.version = m.record.version;
        x.self = m.self;
        x.draining = m.record.draining;
        for (const auto& d : m.record.devices) {
          x.capacity += d.capacity;
          x.used += d.used;
        }
        x.models_loaded = m.record.models_loaded;
        x.loads_in_flight = m.record.loads_in_flight;
        x.loading_threads = m.record.loading_threads;
        x.started_unix = m.record.started_unix;
        x.updated_seconds_ago = m.seen_seconds_ago;
        x.residents = m.record.residents;
        x.loading = m.record.loading;
        x.tiered = m.record.tiered;
        out.instances.push_back(std::move(x));
      }
      out.forwarded = parts_->peers->forwarded() + relay_answered_;
      out.fell_back = parts_->peers->fell_back() + relay_fell_back_;
      out.placed = parts_->counters.placements;
      out.claims_lost = parts_->counters.claims_lost;
    }
  }
  done(std::move(out));
}

std::string cluster_mode::metrics_text() const {
  using prometheus::kind;
  std::uint64_t forwarded = 0, fell_back = 0, placed = 0, lost = 0, copies = 0, added = 0,
                dropped = 0, adopted = 0, resumed = 0;
  std::size_t instances = 0;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (parts_) {
      const auto& p = *parts_;
      forwarded = p.peers->forwarded() + relay_answered_;
      fell_back = p.peers->fell_back() + relay_fell_back_;
      placed = p.counters.placements;
      lost = p.counters.claims_lost;
      adopted = p.counters.adopted;
      resumed = p.counters.transitions_resumed;
      added = p.counters.copies_added;
      dropped = p.counters.copies_dropped;
      for (const auto& m : p.members->members()) {
        ++instances;
        copies += m.record.residents.size();
      }
    }
  }
  prometheus::text_writer w;
  w.family("warm_cluster_forwards_total", kind::counter,
           "Misses forwarded to the peer holding the model, by outcome: answered there, or fell "
           "back (served here).");
  w.sample({{"outcome", "answered"}}, static_cast<double>(forwarded));
  w.sample({{"outcome", "fell_back"}}, static_cast<double>(fell_back));
  w.family("warm_cluster_placements_total", kind::counter,
           "Cold models this instance placed (claims it won).");
  w.sample({}, static_cast<double>(placed));
  w.family("warm_cluster_claims_lost_total", kind::counter,
           "Placements another instance claimed first (then followed).");
  w.sample({}, static_cast<double>(lost));
  w.family("warm_cluster_adopted_total", kind::counter,
           "Hot models of instances that went, loaded again by this instance's placement before "
           "their next request.");
  w.sample({}, static_cast<double>(adopted));
  w.family("warm_cluster_transitions_resumed_total", kind::counter,
           "Pending vmodel transitions this instance set again after an instance went, to load "
           "their targets and flip them.");
  w.sample({}, static_cast<double>(resumed));
  w.family("warm_cluster_copies_added_total", kind::counter,
           "Copies of models held here that this instance asked other instances to load (their "
           "queueing called for more).");
  w.sample({}, static_cast<double>(added));
  w.family("warm_cluster_copies_dropped_total", kind::counter,
           "Copies this instance dropped (the cluster was full and the model cooled).");
  w.sample({}, static_cast<double>(dropped));
  w.family("warm_cluster_instances", kind::gauge,
           "Live instances of the cluster, this one included once its record is seen.");
  w.sample({}, static_cast<double>(instances));
  w.family("warm_cluster_copies", kind::gauge,
           "Models resident across the live instances, one per copy, as their records say.");
  w.sample({}, static_cast<double>(copies));
  return w.text();
}

}  // namespace warm::cluster
