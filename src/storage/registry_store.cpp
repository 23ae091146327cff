#include "storage/registry_store.hpp"

#include <fcntl.h>
#include <sqlite3.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <limits>
#include <utility>

namespace warm {
namespace {

namespace fs = std::filesystem;

constexpr std::uint64_t max_storable = std::numeric_limits<sqlite3_int64>::max();

// Version 1: models and vmodels keyed by id. Counts are INTEGER, NULL when absent.
constexpr const char* schema_v1 = R"sql(
CREATE TABLE models (
  id TEXT PRIMARY KEY NOT NULL,
  path TEXT NOT NULL,
  version INTEGER CHECK (version >= 0),
  size_hint INTEGER CHECK (size_hint >= 0),
  auto_delete INTEGER NOT NULL CHECK (auto_delete IN (0, 1))
) WITHOUT ROWID;
CREATE TABLE vmodels (
  id TEXT PRIMARY KEY NOT NULL,
  active TEXT NOT NULL,
  target TEXT NOT NULL
) WITHOUT ROWID;
PRAGMA user_version = 1;
)sql";

// Version 2: a model's own batching options; all NULL when it has none. batch_preferred lists the
// preferred sizes as decimal numbers separated by commas ('' for none).
constexpr const char* upgrade_to_v2 = R"sql(
ALTER TABLE models ADD COLUMN batch_max INTEGER CHECK (batch_max >= 0);
ALTER TABLE models ADD COLUMN batch_delay_us INTEGER CHECK (batch_delay_us >= 0);
ALTER TABLE models ADD COLUMN batch_preferred TEXT;
ALTER TABLE models ADD COLUMN batch_queue INTEGER CHECK (batch_queue >= 0);
PRAGMA user_version = 2;
)sql";

std::string preferred_text(const std::vector<std::uint64_t>& sizes) {
  std::string out;
  for (auto n : sizes)
    out += (out.empty() ? "" : ",") + std::to_string(n);
  return out;
}

// The inverse of preferred_text; false when `text` is not a list of decimal numbers.
bool parse_preferred(const std::string& text, std::vector<std::uint64_t>& out) {
  out.clear();
  std::size_t at = 0;
  while (at < text.size()) {
    auto comma = text.find(',', at);
    auto part = text.substr(at, comma == std::string::npos ? std::string::npos : comma - at);
    if (part.empty() || part.size() > 19 ||
        part.find_first_not_of("0123456789") != std::string::npos)
      return false;
    out.push_back(std::stoull(part));
    if (comma == std::string::npos) break;
    at = comma + 1;
    if (at == text.size()) return false;  // a trailing comma
  }
  return true;
}

struct db_closer {
  // close_v2: never leaves the handle open, even if a statement were still alive.
  void operator()(sqlite3* db) const { sqlite3_close_v2(db); }
};
struct statement_finalizer {
  void operator()(sqlite3_stmt* s) const { sqlite3_finalize(s); }
};
using db_ptr = std::unique_ptr<sqlite3, db_closer>;
using statement_ptr = std::unique_ptr<sqlite3_stmt, statement_finalizer>;

std::string read_text(sqlite3_stmt* s, int column) {
  const auto* text = reinterpret_cast<const char*>(sqlite3_column_text(s, column));
  int bytes = sqlite3_column_bytes(s, column);  // after column_text: the length of that text
  return text ? std::string(text, static_cast<std::size_t>(bytes)) : std::string();
}

// Resets a cached statement and clears its bindings when a use of it ends, however it ends.
class statement_use {
 public:
  explicit statement_use(sqlite3_stmt* s) : s_(s) {}
  ~statement_use() {
    sqlite3_reset(s_);
    sqlite3_clear_bindings(s_);
  }
  statement_use(const statement_use&) = delete;
  statement_use& operator=(const statement_use&) = delete;

 private:
  sqlite3_stmt* s_;
};

