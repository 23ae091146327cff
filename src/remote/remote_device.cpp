// GCC 12 warns that the std::variant inside warm::expected, carried through kj promises in a
// kj::Maybe, "may be used uninitialized": a false positive (the Maybe is engaged when read). The
// warning points into the standard headers, so this comes before them.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

#include "remote/remote_device.hpp"

#include <regex>

#include "remote/remote_link.hpp"

namespace warm {
using namespace remote_link_detail;

// ---- a model in the runtime -------------------------------------------------------------------

class remote_resident final : public resident_model {
 public:
  remote_resident(remote_device& dev, std::string id, model_io io, memory_reservation charge,
                  std::uint64_t generation, std::uint64_t measured)
      : resident_model(dev, std::move(io)),
        dev_(dev),
        id_(std::move(id)),
        charge_(std::move(charge)),
        generation_(generation) {
    set_measured_bytes(measured);
  }
  // Unloads it in the runtime (when the connection it was loaded on is still up); its bytes go
  // back to the device's budget with charge_.
  ~remote_resident() override { dev_.link_->unload(id_, generation_); }

  const std::string& id() const { return id_; }
  std::string host_id() const override { return id_; }
  std::uint64_t generation() const { return generation_; }
  std::uint64_t bytes() const override { return charge_.bytes(); }
  // Every inference is a round trip to another process: never run on a caller's thread that
  // serves other clients (warmd's RPC loop), always on the inference threads.
  std::uint64_t cost(std::uint64_t) const override { return UINT64_MAX; }
  expected<std::vector<tensor>> run(const std::vector<tensor>& inputs,
                                    std::uint64_t batch) const override {
    return checked(dev_.link_->infer(id_, generation_, inputs, batch), batch);
  }
  // The request is handed to the link and answered from there: no thread of warm's waits for it.
  // The model outlives the answer: its caller holds it until `done` is called.
  void run_then(const std::vector<tensor>& inputs, std::uint64_t batch,
                run_done done) const override {
    dev_.link_->infer_then(
        id_, generation_, inputs, batch,
        [this, batch, done = std::move(done)](expected<std::vector<tensor>> answer) {
          done(checked(std::move(answer), batch));
        });
  }
  void settle(memory_reservation more) override {
    charge_.absorb(std::move(more));
    if (measured_bytes()) charge_.shrink_to(measured_bytes());
  }

 private:
  // The runtime's answer when its outputs are those the load declared (check_outputs), else
  // internal naming the runtime, the model and the output: nothing else reaches a client.
  expected<std::vector<tensor>> checked(expected<std::vector<tensor>> answer,
                                        std::uint64_t batch) const {
    if (!answer) return answer;
    auto fits = check_outputs(*answer, io(), batch);
    if (!fits)
      return make_error(errc::internal, "runtime " + dev_.name() + " answered model " + id_ +
                                            " with " + fits.error().message);
    return answer;
  }

