#include "cluster_mode.hpp"

#include <unistd.h>

#include <filesystem>

#include <spdlog/spdlog.h>

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

expected<std::unique_ptr<cluster_mode>> cluster_mode::start(const config& c, runtime& rt) {
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
  auto m = node::membership::start(std::move(o));
  if (!m) return std::move(m).error();
  spdlog::info("cluster {}: instance {} at {}, etcd {}", name, instance, advertised, fmt::join(c.cluster, ","));
  return std::unique_ptr<cluster_mode>(new cluster_mode(std::move(name), std::move(*m)));
}

cluster_mode::cluster_mode(std::string name, std::unique_ptr<node::membership> m)
    : name_(std::move(name)), membership_(std::move(m)) {}

cluster_mode::~cluster_mode() { leave(); }

void cluster_mode::leave() {
  std::unique_ptr<node::membership> leaving;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    leaving = std::move(membership_);
  }
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