errc code_for(int rc) {
  switch (rc & 0xff) {
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
      return errc::timeout;
    case SQLITE_TOOBIG:
    case SQLITE_CONSTRAINT:
      return errc::invalid_argument;
    case SQLITE_MISUSE:
    case SQLITE_RANGE:
      return errc::internal;
    default:
      return errc::unavailable;  // I/O, full disk, corrupt or foreign file, ...
  }
}

// "<path>: <what>: <SQLite's message>". Call right after the failure, before any reset.
error sqlite_error(const std::string& path, const std::string& what, sqlite3* db, int rc) {
  const char* why = db ? sqlite3_errmsg(db) : sqlite3_errstr(rc);
  return make_error(code_for(rc), path + ": " + what + ": " + why);
}

// Creates `dir` and its missing parents with mode 0700 (like `mkdir -p -m 0700`).
expected<void> make_private_dirs(const std::string& dir) {
  struct stat st {};
  if (::stat(dir.c_str(), &st) == 0) {
    if (S_ISDIR(st.st_mode)) return {};
    return make_error(errc::invalid_argument, dir + ": not a directory");
  }
  int err = errno;
  if (err == ENOTDIR) return make_error(errc::invalid_argument, dir + ": not a directory");
  if (err != ENOENT)
    return make_error(errc::unavailable, dir + ": cannot stat: " + std::strerror(err));
  std::string parent = fs::path(dir).parent_path().string();
  if (!parent.empty() && parent != dir) {
    if (auto made = make_private_dirs(parent); !made) return made;
  }
  if (::mkdir(dir.c_str(), 0700) != 0) {
    err = errno;
    // EEXIST: created meanwhile (by another process, or "a/b/" after "a/b").
    if (err == EEXIST && ::stat(dir.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) return {};
    return make_error(errc::unavailable, dir + ": cannot create directory: " + std::strerror(err));
  }
  return {};
}

// Reads one optional non-negative integer column; false when the stored value is of another type
// or negative (the file was changed outside warm).
bool read_count(sqlite3_stmt* s, int column, std::optional<std::uint64_t>& out) {
  switch (sqlite3_column_type(s, column)) {
    case SQLITE_NULL:
      out.reset();
      return true;
    case SQLITE_INTEGER: {
      sqlite3_int64 v = sqlite3_column_int64(s, column);
      if (v < 0) return false;
      out = static_cast<std::uint64_t>(v);
      return true;
    }
    default:
      return false;
  }
}

}  // namespace

namespace detail {

// The connection and its cached statements. `db` is declared first so that it is destroyed last,
// after every statement has been finalized.
struct registry_connection {
  std::string path;
  db_ptr db;
  statement_ptr begin_read;
  statement_ptr begin_write;
  statement_ptr commit;
  statement_ptr rollback;
  statement_ptr upsert_model;
  statement_ptr delete_model;
  statement_ptr upsert_vmodel;
  statement_ptr delete_vmodel;
  statement_ptr select_models;
  statement_ptr select_vmodels;

  error failure(const std::string& what, int rc) const {
    return sqlite_error(path, what, db.get(), rc);
  }

  expected<void> exec(const char* sql, const char* what) {
    int rc = sqlite3_exec(db.get(), sql, nullptr, nullptr, nullptr);
    if (rc != SQLITE_OK) return failure(what, rc);
    return {};
  }

  // Runs a one-row query such as "PRAGMA user_version" and returns its first column as text. The
  // statement is finalized before this returns, so no read stays open.
  expected<std::string> query(const char* sql, const char* what) {
    sqlite3_stmt* raw = nullptr;
    int rc = sqlite3_prepare_v2(db.get(), sql, -1, &raw, nullptr);
    statement_ptr s(raw);
    if (rc != SQLITE_OK) return failure(what, rc);
    rc = sqlite3_step(s.get());
    if (rc == SQLITE_DONE) return make_error(errc::internal, path + ": " + what + ": no row");
    if (rc != SQLITE_ROW) return failure(what, rc);
    return read_text(s.get(), 0);
  }

  expected<long long> query_int(const char* sql, const char* what) {
    auto text = query(sql, what);
    if (!text) return std::move(text).error();
    return std::strtoll(text->c_str(), nullptr, 10);
  }

