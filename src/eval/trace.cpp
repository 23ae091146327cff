#include "eval/trace.hpp"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <numeric>
#include <set>

#include "eval/support.hpp"

namespace warm::eval {

namespace {

constexpr const char* trace_header = "time_ms,model_id";

// Random stream ids (see detail::random_stream): one per use, so uses do not disturb each other.
constexpr std::uint64_t stream_mapping = 1;
constexpr std::uint64_t stream_zipf_models = 2;
constexpr std::uint64_t stream_zipf_arrivals = 3;
constexpr std::uint64_t stream_function_base = 1'000'000;  // + the function's row in the file
constexpr std::uint64_t stream_day_step = 1ull << 32;      // × the repeated day (0 for day 0)

constexpr std::int64_t us_per_minute = 60'000'000;

}  // namespace

expected<trace> read_trace(const std::string& path) {
  auto reader = detail::line_reader::open(path);
  if (!reader) return std::move(reader).error();
  std::string line;
  if (!reader->next(line))
    return make_error(errc::invalid_argument,
                      path + " is empty (expected the header " + trace_header + ")");
  {
    auto header = detail::split_fields(line);
    if (header.size() != 2 || header[0] != "time_ms" || header[1] != "model_id")
      return reader->bad_line(std::string("the header must be ") + trace_header + ", got '" + line +
                              "'");
  }
  trace out;
  while (reader->next(line)) {
    if (detail::trim(line).empty()) continue;
    auto fields = detail::split_fields(line);
    if (fields.size() != 2)
      return reader->bad_line("expected 2 fields (time_ms,model_id), got " +
                              std::to_string(fields.size()));
    auto time = detail::parse_finite(fields[0]);
    if (!time || *time < 0)
      return reader->bad_line("time_ms must be a finite number >= 0, got '" +
                              std::string(fields[0]) + "'");
    if (fields[1].empty()) return reader->bad_line("model_id is empty");
    if (!out.empty() && *time < out.back().time_ms)
      return reader->bad_line(
          "time_ms " + std::string(fields[0]) + " is before the previous row's " +
          detail::format_double(out.back().time_ms) + " (rows must be sorted by time)");
    out.push_back({*time, std::string(fields[1])});
  }
  if (reader->failed()) return make_error(errc::load_failed, "cannot read " + path);
  return out;
}

expected<void> write_trace(const std::string& path, const trace& t) {
  std::string text = std::string(trace_header) + "\n";
  text.reserve(t.size() * 24 + text.size());
  for (std::size_t i = 0; i < t.size(); ++i) {
    const auto& r = t[i];
    if (!std::isfinite(r.time_ms) || r.time_ms < 0)
      return make_error(errc::invalid_argument,
                        "request " + std::to_string(i) + ": time_ms must be finite and >= 0");
    if (i > 0 && r.time_ms < t[i - 1].time_ms)
      return make_error(errc::invalid_argument, "request " + std::to_string(i) +
                                                    " is before request " + std::to_string(i - 1) +
                                                    " (a trace is sorted by time)");
    if (!detail::valid_csv_id(r.model))
      return make_error(
          errc::invalid_argument,
          "request " + std::to_string(i) + ": model_id '" + r.model +
              "' must be non-empty, without commas, line breaks or surrounding blanks");
    text += detail::format_double(r.time_ms);
    text += ',';
    text += r.model;
    text += '\n';
  }
  return detail::write_text_file(path, text);
}

expected<mapping> parse_mapping(const std::string& name) {
  for (auto m : {mapping::random, mapping::round_robin, mapping::quantile, mapping::quantile_r})
    if (name == to_string(m)) return m;
  return make_error(errc::invalid_argument,
                    "unknown mapping scheme '" + name +
                        "' (expected random, round-robin, quantile or quantile-r)");
}

std::string to_string(mapping m) {
  switch (m) {
    case mapping::random:
      return "random";
    case mapping::round_robin:
      return "round-robin";
    case mapping::quantile:
      return "quantile";
    case mapping::quantile_r:
      return "quantile-r";
  }
  return "random";
}

namespace {

// A function of the invocations file that passed the trigger filter, with its window counts.
struct function_counts {
  std::string id;
  std::size_t row = 0;  // 0-based data row of the file (the random stream of its requests)
  std::vector<std::uint64_t> counts;
  std::uint64_t total = 0;
};

bool identifying_column(std::string_view name) {
  return name == "HashOwner" || name == "HashApp" || name == "HashFunction" || name == "Trigger";
}

// Steps 1-3 of make_azure_trace: the functions with the trigger and their window counts.
expected<std::vector<function_counts>> read_invocations(const azure_options& o, azure_stats& st) {
  auto reader = detail::line_reader::open(o.invocations);
  if (!reader) return std::move(reader).error();
  std::string line;
  if (!reader->next(line)) return make_error(errc::invalid_argument, o.invocations + " is empty");
  std::vector<std::string> header;
  for (auto f : detail::split_fields(line))
    header.emplace_back(f);
  std::size_t first_minute = 0, function_column = header.size(), trigger_column = header.size();
  for (; first_minute < header.size() && identifying_column(header[first_minute]); ++first_minute) {
    if (header[first_minute] == "HashFunction") function_column = first_minute;
    if (header[first_minute] == "Trigger") trigger_column = first_minute;
  }
  if (function_column == header.size())
    return reader->bad_line(
        "expected the Azure Functions header (HashOwner,HashApp,HashFunction,Trigger,<minutes>… or "
        "HashFunction,HashOwner,HashApp,<minutes>…), got no leading HashFunction column");
  for (std::size_t i = first_minute; i < header.size(); ++i)
    if (identifying_column(header[i]) || header[i].empty())
      return reader->bad_line(
          "column " + std::to_string(i + 1) + " ('" + header[i] +
          "') is among the minute columns; identifying columns must come first");
  std::size_t minute_columns = header.size() - first_minute;
  if (o.start_minute >= minute_columns || o.minutes > minute_columns - o.start_minute)
    return make_error(errc::invalid_argument,
                      "the window of " + std::to_string(o.minutes) +
                          " minutes from minute column " + std::to_string(o.start_minute) +
                          " ends past the " + std::to_string(minute_columns) +
                          " minute columns of " + o.invocations);
  std::size_t window_begin = first_minute + o.start_minute;
  st.first_minute = header[window_begin];
  st.trigger_column = trigger_column < header.size();
  bool filter = o.trigger != "any" && st.trigger_column;

  std::vector<function_counts> out;
  std::set<std::string> triggers_seen;
  while (reader->next(line)) {
    if (detail::trim(line).empty()) continue;
    auto fields = detail::split_fields(line);
    if (fields.size() != header.size())
      return reader->bad_line("expected " + std::to_string(header.size()) +
                              " fields like the header, got " + std::to_string(fields.size()));
    std::size_t row = st.functions++;
    if (filter) {
      if (triggers_seen.size() < 64) triggers_seen.emplace(fields[trigger_column]);
      if (fields[trigger_column] != o.trigger) continue;
    }
    function_counts f;
    f.id = std::string(fields[function_column]);
    f.row = row;
    f.counts.reserve(o.minutes);
    for (std::size_t c = window_begin; c < window_begin + o.minutes; ++c) {
      auto count = detail::parse_u64(fields[c]);
      if (!count)
        return reader->bad_line("minute column '" + header[c] + "': '" + std::string(fields[c]) +
                                "' is not a non-negative integer count");
      f.counts.push_back(*count);
      f.total += *count;
    }
    out.push_back(std::move(f));
  }
  if (reader->failed()) return make_error(errc::load_failed, "cannot read " + o.invocations);
  st.with_trigger = out.size();
  if (st.functions == 0)
    return make_error(errc::invalid_argument, o.invocations + " has no function rows");
  if (out.empty()) {
    std::string seen;
    for (const auto& t : triggers_seen)
      seen += (seen.empty() ? "" : ", ") + t;
    return make_error(errc::invalid_argument,
                      "no function of " + o.invocations + " has trigger '" + o.trigger + "'" +
                          (seen.empty() ? std::string() : " (triggers present: " + seen + ")"));
  }
  return out;
}

// Step 5: the catalog index of each function of `popular` (most popular first).
std::vector<std::size_t> map_functions(std::size_t functions, const catalog& models,
                                       const azure_options& o) {
  std::vector<std::size_t> by_load(models.size());
  std::iota(by_load.begin(), by_load.end(), 0);
  std::stable_sort(by_load.begin(), by_load.end(), [&](std::size_t a, std::size_t b) {
    return models[a].load_ms > models[b].load_ms;
  });
  std::size_t m = models.size();
  std::vector<std::size_t> out(functions);
  detail::random_stream rng(o.seed, stream_mapping);
  for (std::size_t i = 0; i < functions; ++i) {
    std::size_t group = i * m / functions;  // i·m stays far below 2^64 for any real trace
    switch (o.scheme) {
      case mapping::random:
        out[i] = static_cast<std::size_t>(rng.below(m));
        break;
      case mapping::round_robin:
        out[i] = by_load[i % m];
        break;
      case mapping::quantile:
        out[i] = by_load[group];
        break;
      case mapping::quantile_r:
        out[i] = by_load[m - 1 - group];
        break;
    }
  }
  return out;
}

}  // namespace

expected<trace> make_azure_trace(const azure_options& o, const catalog& models,
                                 azure_stats* stats) {
  if (!(o.cut > 0 && o.cut <= 1))
    return make_error(errc::invalid_argument,
                      "cut must be in (0, 1], got " + detail::format_double(o.cut));
  if (!(o.sample >= 0 && o.sample <= 1))
    return make_error(errc::invalid_argument,
                      "sample must be in [0, 1], got " + detail::format_double(o.sample));
  if (o.minutes == 0) return make_error(errc::invalid_argument, "minutes must be at least 1");
  if (o.days == 0) return make_error(errc::invalid_argument, "days must be at least 1");
  if (o.trigger.empty())
    return make_error(errc::invalid_argument, "trigger must not be empty (use \"any\" for all)");
  if (auto valid = validate_catalog(models); !valid) return std::move(valid).error();

  azure_stats st;
  auto read = read_invocations(o, st);
  if (!read) return std::move(read).error();
  auto& functions = *read;

  // Step 3: only functions invoked in the window take part.
  std::vector<const function_counts*> active;
  for (const auto& f : functions) {
    st.window_invocations += f.total;
    if (f.total > 0) active.push_back(&f);
  }
  st.active = active.size();
  if (active.empty())
    return make_error(errc::invalid_argument,
                      "no invocation of a function with trigger '" + o.trigger + "' in minutes " +
                          std::to_string(o.start_minute) + ".." +
                          std::to_string(o.start_minute + o.minutes - 1) + " of " + o.invocations);

  // Step 4: the nearest-rank quantile of the totals (a small epsilon keeps 0.9·10 at rank 9).
  std::vector<std::uint64_t> totals;
  for (auto* f : active)
    totals.push_back(f->total);
  std::sort(totals.begin(), totals.end());
  auto rank =
      static_cast<std::size_t>(std::ceil(o.cut * static_cast<double>(totals.size()) - 1e-9));
  rank = std::clamp<std::size_t>(rank, 1, totals.size());
  st.cut_threshold = totals[rank - 1];
  std::vector<const function_counts*> kept;  // in file order
  for (auto* f : active)
    if (f->total <= st.cut_threshold) kept.push_back(f);
  st.kept = kept.size();

  // Step 5: most popular first (stable: ties stay in file order), then map.
  std::vector<const function_counts*> popular = kept;
  std::stable_sort(
      popular.begin(), popular.end(),
      [](const function_counts* a, const function_counts* b) { return a->total > b->total; });
  auto assigned = map_functions(popular.size(), models, o);
  std::vector<std::size_t> model_of_row(functions.empty() ? 0 : functions.back().row + 1, 0);
  for (std::size_t i = 0; i < popular.size(); ++i) {
    model_of_row[popular[i]->row] = assigned[i];
    st.kept_invocations += popular[i]->total;
    st.assignment.push_back({popular[i]->id, popular[i]->total, models[assigned[i]].model});
  }

  // Step 6: sample and spread each minute's invocations, one random stream per function.
  struct timed {
    std::int64_t us;
    std::size_t model;
  };
  std::vector<timed> requests;
  for (std::size_t day = 0; day < o.days; ++day) {
    auto day_start = static_cast<std::int64_t>(day * o.minutes) * us_per_minute;
    for (auto* f : kept) {
      detail::random_stream rng(o.seed, stream_function_base + f->row + day * stream_day_step);
      std::size_t model = model_of_row[f->row];
      for (std::size_t w = 0; w < f->counts.size(); ++w) {
        for (std::uint64_t k = 0; k < f->counts[w]; ++k) {
          bool keep = rng.uniform() < o.sample;  // always drawn, so sample only thins
          auto offset =
              static_cast<std::int64_t>(rng.uniform() * static_cast<double>(us_per_minute));
          if (keep)
            requests.push_back(
                {day_start + static_cast<std::int64_t>(w) * us_per_minute + offset, model});
        }
      }
    }
  }
  std::stable_sort(requests.begin(), requests.end(),
                   [](const timed& a, const timed& b) { return a.us < b.us; });
  trace out;
  out.reserve(requests.size());
  for (const auto& r : requests)
    out.push_back({static_cast<double>(r.us) / 1000.0, models[r.model].model});
  if (stats) *stats = std::move(st);
  return out;
}

trace make_zipf_trace(double alpha, const catalog& models, std::size_t requests, double rate,
                      std::uint64_t seed) {
  assert(std::isfinite(alpha) && alpha >= 0 && rate > 0 && !models.empty());
  if (models.empty() || !(rate > 0)) return {};
  std::vector<double> cumulative(models.size());
  double sum = 0;
  for (std::size_t i = 0; i < models.size(); ++i)
    cumulative[i] = sum += std::pow(static_cast<double>(i + 1), -alpha);
  detail::random_stream pick(seed, stream_zipf_models), arrive(seed, stream_zipf_arrivals);
  trace out;
  out.reserve(requests);
  double seconds = 0;
  for (std::size_t n = 0; n < requests; ++n) {
    seconds += -std::log1p(-arrive.uniform()) / rate;  // exponential gap, mean 1/rate
    double u = pick.uniform() * sum;
    auto i = static_cast<std::size_t>(std::upper_bound(cumulative.begin(), cumulative.end(), u) -
                                      cumulative.begin());
    i = std::min(i, models.size() - 1);
    out.push_back({static_cast<double>(std::llround(seconds * 1e6)) / 1000.0, models[i].model});
  }
  return out;
}

}  // namespace warm::eval
