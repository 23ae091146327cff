// The durable registry: registered models and virtual models, kept in SQLite at
// <state_dir>/registry.db so that a restarted daemon finds what was registered before. Pure
// storage, no CAF: the registry actor owns one store and calls it; tools may open it too.
//
// Contract:
//  1. A batch given to apply() is one transaction: when apply() succeeds every change in it is
//     committed and on disk (WAL journal, synchronous=FULL: SQLite fsyncs before COMMIT returns);
//     when it fails none of it is applied.
//  2. load() returns exactly what the committed batches left, each list sorted by id (byte order,
//     the order of std::string's operator<).
//  3. The store holds what it is given: it checks no references (a vmodel naming an unknown
//     model is stored as is). Keeping the registry consistent is the caller's job.
//  4. A store is not thread-safe: use it from one thread (actor) at a time. Several stores, in
//     this process or others, may open the same file; SQLite serializes their writes, waiting up
//     to `busy_timeout` for a lock before failing with errc::timeout.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "storage/registry_storage.hpp"

namespace warm {

namespace detail {
struct registry_connection;  // the SQLite connection and its statements, defined in the .cpp
}  // namespace detail

class registry_store final : public registry_storage {
 public:
  // The schema version this build writes and reads (kept in SQLite's user_version pragma).
  static constexpr int schema_version = 2;
  // How long a statement waits for another connection's lock before failing with timeout.
  static constexpr std::chrono::milliseconds busy_timeout{5000};

  // Opens `<state_dir>/registry.db`, creating it (and `state_dir` and any missing parents, mode
  // 0700) if needed, and creating the schema in a new file. Errors name the path:
  //  - invalid_argument: `state_dir` is empty or not a directory; the file is a SQLite database
  //    of a newer schema version than `schema_version`, or one without warm's schema (a file of
  //    an older version is upgraded in place, in one transaction);
  //  - unavailable: the directory cannot be created, the file cannot be opened, is not a SQLite
  //    database (it is left untouched), WAL journaling cannot be enabled, or the file fails
  //    SQLite's `PRAGMA quick_check` (damaged pages; the message says how to recover);
  //  - timeout: another connection held a lock for longer than `busy_timeout`.
  static expected<registry_store> open(const std::string& state_dir);

  // Move-only. The destructor finalizes the cached statements and closes the database. A
  // moved-from store may only be destroyed or assigned to (load/apply answer errc::internal).
  registry_store(registry_store&& other) noexcept;
  registry_store& operator=(registry_store&& other) noexcept;
  registry_store(const registry_store&) = delete;
  registry_store& operator=(const registry_store&) = delete;
  ~registry_store();

  // Everything stored, each list sorted by id. unavailable on a read error or a corrupt row.
  expected<registry_contents> load() const;
  expected<registry_contents> load() override { return std::as_const(*this).load(); }

  // Applies every change of `batch`, in order, in one transaction (contract 1). Fails with
  // invalid_argument, naming the id and field, when a number exceeds INT64_MAX (SQLite's largest
  // integer); with timeout when the write lock cannot be had; with unavailable on other SQLite
  // errors (disk full, I/O). An empty batch succeeds without touching the file.
  expected<void> apply(const std::vector<registry_change>& batch) override;

  // The database file, `<state_dir>/registry.db`.
  const std::string& path() const { return path_; }
  std::string where() const override { return path_; }

 private:
  registry_store(std::string path, std::unique_ptr<detail::registry_connection> connection);

  std::string path_;
  std::unique_ptr<detail::registry_connection> connection_;  // null once moved from
};

}  // namespace warm
