#include "support/cluster_fakes.hpp"

namespace warm::test {

expected<void> fake_store::enter(std::unique_lock<std::mutex>& lock) {
  ++waiting_;
  changed_.notify_all();
  changed_.wait(lock, [&] { return !held_; });
  --waiting_;
  if (down_) return make_error(errc::unavailable, "etcd is down (fake)");
  return {};
}

expected<std::optional<etcd::key_value>> fake_store::get(const std::string& key) {
  std::unique_lock<std::mutex> lock(mutex_);
  if (auto ok = enter(lock); !ok) return std::move(ok).error();
  ++lookups_;
  auto it = kvs_.find(key);
  if (it == kvs_.end()) return std::optional<etcd::key_value>{};
  return std::optional<etcd::key_value>{it->second};
}

expected<etcd::range_result> fake_store::get_prefix(const std::string& prefix) {
  std::unique_lock<std::mutex> lock(mutex_);
  if (auto ok = enter(lock); !ok) return std::move(ok).error();
  ++reads_;
  etcd::range_result out;
  out.revision = revision_;
  for (auto it = kvs_.lower_bound(prefix); it != kvs_.end() && it->first.rfind(prefix, 0) == 0;
       ++it)
    out.kvs.push_back(it->second);
  return out;
}

expected<std::int64_t> fake_store::put(const std::string& key, const std::string& value,
                                       etcd::lease_id lease) {
  std::unique_lock<std::mutex> lock(mutex_);
  if (auto ok = enter(lock); !ok) return std::move(ok).error();
  auto& kv = kvs_[key];
  ++revision_;
  if (kv.create_revision == 0) kv.create_revision = revision_;
  kv.key = key;
  kv.value = value;
  kv.mod_revision = revision_;
  ++kv.version;
  kv.lease = lease;
  return revision_;
}

expected<etcd::txn_result> fake_store::transact(const std::vector<etcd::txn_condition>& conditions,
                                                const std::vector<etcd::txn_write>& writes) {
  std::function<void(fake_store&)> before;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    before = std::exchange(before_transaction_, nullptr);
  }
  if (before) before(*this);
  std::unique_lock<std::mutex> lock(mutex_);
  if (auto ok = enter(lock); !ok) return std::move(ok).error();
  ++transactions_;
  etcd::txn_result out;
  bool holds = true;
  for (const auto& c : conditions) {
    auto it = kvs_.find(c.key);
    const std::int64_t now = it == kvs_.end() ? 0 : it->second.mod_revision;
    holds = holds && now == c.mod_revision;
  }
  if (!holds) {
    for (const auto& c : conditions) {
      auto it = kvs_.find(c.key);
      out.current.push_back(it == kvs_.end() ? std::nullopt
                                             : std::optional<etcd::key_value>{it->second});
    }
    out.revision = revision_;
    return out;
  }
  ++revision_;
  for (const auto& w : writes) {
    if (!w.value) {
      kvs_.erase(w.key);
      continue;
    }
    auto& kv = kvs_[w.key];
    if (kv.create_revision == 0) kv.create_revision = revision_;
    kv.key = w.key;
    kv.value = *w.value;
    kv.mod_revision = revision_;
    ++kv.version;
    kv.lease = w.lease;
  }
  out.succeeded = true;
  out.revision = revision_;
  return out;
}

void fake_store::on_next_transaction(std::function<void(fake_store&)> before) {
  std::lock_guard<std::mutex> lock(mutex_);
  before_transaction_ = std::move(before);
}

void fake_store::set_down(bool down) {
  std::lock_guard<std::mutex> lock(mutex_);
  down_ = down;
}
void fake_store::hold() {
  std::lock_guard<std::mutex> lock(mutex_);
  held_ = true;
}
void fake_store::release() {
  std::lock_guard<std::mutex> lock(mutex_);
  held_ = false;
  changed_.notify_all();
}
bool fake_store::wait_waiting(std::chrono::milliseconds limit) {
  std::unique_lock<std::mutex> lock(mutex_);
  return changed_.wait_for(lock, limit, [&] { return waiting_ > 0; });
}
std::optional<etcd::key_value> fake_store::key(const std::string& key) const {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = kvs_.find(key);
  if (it == kvs_.end()) return std::nullopt;
  return it->second;
}
std::vector<etcd::key_value> fake_store::under(const std::string& prefix) const {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<etcd::key_value> out;
  for (auto it = kvs_.lower_bound(prefix); it != kvs_.end() && it->first.rfind(prefix, 0) == 0;
       ++it)
    out.push_back(it->second);
  return out;
}
int fake_store::lookups() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return lookups_;
}
int fake_store::reads() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return reads_;
}
int fake_store::transactions() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return transactions_;
}

void fake_peers::answer_infer(const std::string& address, infer_answer answer) {
  std::lock_guard<std::mutex> lock(mutex_);
  answers_[address] = std::move(answer);
}

void fake_peers::infer(const std::string& address, infer_request request,
                       callback<infer_result> done) {
  infer_answer answer;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    inferred_.push_back({address, request.target});
    if (auto it = answers_.find(address); it != answers_.end()) answer = it->second;
  }
  infer_result served;
  served.model = "peer " + address;
  done(answer ? answer(request) : expected<infer_result>(std::move(served)));
}

void fake_peers::ensure(const std::string& address, const std::string& model, callback<void> done) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    ensured_.push_back({address, model});
  }
  done({});
}

std::vector<fake_peers::call> fake_peers::inferred() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return inferred_;
}
std::vector<fake_peers::call> fake_peers::ensured() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return ensured_;
}

fake_members::fake_members(std::vector<cluster::member> members, std::int64_t lease)
    : members_(std::move(members)), lease_(lease) {}

cluster::membership_status fake_members::status() const {
  std::lock_guard<std::mutex> lock(mutex_);
  cluster::membership_status s;
  s.cluster = "test";
  s.joined = true;
  s.lease = lease_;
  s.members = members_;
  for (const auto& m : members_)
    if (m.self) s.instance = m.record.name;
  return s;
}
std::vector<cluster::member> fake_members::members() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return members_;
}
void fake_members::set(std::vector<cluster::member> members) {
  std::lock_guard<std::mutex> lock(mutex_);
  members_ = std::move(members);
}

cluster::member instance(const std::string& name, std::uint64_t capacity, std::uint64_t used,
                         bool self, std::vector<std::string> residents) {
  cluster::member m;
  m.record.name = name;
  m.record.address = "unix:/run/" + name;
  m.record.loading_threads = 2;
  m.record.devices.push_back({"host", "lru", capacity, used, 0, 0, {}});
  m.record.residents = std::move(residents);
  m.mod_revision = 1;
  m.self = self;
  return m;
}

}  // namespace warm::test
