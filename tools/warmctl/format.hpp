// warmctl's output: warm's value types as JSON documents (--json) and as aligned tables for
// people. Pure functions of their arguments: no RPC, no I/O besides the stream they are given.
#pragma once

#include <ostream>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "warm/runtime_types.hpp"

namespace warm::ctl {

using json = nlohmann::ordered_json;

// An aligned text table: a header row in capitals, then rows; columns are separated by two
// spaces and padded to their widest cell (the last column is not padded).
class table {
 public:
  explicit table(std::vector<std::string> header) : rows_{std::move(header)} {}
  void add(std::vector<std::string> row) { rows_.push_back(std::move(row)); }
  void print(std::ostream& out) const;

 private:
  std::vector<std::vector<std::string>> rows_;
};

// ---- JSON: field names are the snake_case names of warm/runtime_types.hpp ------------------
// `doc` as text (indented by `indent` spaces, one line when negative). Text that is not UTF-8
// (a server's message can quote a file name's bytes) is written with U+FFFD in place of each bad
// byte, never thrown about: every document warmctl prints goes through here.
std::string dump_json(const json& doc, int indent = -1);

json to_json(const warm::error& err);
json to_json(const model_status& status);
json to_json(const vmodel_status& status);
json to_json(const infer_result& result);  // every output's values ("data"), as tensor_values.hpp
json to_json(const model_event& event);
json to_json(const inspection& snapshot);
// One part of a snapshot: "devices", "queue" (queue and running loads), "cache" (residents per
// device), "failures", "models"; anything else is the whole snapshot.
json inspection_section(const inspection& snapshot, std::string_view section);
json to_json(const cluster_info& info);
// The disk tier (format_tier.cpp): its totals and files, by source, first to be evicted first.
json to_json(const tier_info& tier);
// Text: one line of totals, one of counters, then SOURCE SIZE MODELS rows ("not open" when none).
void print_tier(std::ostream& out, const tier_info& tier);
// Where a remote model's file is: "source" and "tier" {held, bytes} added to its JSON, "source:"
// and "disk tier:" rows to its status table. Nothing for a model without a source (local disk).
void add_tier_fields(json& doc, const model_status& status);
void add_tier_rows(table& rows, const model_status& status);

// ---- people --------------------------------------------------------------------------------
// "key: value" lines of one model; first "vmodel: VMODEL" when `vmodel` (the id asked for) is set.
void print_model_status(std::ostream& out, const model_status& status,
                        const std::string& vmodel = {});
// One row per model: ID STATE DEVICE SIZE REQUESTS HITS RPS IDLE.
void print_models(std::ostream& out, const std::vector<model_status>& models);
void print_vmodel_status(std::ostream& out, const vmodel_status& status);
// Which model served it, hit or wait, then each output (rows cut after a few values).
void print_infer_result(std::ostream& out, const infer_result& result);
// The sections named as for inspection_section(); an empty section prints a summary and all.
void print_inspection(std::ostream& out, const inspection& snapshot, std::string_view section);
// The cluster as the answering instance sees it: a summary line, what this instance did for the
// cluster, one row per instance (NAME ADDRESS CAPACITY USED MODELS LOADS DRAINING UPDATED), then
// where each model's copies are ("alone" when not in a cluster).
void print_cluster(std::ostream& out, const cluster_info& info);

// Where one model is in a cluster, as the instances' records say.
struct cluster_copies {
  std::vector<std::string> copies;   // instances holding it, by name
  std::vector<std::string> loading;  // instances loading it (or with its load queued)
  std::vector<std::string> tiered;   // instances whose disk tier holds its file
};
cluster_copies copies_of(const cluster_info& info, const std::string& model);
// `status ID` in a cluster: the model's status plus "copies", "cluster_loads", "loading_on" and
// "tiered_on"; as text, the copies, the loads and (when any) the disk tiers holding its file.
json to_json(const model_status& status, const cluster_copies& where);
void print_copies(std::ostream& out, const cluster_copies& where);
// One line: "#SEQ MODEL PREVIOUS -> STATE [on DEVICE] [(error)]".
std::string event_line(const model_event& event);

}  // namespace warm::ctl