  // PRAGMA quick_check: unavailable naming the file, SQLite's first finding and the recovery
  // when any page or row is damaged (or the check itself cannot read the file).
  expected<void> quick_check() {
    auto verdict = query("PRAGMA quick_check(1)", "cannot check the database");
    if (verdict && *verdict == "ok") return {};
    std::string finding = verdict ? *verdict : verdict.error().message;
    return make_error(
        errc::unavailable,
        path + ": the registry database is corrupt (" + finding +
            "); warm will not start on it. Stop warmd, move the file aside (with its -wal"
            " and -shm files) and either salvage it (sqlite3 registry.db.bad .recover |"
            " sqlite3 registry.db) or start on an empty state and register the models again");
  }

  expected<void> prepare(statement_ptr& out, const char* sql) {
    sqlite3_stmt* raw = nullptr;
    int rc = sqlite3_prepare_v3(db.get(), sql, -1, SQLITE_PREPARE_PERSISTENT, &raw, nullptr);
    out.reset(raw);
    if (rc != SQLITE_OK) return failure("cannot prepare a statement", rc);
    return {};
  }

  // Steps a statement that yields no rows to completion, then resets it.
  expected<void> run(sqlite3_stmt* s, const std::string& what) {
    statement_use use(s);
    int rc = sqlite3_step(s);
    if (rc != SQLITE_DONE) return failure(what, rc);
    return {};
  }

  // Ends an open transaction with ROLLBACK (SQLite may already have rolled it back itself).
  void abandon() {
    if (!sqlite3_get_autocommit(db.get())) {
      statement_use use(rollback.get());
      sqlite3_step(rollback.get());
    }
  }
};

}  // namespace detail

namespace {

// A transaction on a store's connection that rolls back unless committed.
class transaction {
 public:
  explicit transaction(detail::registry_connection& c) : c_(c) {}
  ~transaction() {
    if (open_) c_.abandon();
  }
  transaction(const transaction&) = delete;
  transaction& operator=(const transaction&) = delete;

  expected<void> begin(bool write) {
    auto begun =
        c_.run(write ? c_.begin_write.get() : c_.begin_read.get(), "cannot begin a transaction");
    open_ = begun.has_value();
    return begun;
  }

  expected<void> commit() {
    auto done = c_.run(c_.commit.get(), "cannot commit");
    if (done) open_ = false;  // on failure the destructor rolls back
    return done;
  }

