// Load-failure records with expiry (after ModelMesh). Pure logic: the caller passes the
// time, so tests use a fake clock and never sleep.
//
// A failed load records (model, device, time, error). A record blocks loading that model on that
// device until it expires (`expiry` after it was made). A model with an unexpired record on
// every candidate device fails fast with its most recent error; once any record expires, the
// next request tries again on that device. A successful load or an unregistration clears the
// model's records.
#pragma once

#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/timestamp.hpp"
#include "warm/error.hpp"

namespace warm {

struct failure_record {
  std::string model;
  std::string device;
  timestamp when{};
  timestamp expires{};
  warm::error error;
};

class failure_table {
 public:
  // Records expire `expiry` after they are made (the runtime's default: 10 minutes). Must be
  // positive.
  explicit failure_table(std::chrono::nanoseconds expiry) : expiry_(expiry) {}

  std::chrono::nanoseconds expiry() const { return expiry_; }

  // Records a failed load; replaces an older record for the same model and device. Drops the
  // expired records first, at most once per quarter of the expiry: whenever a record is added,
  // none older than 1.25 × the expiry is held, so memory follows the recent failure rate.
  void record(const std::string& model, const std::string& device, timestamp now,
              warm::error error);
  // The same with its own lifetime (at least 1 ms): a record of a model a device lost when its
  // process died expires when the device is expected back, not after the table's expiry.
  void record(const std::string& model, const std::string& device, timestamp now, warm::error error,
              std::chrono::nanoseconds lasting);

  // True when `device` has no unexpired record for `model` at `now`.
  bool eligible(const std::string& model, const std::string& device, timestamp now) const;

  // The first of `devices` eligible for `model` at `now`, in the given order; nullopt when none.
  std::optional<std::string> first_eligible(const std::string& model,
                                            const std::vector<std::string>& devices,
                                            timestamp now) const;

  // When the first of the model's unexpired records expires; `now` if it has none. A model that
  // gave up loading fails fast until then.
  timestamp next_expiry(const std::string& model, timestamp now) const;

  // The model's most recent unexpired record, the error to fail fast with; nullopt if none.
  std::optional<failure_record> latest(const std::string& model, timestamp now) const;

  // Forgets the model's records (after a successful load, or unregistration).
  void clear(const std::string& model);

  // Drops every record expired at `now`; returns how many were dropped.
  std::size_t expire(timestamp now);

  // Unexpired records at `now`, by model then device (for inspection).
  std::vector<failure_record> snapshot(timestamp now) const;

  std::size_t size() const;

 private:
  std::chrono::nanoseconds expiry_;
  timestamp next_sweep_{};  // when record() next drops expired records
  std::map<std::string, std::map<std::string, failure_record>> records_;  // model → device → record
};

}  // namespace warm
