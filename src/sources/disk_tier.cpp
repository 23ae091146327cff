#include "sources/disk_tier.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <ctime>
#include <map>
#include <nlohmann/json.hpp>

#include "policy/cache_policy.hpp"

namespace warm::sources {
namespace {

constexpr const char* record_name = "entry.json";

struct fd_guard {
  int fd = -1;
  explicit fd_guard(int f = -1) : fd(f) {}
  fd_guard(fd_guard&& o) noexcept : fd(std::exchange(o.fd, -1)) {}
  fd_guard& operator=(fd_guard&& o) noexcept {
    if (this != &o) {
      if (fd >= 0) ::close(fd);
      fd = std::exchange(o.fd, -1);
    }
    return *this;
  }
  ~fd_guard() {
    if (fd >= 0) ::close(fd);
  }
};

std::string os_error(const std::string& what) {
  return what + ": " + std::strerror(errno);
}

// The first 32 hex digits of SHA-256(key): a directory name made by the tier, never by a URL.
std::string hash_of(const std::string& key) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  EVP_Digest(key.data(), key.size(), digest, &length, EVP_sha256(), nullptr);
  static const char* hex = "0123456789abcdef";
  std::string out;
  for (unsigned i = 0; i < 16 && i < length; ++i) {
    out.push_back(hex[digest[i] >> 4]);
    out.push_back(hex[digest[i] & 15]);
  }
  return out;
}

bool plain_name(const std::string& name) {
  return !name.empty() && name.size() <= 255 && name != "." && name != ".." &&
         name.find('/') == std::string::npos && name.find('\0') == std::string::npos &&
         name != record_name;
}

// The names in directory `fd` (without "." and "..").
std::vector<std::string> names_in(int fd) {
  std::vector<std::string> out;
  const int copy = ::dup(fd);
  if (copy < 0) return out;
  DIR* d = ::fdopendir(copy);
  if (!d) {
    ::close(copy);
    return out;
  }
  ::rewinddir(d);
  while (dirent* e = ::readdir(d)) {
    std::string n = e->d_name;
    if (n != "." && n != "..") out.push_back(std::move(n));
  }
  ::closedir(d);
  return out;
}

// Removes `name` beneath `parent`: a file or link by unlinking, a directory with what it holds
// (never following a link).
void remove_beneath(int parent, const std::string& name, int depth = 0) {
  struct stat st {};
  if (::fstatat(parent, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) return;
  if (!S_ISDIR(st.st_mode)) {
    ::unlinkat(parent, name.c_str(), 0);
    return;
  }
  if (depth < 4) {
    fd_guard sub(::openat(parent, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    if (sub.fd >= 0)
      for (const auto& n : names_in(sub.fd))
        remove_beneath(sub.fd, n, depth + 1);
  }
  ::unlinkat(parent, name.c_str(), AT_REMOVEDIR);
}

expected<int> open_dir_beneath(int parent, const char* name, const std::string& shown) {
  if (::mkdirat(parent, name, 0700) != 0 && errno != EEXIST)
    return make_error(errc::load_failed, os_error("cannot create " + shown));
  const int fd = ::openat(parent, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return make_error(errc::invalid_argument, os_error(shown + " is not a directory"));
  return fd;
}

// Writes `text` to `name` beneath `dir` through a temporary name, synced, then renamed.
expected<void> write_synced(int dir, const std::string& name, const std::string& text,
                            const std::string& shown) {
  const std::string temp = name + ".partial";
  fd_guard f(
      ::openat(dir, temp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600));
  if (f.fd < 0) return make_error(errc::load_failed, os_error("cannot write " + shown));
  std::size_t done = 0;
  while (done < text.size()) {
    const auto n = ::write(f.fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const auto why = os_error("cannot write " + shown);
      ::unlinkat(dir, temp.c_str(), 0);
      return make_error(errc::load_failed, why);
    }
    done += static_cast<std::size_t>(n);
  }
  if (::fsync(f.fd) != 0 || ::renameat(dir, temp.c_str(), dir, name.c_str()) != 0) {
    const auto why = os_error("cannot write " + shown);
    ::unlinkat(dir, temp.c_str(), 0);
    return make_error(errc::load_failed, why);
  }
  return {};
}

std::int64_t unix_now() {
  return static_cast<std::int64_t>(std::time(nullptr));
}

struct entry {
  tier_file file;
  std::string hash, name;
  std::int64_t stored_unix = 0;
};

}  // namespace

struct disk_tier::impl {
  std::string dir;
  fd_guard root, objects, incoming;
  std::uint64_t capacity = 0, used = 0, reserved = 0;
  std::unique_ptr<cache_policy> policy;
  const clock* time = nullptr;
  std::map<std::string, entry> entries;     // by key
  std::map<std::string, int> pins;          // by key
  std::map<std::string, int> reservations;  // by key: writes in flight
  std::uint64_t next_temp = 0;
  tier_stats counters;

  bool pinned(const std::string& key) const {
    auto p = pins.find(key);
    auto r = reservations.find(key);
    return (p != pins.end() && p->second > 0) || (r != reservations.end() && r->second > 0);
  }

  // Drops `key`'s files and record. `evicted`: the policy chose it.
  void drop(const std::string& key, bool evicted) {
    auto it = entries.find(key);
    if (it == entries.end()) return;
    fd_guard sub(::openat(objects.fd, it->second.hash.c_str(),
                          O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    if (sub.fd >= 0) {
      ::unlinkat(sub.fd, record_name, 0);  // first: what is left is incomplete, never mismatched
      ::unlinkat(sub.fd, it->second.name.c_str(), 0);
    }
    remove_beneath(objects.fd, it->second.hash);
    used -= it->second.file.bytes;
    policy->on_remove(key, evicted);
    if (evicted) {
      ++counters.evictions;
      counters.evicted_bytes += it->second.file.bytes;
    }
    entries.erase(it);
  }

  // Evicts unpinned entries until `bytes` more fit; false when they cannot.
  bool make_room(const std::string& incoming_key, std::uint64_t bytes) {
    if (used + reserved + bytes <= capacity) return true;
    const auto need = used + reserved + bytes - capacity;
    auto victims = policy->choose_victims(
        incoming_key, need, [this](const std::string& k) { return pinned(k); }, time->now());
    std::uint64_t freed = 0;
    for (const auto& v : victims) {
      auto it = entries.find(v);
      if (it != entries.end()) freed += it->second.file.bytes;
    }
    if (freed < need) return false;
    for (const auto& v : victims)
      drop(v, true);
    return true;
  }

  // Reads and checks the entry in objects/<hash>; nullopt (to be removed) when anything is off.
  std::optional<entry> read_entry(const std::string& hash) {
    struct stat st {};
    if (::fstatat(objects.fd, hash.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISDIR(st.st_mode))
      return std::nullopt;
    fd_guard sub(
        ::openat(objects.fd, hash.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    if (sub.fd < 0) return std::nullopt;
    fd_guard rec(::openat(sub.fd, record_name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC));
    if (rec.fd < 0 || ::fstat(rec.fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size > 65536)
      return std::nullopt;
    std::string text(static_cast<std::size_t>(st.st_size), '\0');
    if (::pread(rec.fd, text.data(), text.size(), 0) != static_cast<ssize_t>(text.size()))
      return std::nullopt;
    entry e;
    try {
      auto j = nlohmann::json::parse(text);
      e.file.key = j.at("key").get<std::string>();
      e.name = j.at("name").get<std::string>();
      e.file.bytes = j.at("bytes").get<std::uint64_t>();
      e.file.etag = j.at("etag").get<std::string>();
      e.file.fetch_seconds = j.at("fetch_seconds").get<double>();
      e.stored_unix = j.at("stored_unix").get<std::int64_t>();
    } catch (const std::exception&) {
      return std::nullopt;
    }
    if (hash_of(e.file.key) != hash || !plain_name(e.name) || !(e.file.fetch_seconds >= 0))
      return std::nullopt;
    if (::fstatat(sub.fd, e.name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(st.st_mode) ||
        static_cast<std::uint64_t>(st.st_size) != e.file.bytes)
      return std::nullopt;
    for (const auto& n : names_in(sub.fd))
      if (n != record_name && n != e.name) return std::nullopt;  // leftovers of a crash
    e.hash = hash;
    e.file.path = dir + "/objects/" + hash + "/" + e.name;
    return e;
  }
};

expected<disk_tier> disk_tier::open(const std::string& dir, std::uint64_t capacity,
                                    const std::string& policy, const clock& time) {
  if (capacity == 0) return invalid_input("the disk tier's budget must be more than 0 bytes");
  if (dir.empty()) return invalid_input("the disk tier needs a directory");
  policy_options options;
  options.capacity = capacity;
  auto made = make_policy(policy, options);
  if (!made) return std::move(made).error();
  struct stat st {};
  if (::lstat(dir.c_str(), &st) != 0) {
    if (errno != ENOENT) return make_error(errc::invalid_argument, os_error(dir));
    if (::mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST)
      return make_error(errc::invalid_argument, os_error("cannot create " + dir));
  } else if (S_ISLNK(st.st_mode)) {
    return invalid_input(dir + " is a symbolic link: the disk tier's directory must be a real one");
  } else if (!S_ISDIR(st.st_mode)) {
    return invalid_input(dir + " is not a directory");
  }
  auto p = std::make_unique<impl>();
  p->dir = dir;
  while (p->dir.size() > 1 && p->dir.back() == '/')
    p->dir.pop_back();
  p->capacity = capacity;
  p->policy = std::move(*made);
  p->time = &time;
  p->root = fd_guard(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (p->root.fd < 0) return make_error(errc::invalid_argument, os_error(dir));
  auto objects = open_dir_beneath(p->root.fd, "objects", dir + "/objects");
  if (!objects) return std::move(objects).error();
  p->objects = fd_guard(*objects);
  auto incoming = open_dir_beneath(p->root.fd, "incoming", dir + "/incoming");
  if (!incoming) return std::move(incoming).error();
  p->incoming = fd_guard(*incoming);

  for (const auto& n : names_in(p->incoming.fd)) {
    remove_beneath(p->incoming.fd, n);
    ++p->counters.removed_at_open;
  }
  std::vector<entry> found;
  for (const auto& n : names_in(p->objects.fd)) {
    auto e = p->read_entry(n);
    if (!e) {
      remove_beneath(p->objects.fd, n);
      ++p->counters.removed_at_open;
      continue;
    }
    found.push_back(std::move(*e));
  }
  std::sort(found.begin(), found.end(),
            [](const entry& a, const entry& b) { return a.stored_unix < b.stored_unix; });
  const auto now = time.now();
  for (auto& e : found) {
    p->used += e.file.bytes;
    p->policy->on_insert(e.file.key, e.file.bytes, e.file.fetch_seconds, now);
    p->entries[e.file.key] = std::move(e);
  }
  if (p->used > capacity) {
    const auto need = p->used - capacity;
    for (const auto& v : p->policy->choose_victims(
             "", need, [](const std::string&) { return false; }, now))
      p->drop(v, true);
  }
  return disk_tier(std::move(p));
}

disk_tier::disk_tier(std::unique_ptr<impl> p) : p_(std::move(p)) {}
disk_tier::disk_tier(disk_tier&&) noexcept = default;
disk_tier& disk_tier::operator=(disk_tier&&) noexcept = default;
disk_tier::~disk_tier() = default;

std::optional<tier_file> disk_tier::find(const std::string& key, const std::string& etag) {
  auto& p = *p_;
  auto it = p.entries.find(key);
  if (it == p.entries.end()) {
    ++p.counters.misses;
    return std::nullopt;
  }
  struct stat st {};
  const auto where = it->second.hash + "/" + it->second.name;
  const bool there = ::fstatat(p.objects.fd, where.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 &&
                     S_ISREG(st.st_mode) &&
                     static_cast<std::uint64_t>(st.st_size) == it->second.file.bytes;
  if ((!etag.empty() && etag != it->second.file.etag) || !there) {
    if (!p.pinned(key)) p.drop(key, false);  // stale, or removed behind the tier's back
    ++p.counters.misses;
    return std::nullopt;
  }
  ++p.counters.hits;
  p.policy->on_access(key, p.time->now());
  return it->second.file;
}

expected<tier_reservation> disk_tier::reserve(const std::string& key, const std::string& name,
                                              std::uint64_t bytes) {
  auto& p = *p_;
  if (!plain_name(name)) return invalid_input("'" + name + "' is not a plain file name");
  if (bytes > p.capacity)
    return make_error(errc::model_too_large, std::to_string(bytes) +
                                                 " bytes do not fit the disk tier's budget of " +
                                                 std::to_string(p.capacity) + " bytes");
  if (!p.make_room(key, bytes))
    return make_error(errc::capacity_exhausted,
                      "no room for " + std::to_string(bytes) +
                          " bytes: " + std::to_string(p.used + p.reserved) + " of " +
                          std::to_string(p.capacity) + " bytes are in files being read or written");
  tier_reservation r;
  r.key = key;
  r.name = name;
  r.bytes = bytes;
  const auto temp = hash_of(key) + "." + std::to_string(++p.next_temp);
  fd_guard f(::openat(p.incoming.fd, temp.c_str(),
                      O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600));
  if (f.fd < 0)
    return make_error(errc::load_failed, os_error("cannot create " + p.dir + "/incoming/" + temp));
  r.temp_path = p.dir + "/incoming/" + temp;
  p.reserved += bytes;
  ++p.reservations[key];
  return r;
}

expected<tier_file> disk_tier::commit(tier_reservation r, const std::string& etag,
                                      double fetch_seconds) {
  auto& p = *p_;
  const auto temp = r.temp_path.substr(r.temp_path.rfind('/') + 1);
  auto release = [&] {
    p.reserved -= r.bytes;
    if (--p.reservations[r.key] <= 0) p.reservations.erase(r.key);
  };
  auto fail = [&](error why) -> expected<tier_file> {
    ::unlinkat(p.incoming.fd, temp.c_str(), 0);
    release();
    return why;
  };
  fd_guard f(::openat(p.incoming.fd, temp.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC));
  struct stat st {};
  if (f.fd < 0 || ::fstat(f.fd, &st) != 0)
    return fail(make_error(errc::load_failed, os_error("cannot read back " + r.temp_path)));
  if (static_cast<std::uint64_t>(st.st_size) != r.bytes)
    return fail(make_error(errc::load_failed, r.key + ": " + std::to_string(st.st_size) +
                                                  " bytes were written of " +
                                                  std::to_string(r.bytes)));
  if (::fsync(f.fd) != 0)
    return fail(make_error(errc::load_failed, os_error("cannot sync " + r.temp_path)));
  p.drop(r.key, false);  // an older copy of the same object
  const auto hash = hash_of(r.key);
  auto sub = open_dir_beneath(p.objects.fd, hash.c_str(), p.dir + "/objects/" + hash);
  if (!sub) return fail(sub.error());
  fd_guard sub_fd(*sub);
  if (::renameat(p.incoming.fd, temp.c_str(), sub_fd.fd, r.name.c_str()) != 0)
    return fail(
        make_error(errc::load_failed, os_error("cannot move " + r.temp_path + " into the tier")));
  nlohmann::json j{{"key", r.key},
                   {"name", r.name},
                   {"bytes", r.bytes},
                   {"etag", etag},
                   {"fetch_seconds", fetch_seconds},
                   {"stored_unix", unix_now()}};
  if (auto w = write_synced(sub_fd.fd, record_name, j.dump(),
                            p.dir + "/objects/" + hash + "/" + record_name);
      !w) {
    remove_beneath(p.objects.fd, hash);
    release();
    return w.error();
  }
  ::fsync(sub_fd.fd);
  ::fsync(p.objects.fd);
  release();
  entry e;
  e.hash = hash;
  e.name = r.name;
  e.stored_unix = unix_now();
  e.file.key = r.key;
  e.file.path = p.dir + "/objects/" + hash + "/" + r.name;
  e.file.bytes = r.bytes;
  e.file.etag = etag;
  e.file.fetch_seconds = fetch_seconds;
  p.used += r.bytes;
  p.policy->on_insert(r.key, r.bytes, fetch_seconds, p.time->now());
  auto out = e.file;
  p.entries[r.key] = std::move(e);
  return out;
}

void disk_tier::abort(tier_reservation r) {
  auto& p = *p_;
  const auto temp = r.temp_path.substr(r.temp_path.rfind('/') + 1);
  ::unlinkat(p.incoming.fd, temp.c_str(), 0);
  p.reserved -= r.bytes;
  if (--p.reservations[r.key] <= 0) p.reservations.erase(r.key);
}

void disk_tier::pin(const std::string& key) {
  ++p_->pins[key];
}

void disk_tier::unpin(const std::string& key) {
  auto it = p_->pins.find(key);
  if (it != p_->pins.end() && --it->second <= 0) p_->pins.erase(it);
}

void disk_tier::remove(const std::string& key) {
  p_->drop(key, false);
}

tier_stats disk_tier::stats() const {
  auto s = p_->counters;
  s.capacity = p_->capacity;
  s.used = p_->used;
  s.reserved = p_->reserved;
  s.files = p_->entries.size();
  return s;
}

std::vector<tier_file> disk_tier::files() const {
  std::vector<tier_file> out;
  for (const auto& r : p_->policy->eviction_order(p_->time->now())) {
    auto it = p_->entries.find(r.model);
    if (it != p_->entries.end()) out.push_back(it->second.file);
  }
  return out;
}

const std::string& disk_tier::dir() const {
  return p_->dir;
}

}  // namespace warm::sources
