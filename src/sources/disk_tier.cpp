#include "sources/disk_tier.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstring>
#include <map>
#include <nlohmann/json.hpp>
#include <utility>

#include "policy/cache_policy.hpp"

namespace warm::sources {
namespace {

constexpr const char* record_name = "entry.json";
constexpr std::size_t max_record_bytes = 64 * 1024;  // a longer record is not one the tier wrote
constexpr std::size_t max_key_bytes = 16 * 1024;     // so that key + etag + name fit a record
constexpr std::size_t max_etag_bytes = 4 * 1024;
constexpr int max_depth = 16;  // how deep a stray tree is removed (fds held at once)
constexpr int dir_flags = O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC;

// Owns a file descriptor (closed on destruction).
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

// `what` and the text of errno as it is on entry.
std::string os_error(const std::string& what, int code = errno) {
  return what + ": " + std::strerror(code);
}

// The first 32 hex digits of SHA-256(key): a directory name made by the tier, never by a URL.
// Empty only if libcrypto fails.
std::string hash_of(const std::string& key) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  if (EVP_Digest(key.data(), key.size(), digest, &length, EVP_sha256(), nullptr) != 1 ||
      length < 16)
    return {};
  static const char* hex = "0123456789abcdef";
  std::string out;
  for (unsigned i = 0; i < 16; ++i) {
    out.push_back(hex[digest[i] >> 4]);
    out.push_back(hex[digest[i] & 15]);
  }
  return out;
}

// A name that stays inside the directory it is used in, and is not the record's.
bool plain_name(const std::string& name) {
  return !name.empty() && name.size() <= 255 && name != "." && name != ".." &&
         name.find('/') == std::string::npos && name.find('\0') == std::string::npos &&
         name != record_name;
}

// Whether `text` can be written into a record (JSON wants valid UTF-8).
bool json_text(const std::string& text) {
  try {
    (void)nlohmann::json(text).dump();
    return true;
  } catch (const nlohmann::json::exception&) {
    return false;
  }
}

// Nanoseconds since the Unix epoch: the records' stored time outlives the process, so it is wall
// time, not the tier's (steady) clock.
std::int64_t wall_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
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

// Removes `name` beneath `parent`: a file or a link by unlinking it (a link's target is never
// touched), a directory with what it holds, up to max_depth levels.
void remove_beneath(int parent, const std::string& name, int depth = 0) {
  struct stat st {};
  if (::fstatat(parent, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) return;
  if (!S_ISDIR(st.st_mode)) {
    ::unlinkat(parent, name.c_str(), 0);
    return;
  }
  if (depth < max_depth) {
    fd_guard sub(::openat(parent, name.c_str(), dir_flags));
    if (sub.fd >= 0)
      for (const auto& n : names_in(sub.fd))
        remove_beneath(sub.fd, n, depth + 1);
  }
  ::unlinkat(parent, name.c_str(), AT_REMOVEDIR);
}

// The directory `name` beneath `parent`, created (0700) if missing; never a link.
expected<int> open_dir_beneath(int parent, const std::string& name, const std::string& shown) {
  if (::mkdirat(parent, name.c_str(), 0700) != 0 && errno != EEXIST)
    return make_error(errc::load_failed, os_error("cannot create " + shown));
  const int fd = ::openat(parent, name.c_str(), dir_flags);
  if (fd < 0) return invalid_input(os_error(shown + " is not a directory the tier can use"));
  return fd;
}

// Writes all of `text` to `fd`.
bool write_all(int fd, const std::string& text) {
  std::size_t done = 0;
  while (done < text.size()) {
    const auto n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      if (n == 0) errno = EIO;
      return false;
    }
    done += static_cast<std::size_t>(n);
  }
  return true;
}

// Writes `text` as `to` beneath `to_dir`: first into `temp` beneath `temp_dir` (created, never
// replacing anything), synced, then renamed. On failure nothing of it is left.
expected<void> write_synced(int temp_dir, const std::string& temp, int to_dir, const char* to,
                            const std::string& text, const std::string& shown) {
  fd_guard f(
      ::openat(temp_dir, temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600));
  if (f.fd < 0) return make_error(errc::load_failed, os_error("cannot write " + shown));
  if (!write_all(f.fd, text) || ::fsync(f.fd) != 0 ||
      ::renameat(temp_dir, temp.c_str(), to_dir, to) != 0) {
    const auto why = os_error("cannot write " + shown);
    ::unlinkat(temp_dir, temp.c_str(), 0);
    return make_error(errc::load_failed, why);
  }
  return {};
}

// A complete file as the tier tracks it.
struct entry {
  tier_file file;
  std::string hash, name;
  std::int64_t stored_ns = 0;  // when it was committed (wall time)
};

// A reservation as the tier handed it out; commit and abort trust this, not the caller's copy.
struct pending {
  std::string key, name, hash, temp;  // temp: its name in incoming/
  std::uint64_t bytes = 0;
};

}  // namespace

