#include "cluster_setup.hpp"

#include <algorithm>

#include <spdlog/spdlog.h>

#include "cluster/etcd_registry.hpp"

namespace warm::warmd {
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

}  // namespace

expected<std::unique_ptr<registry_storage>> cluster_registry(const config& c) {
  auto access = etcd_options(c);
  if (!access) return std::move(access).error();
  return cluster::open_etcd_registry(*access, c.cluster_name,
                                     [](const std::string& line) { spdlog::warn("{}", line); });
}

expected<joined_cluster> join_cluster(const config& c, runtime& rt, const std::string& token,
                                      std::shared_ptr<const net::tls_material> front_tls) {
  joined_cluster out;
  auto address = cluster::advertised_address(c.advertise, c.listen);
  if (!address) return std::move(address).error();
  out.address = *address;
  if (front_tls) {
    if (auto problem = cluster::advertised_tls_problem(*address, *front_tls); !problem.empty())
      return make_error(errc::invalid_argument, "--cluster with TLS: " + problem);
    out.tls = std::make_shared<cluster::peer_tls>(*front_tls);
  }
  cluster::cluster_options o;
  auto access = etcd_options(c);
  if (!access) return std::move(access).error();
  o.etcd = std::move(*access);
  o.cluster = c.cluster_name;
  o.instance = c.instance;
  o.address = *address;
  o.version = WARM_VERSION;
  o.lease_ttl = std::chrono::seconds(c.lease_ttl);
  o.copies.add_queue = c.copy_queue;
  o.copies.drop_queue = std::min(o.copies.drop_queue, c.copy_queue / 4);
  o.copies.cool_ms = std::int64_t{c.copy_cool_seconds} * 1000;
  o.token = token;
  o.tls = out.tls;
  auto mode = cluster::cluster_mode::start(std::move(o), rt);
  if (!mode) return std::move(mode).error();
  out.mode = std::move(*mode);
  return out;
}

}  // namespace warm::warmd
