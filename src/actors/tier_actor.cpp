#include "actors/tier_actor.hpp"

#include <caf/all.hpp>

#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <map>
#include <vector>

#include "actors/protocol/tier_protocol.hpp"

namespace warm {
namespace {

struct fetch_in_flight {
  std::vector<msg::acquire_copy> waiting;
  std::uint32_t reservations = 0;  // reserved again after the object changed size
  // The file as it arrives, for `arriving` requests; the fetch task finishes it.
  std::shared_ptr<file_arrival> arrival;
  std::string temp_path;
};

struct tier_state {
  tier_config config;
  std::map<std::string, fetch_in_flight> fetching;  // by key
  std::uint64_t evictions_counted = 0;  // the tier's evictions already added to the metrics
};

using self_pointer = tier_actor::stateful_pointer<tier_state>;

// The tier's gauges as they are now, and the evictions since the last call.
void publish(tier_state& s) {
  if (!s.config.metrics || !s.config.tier) return;
  auto& m = *s.config.metrics;
  const auto st = s.config.tier->stats();
  m.tier_capacity_bytes.set(static_cast<std::int64_t>(st.capacity));
  m.tier_used_bytes.set(static_cast<std::int64_t>(st.used + st.reserved));
  m.tier_files.set(static_cast<std::int64_t>(st.files));
  m.tier_evictions.add(st.evictions - s.evictions_counted);
  s.evictions_counted = st.evictions;
}

std::string key_of(const sources::remote_model& m) {
  return m.object.url.to_string();
}

// Answers `request` with `file`, pinned until the answer's pin is dropped.
void answer(self_pointer self, msg::acquire_copy& request, const sources::tier_file& file) {
  auto& tier = *self->state.config.tier;
  tier.pin(file.key);
  // The tier's record is the truth about the copy (the request may not know the entity tag).
  auto where = sources::copy_location(request.model, file.path);
  where.root = tier.dir() + "/objects";
  where.source = file.key;
  where.source_etag = file.etag;
  where.source_bytes = file.bytes;
  std::shared_ptr<void> pin(nullptr, [me = caf::actor_cast<tier_actor>(self), key = file.key](
                                         void*) { caf::anon_send(me, msg::release_copy{key}); });
  request.done(tier_copy{std::move(where), std::move(pin)});
}

// Answers `request` with the file of the fetch in flight, read as it arrives.
void answer_arriving(msg::acquire_copy& request, const fetch_in_flight& fetch) {
  auto where = sources::copy_location(request.model, fetch.temp_path);
  where.arriving = fetch.arrival;
  request.done(tier_copy{std::move(where), fetch.arrival});
}

void fail_all(std::vector<msg::acquire_copy>& waiting, const error& why) {
  for (auto& w : waiting)
    w.done(why);
}

// Reserves room for `model` and starts its fetch; false (every waiter answered) when there is none.
bool start_fetch(self_pointer self, const std::string& key, const sources::remote_model& model) {
  auto& s = self->state;
  auto reserved = s.config.tier->reserve(key, model.name, model.object.size);
  if (!reserved) {
    auto waiting = std::move(s.fetching[key].waiting);
    s.fetching.erase(key);
    fail_all(waiting, make_error(reserved.error().code, "the disk tier cannot take '" + key +
                                                            "': " + reserved.error().message));
    return false;
  }
  auto& fetch = s.fetching[key];
  ++fetch.reservations;
  fetch.arrival = std::make_shared<file_arrival>(model.object.size, key);
  fetch.temp_path = reserved->temp_path;
  // The arriving requests among the waiters (of a fetch started again) follow the new one.
  auto waiting = std::move(fetch.waiting);
  for (auto& w : waiting)
    if (w.mode == copy_mode::arriving)
      answer_arriving(w, fetch);
    else
      fetch.waiting.push_back(std::move(w));
  s.config.fetch_on([me = caf::actor_cast<tier_actor>(self), remote = s.config.remote, key, model,
                     reservation = std::move(*reserved),
                     arrival = std::make_shared<arrival_guard>(fetch.arrival)]() mutable {
    auto now = model;
    auto result = sources::fetch_to_file(*remote, now, reservation.temp_path, reservation.bytes,
                                         arrival->get());
    // The readers following the fetch learn its end now, before the tier commits the file.
    const bool whole = result && !result->changed;
    if (whole)
      arrival->get()->finish({});
    else if (result)
      arrival->get()->finish(
          make_error(errc::load_failed, "'" + key + "' was replaced while it was being fetched"));
    else
      arrival->get()->finish(result.error());
    // The file's data is synced here, on the fetch's thread, so that the tier's commit (on the
    // actor's, which every request waits behind) finds it clean: its own sync is then quick.
    if (whole) {
      const int fd = ::open(reservation.temp_path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
      if (fd >= 0) {
        ::fdatasync(fd);
        ::close(fd);
      }
    }
    caf::anon_send(
        me, msg::copy_fetched{key, std::move(reservation), std::move(result), std::move(now)});
  });
  return true;
}

void on_fetched(self_pointer self, msg::copy_fetched& m) {
  auto& s = self->state;
  auto& tier = *s.config.tier;
  auto it = s.fetching.find(m.key);
  if (it == s.fetching.end()) return tier.abort(std::move(m.reservation));  // cannot happen
  if (m.result && s.config.metrics) s.config.metrics->fetch_bytes.add(m.result->bytes);
  if (m.result && m.result->changed && it->second.reservations < 3) {
    tier.abort(std::move(m.reservation));
    for (auto& w : it->second.waiting)
      w.model = m.now;
    start_fetch(self, m.key, m.now);  // the new size
    return;
  }
  auto waiting = std::move(it->second.waiting);
  s.fetching.erase(it);
  if (!m.result || m.result->changed) {
    if (s.config.metrics) s.config.metrics->fetch_failures.add();
    tier.abort(std::move(m.reservation));
    return fail_all(waiting, m.result ? make_error(errc::load_failed,
                                                   "'" + m.key + "' kept changing during the fetch")
                                      : m.result.error());
  }
  auto committed = tier.commit(std::move(m.reservation), m.now.object.etag, m.result->seconds);
  if (!committed) {
    if (s.config.metrics) s.config.metrics->fetch_failures.add();
    return fail_all(waiting, committed.error());
  }
  if (s.config.metrics) {
    s.config.metrics->fetches.add();
    s.config.metrics->fetch_seconds.observe(m.result->seconds);
  }
  for (auto& w : waiting)
    answer(self, w, *committed);
}

tier_actor::behavior_type tier(self_pointer self, std::shared_ptr<tier_config> config) {
  self->state.config = std::move(*config);
  publish(self->state);
  return {
      [=](msg::acquire_copy& m) {
        auto& s = self->state;
        if (!s.config.tier) {
          auto opened = s.config.open ? s.config.open()
                                      : expected<sources::disk_tier>(make_error(
                                            errc::unavailable, "no disk tier is configured"));
          if (!opened) return m.done(opened.error());
          s.config.tier = std::make_unique<sources::disk_tier>(std::move(*opened));
        }
        const auto key = key_of(m.model);
        if (auto it = s.fetching.find(key); it != s.fetching.end()) {
          if (m.mode == copy_mode::arriving && it->second.arrival)
            return answer_arriving(m, it->second);
          if (m.mode != copy_mode::held_only) return it->second.waiting.push_back(std::move(m));
          // held_only: answered from what the tier held before this fetch, if anything
        }
        if (auto found = s.config.tier->find(key, m.model.object.etag)) {
          if (s.config.metrics) s.config.metrics->tier_hits.add();
          return answer(self, m, *found);
        }
        if (m.mode == copy_mode::held_only)
          return m.done(make_error(errc::not_found, "the disk tier does not hold '" + key + "'"));
        if (s.config.metrics) s.config.metrics->tier_misses.add();
        auto model = m.model;
        s.fetching[key].waiting.push_back(std::move(m));
        start_fetch(self, key, model);
        publish(s);
      },
      [=](msg::copy_fetched& m) {
        on_fetched(self, m);
        publish(self->state);
      },
      [=](msg::release_copy& m) {
        if (self->state.config.tier) self->state.config.tier->unpin(m.key);
      },
      [=](msg::inspect_tier& m) {
        const auto& s = self->state;
        tier_info out;
        if (s.config.tier) {
          const auto& tier = *s.config.tier;
          const auto st = tier.stats();
          out.open = true;
          out.dir = tier.dir();
          out.capacity = st.capacity;
          out.used = st.used;
          out.reserved = st.reserved;
          out.files = st.files;
          out.evictions = st.evictions;
          for (auto& f : tier.files())
            if (m.source.empty() || f.key == m.source)
              out.held.push_back({std::move(f.key), f.bytes, {}});
        }
        if (s.config.metrics) {
          const auto& metrics = *s.config.metrics;
          out.hits = metrics.tier_hits.value();
          out.misses = metrics.tier_misses.value();
          out.fetches = metrics.fetches.value();
          out.fetch_failures = metrics.fetch_failures.value();
          out.fetch_bytes = metrics.fetch_bytes.value();
          out.fetch_seconds = metrics.fetch_seconds.read().sum;
        }
        m.done(std::move(out));
      },
  };
}

}  // namespace

tier_actor spawn_tier(caf::actor_system& system, tier_config config) {
  return system.spawn<caf::detached>(tier, std::make_shared<tier_config>(std::move(config)));
}

}  // namespace warm
