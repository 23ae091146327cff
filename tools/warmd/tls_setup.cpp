#include "tls_setup.hpp"

#include <spdlog/spdlog.h>

namespace warm::warmd {

namespace {

net::tls_files files_of(const config& c) {
  return {c.tls_cert, c.tls_key, c.tls_client_ca};
}

void log_loaded(const net::tls_material& m, const net::tls_files& files, const char* when) {
  spdlog::info("{}{}", when, net::describe(m, files));
  if (m.expired) spdlog::warn("TLS: the certificate in {} expired on {}", files.cert, m.not_after);
}

}  // namespace

expected<std::shared_ptr<const net::tls_material>> load_front_tls(const config& c) {
  auto files = files_of(c);
  if (!files.enabled() && files.client_ca.empty())
    return std::shared_ptr<const net::tls_material>();
  net::tls_material m;
  std::string why;
  if (!net::load_tls(files, m, why)) return make_error(errc::invalid_argument, why);
  log_loaded(m, files, "TCP fronts: ");
  return std::make_shared<const net::tls_material>(std::move(m));
}

std::shared_ptr<const net::tls_material> reload_front_tls(const config& c) {
  auto files = files_of(c);
  net::tls_material m;
  std::string why;
  if (!net::load_tls(files, m, why)) {
    spdlog::error("SIGHUP: the TLS certificates were not reloaded, the fronts keep theirs: {}",
                  why);
    return nullptr;
  }
  log_loaded(m, files, "SIGHUP: TCP fronts: ");
  return std::make_shared<const net::tls_material>(std::move(m));
}

}  // namespace warm::warmd
