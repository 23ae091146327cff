#include "cluster/etcd_registry.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <limits>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include "cluster/records.hpp"
#include "core/batch_plan.hpp"
#include "core/model_id.hpp"

namespace warm::cluster {

namespace {

using json = nlohmann::json;

const std::string models_dir = "models/";
const std::string vmodels_dir = "vmodels/";

bool starts_with(const std::string& s, const std::string& prefix) {
  return s.compare(0, prefix.size(), prefix) == 0;
}

expected<registry_change> refuse(const std::string& key, const std::string& why) {
  return make_error(errc::invalid_argument, "registry record " + key + ": " + why);
}

// A non-negative integer field, absent or null as nullopt.
expected<std::optional<std::uint64_t>> count(const json& o, const char* field) {
  auto it = o.find(field);
  if (it == o.end() || it->is_null()) return std::optional<std::uint64_t>{};
  if (!it->is_number_unsigned())
    return make_error(errc::invalid_argument, std::string(field) + " is not a count");
  return std::optional<std::uint64_t>(it->get<std::uint64_t>());
}

expected<std::string> text(const json& o, const char* field) {
  auto it = o.find(field);
  if (it == o.end() || !it->is_string())
    return make_error(errc::invalid_argument, std::string(field) + " is not a string");
  return it->get<std::string>();
}

expected<batching_options> decode_batching(const json& b) {
  if (!b.is_object()) return make_error(errc::invalid_argument, "batching is not an object");
  batching_options out;
  auto max_batch = count(b, "max_batch");
  auto delay = count(b, "max_queue_delay_us");
  auto queue = count(b, "max_queue");
  for (auto* r : {&max_batch, &delay, &queue})
    if (!*r) return std::move(*r).error();
  out.max_batch = max_batch->value_or(0);
  if (delay->value_or(0) > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()))
    return make_error(errc::invalid_argument, "max_queue_delay_us is too large");
  out.max_queue_delay = std::chrono::microseconds(static_cast<std::int64_t>(delay->value_or(0)));
  out.max_queue = queue->value_or(out.max_queue);
  if (auto p = b.find("preferred_batch"); p != b.end()) {
    if (!p->is_array())
      return make_error(errc::invalid_argument, "preferred_batch is not an array");
    for (const auto& n : *p) {
      if (!n.is_number_unsigned())
        return make_error(errc::invalid_argument, "preferred_batch holds a non-count");
      out.preferred_batch.push_back(n.get<std::uint64_t>());
    }
  }
  return out;
}

// A model record, checked as a registration through any front is (the id, a path, the batching
// settings and their limits): etcd is written by others, and a record is no more trusted than a
// client's request.
expected<model_record> decode_model(const std::string& id, const json& o) {
  model_record r;
  r.id = id;
  if (auto ok = check_id(id, "model"); !ok) return std::move(ok).error();
  auto path = text(o, "path");
  if (!path) return std::move(path).error();
  if (path->empty()) return make_error(errc::invalid_argument, "path is empty");
  r.path = std::move(*path);
  auto version = count(o, "version");
  if (!version) return std::move(version).error();
  r.version = *version;
  auto hint = count(o, "size_hint");
  if (!hint) return std::move(hint).error();
  r.size_hint = *hint;
  if (auto a = o.find("auto_delete"); a != o.end()) {
    if (!a->is_boolean()) return make_error(errc::invalid_argument, "auto_delete is not a boolean");
    r.auto_delete = a->get<bool>();
  }
  if (auto b = o.find("batching"); b != o.end() && !b->is_null()) {
    auto batching = decode_batching(*b);
    if (!batching) return std::move(batching).error();
    if (auto why = check_batching(*batching); !why.empty())
      return make_error(errc::invalid_argument, "batching: " + why);
    r.batching = std::move(*batching);
  }
  return r;
}

}  // namespace

std::string registry_prefix(const std::string& root) {
  return root + "registry/";
}

std::string encode_model(const model_record& r) {
  json o = {{"path", r.path}, {"auto_delete", r.auto_delete}};
  if (r.version) o["version"] = *r.version;
  if (r.size_hint) o["size_hint"] = *r.size_hint;
  if (r.batching)
    o["batching"] = {{"max_batch", r.batching->max_batch},
                     {"max_queue_delay_us", static_cast<std::uint64_t>(std::max<std::int64_t>(
                                                0, r.batching->max_queue_delay.count()))},
                     {"preferred_batch", r.batching->preferred_batch},
                     {"max_queue", r.batching->max_queue}};
  return o.dump();
}

std::string encode_vmodel(const vmodel_record& r) {
  return json{{"active", r.active}, {"target", r.target}}.dump();
}

