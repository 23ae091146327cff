// Model catalogs for the evaluation tools: the models a trace may request, their sizes
// and the time a miss costs. Pure logic, no CAF: warm-eval and the policy simulator use it.
// docs/eval/catalog.md describes the CSV format, the shipped catalogs and the load-time fit.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "warm/error.hpp"

namespace warm::eval {

// One model of a catalog. A valid entry has a non-empty id without commas, CR, LF or surrounding
// blanks, bytes > 0, and a finite load_ms >= 0 (the time a miss on this model costs).
struct catalog_entry {
  std::string model;
  std::uint64_t bytes = 0;
  double load_ms = 0;
};

// A catalog: valid entries with distinct ids, in a meaningful order (the rank order of
// make_zipf_trace; otherwise the file's order).
using catalog = std::vector<catalog_entry>;

// Reads a catalog CSV. Rules:
//  1. The first line is exactly `model_id,size_bytes,load_ms` (blanks around fields allowed).
//  2. Then one model per line, three fields: the id, size_bytes a positive decimal integer,
//     load_ms a finite decimal number >= 0. Empty lines are skipped; CRLF endings accepted.
//  3. Ids are distinct; at least one model.
// Errors: not_found / load_failed for the file; invalid_argument "PATH:LINE: what is wrong" for
// the first bad line (a duplicate names the line of the first occurrence too).
expected<catalog> read_catalog(const std::string& path);

// Checks a catalog against the rules read_catalog enforces; invalid_argument naming the first
// bad entry (by index and id).
expected<void> validate_catalog(const catalog& c);

// Writes `c` as read_catalog reads it (load_ms as the shortest text that reads back exactly), so
// write then read gives an equal catalog. Refuses an invalid catalog (validate_catalog) before
// touching the file; creates missing parent directories; replaces `path` atomically.
expected<void> write_catalog(const std::string& path, const catalog& c);

// The sum of the entries' bytes.
std::uint64_t total_bytes(const catalog& c);

// The id of synthetic model `index` of `models`: "m" and the index zero-padded to at least three
// digits, more when `models` needs them (m000…m999, m0000…m1233), so ids sort as they are ranked.
std::string synthetic_model_id(std::size_t index, std::size_t models);

// A synthetic catalog of `models` entries with ids synthetic_model_id(i, models) in order, sizes
// drawn log-uniformly from [min_size, max_size] (rounded to whole bytes), load_ms =
// fitted_load_ms(bytes). The same arguments give the same catalog on every platform.
// Requires 1 <= min_size <= max_size (asserted; the CLI checks its input first).
catalog make_catalog(std::size_t models, std::uint64_t min_size, std::uint64_t max_size,
                     std::uint64_t seed);

// The load times the mCache paper measured on TF-Serving (V100), as (model MB, load ms), MB =
// 10^6 bytes: 17 MB → 210 ms, 96 MB → 1,011 ms, 357 MB → 3,702 ms.
struct load_sample {
  double mb;
  double load_ms;
};
inline constexpr load_sample mcache_load_samples[] = {{17, 210}, {96, 1011}, {357, 3702}};

namespace detail {
struct linear_fit {
  double intercept;
  double slope;
};
// Ordinary least squares of load_ms on mb over mcache_load_samples.
constexpr linear_fit fit_mcache_samples() {
  double n = 0, sx = 0, sy = 0;
  for (const auto& s : mcache_load_samples) {
    n += 1;
    sx += s.mb;
    sy += s.load_ms;
  }
  double mx = sx / n, my = sy / n, sxx = 0, sxy = 0;
  for (const auto& s : mcache_load_samples) {
    sxx += (s.mb - mx) * (s.mb - mx);
    sxy += (s.mb - mx) * (s.load_ms - my);
  }
  return {my - sxy / sxx * mx, sxy / sxx};
}
}  // namespace detail

// The least-squares line load_ms = fit_intercept_ms + fit_slope_ms_per_mb * MB through the three
// samples above. Exactly a = 2885871/94981 ≈ 30.384 ms and b = 976455/94981 ≈ 10.281 ms per MB
// (about 97 MB/s plus 30 ms fixed cost); measured − fitted: +4.8, −6.3, +1.5 ms.
inline constexpr double fit_intercept_ms = detail::fit_mcache_samples().intercept;
inline constexpr double fit_slope_ms_per_mb = detail::fit_mcache_samples().slope;

// fit_intercept_ms + fit_slope_ms_per_mb * bytes / 10^6: the load time the fit predicts.
double fitted_load_ms(std::uint64_t bytes);

// The mCache paper's seven models (ResNet50, SSD300-VGG16, BERT-base, RoBERTa-base,
// XLNet-base-cased, GPT-2 small, T5-base) at 4 bytes per parameter of their standard public
// checkpoints, load_ms = fitted_load_ms(bytes); docs/eval/catalog-mcache7.csv is this catalog
// (`warm-eval catalog --mcache7` writes it) and docs/eval/catalog.md gives the parameter counts.
catalog mcache7_catalog();

}  // namespace warm::eval
