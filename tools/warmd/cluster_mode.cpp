#include "cluster_mode.hpp"

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <future>

#include <spdlog/spdlog.h>

#include "etcd/client.hpp"
#include "metrics/text_format.hpp"
#include "node/etcd_registry.hpp"
#include "node/membership.hpp"
#include "node/placing.hpp"
#include "relay.hpp"

namespace warm::warmd {

expected<std::string> advertised_address(const config& c) {
  if (!c.advertise.empty()) return c.advertise;
  if (c.listen.empty())
    return make_error(errc::invalid_argument, "--cluster needs --advertise or a --listen address");
  auto address = c.listen.front();
  if (address.rfind("unix:", 0) == 0) {
    std::filesystem::path path = address.substr(5);
    if (path.is_relative())
      address = "unix:" + (std::filesystem::current_path() / path).lexically_normal().string();
  }
  return address;
}

namespace {

// How to reach the cluster's etcd (--cluster; a secured one with --etcd-*), with the client's
// default deadlines. invalid_argument for --etcd-* flags that cannot be used (a password file
// others may read, a user without one); etcd::client::connect checks the rest.
expected<etcd::options> etcd_options(const config& c) {
  etcd::options o;
  o.endpoints = c.cluster;
  o.ca_file = c.etcd_ca;
  o.cert_file = c.etcd_cert;
  o.key_file = c.etcd_key;
  o.user = c.etcd_user;
  if (c.etcd_user.empty() != c.etcd_password_file.empty())
    return make_error(errc::invalid_argument, "--etcd-user and --etcd-password-file go together");
  if (!c.etcd_password_file.empty()) {
    auto password = read_etcd_password(c.etcd_password_file);
    if (!password) return std::move(password).error();
    o.password = std::move(*password);
  }
  return o;
}

// A client of the cluster's etcd.
expected<std::unique_ptr<etcd::client>> connect_etcd(const config& c) {
  auto o = etcd_options(c);
  if (!o) return std::move(o).error();
  return etcd::client::connect(std::move(*o));
}

}  // namespace

expected<std::unique_ptr<registry_storage>> cluster_registry(const config& c) {
  auto client = connect_etcd(c);
  if (!client) return std::move(client).error();
  node::etcd_registry_options o;
  o.etcd = std::move(*client);
  o.cluster = c.cluster_name;
  o.log = [](const std::string& line) { spdlog::warn("{}", line); };
  return node::open_etcd_registry(std::move(o));
}

expected<std::unique_ptr<cluster_mode>> cluster_mode::start(const config& c, runtime& rt,
                                                            std::string token,
                                                            std::shared_ptr<const peer_tls> tls) {
  node::membership_options o;
  o.endpoints = c.cluster;
  auto access = etcd_options(c);
  if (!access) return std::move(access).error();
  o.etcd_access = std::move(*access);
  o.cluster = c.cluster_name;
  o.instance = c.instance;
  if (o.instance.empty()) {
    char host[256] = {};
    if (::gethostname(host, sizeof host - 1) != 0 || host[0] == '\0')
      return make_error(errc::invalid_argument, "cannot read the host name: give --instance");
    o.instance = host;
  }
  auto address = advertised_address(c);
  if (!address) return std::move(address).error();
  o.address = std::move(*address);
  o.version = WARM_VERSION;
  o.lease_ttl = std::chrono::seconds(c.lease_ttl);
  o.inspect = [&rt](callback<inspection> done) { rt.inspect(std::move(done)); };
  o.log = [](const std::string& line) { spdlog::warn("{}", line); };
  o.note = [](const std::string& line) { spdlog::info("{}", line); };
  // The hot models of an instance that went are adopted by the placer, once it exists (and not
  // after it is gone: leave() clears the hook first).
  auto adopter = std::make_shared<adoption_hook>();
  o.gone = [adopter](const node::instance_record& r) {
    std::lock_guard<std::mutex> lock(adopter->mutex);
    if (adopter->placing) adopter->placing->adopt(r.hot);
  };
  auto name = o.cluster;
  auto instance = o.instance;
  auto advertised = o.address;
  peer_client::options po;
  po.token = std::move(token);
  po.tls = tls;
  po.fallback = [&rt](infer_request request, callback<infer_result> done) {
    rt.infer(std::move(request), std::move(done));
  };
  po.log = [](const std::string& line) { spdlog::warn("{}", line); };
  auto peers = peer_client::start(std::move(po));
  if (!peers) return std::move(peers).error();
  auto root = node::cluster_root(name);
  if (!root) return std::move(root).error();
  auto m = node::membership::start(std::move(o));
  if (!m) return std::move(m).error();
  auto placing_etcd = connect_etcd(c);
  if (!placing_etcd) return std::move(placing_etcd).error();
  placer::options pl;
  pl.etcd = std::move(*placing_etcd);
  pl.root = std::move(*root);
  pl.instance = instance;
  pl.rt = &rt;
  pl.membership = m->get();
  pl.peers = peers->get();
  pl.log = [](const std::string& line) { spdlog::warn("{}", line); };
  auto placing = placer::start(std::move(pl));
  if (!placing) return std::move(placing).error();
  copy_scaler::options co;
  co.rule.add_queue = c.copy_queue;
  co.rule.drop_queue = std::min(co.rule.drop_queue, c.copy_queue / 4);
  co.rule.cool_ms = std::int64_t{c.copy_cool_seconds} * 1000;
  co.rt = &rt;
  co.membership = m->get();
  co.placing = placing->get();
  co.log = [](const std::string& line) { spdlog::warn("{}", line); };
  co.note = [](const std::string& line) { spdlog::info("{}", line); };
  auto copies = copy_scaler::start(std::move(co));
  if (!copies) return std::move(copies).error();
  {
    std::lock_guard<std::mutex> lock(adopter->mutex);
    adopter->placing = placing->get();
  }
  spdlog::info("cluster {}: instance {} at {}, etcd {}", name, instance, advertised,
               fmt::join(c.cluster, ","));
  auto mode = std::unique_ptr<cluster_mode>(new cluster_mode(std::move(name), rt, std::move(*m),
                                                             std::move(*peers), std::move(*placing),
                                                             std::move(*copies)));
  mode->adopter_ = std::move(adopter);
  mode->tls_ = std::move(tls);
  return mode;
}

cluster_mode::cluster_mode(std::string name, runtime& rt, std::unique_ptr<node::membership> m,
                           std::unique_ptr<peer_client> peers, std::unique_ptr<placer> placing,
                           std::unique_ptr<copy_scaler> copies)
    : name_(std::move(name)),
      rt_(rt),
      membership_(std::move(m)),
      peers_(std::move(peers)),
      placer_(std::move(placing)),
      copies_(std::move(copies)) {}

void cluster_mode::drain(std::chrono::seconds budget) {
  const auto started = std::chrono::steady_clock::now();
  node::membership* membership = nullptr;
  placer* placing = nullptr;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    membership = membership_.get();  // only leave() ends them, on this (the main) thread
    placing = placer_.get();
  }
  if (!membership || !placing) return;
  std::unique_ptr<copy_scaler> copies;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    copies = std::move(copies_);  // a leaving instance adds and drops no copies
  }
  copies.reset();
  membership->set_draining(true);
  placing->set_draining();
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
  std::vector<placer::migrant> models;
  for (auto& m : node::recent_models(*state, 15 * 60))
    models.push_back({std::move(m.model), m.bytes});
  if (models.empty()) return spdlog::info("drain: no recent model to load elsewhere");
  auto moved = placing->migrate(models, started + budget);
  spdlog::info(
      "drain: {} recent model(s): {} loaded on other instances, {} already there, {} failed or "
      "unfinished, {} with nowhere to go ({:.1f} s)",
      models.size(), moved.loaded, moved.elsewhere, moved.failed, moved.unplaced,
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count());
}

