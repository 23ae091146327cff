// The registry over a store other runtimes share (runtime_options::registry_store; in a cluster,
// etcd): others' registrations, unregistrations and vmodels reach this runtime's tables, and a
// change staged here before another instance changed the same record fails instead of
// overwriting it, leaving memory as the store has it. The store is an in-memory stand-in with
// etcd's rules (per-record revisions, compare-and-set), so the interleavings are the test's.
#include <catch2/catch.hpp>

#include <condition_variable>
#include <map>
#include <mutex>
#include <thread>

#include "storage/registry_storage.hpp"
#include "support/runtime_fixture.hpp"

using namespace std::chrono_literals;
using namespace warm;
using warm::test::eventually;

namespace {

std::string key_of(const registry_change& c) {
  if (auto* p = std::get_if<put_model>(&c)) return "m/" + p->record.id;
  if (auto* e = std::get_if<erase_model>(&c)) return "m/" + e->id;
  if (auto* p = std::get_if<put_vmodel>(&c)) return "v/" + p->record.id;
  return "v/" + std::get<erase_vmodel>(c).id;
}

bool is_put(const registry_change& c) {
  return std::holds_alternative<put_model>(c) || std::holds_alternative<put_vmodel>(c);
}

// What the runtimes share: records with revisions, and the follower of the store under test.
struct shared_records {
  std::mutex mutex;
  std::condition_variable changed;
  std::int64_t revision = 0;
  std::map<std::string, std::pair<registry_change, std::int64_t>> records;
  std::function<void(registry_update)> follower;
  bool hold = false;        // applies wait while set
  int applies_waiting = 0;  // applies held now

  // Another instance's write: stored and delivered to the follower.
  void write_from_elsewhere(registry_change c) {
    registry_update u;
    {
      std::lock_guard<std::mutex> lock(mutex);
      ++revision;
      if (is_put(c))
        records[key_of(c)] = {c, revision};
      else
        records.erase(key_of(c));
      u.revision = revision;
      u.changes = {std::move(c)};
      u.revisions = {revision};
    }
    follower(std::move(u));
  }
  void release() {
    std::lock_guard<std::mutex> lock(mutex);
    hold = false;
    changed.notify_all();
  }
  bool wait_held(int n) {
    std::unique_lock<std::mutex> lock(mutex);
    return changed.wait_for(lock, 10s, [&] { return applies_waiting >= n; });
  }
};

// One runtime's store: compares each record it writes with the revision it last saw.
class shared_store final : public registry_storage {
 public:
  explicit shared_store(std::shared_ptr<shared_records> s) : s_(std::move(s)) {}

  expected<registry_contents> load() override {
    std::lock_guard<std::mutex> lock(s_->mutex);
    registry_contents out;
    known_.clear();
    for (auto& [key, rec] : s_->records) {
      known_[key] = rec.second;
      if (auto* p = std::get_if<put_model>(&rec.first)) out.models.push_back(p->record);
      if (auto* p = std::get_if<put_vmodel>(&rec.first)) out.vmodels.push_back(p->record);
    }
    out.revision = s_->revision;
    return out;
  }

  expected<void> apply(const std::vector<registry_change>& batch) override {
    std::unique_lock<std::mutex> lock(s_->mutex);
    ++s_->applies_waiting;
    s_->changed.notify_all();
    s_->changed.wait(lock, [&] { return !s_->hold; });
    --s_->applies_waiting;
    for (auto& c : batch) {
      auto it = s_->records.find(key_of(c));
      auto seen = known_.find(key_of(c));
      if ((it == s_->records.end() ? 0 : it->second.second) !=
          (seen == known_.end() ? 0 : seen->second))
        return make_error(errc::unavailable, "another instance changed " + key_of(c));
    }
    ++s_->revision;
    for (auto& c : batch) {
      if (is_put(c)) {
        s_->records[key_of(c)] = {c, s_->revision};
        known_[key_of(c)] = s_->revision;
      } else {
        s_->records.erase(key_of(c));
        known_.erase(key_of(c));
      }
    }
    return {};
  }

  void follow(std::int64_t, std::function<void(registry_update)> sink) override {
    s_->follower = std::move(sink);
  }

  void seen(const registry_update& u) override {
    std::lock_guard<std::mutex> lock(s_->mutex);
    for (std::size_t i = 0; i < u.changes.size(); ++i)
      if (is_put(u.changes[i]))
        known_[key_of(u.changes[i])] = u.revisions[i];
      else
        known_.erase(key_of(u.changes[i]));
  }

  std::string where() const override { return "shared records"; }

 private:
  std::shared_ptr<shared_records> s_;
  std::map<std::string, std::int64_t> known_;  // the writer's thread only
};

model_record record(const std::string& id, const std::string& path,
                    std::optional<std::uint64_t> hint = {}) {
  model_record r;
  r.id = id;
  r.path = path;
  r.size_hint = hint;
  return r;
}

// A runtime option: the registry kept in `shared`.
std::function<void(runtime_options&)> keep_registry_in(std::shared_ptr<shared_records> shared) {
  return [shared](runtime_options& o) {
    o.registry_store = [shared]() -> expected<std::unique_ptr<registry_storage>> {
      return std::unique_ptr<registry_storage>(std::make_unique<shared_store>(shared));
    };
  };
}

model_state state_of(runtime& rt, const std::string& id) {
  auto st = rt.status(id).get();
  return st ? st->state : model_state::not_found;
}

}  // namespace