  remote_device& dev_;
  std::string id_;
  memory_reservation charge_;
  std::uint64_t generation_;
};

// ---- the device -------------------------------------------------------------------------------

std::string shell_quote(const std::string& text) {
  std::string out = "'";
  for (char c : text)
    out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

expected<runtime_link_options> parse_runtime_spec(const std::string& text,
                                                  const std::string& bridge) {
  auto eq = text.find('=');
  if (eq == std::string::npos)
    return make_error(errc::invalid_argument,
                      "runtime '" + text + "': expected NAME=COMMAND or NAME=unix:PATH");
  runtime_link_options o;
  o.name = text.substr(0, eq);
  auto rest = text.substr(eq + 1);
  static const std::regex name_rule("[A-Za-z0-9_.-]{1,64}");
  if (!std::regex_match(o.name, name_rule))
    return make_error(
        errc::invalid_argument,
        "runtime '" + text + "': the name must be 1..64 letters, digits, '_', '.' or '-'");
  if (o.name == "host" || o.name == "cuda" || o.name.rfind("host.", 0) == 0 ||
      o.name.rfind("cuda:", 0) == 0)
    return make_error(errc::invalid_argument,
                      "runtime '" + text + "': '" + o.name + "' names a built-in device");
  for (const char* form : {"grpc:", "grpc-exec:"}) {
    std::string prefix = form;
    if (rest.rfind(prefix, 0) != 0) continue;
    auto target = rest.substr(prefix.size());
    if (target.find_first_not_of(" \t") == std::string::npos)
      return make_error(errc::invalid_argument, "runtime '" + text + "': nothing after " + prefix);
    if (bridge.empty())
      return make_error(errc::invalid_argument,
                        "runtime '" + text +
                            "': a gRPC runtime needs warm-mmesh, which was not found beside warmd");
    o.command = shell_quote(bridge) + (prefix == "grpc:" ? " --connect " : " --exec ") +
                shell_quote(target);
    return o;
  }
  if (rest.rfind("unix:", 0) == 0) {
    o.socket = rest.substr(5);
    if (o.socket.empty())
      return make_error(errc::invalid_argument, "runtime '" + text + "': empty socket path");
  } else {
    o.command = rest;
    if (rest.find_first_not_of(" \t") == std::string::npos)
      return make_error(errc::invalid_argument, "runtime '" + text + "': empty command");
  }
  return o;
}

remote_device::remote_device(runtime_link_options options) : device(options.name, 0) {
  link_ = std::make_unique<link>(*this, std::move(options));
}

std::shared_ptr<remote_device> remote_device::start(runtime_link_options options) {
  auto wait = options.start_timeout;
  std::shared_ptr<remote_device> dev(new remote_device(std::move(options)));
  dev->link_->wait_ready(wait);
  return dev;
}

remote_device::~remote_device() {
  link_.reset();
}

bool remote_device::ready() const {
  return link_->ready();
}
std::string remote_device::state() const {
  return link_->state();
}
void remote_device::watch(std::function<void(const device_event&)> listener) {
  link_->watch(std::move(listener));
}
bool remote_device::serves(std::string_view kind) const {
  return link_->serves(kind);
}
bool remote_device::holds(const resident_model& model) const {
  auto* remote = dynamic_cast<const remote_resident*>(&model);
  return remote && &remote->owner() == this && remote->generation() == link_->generation() &&
         link_->ready();
}

int remote_device::pid() const {
  return link_->pid();
}
std::uint64_t remote_device::restarts() const {
  return link_->restarts();
}

expected<std::unique_ptr<resident_model>> remote_device::load_model(const model_location& where,
                                                                    memory_reservation reservation,
                                                                    load_stats* stats) {
  auto started = steady::now();
  // The runtime knows models by warmd's name for each load: the model's path in its repository
  // and a number, unique for this warmd.
  static std::atomic<std::uint64_t> loads{0};
  auto relative = where.root.empty() || where.path.rfind(where.root, 0) != 0
                      ? where.path
                      : where.path.substr(where.root.size() + 1);
  auto id = relative + "#" + std::to_string(++loads);
  auto predicted = link_->predict(id, where);
  if (predicted && *predicted > capacity())
    return make_error(errc::model_too_large,
                      name() + ": the runtime predicts " + format_bytes(*predicted) + " for " +
                          relative + ", more than its capacity of " + format_bytes(capacity()));
  link_->loads().acquire();
  auto loaded = link_->load(id, where, reservation.bytes());
  link_->loads().release();
  if (!loaded) {
    auto e = std::move(loaded).error();
    if (e.code == errc::invalid_argument || e.code == errc::not_found || e.code == errc::internal)
      e.code = errc::load_failed;
    return e;
  }
  if (loaded->bytes > capacity()) {  // also a number no runtime could hold (2^64): never used
    link_->unload(id, loaded->generation);
    return make_error(errc::model_too_large,
                      name() + ": the runtime measured " + format_bytes(loaded->bytes) + " for " +
                          relative + ", more than its capacity of " + format_bytes(capacity()));
  }
  if (loaded->io.inputs.empty() || loaded->io.outputs.empty()) {
    link_->unload(id, loaded->generation);
    return make_error(errc::load_failed,
                      name() + ": the runtime loaded " + relative +
                          " but described no inputs or outputs (the interface requires them)");
  }
  if (stats) {
    stats->bytes = loaded->bytes;
    stats->seconds = std::chrono::duration<double>(steady::now() - started).count();
  }
  return std::unique_ptr<resident_model>(std::make_unique<remote_resident>(
      *this, id, std::move(loaded->io), std::move(reservation), loaded->generation, loaded->bytes));
}

expected<std::unique_ptr<device_buffer>> remote_device::allocate_memory(std::uint64_t) {
  return make_error(errc::invalid_argument,
                    name() + ": a model runtime's memory is its own; warm allocates none");
}

std::unique_ptr<upload_target> remote_device::upload_target_for(device_buffer&) {
  return nullptr;
}

expected<void> remote_device::run(const dense_resident&, const float*, std::uint64_t, float*) {
  return make_error(errc::invalid_argument, name() + ": models here run in the runtime");
}

}  // namespace warm