 private:
  detail::registry_connection& c_;
  bool open_ = false;
};

// Binds an optional count, refusing values SQLite cannot hold.
expected<void> bind_count(detail::registry_connection& c, sqlite3_stmt* s, int index,
                          const std::optional<std::uint64_t>& value, const std::string& id,
                          const char* field) {
  int rc = SQLITE_OK;
  if (!value) {
    rc = sqlite3_bind_null(s, index);
  } else if (*value > max_storable) {
    return make_error(errc::invalid_argument,
                      c.path + ": model '" + id + "': " + field + " " + std::to_string(*value) +
                          " exceeds the largest storable value " + std::to_string(max_storable));
  } else {
    rc = sqlite3_bind_int64(s, index, static_cast<sqlite3_int64>(*value));
  }
  if (rc != SQLITE_OK) return c.failure("cannot bind " + std::string(field), rc);
  return {};
}

expected<void> bind_text(detail::registry_connection& c, sqlite3_stmt* s, int index,
                         const std::string& text) {
  // SQLITE_STATIC: the string outlives the statement's use (reset clears the binding).
  int rc = sqlite3_bind_text64(s, index, text.data(), text.size(), SQLITE_STATIC, SQLITE_UTF8);
  if (rc != SQLITE_OK) return c.failure("cannot bind a text value", rc);
  return {};
}

// Runs one change inside the caller's transaction.
expected<void> apply_change(detail::registry_connection& c, const registry_change& change) {
  if (const auto* put = std::get_if<put_model>(&change)) {
    const model_record& r = put->record;
    sqlite3_stmt* s = c.upsert_model.get();
    statement_use use(s);
    if (auto b = bind_text(c, s, 1, r.id); !b) return b;
    if (auto b = bind_text(c, s, 2, r.path); !b) return b;
    if (auto b = bind_count(c, s, 3, r.version, r.id, "version"); !b) return b;
    if (auto b = bind_count(c, s, 4, r.size_hint, r.id, "size_hint"); !b) return b;
    if (int rc = sqlite3_bind_int(s, 5, r.auto_delete ? 1 : 0); rc != SQLITE_OK)
      return c.failure("cannot bind auto_delete", rc);
    std::optional<std::uint64_t> max_batch, delay_us, queue;
    std::string preferred;
    if (r.batching) {
      max_batch = r.batching->max_batch;
      delay_us = static_cast<std::uint64_t>(
          std::max<std::int64_t>(0, r.batching->max_queue_delay.count()));
      queue = r.batching->max_queue;
      preferred = preferred_text(r.batching->preferred_batch);
    }
    if (auto b = bind_count(c, s, 6, max_batch, r.id, "batch_max"); !b) return b;
    if (auto b = bind_count(c, s, 7, delay_us, r.id, "batch_delay_us"); !b) return b;
    int rc = r.batching ? sqlite3_bind_text64(s, 8, preferred.data(), preferred.size(),
                                              SQLITE_TRANSIENT, SQLITE_UTF8)
                        : sqlite3_bind_null(s, 8);
    if (rc != SQLITE_OK) return c.failure("cannot bind batch_preferred", rc);
    if (auto b = bind_count(c, s, 9, queue, r.id, "batch_queue"); !b) return b;
    return c.run(s, "cannot store model '" + r.id + "'");
  }
  if (const auto* put = std::get_if<put_vmodel>(&change)) {
    const vmodel_record& r = put->record;
    sqlite3_stmt* s = c.upsert_vmodel.get();
    statement_use use(s);
    if (auto b = bind_text(c, s, 1, r.id); !b) return b;
    if (auto b = bind_text(c, s, 2, r.active); !b) return b;
    if (auto b = bind_text(c, s, 3, r.target); !b) return b;
    return c.run(s, "cannot store vmodel '" + r.id + "'");
  }
  const bool model = std::holds_alternative<erase_model>(change);
  const std::string& id =
      model ? std::get<erase_model>(change).id : std::get<erase_vmodel>(change).id;
  sqlite3_stmt* s = model ? c.delete_model.get() : c.delete_vmodel.get();
  statement_use use(s);
  if (auto b = bind_text(c, s, 1, id); !b) return b;
  return c.run(s, std::string("cannot erase ") + (model ? "model" : "vmodel") + " '" + id + "'");
}

error moved_from() {
  return make_error(errc::internal, "registry store used after a move");
}

}  // namespace

registry_store::registry_store(std::string path,
                               std::unique_ptr<detail::registry_connection> connection)
    : path_(std::move(path)), connection_(std::move(connection)) {}

registry_store::registry_store(registry_store&& other) noexcept = default;
registry_store& registry_store::operator=(registry_store&& other) noexcept = default;
registry_store::~registry_store() = default;

