#include "cluster_mode.hpp"

#include <unistd.h>

#include <algorithm>
#include <filesystem>

#include <spdlog/spdlog.h>

#include "etcd/client.hpp"
#include "node/etcd_registry.hpp"
#include "node/membership.hpp"

namespace warm::warmd {

expected<std::string> advertised_address(const config& c) {
  if (!c.advertise.empty()) return c.advertise;
  if (c.listen.empty()) return make_error(errc::invalid_argument, "--cluster needs --advertise or a --listen address");
  auto address = c.listen.front();
  if (address.rfind("unix:", 0) == 0) {
    std::filesystem::path path = address.substr(5);
    if (path.is_relative()) address = "unix:" + (std::filesystem::current_path() / path).lexically_normal().string();
  }
  return address;
}

expected<std::unique_ptr<registry_storage>> cluster_registry(const config& c) {
  etcd::options eo;
  eo.endpoints = c.cluster;
  auto client = etcd::client::connect(std::move(eo));
  if (!client) return std::move(client).error();
  node::etcd_registry_options o;
  o.etcd = std::move(*client);
  o.cluster = c.cluster_name;
  o.log = [](const std::string& line) { spdlog::warn("{}", line); };
  return node::open_etcd_registry(std::move(o));
}

expected<std::unique_ptr<cluster_mode>> cluster_mode::start(const config& c, runtime& rt, std::string token) {
  node::membership_options o;
  o.endpoints = c.cluster;
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
  auto name = o.cluster;
  auto instance = o.instance;
  auto advertised = o.address;
  peer_client::options po;
  po.token = std::move(token);
  po.fallback = [&rt](infer_request request, callback<infer_result> done) { rt.infer(std::move(request), std::move(done)); };
  po.log = [](const std::string& line) { spdlog::warn("{}", line); };
  auto peers = peer_client::start(std::move(po));
  if (!peers) return std::move(peers).error();
  auto root = node::cluster_root(name);
  if (!root) return std::move(root).error();
  auto m = node::membership::start(std::move(o));
  if (!m) return std::move(m).error();
  etcd::options eo;
  eo.endpoints = c.cluster;
  auto placing_etcd = etcd::client::connect(std::move(eo));
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
  spdlog::info("cluster {}: instance {} at {}, etcd {}", name, instance, advertised, fmt::join(c.cluster, ","));
  return std::unique_ptr<cluster_mode>(
      new cluster_mode(std::move(name), std::move(*m), std::move(*peers), std::move(*placing)));
}

cluster_mode::cluster_mode(std::string name, std::unique_ptr<node::membership> m, std::unique_ptr<peer_client> peers,
                           std::unique_ptr<placer> placing)
    : name_(std::move(name)), membership_(std::move(m)), peers_(std::move(peers)), placer_(std::move(placing)) {}

bool cluster_mode::forward(const std::string& model, infer_request& request, callback<infer_result>& done) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!membership_ || !peers_) return false;  // left the cluster: serve everything here
    const auto members = membership_->members();
    const node::member* best = nullptr;
    for (const auto& m : members) {
      const auto& r = m.record;
      if (m.self || r.draining || !std::binary_search(r.residents.begin(), r.residents.end(), model)) continue;
      if (!best || r.loads_in_flight < best->record.loads_in_flight ||
          (r.loads_in_flight == best->record.loads_in_flight && r.name < best->record.name))
        best = &m;
    }
    if (best)
      peers_->infer(best->record.address, std::move(request), std::move(done));  // returns at once
    else
      placer_->place(model, std::move(request), std::move(done));  // returns at once
  }
  return true;
}

cluster_mode::~cluster_mode() { leave(); }

void cluster_mode::leave() {
  std::unique_ptr<node::membership> leaving;
  std::unique_ptr<peer_client> peers;
  std::unique_ptr<placer> placing;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    leaving = std::move(membership_);
    peers = std::move(peers_);
    placing = std::move(placer_);
  }
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
        out.instances.push_back(std::move(x));
      }
    }
  }
  done(std::move(out));
}

}  // namespace warm::warmd
