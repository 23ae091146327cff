// A real, single-member etcd for tests: its own data directory under /tmp and two free loopback
// ports (client and peer), started by fork/exec, waited for until its /health says true, and
// killed by pid. It can be crashed, stopped, paused and started again on the same ports and data
// directory, so tests can take etcd away and bring it back under a client that keeps running.
//
// Secured (etcd_member_options::tls): the member serves clients over https only and asks each for
// a certificate signed by its CA (--client-cert-auth). On first start it makes, with the openssl
// command, in its directory: that CA, a server certificate for 127.0.0.1 (subjectAltName
// IP:127.0.0.1), a client certificate per user (CN = the user's name; "root" always), and an
// unrelated CA for tests of a wrong one. /health is then read on a third, plain-HTTP port
// (--listen-metrics-urls). enable_auth() and add_user() turn on etcd's authentication (etcdctl,
// over TLS with root's certificate when secured).
//
// No Catch2 and no warm library beyond warm/error.hpp: any test or tool may use it. Start and
// stop it from one thread (the one that started it should outlive it: the member is killed when
// the thread that forked it exits, so a crashed test leaves no etcd behind).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "warm/error.hpp"

namespace warm::test {

// How a member runs. The default is plain HTTP with no authentication.
struct etcd_member_options {
  // https with client certificates (see the header comment).
  bool tls = false;
  // The users to make client certificates for (CN = the name), besides "root". TLS only.
  std::vector<std::string> users;
  // More etcd flags, appended to the member's own (e.g. {"--auth-token-ttl", "1"}).
  std::vector<std::string> flags;
};

class etcd_member {
 public:
  // Makes the data directory and picks the ports; starts nothing (no certificates either: the
  // first start() makes them).
  etcd_member();
  explicit etcd_member(etcd_member_options options);
  // Kills the member (if running) and removes its directory.
  ~etcd_member();
  etcd_member(const etcd_member&) = delete;
  etcd_member& operator=(const etcd_member&) = delete;

  // The etcd executable: $ETCD when set, else /usr/bin/etcd; empty when it does not exist (the
  // test should then exit 77, which meson reports as skipped).
  static std::string executable();

  // Starts etcd and waits (up to 20 s) until it reports healthy. The first start picks new ports
  // and tries again (up to 5 times) when etcd exits at once, as when a test beside this one took
  // a port between probing and binding; later starts keep the ports and the data. Errors
  // (errc::unavailable) carry the end of etcd's log.
  expected<void> start();
  // SIGKILL and reap: a crash. The data directory stays for the next start().
  void kill();
  // SIGTERM and reap (SIGKILL after 10 s): a clean shutdown.
  void stop();
  // SIGSTOP / SIGCONT: the member keeps its connections but answers nothing while paused. pause()
  // returns once every thread of the member has stopped.
  void pause();
  void resume();

  bool running() const { return pid_ > 0; }
  std::uint16_t client_port() const { return client_port_; }
  // "http://127.0.0.1:PORT" (secured: "https://127.0.0.1:PORT"), the client URL.
  std::string endpoint() const;
  // What etcd wrote to stdout and stderr, every start so far.
  std::string log() const;
  // For `etcdctl --endpoints`: "127.0.0.1:PORT".
  std::string host_port() const;

  // A loopback TCP port nothing listens on when this returns (bound to port 0, then released).
  static std::uint16_t free_port();

  // ---- secured members (etcd_member_options::tls); the files exist once start() succeeded ----

  bool secured() const { return options_.tls; }
  // The CA that signed the member's certificates (PEM).
  std::string ca_file() const;
  // A CA that signed none of them: a client trusting only it must refuse the member.
  std::string other_ca_file() const;
  // The client certificate and key of `user` ("root" or one of etcd_member_options::users).
  std::string cert_file(const std::string& user) const;
  std::string key_file(const std::string& user) const;

  // ---- etcd's authentication (plain or secured members, running) ----

  // Runs etcdctl (v3 API, $ETCDCTL or /usr/bin/etcdctl) with `args` against this member: over
  // TLS with root's certificate when secured, as root with its password once enable_auth ran.
  // Its output, or errc::unavailable with the output when it fails (or takes over 20 s).
  expected<std::string> etcdctl(const std::vector<std::string>& args);
  // Adds the user root with `root_password` and turns authentication on (etcdctl auth enable).
  expected<void> enable_auth(const std::string& root_password);
  // Adds `user` with `password` and a role of its own, "<user>-role", that may read and write
  // the keys under `prefix` and nothing else.
  expected<void> add_user(const std::string& user, const std::string& password,
                          const std::string& prefix);

 private:
  bool healthy() const;
  expected<void> start_once();
  // Makes the CA and certificates, unless they exist.
  expected<void> make_certificates();
  // Runs `argv` to its end (at most 20 s) in the member's directory, stdin /dev/null; its
  // exit status (-1: not run or killed) and its output (stdout and stderr).
  int run(const std::vector<std::string>& argv, std::string* output) const;

  etcd_member_options options_;
  std::filesystem::path dir_;
  std::uint16_t client_port_ = 0, peer_port_ = 0;
  std::uint16_t health_port_ = 0;  // secured: the plain-HTTP port /health is read on
  pid_t pid_ = -1;
  bool started_before_ = false;
  std::string root_password_;  // set by enable_auth
};

}  // namespace warm::test
