// Conversions of inspection snapshots and model events (convert.hpp has the contracts).
#include <algorithm>
#include <chrono>
#include <cmath>

#include "rpc/convert.hpp"

namespace warm::rpc {

// ---- inspection and events -----------------------------------------------------------------

void to_capnp(const inspection& s, Inspection::Builder out) {
  auto devices = out.initDevices(static_cast<unsigned>(s.devices.size()));
  for (unsigned i = 0; i < s.devices.size(); ++i) {
    const auto& d = s.devices[i];
    auto o = devices[i];
    o.setName(to_text(d.name));
    o.setPolicy(to_text(d.policy));
    o.setCapacity(d.capacity);
    o.setUsed(d.used);
    o.setDraining(d.draining);
    o.setEvictions(d.evictions);
    o.setScoreSwaps(d.score_swaps);
    o.setState(to_text(d.state));
    auto resident = o.initResident(static_cast<unsigned>(d.resident.size()));
    for (unsigned j = 0; j < d.resident.size(); ++j) {
      const auto& r = d.resident[j];
      resident[j].setModel(to_text(r.model));
      resident[j].setBytes(r.bytes);
      resident[j].setInFlight(r.in_flight);
      resident[j].setUses(r.uses);
      resident[j].setIdleSeconds(r.idle_seconds);
      resident[j].setScore(r.score);
      resident[j].setPredicted(r.predicted);
      resident[j].setMeasured(r.measured);
    }
  }
  auto queue = out.initQueue(static_cast<unsigned>(s.queue.size()));
  for (unsigned i = 0; i < s.queue.size(); ++i) {
    queue[i].setModel(to_text(s.queue[i].model));
    queue[i].setWaiting(s.queue[i].waiting);
    queue[i].setAgeMs(s.queue[i].age_ms);
    queue[i].setAttempts(s.queue[i].attempts);
    queue[i].setWaiters(s.queue[i].waiters);
  }
  auto running = out.initRunning(static_cast<unsigned>(s.running.size()));
  for (unsigned i = 0; i < s.running.size(); ++i) {
    running[i].setModel(to_text(s.running[i].model));
    running[i].setDevice(to_text(s.running[i].device));
    running[i].setPhase(to_text(s.running[i].phase));
    running[i].setAttempt(s.running[i].attempt);
    running[i].setWaiters(s.running[i].waiters);
    running[i].setElapsedMs(s.running[i].elapsed_ms);
    running[i].setBytes(s.running[i].bytes);
  }
  auto failures = out.initFailures(static_cast<unsigned>(s.failures.size()));
  for (unsigned i = 0; i < s.failures.size(); ++i) {
    const auto& f = s.failures[i];
    failures[i].setModel(to_text(f.model));
    failures[i].setDevice(to_text(f.device));
    to_capnp(f.error, failures[i].initError());
    failures[i].setAgeSeconds(f.age_seconds);
    failures[i].setExpiresInSeconds(f.expires_in_seconds);
  }
  auto models = out.initModels(static_cast<unsigned>(s.models.size()));
  for (unsigned i = 0; i < s.models.size(); ++i)
    to_capnp(s.models[i], models[i]);
  out.setRegisteredModels(s.registered_models);
  out.setVmodels(s.vmodels);
  out.setMaxConcurrentLoads(s.max_concurrent_loads);
  out.setLoadsStarted(s.loads_started);
  out.setLoadsFailed(s.loads_failed);
  out.setImportanceRebuilds(s.importance_rebuilds);
  out.setImportanceRebuildSeconds(s.importance_rebuild_seconds);
  auto tier = out.initTier();
  const auto& t = s.tier;
  tier.setOpen(t.open);
  tier.setDir(to_text(t.dir));
  tier.setCapacity(t.capacity);
  tier.setUsed(t.used);
  tier.setReserved(t.reserved);
  tier.setFiles(t.files);
  tier.setHits(t.hits);
  tier.setMisses(t.misses);
  tier.setEvictions(t.evictions);
  tier.setFetches(t.fetches);
  tier.setFetchFailures(t.fetch_failures);
  tier.setFetchBytes(t.fetch_bytes);
  tier.setFetchSeconds(t.fetch_seconds);
  auto held = tier.initHeld(static_cast<unsigned>(t.held.size()));
  for (unsigned i = 0; i < t.held.size(); ++i) {
    held[i].setSource(to_text(t.held[i].source));
    held[i].setBytes(t.held[i].bytes);
    set_texts(t.held[i].models, [&](unsigned n) { return held[i].initModels(n); });
  }
}

inspection from_capnp(Inspection::Reader s) {
  inspection out;
  for (auto d : s.getDevices()) {
    device_info o;
    o.name = to_std(d.getName());
    o.policy = to_std(d.getPolicy());
    o.capacity = d.getCapacity();
    o.used = d.getUsed();
    o.draining = d.getDraining();
    o.evictions = d.getEvictions();
    o.score_swaps = d.getScoreSwaps();
    o.state = to_std(d.getState());
    for (auto r : d.getResident())
      o.resident.push_back({to_std(r.getModel()), r.getBytes(), r.getInFlight(), r.getUses(),
                            r.getIdleSeconds(), r.getScore(), r.getPredicted(), r.getMeasured()});
    out.devices.push_back(std::move(o));
  }
  for (auto q : s.getQueue())
    out.queue.push_back(
        {to_std(q.getModel()), q.getWaiting(), q.getAgeMs(), q.getAttempts(), q.getWaiters()});
  for (auto r : s.getRunning())
    out.running.push_back({to_std(r.getModel()), to_std(r.getDevice()), to_std(r.getPhase()),
                           r.getAttempt(), r.getWaiters(), r.getElapsedMs(), r.getBytes()});
  for (auto f : s.getFailures()) {
    failure_info o;
    o.model = to_std(f.getModel());
    o.device = to_std(f.getDevice());
    auto err = optional_error(f.getError());
    o.error = err ? *err : make_error(errc::internal, "failure record without an error");
    o.age_seconds = f.getAgeSeconds();
    o.expires_in_seconds = f.getExpiresInSeconds();
    out.failures.push_back(std::move(o));
  }
  for (auto m : s.getModels())
    out.models.push_back(from_capnp(m));
  out.registered_models = s.getRegisteredModels();
  out.vmodels = s.getVmodels();
  out.max_concurrent_loads = s.getMaxConcurrentLoads();
  out.loads_started = s.getLoadsStarted();
  out.loads_failed = s.getLoadsFailed();
  out.importance_rebuilds = s.getImportanceRebuilds();
  out.importance_rebuild_seconds = s.getImportanceRebuildSeconds();
  auto tier = s.getTier();
  auto& t = out.tier;
  t.open = tier.getOpen();
  t.dir = to_std(tier.getDir());
  t.capacity = tier.getCapacity();
  t.used = tier.getUsed();
  t.reserved = tier.getReserved();
  t.files = tier.getFiles();
  t.hits = tier.getHits();
  t.misses = tier.getMisses();
  t.evictions = tier.getEvictions();
  t.fetches = tier.getFetches();
  t.fetch_failures = tier.getFetchFailures();
  t.fetch_bytes = tier.getFetchBytes();
  t.fetch_seconds = tier.getFetchSeconds();
  for (auto h : tier.getHeld()) {
    tier_held o;
    o.source = to_std(h.getSource());
    o.bytes = h.getBytes();
    o.models = texts(h.getModels());
    t.held.push_back(std::move(o));
  }
  return out;
}

void to_capnp(const model_event& e, ModelEvent::Builder out) {
  out.setModel(to_text(e.model));
  out.setPrevious(to_capnp(e.previous));
  out.setState(to_capnp(e.state));
  out.setDevice(to_text(e.device));
  to_capnp(e.error, out.initError());
  out.setSequence(e.sequence);
  out.setReason(to_text(e.reason));
}

model_event from_capnp(ModelEvent::Reader e) {
  model_event out;
  out.model = to_std(e.getModel());
  out.previous = from_capnp(e.getPrevious());
  out.state = from_capnp(e.getState());
  out.device = to_std(e.getDevice());
  out.error = optional_error(e.getError());
  out.sequence = e.getSequence();
  out.reason = to_std(e.getReason());
  return out;
}

}  // namespace warm::rpc
