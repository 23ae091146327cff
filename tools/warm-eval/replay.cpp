// The replay engine (contract in replay.hpp): a kj event loop, one Cap'n Proto connection
// (warmctl's connection class), open-loop sends driven by kj timers.
#include "replay.hpp"

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cmath>
#include <cstring>
#include <optional>
#include <random>
#include <sstream>

#include <capnp/message.h>
#include <kj/async-io.h>
#include <kj/timer.h>

#include "../warmctl/connection.hpp"
#include "eval/support.hpp"
#include "rpc/convert.hpp"
#include "warm/dense_model.hpp"
#include "warm/model_repository.hpp"

namespace warm::eval_cli {
namespace {

namespace r = warm::rpc;
using steady = std::chrono::steady_clock;

double ms_since(steady::time_point start) {
  return std::chrono::duration<double, std::milli>(steady::now() - start).count();
}

std::string describe(const kj::Exception& e) {
  return std::string(e.getDescription().cStr());
}

// One F32 row of `width` values uniform in [-1, 1).
tensor random_row(std::uint64_t width, std::mt19937_64& rng) {
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> values(width);
  for (auto& v : values)
    v = dist(rng);
  tensor t;
  t.name = "input";
  t.type = dtype::f32;
  t.shape = {1, width};
  t.data.resize(values.size() * sizeof(float));
  std::memcpy(t.data.data(), values.data(), t.data.size());  // little-endian hosts (x86, arm64)
  return t;
}

}  // namespace

struct replay_client::impl : kj::TaskSet::ErrorHandler {
  kj::AsyncIoContext io = kj::setupAsyncIo();
  std::unique_ptr<ctl::connection> conn;
  std::string address;

  // Waits for `promise`; a kj exception (transport failure) becomes `unavailable`.
  template <class T>
  expected<T> wait(kj::Promise<T>&& promise) {
    try {
      return promise.wait(io.waitScope);
    } catch (const kj::Exception& e) {
      return make_error(errc::unavailable, transport_message(e));
    }
  }

  std::string transport_message(const kj::Exception& e) const {
    if (e.getType() == kj::Exception::Type::DISCONNECTED)
      return "connection to " + address + " lost: " + describe(e);
    if (e.getType() == kj::Exception::Type::UNIMPLEMENTED)
      return "call to " + address +
             " failed (a remote listener needs --token-file): " + describe(e);
    return "call to " + address + " failed: " + describe(e);
  }

  // ---- the replay's state (valid during replay()) ----------------------------------------
  const eval::trace* requests = nullptr;
  const width_map* widths = nullptr;
  replay_settings settings;
  std::vector<replay_record>* records = nullptr;
  steady::time_point start;
  std::size_t next = 0;         // the next request to send
  std::size_t outstanding = 0;  // sent, not answered
  std::optional<warm::error> broken;
  std::mt19937_64 rng;
  kj::Own<kj::PromiseFulfiller<void>> finished;
  kj::Own<kj::TaskSet> tasks = kj::heap<kj::TaskSet>(*this);

  void taskFailed(kj::Exception&& e) override {
    // Every request handles its own failures; reaching this is a bug, but stop cleanly.
    if (!broken) broken = make_error(errc::internal, "replay task failed: " + describe(e));
    maybe_finish();
  }

  void maybe_finish() {
    if (outstanding == 0 && (next == requests->size() || broken) && finished->isWaiting())
      finished->fulfill();
  }

  // Sends every request that is due, then sleeps until the next one is.
  kj::Promise<void> pump() {
    while (next < requests->size() && !broken) {
      double due = (*records)[next].scheduled_ms;
      double now = ms_since(start);
      if (due > now) {
        // kj's timer reads its clock once per loop turn, so it may wake us early: check again.
        auto delay = static_cast<std::int64_t>(std::ceil((due - now) * 1e6)) * kj::NANOSECONDS;
        return io.provider->getTimer().afterDelay(delay).then([this] { return pump(); });
      }
      send(next++);
    }
    maybe_finish();
    return kj::READY_NOW;
  }

  void send(std::size_t i) {
    auto& rec = (*records)[i];
    const auto& model = (*requests)[i].model;
    auto request = conn->warm().inferRequest();
    r::to_capnp(infer_request{model, {random_row(widths->at(model), rng)}}, request.initRequest());
    rec.sent_ms = ms_since(start);
    ++outstanding;
    auto timeout = static_cast<std::int64_t>(settings.request_timeout_s * 1e3) * kj::MILLISECONDS;
    kj::Promise<capnp::Response<r::Warm::InferResults>> reply = request.send();
    tasks->add(io.provider->getTimer()
                   .timeoutAfter(timeout, kj::mv(reply))
                   .then(
                       [this, i](capnp::Response<r::Warm::InferResults>&& reply) {
                         answered(i, reply.getStatus(), reply.getResult());
                       },
                       [this, i](kj::Exception&& e) { failed(i, e); }));
  }

