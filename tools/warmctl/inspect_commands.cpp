// inspect (one snapshot of the actors' state) and watch (a StateListener served by warmctl).
#include <unistd.h>
#include <csignal>
#include <iostream>
#include <memory>

#include "commands.hpp"
#include "format.hpp"
#include "rpc/convert.hpp"

namespace warm::ctl {
namespace {

namespace r = warm::rpc;

// The StateListener warmctl hands to the server: each call prints one event and, with a limit,
// fulfils `done` after that many.
class event_printer final : public r::StateListener::Server {
 public:
  event_printer(bool json, std::uint64_t limit, kj::Own<kj::PromiseFulfiller<void>> done)
      : json_(json), limit_(limit), done_(kj::mv(done)) {}

  kj::Promise<void> modelStateChanged(ModelStateChangedContext context) override {
    auto capnp_event = context.getParams().getEvent();
    auto event = r::from_capnp(capnp_event);
    auto missed = capnp_event.getMissed();
    if (json_) {
      auto doc = to_json(event);
      doc["missed"] = missed;
      std::cout << dump_json(doc) << std::endl;  // one JSON document per line
    } else {
      if (missed > 0)
        std::cout << "(" << missed << " event(s) missed: this watcher fell behind)" << std::endl;
      std::cout << event_line(event) << std::endl;
    }
    if (limit_ && ++seen_ == limit_) done_->fulfill();
    return kj::READY_NOW;
  }

 private:
  bool json_;
  std::uint64_t limit_, seen_ = 0;
  kj::Own<kj::PromiseFulfiller<void>> done_;
};

// SIGINT as a kj promise, for as long as the object lives: a handler writes to a pipe the event
// loop reads. The previous handler comes back on destruction (the REPL keeps running).
class interrupt_watch {
 public:
  explicit interrupt_watch(kj::AsyncIoContext& io) {
    if (::pipe(fds_) != 0) throw connection_error("pipe() failed");
    write_fd_ = fds_[1];
    struct sigaction action {};
    action.sa_handler = [](int) {
      char byte = 1;
      [[maybe_unused]] auto n = ::write(write_fd_, &byte, 1);
    };
    sigemptyset(&action.sa_mask);
    ::sigaction(SIGINT, &action, &previous_);
    input_ = io.lowLevelProvider->wrapInputFd(fds_[0]);
  }
  ~interrupt_watch() {
    ::sigaction(SIGINT, &previous_, nullptr);
    input_ = nullptr;
    ::close(fds_[0]);
    ::close(fds_[1]);
  }
  kj::Promise<void> interrupted() { return input_->read(buffer_, 1); }

 private:
  static inline int write_fd_ = -1;
  int fds_[2] = {-1, -1};
  struct sigaction previous_ {};
  kj::Own<kj::AsyncInputStream> input_;
  char buffer_[1];
};

void add_inspect(CLI::App& app, command_context& ctx) {
  auto* cmd = app.add_subcommand("inspect",
                                 "One snapshot of the runtime's actors (all sections by default)");
  auto section = std::make_shared<std::string>();
  cmd->add_option("SECTION", *section, "devices, queue, cache, failures, models, tier or cluster")
      ->check(
          CLI::IsMember({"devices", "queue", "cache", "failures", "models", "tier", "cluster"}));
  cmd->callback([&ctx, section] {
    run_rpc(ctx, [&](connection& c) {
      if (*section == "cluster") {
        auto reply = ctx.s.wait(c.warm().clusterInfoRequest().send());
        if (int rc = check_status(reply.getStatus())) return rc;
        auto info = r::from_capnp(reply.getCluster());
        if (ctx.options.json)
          std::cout << dump_json(to_json(info), 2) << "\n";
        else
          print_cluster(std::cout, info);
        return exit_ok;
      }
      auto reply = ctx.s.wait(c.warm().inspectRequest().send());
      if (int rc = check_status(reply.getStatus())) return rc;
      auto snapshot = r::from_capnp(reply.getInspection());
      if (ctx.options.json)
        std::cout << dump_json(inspection_section(snapshot, *section), 2) << "\n";
      else
        print_inspection(std::cout, snapshot, *section);
      return exit_ok;
    });
  });
}

void add_watch(CLI::App& app, command_context& ctx) {
  auto* cmd = app.add_subcommand("watch", "Print every model state change until Ctrl-C");
  auto count = std::make_shared<std::uint64_t>(0);
  cmd->add_option("--count", *count, "Stop after N events (0: until Ctrl-C)")
      ->capture_default_str();
  cmd->callback([&ctx, count] {
    run_rpc(ctx, [&](connection& c) {
      auto stop = kj::newPromiseAndFulfiller<void>();
      auto req = c.warm().watchRequest();
      req.setListener(kj::heap<event_printer>(ctx.options.json, *count, kj::mv(stop.fulfiller)));
      auto reply = ctx.s.wait(req.send());
      if (int rc = check_status(reply.getStatus())) return rc;
      auto handle = reply.getHandle();  // held until we stop watching
      std::cerr << "watching " << c.address() << " (Ctrl-C to stop)" << std::endl;
      interrupt_watch interrupt(ctx.s.io());
      bool lost = ctx.s.wait(interrupt.interrupted()
                                 .then([] { return false; })
                                 .exclusiveJoin(stop.promise.then([] { return false; }))
                                 .exclusiveJoin(c.on_disconnect().then([] { return true; })));
      if (lost) throw connection_error("connection to " + c.address() + " lost");
      return exit_ok;
    });
  });
}

}  // namespace

void add_inspect_commands(CLI::App& app, command_context& ctx) {
  add_inspect(app, ctx);
  add_watch(app, ctx);
}

}  // namespace warm::ctl