expected<registry_store> registry_store::open(const std::string& state_dir) {
  if (state_dir.empty())
    return make_error(errc::invalid_argument, "registry store: the state directory is empty");
  if (auto made = make_private_dirs(state_dir); !made) return std::move(made).error();

  auto c = std::make_unique<detail::registry_connection>();
  c->path = (fs::path(state_dir) / "registry.db").string();
  // Born 0600 (SQLite gives its journal and WAL files the database's mode), and a database left
  // readable by others by an older warmd is tightened.
  if (int fd = ::open(c->path.c_str(), O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600); fd >= 0) {
    struct stat st {};
    if (::fstat(fd, &st) == 0 && (st.st_mode & 077) != 0) ::fchmod(fd, st.st_mode & 0700);
    ::close(fd);
  }
  sqlite3* raw = nullptr;
  int rc =
      sqlite3_open_v2(c->path.c_str(), &raw,
                      SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, nullptr);
  c->db.reset(raw);  // open_v2 allocates a handle even when it fails
  if (rc != SQLITE_OK) {
    auto e = c->failure("cannot open", rc);
    e.code = errc::unavailable;
    return e;
  }
  sqlite3_busy_timeout(c->db.get(), static_cast<int>(busy_timeout.count()));

  // The first statement that reads the file: a file that is not a database fails here, untouched.
  auto mode = c->query("PRAGMA journal_mode = WAL", "cannot enable WAL journaling");
  if (!mode) {
    auto e = std::move(mode).error();
    if (e.code != errc::timeout) e.code = errc::unavailable;
    return e;
  }
  if (*mode != "wal")
    return make_error(errc::unavailable,
                      c->path + ": cannot enable WAL journaling (the mode stays '" + *mode + "')");
  if (auto done = c->exec("PRAGMA synchronous = FULL", "cannot set synchronous=FULL"); !done)
    return std::move(done).error();

  for (auto [out, sql] :
       {std::pair{&c->begin_read, "BEGIN DEFERRED"}, std::pair{&c->begin_write, "BEGIN IMMEDIATE"},
        std::pair{&c->commit, "COMMIT"}, std::pair{&c->rollback, "ROLLBACK"}}) {
    if (auto prepared = c->prepare(*out, sql); !prepared) return std::move(prepared).error();
  }

  const char* read_version = "PRAGMA user_version";
  const char* cannot_read_version = "cannot read the schema version";
  auto version = c->query_int(read_version, cannot_read_version);
  if (!version) return std::move(version).error();
  if (*version == 0) {
    // A new (empty) file: create the schema, unless another process did so meanwhile.
    transaction txn(*c);
    if (auto begun = txn.begin(true); !begun) return std::move(begun).error();
    version = c->query_int(read_version, cannot_read_version);
    if (!version) return std::move(version).error();
    if (*version == 0) {
      auto objects = c->query_int("SELECT count(*) FROM sqlite_master", "cannot read the schema");
      if (!objects) return std::move(objects).error();
      if (*objects != 0)
        return make_error(errc::invalid_argument,
                          c->path + ": a SQLite database without warm's registry schema");
      if (auto made = c->exec(schema_v1, "cannot create the schema"); !made)
        return std::move(made).error();
      version = 1;
    }
    if (auto committed = txn.commit(); !committed) return std::move(committed).error();
  }
  if (*version == 1) {
    // Written by an older warm: add what version 2 adds, unless another process did meanwhile.
    transaction txn(*c);
    if (auto begun = txn.begin(true); !begun) return std::move(begun).error();
    version = c->query_int(read_version, cannot_read_version);
    if (!version) return std::move(version).error();
    if (*version == 1) {
      if (auto made = c->exec(upgrade_to_v2, "cannot upgrade the schema to version 2"); !made)
        return std::move(made).error();
      version = 2;
    }
    if (auto committed = txn.commit(); !committed) return std::move(committed).error();
  }
  if (*version != schema_version)
    return make_error(errc::invalid_argument,
                      c->path + ": schema version " + std::to_string(*version) +
                          " is unknown to this warm (it reads version " +
                          std::to_string(schema_version) + "); was it written by a newer warm?");

  // A file whose pages were damaged (a disk fault, a copy cut short, a hand edit) must not start
  // as an empty registry: SQLite reads a damaged b-tree as fewer rows, or fails only later.
  if (auto checked = c->quick_check(); !checked) return std::move(checked).error();

  const std::pair<statement_ptr*, const char*> statements[] = {
      {&c->upsert_model,
       "INSERT INTO models (id, path, version, size_hint, auto_delete, batch_max, batch_delay_us,"
       " batch_preferred, batch_queue) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)"
       " ON CONFLICT (id) DO UPDATE SET path = excluded.path, version = excluded.version,"
       " size_hint = excluded.size_hint, auto_delete = excluded.auto_delete,"
       " batch_max = excluded.batch_max, batch_delay_us = excluded.batch_delay_us,"
       " batch_preferred = excluded.batch_preferred, batch_queue = excluded.batch_queue"},
      {&c->delete_model, "DELETE FROM models WHERE id = ?1"},
      {&c->upsert_vmodel,
       "INSERT INTO vmodels (id, active, target) VALUES (?1, ?2, ?3)"
       " ON CONFLICT (id) DO UPDATE SET active = excluded.active, target = excluded.target"},
      {&c->delete_vmodel, "DELETE FROM vmodels WHERE id = ?1"},
      {&c->select_models,
       "SELECT id, path, version, size_hint, auto_delete, batch_max, batch_delay_us, "
       "batch_preferred,"
       " batch_queue FROM models ORDER BY id"},
      {&c->select_vmodels, "SELECT id, active, target FROM vmodels ORDER BY id"},
  };
  for (const auto& [out, sql] : statements) {
    if (auto prepared = c->prepare(*out, sql); !prepared) return std::move(prepared).error();
  }

  std::string path = c->path;
  return registry_store(std::move(path), std::move(c));
}