expected<registry_change> decode_change(const std::string& prefix, const std::string& key,
                                        const std::optional<std::string>& value) {
  if (!starts_with(key, prefix)) return refuse(key, "not under " + prefix);
  const auto rest = key.substr(prefix.size());
  const bool model = starts_with(rest, models_dir);
  if (!model && !starts_with(rest, vmodels_dir)) return refuse(key, "neither a model nor a vmodel");
  auto id = rest.substr(model ? models_dir.size() : vmodels_dir.size());
  if (id.empty()) return refuse(key, "the id is empty");
  if (!value) return model ? registry_change{erase_model{id}} : registry_change{erase_vmodel{id}};
  auto o = json::parse(*value, nullptr, false);
  if (o.is_discarded() || !o.is_object()) return refuse(key, "the value is not a JSON object");
  if (model) {
    auto r = decode_model(id, o);
    if (!r) return refuse(key, r.error().message);
    return registry_change{put_model{std::move(*r)}};
  }
  if (auto ok = check_id(id, "vmodel"); !ok) return refuse(key, ok.error().message);
  auto active = text(o, "active");
  auto target = text(o, "target");
  if (!active) return refuse(key, active.error().message);
  if (!target) return refuse(key, target.error().message);
  if (auto ok = check_id(*target, "target model"); !ok) return refuse(key, ok.error().message);
  if (!active->empty())
    if (auto ok = check_id(*active, "active model"); !ok) return refuse(key, ok.error().message);
  return registry_change{put_vmodel{{id, std::move(*active), std::move(*target)}}};
}

namespace {

// The key a change writes and its new value (nullopt: erased).
std::pair<std::string, std::optional<std::string>> write_of(const std::string& prefix,
                                                            const registry_change& c) {
  if (auto* p = std::get_if<put_model>(&c))
    return {prefix + models_dir + p->record.id, encode_model(p->record)};
  if (auto* e = std::get_if<erase_model>(&c)) return {prefix + models_dir + e->id, std::nullopt};
  if (auto* p = std::get_if<put_vmodel>(&c))
    return {prefix + vmodels_dir + p->record.id, encode_vmodel(p->record)};
  return {prefix + vmodels_dir + std::get<erase_vmodel>(c).id, std::nullopt};
}

// Whether a key as etcd holds it is what a write would leave (values compared as records, so
// that two encodings of one record agree).
bool holds(const std::string& prefix, const std::optional<etcd::key_value>& now,
           const std::string& key, const std::optional<std::string>& wanted) {
  if (!wanted || !now) return !wanted && !now;
  auto a = decode_change(prefix, key, now->value);
  auto b = decode_change(prefix, key, wanted);
  return a && b && *a == *b;
}

class etcd_registry final : public registry_storage {
 public:
  explicit etcd_registry(etcd_registry_options options, std::string prefix)
      : options_(std::move(options)), prefix_(std::move(prefix)) {}

  ~etcd_registry() override {
    {
      std::lock_guard<std::mutex> lock(follow_mutex_);
      stopping_ = true;
    }
    wake_.notify_all();
    if (follower_.joinable()) follower_.join();
  }

  expected<registry_contents> load() override {
    std::lock_guard<std::mutex> lock(mutex_);
    auto listed = list();
    if (!listed) return std::move(listed).error();
    revisions_ = std::move(listed->second);
    base_ = listed->first.revision;
    return std::move(listed->first);
  }

  expected<void> apply(const std::vector<registry_change>& batch) override {
    // The batch's last word on each key, in key order (a transaction writes a key at most once).
    std::map<std::string, std::optional<std::string>> writes;
    for (const auto& c : batch) {
      auto [key, value] = write_of(prefix_, c);
      writes[key] = std::move(value);
    }
    std::lock_guard<std::mutex> lock(mutex_);  // held through each transaction: see follow()
    std::vector<std::pair<std::string, std::optional<std::string>>> chunk;
    for (auto it = writes.begin(); it != writes.end();) {
      chunk.clear();
      for (; it != writes.end() && chunk.size() < etcd::client::max_txn_operations; ++it)
        chunk.push_back(*it);
      if (auto ok = commit(chunk); !ok) return ok;
    }
    return {};
  }

  void follow(std::int64_t since, std::function<void(registry_update)> sink) override {
    std::lock_guard<std::mutex> lock(follow_mutex_);
    if (follower_.joinable() || !sink) return;
    sink_ = std::move(sink);
    next_ = since + 1;
    follower_ = std::thread([this] { run_follower(); });
  }

