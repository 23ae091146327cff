// warm-eval sweep: many simulations in one process, in parallel on a oneTBB arena
// (eval::run_sweep). The cells file has one JSON object per line:
//   {"trace": PATH, "catalog": PATH, "capacity": "60%" | "2GiB" | BYTES, "policy": "lru,kdf",
//    "tag": {...}}
// ("tag" optional: its fields are copied to the front of each of the cell's output lines; they
// may not reuse a result field's name). Output: for each cell in file order, for each of its
// policies in order, `simulate`'s JSON object behind the tag fields — the same bytes whatever
// --threads is. Each distinct trace and catalog file is read once. If a simulation fails, the
// lines before it are printed, then the error (exit 1), as a loop of `simulate` calls would.
#include <cstdio>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>

#include "commands.hpp"
#include "eval/sweep.hpp"
#include "sim_common.hpp"

namespace warm::eval_cli {
namespace {

// One cell as read from the file, before its files are loaded.
struct cell_spec {
  std::string trace, catalog, capacity, policies;
  nlohmann::ordered_json tag = nlohmann::ordered_json::object();
};

const char* const result_fields[] = {"policy",
                                     "capacity_bytes",
                                     "requests",
                                     "hits",
                                     "misses",
                                     "hit_ratio",
                                     "byte_miss_ratio",
                                     "load_ms_total",
                                     "load_ms_per_request",
                                     "evictions"};

expected<std::vector<cell_spec>> read_cells(const std::string& path) {
  std::ifstream in(path);
  if (!in) return make_error(errc::not_found, "cannot read cells file '" + path + "'");
  std::vector<cell_spec> cells;
  std::string line;
  for (int number = 1; std::getline(in, line); ++number) {
    auto where = path + ":" + std::to_string(number) + ": ";
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    auto j = nlohmann::ordered_json::parse(line, nullptr, false);
    if (j.is_discarded() || !j.is_object())
      return make_error(errc::invalid_argument, where + "not a JSON object");
    cell_spec c;
    for (auto& [key, value] : j.items()) {
      if (key == "tag") {
        if (!value.is_object())
          return make_error(errc::invalid_argument, where + "\"tag\" must be an object");
        for (const char* f : result_fields)
          if (value.contains(f))
            return make_error(errc::invalid_argument,
                              where + "tag field \"" + f + "\" is a result field");
        c.tag = value;
      } else if (key == "capacity" && value.is_number_unsigned()) {
        c.capacity = std::to_string(value.get<std::uint64_t>());
      } else if ((key == "trace" || key == "catalog" || key == "capacity" || key == "policy") &&
                 value.is_string()) {
        (key == "trace"      ? c.trace
         : key == "catalog"  ? c.catalog
         : key == "capacity" ? c.capacity
                             : c.policies) = value.get<std::string>();
      } else {
        return make_error(errc::invalid_argument,
                          where + "unexpected field \"" + key + "\" (or wrong type)");
      }
    }
    if (c.trace.empty() || c.catalog.empty() || c.capacity.empty() || c.policies.empty())
      return make_error(errc::invalid_argument,
                        where + "needs \"trace\", \"catalog\", \"capacity\" and \"policy\"");
    cells.push_back(std::move(c));
  }
  return cells;
}

}  // namespace

void add_sweep_command(CLI::App& app, int& rc) {
  struct options {
    std::string cells;
    unsigned threads = 0;
    tuning_flags tuning;
  };
  auto o = std::make_shared<options>();
  auto* cmd = app.add_subcommand(
      "sweep", "Run many simulations in parallel (cells file; JSON per policy per cell)");
  cmd->add_option("--cells", o->cells,
                  "Cells file: one JSON object per line (trace, catalog, capacity, policy, tag)")
      ->required();
  cmd->add_option("--threads", o->threads, "Simulations run at once (0 = all cores)")
      ->capture_default_str();
  add_tuning_flags(*cmd, o->tuning);
  cmd->callback([o, &rc] {
    auto specs = read_cells(o->cells);
    if (!specs) return void(rc = report("sweep", specs.error(), exit_failure));
    // Every file once, in first-use order; the maps own what the cells borrow.
    std::map<std::string, eval::trace> traces;
    std::map<std::string, eval::catalog> catalogs;
    std::vector<eval::sweep_cell> cells;
    std::vector<std::size_t> owner;  // cells[k] belongs to (*specs)[owner[k]]
    for (std::size_t i = 0; i < specs->size(); ++i) {
      const cell_spec& s = (*specs)[i];
      if (!catalogs.count(s.catalog)) {
        auto c = eval::read_catalog(s.catalog);
        if (!c) return void(rc = report("sweep", c.error(), exit_failure));
        catalogs.emplace(s.catalog, std::move(*c));
      }
      if (!traces.count(s.trace)) {
        auto t = eval::read_trace(s.trace);
        if (!t) return void(rc = report("sweep", t.error(), exit_failure));
        traces.emplace(s.trace, std::move(*t));
      }
      const eval::catalog& models = catalogs.at(s.catalog);
      auto capacity = parse_capacity(s.capacity, models);
      if (!capacity) return void(rc = report("sweep", capacity.error(), exit_failure));
      std::stringstream list(s.policies);
      std::string name;
      while (std::getline(list, name, ',')) {
        cells.push_back({&traces.at(s.trace), &models, *capacity, name});
        owner.push_back(i);
      }
    }
    auto results = eval::run_sweep(cells, to_policy_options(o->tuning), o->threads);
    rc = exit_ok;
    for (std::size_t k = 0; k < results.size(); ++k) {
      if (!results[k]) return void(rc = report("sweep", results[k].error(), exit_failure));
      nlohmann::ordered_json out = (*specs)[owner[k]].tag;
      nlohmann::ordered_json fields = to_json(*results[k]);
      for (auto& [key, value] : fields.items())
        out[key] = value;
      std::printf("%s\n", out.dump().c_str());
    }
  });
}

}  // namespace warm::eval_cli
