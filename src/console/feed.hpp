// The console's JSON (docs/console.md): the feed's state and the models' pages, encoded from
// what the runtime reports, and the queries of both routes checked. Pure functions: no runtime,
// no clock; every list they write is bounded.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "console/event_log.hpp"
#include "console/series.hpp"
#include "warm/error.hpp"
#include "warm/runtime_types.hpp"

namespace warm::console {

// Bounds of one answer.
inline constexpr std::size_t max_residents = 2000;      // per device; per cluster instance list
inline constexpr std::size_t max_list = 500;            // queue, running loads, failures
inline constexpr std::size_t max_events = 1000;         // events per feed answer: all kept
inline constexpr std::uint32_t max_models_page = 5000;  // rows per models page

// The state a feed answer draws, taken at one moment (console::monitor::feed).
struct snapshot {
  double unix_seconds = 0;
  double uptime_seconds = 0;
  inspection state;
  std::optional<cluster_info> cluster;  // none: not in a cluster
  reading counters;                     // the runtime's instruments at the moment
};

using query_params = std::vector<std::pair<std::string, std::string>>;

// GET /console/feed's parameters: events_after (an event seq) and series_after (unix seconds).
struct feed_query {
  std::uint64_t events_after = 0;
  double series_after = 0;  // 0: every point kept
};
// invalid_argument naming the parameter for one that is unknown, repeated or not a number in
// range.
expected<feed_query> parse_feed_query(const query_params& params);

// GET /console/models's parameters: after (a model id, at most 1 KiB) and limit
// (1..max_models_page, default max_models_page).
struct models_query {
  std::string after;
  std::uint32_t limit = max_models_page;
};
expected<models_query> parse_models_query(const query_params& params);

// The feed's answer: the snapshot's state, then `points` and `events` (newest first) as given,
// and `events_last`, the newest event's seq.
std::string encode_feed(const snapshot& s, const std::vector<point>& points,
                        const std::vector<event>& events, std::uint64_t events_last);

// A models page: `models` as rows, and `next` (the id to ask after) when there may be more.
std::string encode_models(const std::vector<model_status>& models,
                          const std::optional<std::string>& next);

}  // namespace warm::console
