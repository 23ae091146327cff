#include "eval/workload.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "eval/support.hpp"

namespace warm::eval {

namespace {

// Random stream ids, one per use (detail::random_stream).
constexpr std::uint64_t stream_sizes = 0x73697a6573;  // "sizes"
constexpr std::uint64_t stream_drift = 21;
constexpr std::uint64_t stream_bursts = 22;
constexpr std::uint64_t stream_model_base = 3'000'000;  // + the model's catalog index

constexpr double seconds_per_day = 86'400;
constexpr double slot_seconds = 3'600;
constexpr double pi = 3.14159265358979323846;

}  // namespace

expected<size_shape> parse_size_shape(const std::string& name) {
  if (name == "uniform") return size_shape::uniform;
  if (name == "two-class") return size_shape::two_class;
  if (name == "log-uniform") return size_shape::log_uniform;
  return make_error(errc::invalid_argument,
                    "unknown size shape '" + name + "' (known: uniform, two-class, log-uniform)");
}

expected<size_order> parse_size_order(const std::string& name) {
  if (name == "random") return size_order::random;
  if (name == "ascending") return size_order::ascending;
  if (name == "descending") return size_order::descending;
  return make_error(errc::invalid_argument,
                    "unknown size order '" + name + "' (known: random, ascending, descending)");
}

expected<catalog> make_shaped_catalog(const shaped_catalog_options& o) {
  if (o.models == 0)
    return make_error(errc::invalid_argument, "a catalog needs at least one model");
  if (o.min_size == 0)
    return make_error(errc::invalid_argument, "the smallest size must be positive");
  if (!(std::isfinite(o.ratio) && o.ratio >= 1))
    return make_error(errc::invalid_argument, "the size ratio must be at least 1");
  if (!(o.large_share >= 0 && o.large_share <= 1))
    return make_error(errc::invalid_argument, "the share of large models must be in [0, 1]");
  detail::random_stream rng(o.seed, stream_sizes);
  auto large = static_cast<std::uint64_t>(std::llround(static_cast<double>(o.min_size) * o.ratio));
  std::vector<std::uint64_t> sizes(o.models, o.min_size);
  if (o.shape == size_shape::two_class) {
    auto n_large =
        static_cast<std::size_t>(std::llround(o.large_share * static_cast<double>(o.models)));
    std::fill(sizes.begin(), sizes.begin() + static_cast<std::ptrdiff_t>(n_large), large);
  } else if (o.shape == size_shape::log_uniform) {
    double lo = std::log(static_cast<double>(o.min_size)),
           hi = std::log(static_cast<double>(large));
    for (auto& s : sizes)
      s = std::clamp(
          static_cast<std::uint64_t>(std::llround(std::exp(lo + rng.uniform() * (hi - lo)))),
          o.min_size, large);
  }
  switch (o.order) {
    case size_order::random:  // Fisher-Yates: the two classes' ranks are independent of size
      for (std::size_t i = sizes.size(); i > 1; --i)
        std::swap(sizes[i - 1], sizes[rng.below(i)]);
      break;
    case size_order::ascending:
      std::sort(sizes.begin(), sizes.end());
      break;
    case size_order::descending:
      std::sort(sizes.rbegin(), sizes.rend());
      break;
  }
  catalog out;
  out.reserve(o.models);
  for (std::size_t i = 0; i < o.models; ++i)
    out.push_back({synthetic_model_id(i, o.models), sizes[i], fitted_load_ms(sizes[i])});
  return out;
}

expected<trace> make_synthetic_trace(const synthetic_options& o, const catalog& models) {
  if (models.empty()) return make_error(errc::invalid_argument, "the catalog is empty");
  if (!(o.days > 0 && std::isfinite(o.days)))
    return make_error(errc::invalid_argument, "days must be positive");
  if (!(o.requests_per_day > 0 && std::isfinite(o.requests_per_day)))
    return make_error(errc::invalid_argument, "requests per day must be positive");
  if (!(o.alpha >= 0 && std::isfinite(o.alpha)))
    return make_error(errc::invalid_argument, "alpha must be >= 0");
  if (!(o.drift >= 0 && o.drift <= 1))
    return make_error(errc::invalid_argument, "drift must be in [0, 1]");
  if (!(o.diurnal >= 0 && o.diurnal < 1))
    return make_error(errc::invalid_argument, "diurnal must be in [0, 1)");
  if (!(o.pareto_shape == 0 || (o.pareto_shape > 1 && std::isfinite(o.pareto_shape))))
    return make_error(errc::invalid_argument, "the Pareto shape must be 0 (Poisson) or above 1");
  if (!(o.burst_probability >= 0 && o.burst_probability <= 1))
    return make_error(errc::invalid_argument, "the burst probability must be in [0, 1]");
  if (!(o.burst_seconds >= 0 && std::isfinite(o.burst_seconds)))
    return make_error(errc::invalid_argument, "burst seconds must be >= 0");

  const std::size_t n = models.size();
  std::vector<double> weight(n);
  for (std::size_t r = 0; r < n; ++r)
    weight[r] = std::pow(static_cast<double>(r + 1), -o.alpha);
  const double total_weight = std::accumulate(weight.begin(), weight.end(), 0.0);
  std::vector<std::size_t> rank(n);
  std::iota(rank.begin(), rank.end(), 0);

  // A gap in operational time (expected requests), mean 1.
  auto gap = [&](detail::random_stream& rng) {
    double u = rng.uniform();
    if (o.pareto_shape == 0) return -std::log1p(-u);
    double scale = (o.pareto_shape - 1) / o.pareto_shape;
    return scale / std::pow(1 - u, 1 / o.pareto_shape);
  };
  std::vector<detail::random_stream> streams;
  streams.reserve(n);
  std::vector<double> until(n);  // operational time left until each model's next request
  for (std::size_t m = 0; m < n; ++m) {
    streams.emplace_back(o.seed, stream_model_base + m);
    until[m] = gap(streams[m]);
  }
  detail::random_stream drift(o.seed, stream_drift), bursts(o.seed, stream_bursts);

  struct timed {
    std::int64_t us;
    std::size_t model;
  };
  std::vector<timed> out;
  auto add = [&](double seconds, std::size_t model) {
    out.push_back({std::llround(seconds * 1e6), model});
    bool burst = bursts.uniform() < o.burst_probability;  // always drawn: streams stay aligned
    if (!burst) return;
    for (std::size_t k = 0; k < o.burst_size; ++k)
      out.push_back({std::llround((seconds + bursts.uniform() * o.burst_seconds) * 1e6), model});
  };
  const double end = o.days * seconds_per_day;
  for (std::size_t slot = 0; slot * slot_seconds < end; ++slot) {
    double start = static_cast<double>(slot) * slot_seconds,
           length = std::min(slot_seconds, end - start);
    if (slot > 0 && slot % 24 == 0)
      for (std::size_t m = 0; m < n; ++m)
        if (drift.uniform() < o.drift) std::swap(rank[m], rank[drift.below(n)]);
    double middle = (start + length / 2) / seconds_per_day;
    double expected =
        o.requests_per_day * length / seconds_per_day * (1 + o.diurnal * std::sin(2 * pi * middle));
    for (std::size_t m = 0; m < n; ++m) {
      double budget = expected * weight[rank[m]] / total_weight;
      if (budget <= 0) continue;
      double used = 0;
      while (until[m] <= budget - used) {
        used += until[m];
        add(start + used / budget * length, m);
        until[m] = gap(streams[m]);
      }
      until[m] -= budget - used;
    }
  }
  std::sort(out.begin(), out.end(), [](const timed& a, const timed& b) {
    return a.us != b.us ? a.us < b.us : a.model < b.model;
  });
  trace t;
  t.reserve(out.size());
  for (const auto& r : out)
    t.push_back({static_cast<double>(r.us) / 1000.0, models[r.model].model});
  return t;
}

}  // namespace warm::eval
