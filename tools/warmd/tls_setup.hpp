// warmd's TLS certificates (--tls-cert, --tls-key, --tls-client-ca): read at start and again on
// SIGHUP, for every TCP front (docs/configuration.md, TLS).
#pragma once

#include <memory>

#include "config.hpp"
#include "net/tls.hpp"
#include "warm/error.hpp"

namespace warm::warmd {

// The files' certificates, checked (net::load_tls), and logged: null when none of the three flags
// is given; invalid_argument naming the file otherwise (a client CA without a certificate
// included). An expired certificate is served, with a warning.
expected<std::shared_ptr<const net::tls_material>> load_front_tls(const config& c);

// SIGHUP: the files read again. The new certificates (logged), or null when they do not load, which
// is logged as an error: the fronts keep the certificates they have.
std::shared_ptr<const net::tls_material> reload_front_tls(const config& c);

}  // namespace warm::warmd
