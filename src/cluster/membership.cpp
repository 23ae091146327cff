#include "cluster/membership.hpp"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <future>
#include <map>
#include <mutex>
#include <thread>

#include "etcd/client.hpp"

namespace warm::cluster {
namespace {

using steady = std::chrono::steady_clock;

std::int64_t unix_now() {
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace

struct membership::state {
  membership_options options;
  std::string root;
  std::unique_ptr<etcd::client> etcd;
  std::int64_t started_unix = unix_now();

  // Shared with the watch thread and the public methods.
  mutable std::mutex mutex;
  std::condition_variable wake;
  bool stopping = false;
  bool draining = false;
  bool publish_now = false;
  bool joined = false;
  std::int64_t lease_public = 0;
  std::string last_error;
  struct seen {
    instance_record record;
    std::int64_t mod_revision = 0;
    steady::time_point at;
  };
  std::map<std::string, seen> members;
  std::atomic<bool> watch_ended{true};

  // The session thread's own.
  etcd::lease_id lease = 0;
  steady::time_point next_keepalive{};
  steady::time_point last_keepalive_ok{};
  steady::time_point next_publish_check{};
  steady::time_point last_publish{};
  std::optional<instance_record> published;
  std::unique_ptr<etcd::watcher> watcher;
  steady::time_point last_logged{};  // of the last failure logged (warn; session thread)
  std::thread session;

  // Records the failure; logs it when etcd was answering until now, then at most every 30 s
  // (an etcd that stays down would otherwise fill the log with the same retries).
  void warn(const std::string& what) {
    bool was_failing;
    {
      std::lock_guard<std::mutex> lock(mutex);
      was_failing = !last_error.empty();
      last_error = what;
    }
    auto now = steady::now();
    if (was_failing && now - last_logged < std::chrono::seconds(30)) return;
    last_logged = now;
    if (options.log) options.log(what);
  }
  void succeeded() {
    std::lock_guard<std::mutex> lock(mutex);
    last_error.clear();
  }
  void set_lease(etcd::lease_id id, bool is_joined) {
    lease = id;
    std::lock_guard<std::mutex> lock(mutex);
    lease_public = id;
    joined = is_joined;
  }

  std::optional<instance_record> current_record() {
    auto promise = std::make_shared<std::promise<expected<inspection>>>();
    auto answer = promise->get_future();
    options.inspect([promise](expected<inspection> r) { promise->set_value(std::move(r)); });
    if (answer.wait_for(options.etcd_timeout) != std::future_status::ready) return std::nullopt;
    auto inspected = answer.get();
    if (!inspected) return std::nullopt;
    bool is_draining;
    {
      std::lock_guard<std::mutex> lock(mutex);
      is_draining = draining;
    }
    auto r = record_from(*inspected, options.instance, options.address, options.version,
                         started_unix, is_draining);
    r.updated_unix = unix_now();
    return r;
  }

  // Puts the record on the lease; false when etcd did not take it (the lease may be gone).
  bool publish(const instance_record& r) {
    auto put = etcd->put(instance_key(root, options.instance), encode(r), lease);
    if (!put) {
      if (put.error().code == errc::not_found) {
        if (options.log)
          options.log("cluster: the lease of instance " + options.instance +
                      " is gone; joining again");
        set_lease(0, false);
      } else {
        warn("cluster: cannot publish the record of instance " + options.instance + ": " +
             put.error().message);
      }
      return false;
    }
    succeeded();
    published = r;
    last_publish = steady::now();
    return true;
  }

  void join() {
    auto granted = etcd->grant_lease(options.lease_ttl.count());
    if (!granted) return warn("cluster: cannot join (lease): " + granted.error().message);
    lease = granted->id;
    auto r = current_record();
    if (!r) {
      if (options.log)
        options.log(
            "cluster: the runtime did not answer its inspection; joining without device figures");
      r = instance_record{};
      r->name = options.instance;
      r->address = options.address;
      r->version = options.version;
      r->started_unix = started_unix;
      r->updated_unix = unix_now();
    }
    if (!publish(*r)) {
      static_cast<void>(etcd->revoke_lease(granted->id));
      lease = 0;
      return;
    }
    set_lease(granted->id, true);
    last_keepalive_ok = steady::now();
    next_keepalive = last_keepalive_ok + options.lease_ttl / 3;
    if (options.note)
      options.note("cluster: instance " + options.instance + " joined " + options.cluster);
  }

  void keep_alive() {
    auto now = steady::now();
    next_keepalive = now + options.lease_ttl / 3;
    auto ttl = etcd->keep_alive_once(lease);
    if (ttl && *ttl > 0) {
      last_keepalive_ok = now;
      return succeeded();
    }
    if (ttl) {
      if (options.log)
        options.log("cluster: the lease of instance " + options.instance +
                    " expired; joining again");
      return set_lease(0, false);
    }
    warn("cluster: cannot keep the lease alive: " + ttl.error().message);
    // Past its TTL without a renewal the lease has expired on etcd's side too.
    if (now - last_keepalive_ok >= options.lease_ttl) set_lease(0, false);
    next_keepalive = now + std::chrono::seconds(1);
  }

  void publish_if_due() {
    auto now = steady::now();
    next_publish_check = now + options.min_publish_interval;
    bool forced;
    {
      std::lock_guard<std::mutex> lock(mutex);
      forced = std::exchange(publish_now, false);
    }
    auto r = current_record();
    if (!r) return;
    bool changed = !published || !published->same_state(*r);
    if (forced || changed || now - last_publish >= options.refresh_interval) publish(*r);
  }

  // Lists every instance's record and watches from there.
  void watch_members() {
    watcher.reset();
    auto listed = etcd->get_prefix(instances_prefix(root));
    if (!listed) return warn("cluster: cannot list the instances: " + listed.error().message);
    {
      std::lock_guard<std::mutex> lock(mutex);
      members.clear();
      for (const auto& kv : listed->kvs)
        apply_put(kv);
    }
    watch_ended = false;
    auto w = etcd->watch(
        instances_prefix(root), listed->revision + 1, [this](const etcd::watch_update& u) {
          if (u.error) {
            if (options.log)
              options.log("cluster: the watch on the instances ended: " + u.error->message);
            watch_ended = true;
            wake.notify_all();
            return;
          }
          std::vector<instance_record> went;
          {
            std::lock_guard<std::mutex> lock(mutex);
            for (const auto& e : u.events) {
              if (e.type == etcd::watch_event::kind::put) {
                apply_put(e.kv);
                continue;
              }
              auto found = members.find(e.kv.key.substr(instances_prefix(root).size()));
              if (found == members.end()) continue;
              if (found->first != options.instance) went.push_back(std::move(found->second.record));
              members.erase(found);
            }
          }
          if (options.gone)
            for (const auto& r : went)
              options.gone(r);
        });
    if (!w) {
      watch_ended = true;
      return warn("cluster: cannot watch the instances: " + w.error().message);
    }
    watcher = std::move(*w);
  }

  // Under `mutex`. A record is taken only as an instance writes its own: valid, under its own
  // name, and on a lease (etcd deletes a lease's keys when it ends, so a record with one is live;
  // one without would never go).
  void apply_put(const etcd::key_value& kv) {
    auto name = kv.key.substr(instances_prefix(root).size());
    auto r = decode_instance(kv.key, kv.value);
    std::string why = !r                ? r.error().message
                      : kv.lease == 0   ? "instance record at " + kv.key + " is on no lease"
                      : r->name != name ? "instance record at " + kv.key +
                                              " names another instance ('" + r->name + "')"
                                        : std::string();
    if (!why.empty()) {
      if (options.log) options.log("cluster: ignored: " + why);
      members.erase(name);  // whatever the key held before, it holds no instance now
      return;
    }
    members[name] = {std::move(*r), kv.mod_revision, steady::now()};
  }

  void run() {
    std::unique_lock<std::mutex> lock(mutex);
    while (!stopping) {
      bool forced = publish_now;
      lock.unlock();
      if (lease == 0) join();
      if (watch_ended) watch_members();
      if (lease != 0 && steady::now() >= next_keepalive) keep_alive();
      if (lease != 0 && (forced || steady::now() >= next_publish_check)) publish_if_due();
      lock.lock();
      auto next = steady::now() + std::chrono::seconds(1);  // retries of join and watch
      if (lease != 0) next = std::min({next_keepalive, next_publish_check, next});
      wake.wait_until(lock, next,
                      [&] { return stopping || publish_now || (watch_ended && lease != 0); });
    }
    lock.unlock();
    watcher.reset();
    if (lease != 0) static_cast<void>(etcd->revoke_lease(lease));  // the record goes at once
    set_lease(0, false);
  }
};

expected<std::unique_ptr<membership>> membership::start(membership_options options) {
  auto root = cluster_root(options.cluster);
  if (!root) return std::move(root).error();
  if (auto ok = check_instance_name(options.instance); !ok) return std::move(ok).error();
  if (options.address.empty())
    return make_error(errc::invalid_argument, "the instance needs an address for its peers");
  if (options.lease_ttl < std::chrono::seconds(2))
    return make_error(errc::invalid_argument,
                      "the lease TTL must be at least 2 seconds (etcd's minimum)");
  if (options.min_publish_interval <= std::chrono::milliseconds(0) ||
      options.refresh_interval < options.min_publish_interval)
    return make_error(
        errc::invalid_argument,
        "the publish interval must be positive and the refresh interval no shorter than it");
  if (!options.inspect)
    return make_error(errc::invalid_argument, "the membership needs the runtime's inspection");
  etcd::options eo = options.etcd_access;
  eo.endpoints = options.endpoints;
  eo.timeout = options.etcd_timeout;
  options.etcd_access.password.clear();  // the client has it; the options are kept
  auto client = etcd::client::connect(std::move(eo));
  if (!client) return std::move(client).error();
  auto s = std::make_shared<state>();
  s->options = std::move(options);
  s->root = std::move(*root);
  s->etcd = std::move(*client);
  s->session = std::thread([raw = s.get()] { raw->run(); });
  return std::unique_ptr<membership>(new membership(std::move(s)));
}

membership::membership(std::shared_ptr<state> s) : state_(std::move(s)) {}

membership::~membership() {
  {
    std::lock_guard<std::mutex> lock(state_->mutex);
    state_->stopping = true;
  }
  state_->wake.notify_all();
  state_->session.join();
}

void membership::set_draining(bool draining) {
  {
    std::lock_guard<std::mutex> lock(state_->mutex);
    state_->draining = draining;
    state_->publish_now = true;
  }
  state_->wake.notify_all();
}

std::vector<member> membership::members() const {
  std::lock_guard<std::mutex> lock(state_->mutex);
  std::vector<member> out;
  auto now = steady::now();
  for (const auto& [name, seen] : state_->members)
    out.push_back({seen.record, seen.mod_revision,
                   std::chrono::duration<double>(now - seen.at).count(),
                   name == state_->options.instance});
  return out;
}

std::vector<membership::holder> membership::holders(const std::string& model) const {
  std::lock_guard<std::mutex> lock(state_->mutex);
  std::vector<holder> out;
  for (const auto& [name, seen] : state_->members) {
    const auto& r = seen.record;
    if (r.holds(model))
      out.push_back(
          {name, r.address, r.loads_in_flight, r.draining, name == state_->options.instance});
  }
  return out;
}

membership_status membership::status() const {
  membership_status s;
  s.members = members();
  std::lock_guard<std::mutex> lock(state_->mutex);
  s.cluster = state_->options.cluster;
  s.instance = state_->options.instance;
  s.endpoints = state_->options.endpoints;
  s.joined = state_->joined;
  s.lease = state_->lease_public;
  s.last_error = state_->last_error;
  return s;
}

}  // namespace warm::cluster