bool cluster_mode::forward(const std::string& model, infer_request& request,
                           callback<infer_result>& done) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!membership_ || !peers_) return false;         // left the cluster: serve everything here
    const auto holders = membership_->holders(model);  // by name
    const auto* best = node::choose_holder(
        holders, [this](const std::string& address) { return peers_->in_flight(address); });
    if (best)
      peers_->infer(best->address, std::move(request), std::move(done));  // returns at once
    else
      placer_->place(model, std::move(request), std::move(done));  // returns at once
  }
  return true;
}

std::string cluster_mode::relay_address(
    const std::string& model,
    const std::function<std::uint32_t(const std::string&)>& requests) const {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!membership_ || !peers_) return {};
  const auto holders = membership_->holders(model);
  for (const auto& h : holders)
    if (h.self) return {};
  const auto* best = node::choose_holder(holders, [&](const std::string& address) {
    return requests(address) + peers_->in_flight(address);
  });
  return best ? best->address : std::string();
}

void cluster_mode::relayed(bool answered) {
  ++(answered ? relay_answered_ : relay_fell_back_);
}

std::function<decltype(rpc::server_options::relay)(kj::AsyncIoProvider&)>
cluster_mode::relay_factory(std::string token) {
  return [this, token](kj::AsyncIoProvider& io) -> decltype(rpc::server_options::relay) {
    auto relay =
        std::make_shared<rpc_relay>(io, *this, token, tls_, std::chrono::seconds(60),
                                    [](const std::string& line) { spdlog::warn("{}", line); });
    return [relay](rpc::infer_context context, std::function<kj::Promise<void>()> serve_here) {
      return relay->infer(context, std::move(serve_here));
    };
  };
}

cluster_mode::~cluster_mode() {
  leave();
}

void cluster_mode::leave() {
  std::unique_ptr<node::membership> leaving;
  std::unique_ptr<peer_client> peers;
  std::unique_ptr<placer> placing;
  std::unique_ptr<copy_scaler> copies;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    leaving = std::move(membership_);
    peers = std::move(peers_);
    placing = std::move(placer_);
    copies = std::move(copies_);
  }
  if (adopter_) {
    std::lock_guard<std::mutex> lock(adopter_->mutex);
    adopter_->placing = nullptr;
  }
  copies.reset();
  placing.reset();  // what waits for placement is served here
  peers.reset();    // forwards still in flight are answered unavailable
  leaving.reset();  // revokes the lease, outside the lock (it waits on etcd)
}

void cluster_mode::info(callback<cluster_info> done) const {
  cluster_info out;
  out.enabled = true;
  out.name = name_;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (membership_) {
      auto s = membership_->status();
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
        out.instances.push_back(std::move(x));
      }
    }
    if (peers_) {
      out.forwarded = peers_->forwarded() + relay_answered_;
      out.fell_back = peers_->fell_back() + relay_fell_back_;
    }
    if (placer_) {
      out.placed = placer_->placements();
      out.claims_lost = placer_->claims_lost();
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
    if (peers_)
      forwarded = peers_->forwarded() + relay_answered_,
      fell_back = peers_->fell_back() + relay_fell_back_;
    if (placer_)
      placed = placer_->placements(), lost = placer_->claims_lost(), adopted = placer_->adopted(),
      resumed = placer_->transitions_resumed();
    if (copies_) added = copies_->added(), dropped = copies_->dropped();
    if (membership_) {
      for (const auto& m : membership_->members()) {
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

}  // namespace warm::warmd
