// A real, single-member etcd for tests: its own data directory under /tmp and two free loopback
// ports (client and peer), started by fork/exec, waited for until its /health says true, and
// killed by pid. It can be crashed, stopped, paused and started again on the same ports and data
// directory, so tests can take etcd away and bring it back under a client that keeps running.
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

class etcd_member {
 public:
  // Makes the data directory and picks the ports; starts nothing.
  etcd_member();
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
  // "http://127.0.0.1:PORT", the client URL.
  std::string endpoint() const;
  // What etcd wrote to stdout and stderr, every start so far.
  std::string log() const;
  // For `etcdctl --endpoints`: "127.0.0.1:PORT".
  std::string host_port() const;

  // A loopback TCP port nothing listens on when this returns (bound to port 0, then released).
  static std::uint16_t free_port();

 private:
  bool healthy() const;
  expected<void> start_once();

  std::filesystem::path dir_;
  std::uint16_t client_port_ = 0, peer_port_ = 0;
  pid_t pid_ = -1;
  bool started_before_ = false;
};

}  // namespace warm::test