TEST_CASE("another instance's registrations, unregistrations and vmodels reach this runtime") {
  auto shared = std::make_shared<shared_records>();
  test::runtime_fixture f({"a", "b"}, {"host:64KiB"}, 2, keep_registry_in(shared));
  REQUIRE(f.rt->register_model("a", {"a"}).get());
  shared->write_from_elsewhere(put_model{record("b", "b")});
  REQUIRE(eventually([&] { return state_of(*f.rt, "b") == model_state::not_loaded; }));
  REQUIRE(f.rt->ensure_loaded("b", true).get());  // served here, registered elsewhere

  shared->write_from_elsewhere(put_vmodel{{"v", "b", "b"}});
  REQUIRE(eventually([&] {
    auto v = f.rt->vmodel_status("v").get();
    return v && v->active == "b";
  }));
  shared->write_from_elsewhere(put_vmodel{{"v", "a", "a"}});  // flipped elsewhere
  REQUIRE(eventually([&] {
    auto v = f.rt->vmodel_status("v").get();
    return v && v->active == "a";
  }));
  shared->write_from_elsewhere(erase_vmodel{"v"});
  REQUIRE(eventually([&] { return !f.rt->vmodel_status("v").get(); }));

  // Marked auto-delete elsewhere (a vmodel set with --auto-delete): the same file, it stays loaded.
  auto marked = record("b", "b");
  marked.auto_delete = true;
  shared->write_from_elsewhere(put_model{marked});
  shared->write_from_elsewhere(put_vmodel{{"w", "b", "b"}});  // after it: the mark is taken in
  REQUIRE(eventually([&] { return f.rt->vmodel_status("w").get().has_value(); }));
  CHECK(state_of(*f.rt, "b") == model_state::loaded);
  CHECK(f.loader->loads_of("b") == 1);
  shared->write_from_elsewhere(erase_vmodel{"w"});

  shared->write_from_elsewhere(erase_model{"b"});
  REQUIRE(eventually([&] { return state_of(*f.rt, "b") == model_state::not_found; }));
  // Re-registered elsewhere with other info: this runtime takes the new record.
  shared->write_from_elsewhere(put_model{record("a", "a", 4096)});
  REQUIRE(eventually([&] {
    auto st = f.rt->status("a").get();
    return st && st->bytes == 4096;
  }));
}

TEST_CASE(
    "a change staged before another instance changed the same record fails; memory follows the "
    "store") {
  auto shared = std::make_shared<shared_records>();
  test::runtime_fixture f({"a", "b"}, {"host:64KiB"}, 2, keep_registry_in(shared));
  REQUIRE(f.rt->register_model("a", {"a"}).get());
  // A commit held in flight, and behind it a registration of x staged here.
  shared->hold = true;
  auto first = f.rt->register_model("b", {"b"});
  REQUIRE(shared->wait_held(1));
  auto mine = f.rt->register_model("x", {"a", std::nullopt, 4096});
  REQUIRE(eventually([&] { return state_of(*f.rt, "x") == model_state::not_loaded; }));  // staged
  // Meanwhile another instance registers x differently; its change reaches this registry first.
  shared->write_from_elsewhere(put_model{record("x", "b", 8192)});
  std::this_thread::sleep_for(50ms);
  shared->release();
  CHECK(first.get());
  auto lost = mine.get();
  REQUIRE_FALSE(lost);
  CHECK(lost.error().code == errc::unavailable);
  // Memory is what the store holds: the other instance's x.
  REQUIRE(eventually([&] {
    auto st = f.rt->status("x").get();
    return st && st->bytes == 8192;
  }));
  {
    std::lock_guard<std::mutex> lock(shared->mutex);
    CHECK(std::get<put_model>(shared->records.at("m/x").first).record.size_hint == 8192u);
  }
  // A retry, knowing the record now, succeeds only with the same info.
  auto again = f.rt->register_model("x", {"a", std::nullopt, 4096}).get();
  REQUIRE_FALSE(again);
  CHECK(again.error().code == errc::invalid_argument);
  CHECK(f.rt->register_model("y", {"a"}).get());
}

TEST_CASE(
    "a transition another instance set and never finished is finished here when its target is set "
    "again") {
  auto shared = std::make_shared<shared_records>();
  test::runtime_fixture f({"a", "b"}, {"host:64KiB"}, 2, keep_registry_in(shared));
  REQUIRE(f.rt->register_model("a", {"a"}).get());
  REQUIRE(f.rt->register_model("b", {"b"}).get());
  // Set elsewhere, a → b, and not flipped: that instance drives it (and may be gone).
  shared->write_from_elsewhere(put_vmodel{{"v", "a", "b"}});
  REQUIRE(eventually([&] {
    auto v = f.rt->vmodel_status("v").get();
    return v && v->state == vmodel_state::transitioning && v->active == "a";
  }));
  CHECK(f.loader->loads_of("b") == 0);  // not driven here
  // The same target set here: this instance loads it and flips.
  auto again = f.rt->set_vmodel("v", "b").get();
  REQUIRE(again);
  REQUIRE(eventually([&] {
    auto v = f.rt->vmodel_status("v").get();
    return v && v->state == vmodel_state::defined && v->active == "b";
  }));
  CHECK(f.loader->loads_of("b") == 1);
  // Settled: setting it again changes nothing and loads nothing.
  REQUIRE(f.rt->set_vmodel("v", "b").get());
  CHECK(f.loader->loads_of("b") == 1);
}