  void seen(const registry_update& update) override {
    std::lock_guard<std::mutex> lock(mutex_);
    if (update.revision <= base_) return;
    if (update.reset) {
      auto it = resets_.find(update.revision);
      if (it != resets_.end()) {
        revisions_ = std::move(it->second);
        base_ = update.revision;
      }
      resets_.erase(resets_.begin(), resets_.upper_bound(update.revision));
      return;
    }
    for (std::size_t i = 0; i < update.changes.size() && i < update.revisions.size(); ++i) {
      if (update.revisions[i] <= base_) continue;
      auto [key, value] = write_of(prefix_, update.changes[i]);
      if (value)
        revisions_[key] = update.revisions[i];
      else
        revisions_.erase(key);
    }
  }

  std::string where() const override {
    std::string names;
    for (const auto& e : options_.etcd->endpoints())
      names += (names.empty() ? "" : ",") + e;
    return "etcd " + names + " " + prefix_;
  }

 private:
  void log(const std::string& line) const {
    if (options_.log) options_.log(line);
  }

  // The follower's failures: the first of a run, then at most every 30 s (an etcd that stays
  // down does not fill the log). The follower's thread and its watcher's.
  void warn(const std::string& line) {
    const auto now = std::chrono::steady_clock::now();
    {
      std::lock_guard<std::mutex> lock(follow_mutex_);
      if (failing_ && now - last_warning_ < std::chrono::seconds(30)) return;
      failing_ = true;
      last_warning_ = now;
    }
    log(line);
  }

  // Everything under the prefix, with each key's mod_revision; undecodable records logged and
  // left out of the contents (their revisions are kept, so a registration may replace them).
  expected<std::pair<registry_contents, std::map<std::string, std::int64_t>>> list() const {
    auto listed = options_.etcd->get_prefix(prefix_);
    if (!listed) return std::move(listed).error();
    std::pair<registry_contents, std::map<std::string, std::int64_t>> out;
    out.first.revision = listed->revision;
    for (const auto& kv : listed->kvs) {
      out.second[kv.key] = kv.mod_revision;
      auto change = decode_change(prefix_, kv.key, kv.value);
      if (!change) {
        log("cluster: registry: ignored: " + change.error().message);
        continue;
      }
      if (auto* m = std::get_if<put_model>(&*change))
        out.first.models.push_back(std::move(m->record));
      if (auto* v = std::get_if<put_vmodel>(&*change))
        out.first.vmodels.push_back(std::move(v->record));
    }
    return out;  // keys are sorted, so each list is sorted by id
  }

  // One transaction for `chunk`, compared with the revisions last seen; after a lost comparison,
  // keys already as wanted drop out, keys unchanged since go again, any other key fails it.
  // Under mutex_.
  expected<void> commit(std::vector<std::pair<std::string, std::optional<std::string>>> chunk) {
    for (int attempt = 0; !chunk.empty(); ++attempt) {
      std::vector<etcd::txn_condition> conditions;
      std::vector<etcd::txn_write> writes;
      for (const auto& [key, value] : chunk) {
        auto seen = revisions_.find(key);
        conditions.push_back({key, seen == revisions_.end() ? 0 : seen->second});
        writes.push_back({key, value});
      }
      auto r = options_.etcd->transact(conditions, writes);
      if (!r) return make_error(r.error().code, "the cluster's registry: " + r.error().message);
      if (r->succeeded) {
        own_.insert(r->revision);
        for (const auto& [key, value] : chunk)
          if (value)
            revisions_[key] = r->revision;
          else
            revisions_.erase(key);
        return {};
      }
      std::vector<std::pair<std::string, std::optional<std::string>>> again;
      for (std::size_t i = 0; i < chunk.size(); ++i) {
        const auto& [key, value] = chunk[i];
        const auto& now = i < r->current.size() ? r->current[i] : std::nullopt;
        if (holds(prefix_, now, key, value)) {
          if (now)
            revisions_[key] = now->mod_revision;
          else
            revisions_.erase(key);
          continue;
        }
        const auto expected_revision = conditions[i].mod_revision;
        if ((now ? now->mod_revision : 0) != expected_revision || attempt >= 2)
          return make_error(errc::unavailable, "another instance changed " +
                                                   key.substr(prefix_.size()) +
                                                   " in the cluster's registry meanwhile; retry");
        again.push_back(chunk[i]);
      }
      chunk = std::move(again);
    }
    return {};
  }