expected<registry_contents> registry_store::load() const {
  if (!connection_) return moved_from();
  detail::registry_connection& c = *connection_;
  // One read transaction: both lists come from the same commit.
  transaction txn(c);
  if (auto begun = txn.begin(false); !begun) return std::move(begun).error();

  registry_contents out;
  {
    sqlite3_stmt* s = c.select_models.get();
    statement_use use(s);
    int rc;
    while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
      model_record r;
      r.id = read_text(s, 0);
      r.path = read_text(s, 1);
      if (!read_count(s, 2, r.version) || !read_count(s, 3, r.size_hint))
        return make_error(
            errc::unavailable,
            path_ + ": model '" + r.id + "': corrupt row (a count is not a non-negative integer)");
      r.auto_delete = sqlite3_column_int64(s, 4) != 0;
      std::optional<std::uint64_t> max_batch, delay_us, queue;
      const bool counts =
          read_count(s, 5, max_batch) && read_count(s, 6, delay_us) && read_count(s, 8, queue);
      if (counts && max_batch) {
        batching_options b;
        b.max_batch = *max_batch;
        b.max_queue_delay =
            std::chrono::microseconds(static_cast<std::int64_t>(std::min<std::uint64_t>(
                delay_us.value_or(0),
                static_cast<std::uint64_t>(std::chrono::microseconds::max().count()))));
        b.max_queue = queue.value_or(b.max_queue);
        if (sqlite3_column_type(s, 7) != SQLITE_TEXT ||
            !parse_preferred(read_text(s, 7), b.preferred_batch))
          return make_error(errc::unavailable,
                            path_ + ": model '" + r.id + "': corrupt row (batch_preferred)");
        r.batching = std::move(b);
      }
      if (!counts)
        return make_error(
            errc::unavailable,
            path_ + ": model '" + r.id + "': corrupt row (a count is not a non-negative integer)");
      out.models.push_back(std::move(r));
    }
    if (rc != SQLITE_DONE) return c.failure("cannot read models", rc);
  }
  {
    sqlite3_stmt* s = c.select_vmodels.get();
    statement_use use(s);
    int rc;
    while ((rc = sqlite3_step(s)) == SQLITE_ROW)
      out.vmodels.push_back(vmodel_record{read_text(s, 0), read_text(s, 1), read_text(s, 2)});
    if (rc != SQLITE_DONE) return c.failure("cannot read vmodels", rc);
  }
  if (auto committed = txn.commit(); !committed) return std::move(committed).error();
  return out;
}

expected<void> registry_store::apply(const std::vector<registry_change>& batch) {
  if (!connection_) return moved_from();
  if (batch.empty()) return {};
  detail::registry_connection& c = *connection_;
  transaction txn(c);
  if (auto begun = txn.begin(true); !begun) return begun;
  // Each change is checked as it is bound; a failure midway leaves the transaction to roll back.
  for (const auto& change : batch) {
    if (auto done = apply_change(c, change); !done) return done;
  }
  return txn.commit();
}

}  // namespace warm