  void answered(std::size_t i, r::Status::Reader status, r::InferResult::Reader result) {
    auto& rec = (*records)[i];
    rec.latency_ms = ms_since(start) - rec.sent_ms;
    rec.status = std::string(r::code_name(status.getCode()));
    if (status.getCode() == r::Status::Code::OK) {
      rec.hit = result.getCacheHit();
      rec.load_wait_ms = result.getLoadWaitMs();
    }
    --outstanding;
    maybe_finish();
  }

  void failed(std::size_t i, const kj::Exception& e) {
    auto& rec = (*records)[i];
    rec.latency_ms = ms_since(start) - rec.sent_ms;
    if (e.getType() == kj::Exception::Type::OVERLOADED) {
      rec.status = "timeout";
    } else {
      rec.status = "disconnected";
      if (!broken) broken = make_error(errc::unavailable, transport_message(e));
    }
    --outstanding;
    maybe_finish();
  }
};

replay_client::replay_client(std::unique_ptr<impl> i) : impl_(std::move(i)) {}
replay_client::~replay_client() {
  if (!impl_) return;
  impl_->tasks = nullptr;  // the tasks and the connection before the event loop they live on
  impl_->conn.reset();
}

expected<std::unique_ptr<replay_client>> replay_client::connect(
    const ctl::connect_options& options) {
  auto i = std::make_unique<impl>();
  i->address = options.address;
  try {
    i->conn = ctl::connection::open(i->io, options);
  } catch (const ctl::connection_error& e) {
    return make_error(errc::unavailable, e.what());
  }
  return std::unique_ptr<replay_client>(new replay_client(std::move(i)));
}

expected<void> replay_client::register_models(const eval::catalog& models) {
  auto& i = *impl_;
  kj::Vector<kj::Promise<std::optional<warm::error>>> calls;
  for (const auto& m : models) {
    auto request = i.conn->warm().registerModelRequest();
    request.setId(r::to_text(m.model));
    request.initInfo().setPath(r::to_text(m.model));
    calls.add(request.send().then(
        [id = m.model](
            capnp::Response<r::Warm::RegisterModelResults>&& reply) -> std::optional<warm::error> {
          if (auto ok = r::from_capnp(reply.getStatus()); !ok)
            return make_error(ok.error().code,
                              "cannot register model '" + id + "': " + ok.error().message);
          return std::nullopt;
        }));
  }
  auto results = i.wait(kj::joinPromises(calls.releaseAsArray()));
  if (!results) return std::move(results).error();
  for (auto& e : *results)
    if (e) return *e;
  return {};
}

expected<void> replay_client::check_registered(const std::vector<std::string>& models) {
  auto& i = *impl_;
  for (const auto& model : models) {
    auto request = i.conn->warm().getModelStatusRequest();
    request.setId(r::to_text(model));
    using reply_t = capnp::Response<r::Warm::GetModelStatusResults>;
    auto reply = i.wait(kj::Promise<reply_t>(request.send()));
    if (!reply) return std::move(reply).error();
    if (auto ok = r::from_capnp(reply->getStatus()); !ok)
      return make_error(ok.error().code, "status of model '" + model + "': " + ok.error().message);
    if (reply->getModel().getState() == r::ModelState::NOT_FOUND)
      return make_error(errc::not_found, "model '" + model +
                                             "' is not registered with the daemon at " + i.address +
                                             " (pass --register CATALOG)");
  }
  return {};
}

expected<std::uint64_t> replay_client::probe_width(const std::string& model) {
  auto& i = *impl_;
  auto request = i.conn->warm().getModelStatusRequest();
  request.setId(model);
  using reply_t = capnp::Response<r::Warm::GetModelStatusResults>;
  auto reply = i.wait(kj::Promise<reply_t>(request.send()));
  if (!reply) return std::move(reply).error();
  auto status = reply->getStatus();
  if (status.getCode() == r::Status::Code::OK && reply->getModel().getInputWidth() > 0)
    return reply->getModel().getInputWidth();
  return make_error(errc::invalid_argument,
                    "cannot learn the input width of model '" + model + "' from the daemon (" +
                        (status.getCode() == r::Status::Code::OK
                             ? std::string("it does not take one [batch, width] input")
                             : std::string(r::code_name(status.getCode())) + ": " +
                                   r::to_std(status.getMessage())) +
                        "); pass --repo DIR to read it from the model file");
}

expected<std::vector<replay_record>> replay_client::replay(const eval::trace& requests,
                                                           const width_map& widths,
                                                           const replay_settings& settings) {
  auto& i = *impl_;
  std::vector<replay_record> records(requests.size());
  for (std::size_t k = 0; k < requests.size(); ++k) {
    if (!widths.count(requests[k].model))
      return make_error(errc::invalid_argument,
                        "no input width for model '" + requests[k].model + "'");
    records[k].model = requests[k].model;
    records[k].scheduled_ms = requests[k].time_ms / settings.speed;
  }
  i.requests = &requests;
  i.widths = &widths;
  i.settings = settings;
  i.records = &records;
  i.rng.seed(settings.seed);
  i.next = 0;
  i.outstanding = 0;
  i.broken.reset();
  auto done = kj::newPromiseAndFulfiller<void>();
  i.finished = kj::mv(done.fulfiller);
  i.start = steady::now();
  i.tasks->add(i.pump());
  try {
    done.promise.wait(i.io.waitScope);
  } catch (const kj::Exception& e) {
    return make_error(errc::internal, "replay failed: " + describe(e));
  }
  if (i.broken) return *i.broken;
  return records;
}

expected<width_map> widths_from_repository(const std::string& repo,
                                           const std::vector<std::string>& models) {
  auto root = model_repository::create({repo});
  if (!root) return make_error(root.error().code, "--repo: " + root.error().message);
  width_map widths;
  for (const auto& model : models) {
    auto path = root->resolve(model);
    if (!path)
      return make_error(path.error().code,
                        "model '" + model + "' in " + repo + ": " + path.error().message);
    auto file = open_model_file(*path);
    if (!file)
      return make_error(file.error().code, "model '" + model + "': " + file.error().message);
    widths[model] = file->spec.input_width();
  }
  return widths;
}

replay_summary summarize(const std::vector<replay_record>& records) {
  replay_summary s;
  s.requests = records.size();
  std::vector<double> latency, wait;
  std::vector<std::pair<double, int>> events;  // (time, +1 send / -1 reply)
  for (const auto& rec : records) {
    s.lag_ms_max = std::max(s.lag_ms_max, rec.sent_ms - rec.scheduled_ms);
    s.duration_s = std::max(s.duration_s, (rec.sent_ms + rec.latency_ms) / 1e3);
    events.emplace_back(rec.sent_ms, +1);
    events.emplace_back(rec.sent_ms + rec.latency_ms, -1);
    if (rec.status != "ok") {
      ++s.errors;
      continue;
    }
    s.hits += rec.hit ? 1 : 0;
    latency.push_back(rec.latency_ms);
    wait.push_back(rec.load_wait_ms);
  }
  std::sort(events.begin(), events.end());  // a reply at the same instant as a send goes first
  long in_flight = 0;
  for (const auto& e : events) {
    in_flight += e.second;
    s.in_flight_max =
        std::max<std::size_t>(s.in_flight_max, static_cast<std::size_t>(std::max(0L, in_flight)));
  }
  auto mean = [](const std::vector<double>& v) {
    double sum = 0;
    for (double x : v)
      sum += x;
    return v.empty() ? 0.0 : sum / static_cast<double>(v.size());
  };
  auto percentile = [](std::vector<double> v, double p) {  // nearest rank
    if (v.empty()) return 0.0;
    std::sort(v.begin(), v.end());
    auto rank = static_cast<std::size_t>(std::ceil(p * static_cast<double>(v.size())));
    return v[std::min(v.size(), std::max<std::size_t>(rank, 1)) - 1];
  };
  if (!latency.empty())
    s.hit_ratio = static_cast<double>(s.hits) / static_cast<double>(latency.size());
  s.latency_ms_mean = mean(latency);
  s.latency_ms_p50 = percentile(latency, 0.50);
  s.latency_ms_p99 = percentile(latency, 0.99);
  s.latency_ms_max = percentile(latency, 1.0);
  s.load_wait_ms_mean = mean(wait);
  s.load_wait_ms_p99 = percentile(wait, 0.99);
  return s;
}

expected<void> write_records(const std::string& path, const std::vector<replay_record>& records) {
  std::ostringstream out;
  out << "sent_ms,model_id,latency_ms,hit,load_wait_ms,status\n";
  char line[96];
  for (const auto& rec : records) {
    std::snprintf(line, sizeof line, "%.3f,", rec.sent_ms);
    out << line << rec.model;
    std::snprintf(line, sizeof line, ",%.3f,%d,%.3f,", rec.latency_ms, rec.hit ? 1 : 0,
                  rec.load_wait_ms);
    out << line << rec.status << "\n";
  }
  return eval::detail::write_text_file(path, out.str());
}

}  // namespace warm::eval_cli
