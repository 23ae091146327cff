#include "console/monitor.hpp"

#include <condition_variable>
#include <future>
#include <map>
#include <mutex>
#include <thread>

#include "warm/runtime.hpp"

namespace warm::console {

namespace {

double unix_now() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

double monotonic_now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// The event log, shared with the runtime's watcher: the watch may call it after unwatch()
// returns, so it lives as long as either needs it.
struct shared_log {
  std::mutex mutex;
  event_log log;
  explicit shared_log(std::size_t capacity) : log(capacity) {}
  void add(event e) {
    std::lock_guard<std::mutex> lock(mutex);
    log.add(std::move(e));
  }
};

template <class T>
expected<T> wait_for(std::future<expected<T>> f, std::chrono::milliseconds timeout,
                     const char* what) {
  if (f.wait_for(timeout) != std::future_status::ready)
    return make_error(errc::timeout, std::string(what) + " did not answer in time");
  return f.get();
}

}  // namespace

struct monitor::impl {
  runtime& rt;
  monitor_options options;
  const double started = monotonic_now();
  std::shared_ptr<shared_log> events;
  std::uint64_t watch_id = 0;

  std::mutex series_mutex;
  console::series points;

  std::mutex snapshot_mutex;  // one caller takes a snapshot, the others wait for it
  std::optional<snapshot> latest;
  std::chrono::steady_clock::time_point taken{};

  std::mutex stop_mutex;
  std::condition_variable stop_signal;
  bool stopping = false;
  std::thread sampler;
  std::map<std::string, std::optional<std::uint64_t>> default_versions;  // sampler thread only

  impl(runtime& r, monitor_options o)
      : rt(r),
        options(std::move(o)),
        events(std::make_shared<shared_log>(options.events)),
        points(options.series_points) {}

  void sample() {
    auto r = read_instruments(rt.metrics(), unix_now(), monotonic_now());
    std::lock_guard<std::mutex> lock(series_mutex);
    points.add(r);
  }

  // A served model's default version that moved is an event; the first look only notes them.
  void look_at_versions(bool first) {
    auto served = wait_for(rt.served(), options.timeout, "the runtime");
    if (!served) return;
    std::map<std::string, std::optional<std::uint64_t>> now;
    for (const auto& m : *served)
      now[m.config.name] = m.default_version;
    for (const auto& [name, version] : now) {
      auto before = default_versions.find(name);
      const bool moved =
          before == default_versions.end() ? version.has_value() : before->second != version;
      if (first || !moved) continue;
      event e;
      e.unix_seconds = unix_now();
      e.model = name;
      e.kind = "version";
      if (before != default_versions.end() && before->second)
        e.from = std::to_string(*before->second);
      if (version) e.to = std::to_string(*version);
      events->add(std::move(e));
    }
    default_versions = std::move(now);
  }

  void run() {
    sample();
    look_at_versions(true);
    std::unique_lock<std::mutex> lock(stop_mutex);
    auto next = std::chrono::steady_clock::now() + options.interval;
    while (!stop_signal.wait_until(lock, next, [this] { return stopping; })) {
      lock.unlock();
      sample();
      look_at_versions(false);
      lock.lock();
      next += options.interval;
      if (next < std::chrono::steady_clock::now())  // fell behind: start afresh
        next = std::chrono::steady_clock::now() + options.interval;
    }
  }

  expected<snapshot> take() {
    snapshot s;
    auto state = wait_for(rt.inspect(), options.timeout, "the runtime");
    if (!state) return state.error();
    s.state = std::move(*state);
    if (options.cluster) {
      auto promise = std::make_shared<std::promise<expected<cluster_info>>>();
      auto answered = promise->get_future();
      options.cluster([promise](expected<cluster_info> c) { promise->set_value(std::move(c)); });
      auto c = wait_for(std::move(answered), options.timeout, "the cluster");
      if (c) s.cluster = std::move(*c);
    }
    s.counters = read_instruments(rt.metrics(), unix_now(), monotonic_now());
    s.unix_seconds = s.counters.unix_seconds;
    s.uptime_seconds = monotonic_now() - started;
    return s;
  }
};

std::unique_ptr<monitor> monitor::start(runtime& rt, monitor_options options) {
  auto i = std::make_unique<impl>(rt, std::move(options));
  i->watch_id = rt.watch(
      [events = i->events](const model_event& e) { events->add(from_model_event(e, unix_now())); });
  i->sampler = std::thread([raw = i.get()] { raw->run(); });
  return std::unique_ptr<monitor>(new monitor(std::move(i)));
}

monitor::monitor(std::unique_ptr<impl> i) : impl_(std::move(i)) {}

monitor::~monitor() {
  impl_->rt.unwatch(impl_->watch_id);
  {
    std::lock_guard<std::mutex> lock(impl_->stop_mutex);
    impl_->stopping = true;
  }
  impl_->stop_signal.notify_all();
  impl_->sampler.join();
}

expected<std::string> monitor::feed(const feed_query& q) {
  auto& i = *impl_;
  std::lock_guard<std::mutex> lock(i.snapshot_mutex);
  auto now = std::chrono::steady_clock::now();
  if (!i.latest || now - i.taken >= i.options.snapshot_ttl) {
    auto s = i.take();
    if (!s) return s.error();
    i.latest = std::move(*s);
    i.taken = std::chrono::steady_clock::now();
  }
  std::vector<point> points;
  {
    std::lock_guard<std::mutex> series_lock(i.series_mutex);
    points = i.points.after(q.series_after);
  }
  std::vector<event> events;
  std::uint64_t last = 0;
  {
    std::lock_guard<std::mutex> events_lock(i.events->mutex);
    events = i.events->log.after(q.events_after, max_events);
    last = i.events->log.last();
  }
  return encode_feed(*i.latest, points, events, last);
}

expected<std::string> monitor::models(const models_query& q) {
  // One more than the page: whether there is a next page is known without a request for it.
  auto listed =
      wait_for(impl_->rt.list_models(q.after, q.limit + 1), impl_->options.timeout, "the runtime");
  if (!listed) return listed.error();
  std::optional<std::string> next;
  if (listed->size() > q.limit) {
    listed->resize(q.limit);
    next = listed->back().id;
  }
  return encode_models(*listed, next);
}

}  // namespace warm::console