  // The follower's thread: watch from next_, deliver, and after a failure watch again.
  void run_follower() {
    std::unique_lock<std::mutex> lock(follow_mutex_);
    while (!stopping_) {
      lock.unlock();
      bool reset_needed = false;
      auto w = options_.etcd->watch(
          prefix_, next_,
          [this, &reset_needed](const etcd::watch_update& u) { on_watch(u, reset_needed); });
      lock.lock();
      if (!w) {
        lock.unlock();
        warn("cluster: registry: cannot watch: " + w.error().message);
        lock.lock();
        reset_needed = w.error().code == errc::invalid_argument;  // the start revision is compacted
      } else {
        if (std::exchange(failing_, false))
          log("cluster: registry: watching again from revision " + std::to_string(next_));
        watcher_ = std::move(*w);
        wake_.wait(lock, [&] { return stopping_ || watcher_->stopped(); });
        lock.unlock();
        watcher_.reset();  // joins its thread: on_watch is done with reset_needed
        lock.lock();
        if (stopping_) break;
      }
      if (reset_needed) {
        lock.unlock();
        deliver_reset();
        lock.lock();
        continue;
      }
      wake_.wait_for(lock, options_.retry, [&] { return stopping_; });
    }
  }

  // On the watcher's thread.
  void on_watch(const etcd::watch_update& u, bool& reset_needed) {
    if (u.error) {
      warn("cluster: registry: the watch ended: " + u.error->message);
      reset_needed = u.error->code == errc::not_found;  // compacted: list again
      std::lock_guard<std::mutex> lock(follow_mutex_);
      wake_.notify_all();
      return;
    }
    registry_update update;
    {
      std::lock_guard<std::mutex> lock(
          mutex_);  // after any transaction in flight has recorded its revision
      std::int64_t last = 0;
      for (const auto& e : u.events) {
        const auto revision = e.kv.mod_revision;
        last = std::max(last, revision);
        if (own_.count(revision)) continue;
        std::optional<std::string> value;
        if (e.type == etcd::watch_event::kind::put) value = e.kv.value;
        auto change = decode_change(prefix_, e.kv.key, value);
        if (!change) {
          log("cluster: registry: ignored: " + change.error().message);
          continue;
        }
        update.changes.push_back(std::move(*change));
        update.revisions.push_back(revision);
      }
      own_.erase(own_.begin(), own_.upper_bound(last));
      update.revision = last;
    }
    next_ = std::max(next_.load(), update.revision + 1);
    if (!update.changes.empty()) sink_(std::move(update));
  }

  // The history the follower needed is gone: the whole registry, as of one revision.
  void deliver_reset() {
    std::unique_lock<std::mutex> lock(mutex_);
    auto listed = list();
    if (!listed) {
      lock.unlock();
      warn("cluster: registry: cannot list: " + listed.error().message);
      std::unique_lock<std::mutex> wait(follow_mutex_);
      wake_.wait_for(wait, options_.retry, [&] { return stopping_; });
      return;  // the next watch fails again and asks for another reset
    }
    registry_update update;
    update.revision = listed->first.revision;
    resets_[update.revision] = std::move(listed->second);
    update.reset = std::move(listed->first);
    lock.unlock();
    log("cluster: registry: re-listed at revision " + std::to_string(update.revision));
    next_ = update.revision + 1;
    sink_(std::move(update));
  }

  const etcd_registry_options options_;
  const std::string prefix_;

  std::mutex mutex_;  // the revisions: the writer's thread, the watcher's thread, a reset
  std::map<std::string, std::int64_t> revisions_;  // each key's mod_revision as last seen
  std::int64_t base_ = 0;                          // the revision of the last full listing taken in
  std::set<std::int64_t> own_;  // this store's transactions not yet seen by the watch
  std::map<std::int64_t, std::map<std::string, std::int64_t>>
      resets_;  // listings delivered, not yet seen

  std::mutex follow_mutex_;  // the follower's life
  std::condition_variable wake_;
  bool stopping_ = false;
  bool failing_ = false;  // since the last failure logged, no watch has started
  std::chrono::steady_clock::time_point last_warning_;
  std::atomic<std::int64_t> next_{1};  // the first revision the next watch asks for
  std::function<void(registry_update)> sink_;
  std::unique_ptr<etcd::watcher> watcher_;
  std::thread follower_;
};

}  // namespace

expected<std::unique_ptr<registry_storage>> open_etcd_registry(etcd_registry_options options) {
  if (!options.etcd)
    return make_error(errc::invalid_argument, "the cluster's registry needs an etcd client");
  auto root = cluster_root(options.cluster);
  if (!root) return std::move(root).error();
  auto prefix = registry_prefix(*root);
  return std::unique_ptr<registry_storage>(
      std::make_unique<etcd_registry>(std::move(options), std::move(prefix)));
}

expected<std::unique_ptr<registry_storage>> open_etcd_registry(
    const etcd::options& access, std::string cluster, std::function<void(const std::string&)> log) {
  auto client = etcd::client::connect(access);
  if (!client) return std::move(client).error();
  etcd_registry_options o;
  o.etcd = std::move(*client);
  o.cluster = std::move(cluster);
  o.log = std::move(log);
  return open_etcd_registry(std::move(o));
}

}  // namespace warm::cluster
