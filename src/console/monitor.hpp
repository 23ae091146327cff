// What the console shows, kept live beside a runtime (docs/console.md): a reading of the
// runtime's instruments every second (console::series), the model events it reports and the
// served models' version changes (console::event_log), and the feed's snapshot of every actor's
// state, taken at most once per snapshot_ttl whoever asks.
//
// Threads: one of its own takes the readings and looks at the served models; the runtime's
// watcher adds events from a warm thread; feed() and models() are called from the HTTP front's
// threads, any number at once (concurrent callers share a snapshot). Nothing here runs on an
// actor's thread but the watcher's few lines.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>

#include "console/feed.hpp"
#include "warm/error.hpp"
#include "warm/runtime_types.hpp"

namespace warm {
class runtime;
}

namespace warm::console {

struct monitor_options {
  // This instance's view of its cluster (warmd's cluster mode); empty when it runs alone. Called
  // from an HTTP thread; must answer `done` (on any thread) without blocking.
  std::function<void(callback<cluster_info>)> cluster;
  std::chrono::milliseconds interval{1000};     // between readings: a series point each
  std::chrono::milliseconds snapshot_ttl{250};  // a snapshot younger than this is shared
  std::chrono::milliseconds timeout{5000};      // for the runtime's and the cluster's answers
  std::size_t series_points = 900;              // 15 minutes of points
  std::size_t events = 1000;                    // events kept
};

class monitor {
 public:
  // Starts watching `rt` (borrowed; it must outlive the monitor) and taking readings.
  static std::unique_ptr<monitor> start(runtime& rt, monitor_options options);
  ~monitor();  // stops the thread and the watch
  monitor(const monitor&) = delete;
  monitor& operator=(const monitor&) = delete;

  // The feed's JSON for `q`; the runtime's error (timeout, unavailable) when it did not answer.
  expected<std::string> feed(const feed_query& q);
  // A models page's JSON for `q`: `next` only when more models follow.
  expected<std::string> models(const models_query& q);

  struct impl;

 private:
  explicit monitor(std::unique_ptr<impl> i);
  std::unique_ptr<impl> impl_;
};

}  // namespace warm::console