struct disk_tier::impl {
  std::string dir;
  fd_guard root, objects, incoming;  // root holds the tier's lock (flock)
  std::uint64_t capacity = 0, used = 0, reserved = 0;
  std::unique_ptr<cache_policy> policy;
  const clock* time = nullptr;
  std::map<std::string, entry> entries;      // by key
  std::map<std::string, int> pins;           // by key
  std::map<std::string, pending> writes;     // by temp_path: reservations in flight
  std::map<std::string, int> writes_by_key;  // how many of them each key has
  std::uint64_t next_temp = 0;
  std::int64_t last_stored_ns = 0;
  tier_stats counters;

  bool pinned(const std::string& key) const {
    return pins.count(key) > 0 || writes_by_key.count(key) > 0;
  }

  // Bytes neither used nor reserved.
  std::uint64_t room() const {
    return used + reserved >= capacity ? 0 : capacity - used - reserved;
  }

  // A stored time later than every other one of this tier, so that the order survives a clock
  // that steps back.
  std::int64_t next_stored_ns() {
    last_stored_ns = std::max(wall_ns(), last_stored_ns + 1);
    return last_stored_ns;
  }

  // Drops `key`'s file and record. `evicted`: the policy chose it.
  void drop(const std::string& key, bool evicted) {
    auto it = entries.find(key);
    if (it == entries.end()) return;
    fd_guard sub(::openat(objects.fd, it->second.hash.c_str(), dir_flags));
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

  // Evicts unpinned entries, in the policy's order, until `bytes` more fit; false (nothing
  // evicted) when they cannot.
  bool make_room(const std::string& incoming_key, std::uint64_t bytes) {
    if (bytes <= room()) return true;
    const auto need = bytes - room();
    auto victims = policy->choose_victims(
        incoming_key, need, [this](const std::string& k) { return pinned(k); }, time->now());
    std::uint64_t freed = 0;
    for (const auto& v : victims) {
      auto it = entries.find(v);
      if (it != entries.end() && !pinned(v)) freed += it->second.file.bytes;
    }
    if (freed < need) return false;
    for (const auto& v : victims)
      if (!pinned(v)) drop(v, true);
    return true;
  }

  // Evicts until the files fit the capacity (open, nothing pinned yet).
  void evict_to_capacity() {
    if (used <= capacity) return;
    for (const auto& v : policy->choose_victims(
             "", used - capacity, [](const std::string&) { return false; }, time->now()))
      drop(v, true);
    while (used > capacity && !entries.empty()) {  // a policy that answered too little
      auto order = policy->eviction_order(time->now());
      const bool known = !order.empty() && entries.count(order.front().model) > 0;
      drop(known ? order.front().model : entries.begin()->first, true);
    }
  }

  // Forgets the reservation `it` and gives its bytes back.
  void release(std::map<std::string, pending>::iterator it) {
    reserved -= it->second.bytes;
    auto k = writes_by_key.find(it->second.key);
    if (k != writes_by_key.end() && --k->second <= 0) writes_by_key.erase(k);
    writes.erase(it);
  }

  // Reads and checks the entry in objects/<hash>; nullopt (to be removed) when anything is off.
  std::optional<entry> read_entry(const std::string& hash) {
    struct stat st {};
    if (::fstatat(objects.fd, hash.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISDIR(st.st_mode))
      return std::nullopt;
    fd_guard sub(::openat(objects.fd, hash.c_str(), dir_flags));
    if (sub.fd < 0) return std::nullopt;
    fd_guard rec(::openat(sub.fd, record_name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK));
    if (rec.fd < 0 || ::fstat(rec.fd, &st) != 0 || !S_ISREG(st.st_mode) ||
        static_cast<std::uint64_t>(st.st_size) > max_record_bytes)
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
      const auto seconds = j.at("stored_unix").get<std::int64_t>();
      e.stored_ns =
          j.contains("stored_ns") ? j.at("stored_ns").get<std::int64_t>() : seconds * 1'000'000'000;
    } catch (const std::exception&) {
      return std::nullopt;
    }
    if (hash_of(e.file.key) != hash || !plain_name(e.name) ||
        !std::isfinite(e.file.fetch_seconds) || e.file.fetch_seconds < 0)
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

  // Empties incoming/ and takes in every complete entry of objects/, oldest stored first.
  void rescan() {
    for (const auto& n : names_in(incoming.fd)) {
      remove_beneath(incoming.fd, n);
      ++counters.removed_at_open;
    }
    std::vector<entry> found;
    for (const auto& n : names_in(objects.fd)) {
      auto e = read_entry(n);
      if (!e) {
        remove_beneath(objects.fd, n);
        ++counters.removed_at_open;
        continue;
      }
      found.push_back(std::move(*e));
    }
    std::sort(found.begin(), found.end(), [](const entry& a, const entry& b) {
      return a.stored_ns != b.stored_ns ? a.stored_ns < b.stored_ns : a.file.key < b.file.key;
    });
    const auto now = time->now();
    for (auto& e : found) {
      used += e.file.bytes;
      last_stored_ns = std::max(last_stored_ns, e.stored_ns);
      policy->on_insert(e.file.key, e.file.bytes, e.file.fetch_seconds, now);
      entries[e.file.key] = std::move(e);
    }
    evict_to_capacity();
  }
};

expected<disk_tier> disk_tier::open(const std::string& dir, std::uint64_t capacity,
                                    const std::string& policy, const clock& time) {
  if (capacity == 0) return invalid_input("the disk tier's budget must be more than 0 bytes");
  std::string path = dir;
  while (path.size() > 1 && path.back() == '/')  // "link/" would follow the link
    path.pop_back();
  if (path.empty()) return invalid_input("the disk tier needs a directory");
  policy_options options;
  options.capacity = capacity;
  auto made = make_policy(policy, options);
  if (!made) return std::move(made).error();

  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) {
    if (errno != ENOENT) return invalid_input(os_error(path));
    if (::mkdir(path.c_str(), 0700) != 0 && errno != EEXIST)
      return invalid_input(os_error("cannot create " + path));
  } else if (S_ISLNK(st.st_mode)) {
    return invalid_input(path +
                         " is a symbolic link: the disk tier's directory must be a real one");
  } else if (!S_ISDIR(st.st_mode)) {
    return invalid_input(path + " is not a directory");
  }
  auto p = std::make_unique<impl>();
  p->dir = path;
  p->capacity = capacity;
  p->policy = std::move(*made);
  p->time = &time;
  p->root = fd_guard(::open(path.c_str(), dir_flags));  // O_NOFOLLOW: a link swapped in is refused
  if (p->root.fd < 0) return invalid_input(os_error(path + " cannot be opened as a directory"));
  if (::flock(p->root.fd, LOCK_EX | LOCK_NB) != 0)
    return make_error(errc::unavailable, errno == EWOULDBLOCK
                                             ? path + " is in use by another disk tier"
                                             : os_error("cannot lock " + path));
  auto objects = open_dir_beneath(p->root.fd, "objects", path + "/objects");
  if (!objects) return std::move(objects).error();
  p->objects = fd_guard(*objects);
  auto incoming = open_dir_beneath(p->root.fd, "incoming", path + "/incoming");
  if (!incoming) return std::move(incoming).error();
  p->incoming = fd_guard(*incoming);
  p->rescan();
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
    if (!p.pins.count(key)) p.drop(key, false);  // stale, or removed behind the tier's back
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
  if (key.empty() || key.size() > max_key_bytes || !json_text(key))
    return invalid_input("the disk tier takes keys of 1 to " + std::to_string(max_key_bytes) +
                         " bytes of UTF-8");
  if (!plain_name(name) || !json_text(name))
    return invalid_input("'" + name + "' is not a plain file name");
  const auto hash = hash_of(key);
  if (hash.empty()) return make_error(errc::internal, "SHA-256 failed in libcrypto");
  if (bytes > p.capacity)
    return make_error(errc::model_too_large, std::to_string(bytes) +
                                                 " bytes do not fit the disk tier's budget of " +
                                                 std::to_string(p.capacity) + " bytes");
  if (!p.make_room(key, bytes))
    return make_error(errc::capacity_exhausted,
                      "no room for " + std::to_string(bytes) +
                          " bytes: " + std::to_string(p.used + p.reserved) + " of " +
                          std::to_string(p.capacity) +
                          " bytes are taken and files being read or written keep the rest");
  pending w{key, name, hash, hash + "." + std::to_string(++p.next_temp), bytes};
  fd_guard f(::openat(p.incoming.fd, w.temp.c_str(),
                      O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600));
  if (f.fd < 0)
    return make_error(errc::load_failed,
                      os_error("cannot create " + p.dir + "/incoming/" + w.temp));
  tier_reservation r{key, name, p.dir + "/incoming/" + w.temp, bytes};
  p.reserved += bytes;
  ++p.writes_by_key[key];
  p.writes[r.temp_path] = std::move(w);
  return r;
}

expected<tier_file> disk_tier::commit(tier_reservation r, const std::string& etag,
                                      double fetch_seconds) {
  auto& p = *p_;
  auto at = p.writes.find(r.temp_path);
  if (at == p.writes.end())
    return invalid_input("'" + r.temp_path +
                         "' is not a reservation of this disk tier (committed or aborted already)");
  const pending w = at->second;
  auto fail = [&](error why) -> expected<tier_file> {
    ::unlinkat(p.incoming.fd, w.temp.c_str(), 0);
    p.release(at);
    return why;
  };
  if (r.key != w.key || r.name != w.name || r.bytes != w.bytes)
    return fail(invalid_input("the reservation for '" + w.key + "' was changed after reserve"));
  if (etag.size() > max_etag_bytes || !json_text(etag))
    return fail(invalid_input("the entity tag of '" + w.key + "' is not " +
                              std::to_string(max_etag_bytes) + " bytes of UTF-8 or fewer"));
  if (!std::isfinite(fetch_seconds) || fetch_seconds < 0) fetch_seconds = 0;

  fd_guard f(
      ::openat(p.incoming.fd, w.temp.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK));
  struct stat st {};
  if (f.fd < 0 || ::fstat(f.fd, &st) != 0 || !S_ISREG(st.st_mode))
    return fail(make_error(errc::load_failed, os_error("cannot read back " + r.temp_path)));
  if (static_cast<std::uint64_t>(st.st_size) != w.bytes)
    return fail(make_error(errc::load_failed, w.key + ": " + std::to_string(st.st_size) +
                                                  " bytes were written of " +
                                                  std::to_string(w.bytes)));
  if (::fsync(f.fd) != 0)
    return fail(make_error(errc::load_failed, os_error("cannot sync " + r.temp_path)));

  const auto shown = p.dir + "/objects/" + w.hash;
  p.drop(w.key, false);                  // an older copy: its record goes first
  remove_beneath(p.objects.fd, w.hash);  // and anything else that is in the way
  auto sub = open_dir_beneath(p.objects.fd, w.hash, shown);
  if (!sub) return fail(sub.error());
  fd_guard sub_fd(*sub);
  if (::renameat(p.incoming.fd, w.temp.c_str(), sub_fd.fd, w.name.c_str()) != 0)
    return fail(
        make_error(errc::load_failed, os_error("cannot move " + r.temp_path + " into " + shown)));

  entry e;
  e.hash = w.hash;
  e.name = w.name;
  e.stored_ns = p.next_stored_ns();
  e.file = tier_file{w.key, shown + "/" + w.name, w.bytes, etag, fetch_seconds};
  const nlohmann::json record{{"key", w.key},
                              {"name", w.name},
                              {"bytes", w.bytes},
                              {"etag", etag},
                              {"fetch_seconds", fetch_seconds},
                              {"stored_unix", e.stored_ns / 1'000'000'000},
                              {"stored_ns", e.stored_ns}};
  auto written = write_synced(p.incoming.fd, w.temp + ".json", sub_fd.fd, record_name,
                              record.dump(), shown + "/" + record_name);
  if (written && (::fsync(sub_fd.fd) != 0 || ::fsync(p.objects.fd) != 0))
    written = make_error(errc::load_failed, os_error("cannot sync " + shown));
  if (!written) {
    ::unlinkat(sub_fd.fd, record_name, 0);
    remove_beneath(p.objects.fd, w.hash);
    return fail(written.error());
  }
  p.release(at);
  p.used += w.bytes;
  p.policy->on_insert(w.key, w.bytes, fetch_seconds, p.time->now());
  auto out = e.file;
  p.entries[w.key] = std::move(e);
  return out;
}

void disk_tier::abort(tier_reservation r) {
  auto& p = *p_;
  auto at = p.writes.find(r.temp_path);
  if (at == p.writes.end()) return;  // committed or aborted already
  ::unlinkat(p.incoming.fd, at->second.temp.c_str(), 0);
  p.release(at);
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
