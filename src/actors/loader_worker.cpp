#include "actors/loader_worker.hpp"

#include <caf/all.hpp>

#include "storage/file_arrival.hpp"
#include "storage/located_file.hpp"

namespace warm {

loader_worker_actor::behavior_type loader_worker(
    loader_worker_actor::stateful_pointer<loader_worker_state> self,
    std::shared_ptr<model_loader> loader, reclaim_fn reclaim, materialize_fn materialize) {
  self->state.loader = std::move(loader);
  self->state.reclaim = std::move(reclaim);
  self->state.materialize = std::move(materialize);
  return {
      [=](msg::load_job& job) -> msg::load_result {
        msg::load_result result;
        // A remote model loads from its copy in the disk tier, pinned until the load is done.
        auto where = job.where;
        std::shared_ptr<void> pin;
        if (!where.source.empty()) {
          // A dense model loaded here reads only through read_exactly: it may follow the fetch.
          const auto mode = where.kind == "dense" && !job.dev->hosted_models()
                                ? copy_mode::arriving
                                : copy_mode::committed;
          auto copy = self->state.materialize
                          ? self->state.materialize(where, mode)
                          : expected<tier_copy>(make_error(
                                errc::unavailable, "remote sources are not configured here"));
          if (!copy) {
            result.error = make_error(
                copy.error().code == errc::unavailable ? errc::unavailable : errc::load_failed,
                copy.error().message);
            return result;
          }
          where = std::move(copy->where);
          pin = std::move(copy->pin);
        }
        // Looked at before the load: a file changed after this look makes the failure stale.
        auto seen = where.arriving ? file_seen{} : look_at(where);
        const auto epoch = where.arriving ? where.arriving->epoch() : 0;
        load_stats stats;
        stats.copied = job.progress.get();
        auto loaded =
            self->state.loader->load(*job.dev, where, std::move(*job.reservation), &stats);
        // A load that followed a fetch holds the object's bytes only if the fetch ended verified
        // with no restart since the load began: else its weights go, through the reclaimer.
        if (loaded && where.arriving)
          if (auto settled = where.arriving->settled(epoch); !settled) {
            weights dropped(std::move(*loaded), self->state.reclaim);
            loaded = expected<std::unique_ptr<resident_model>>(std::move(settled).error());
          }
        if (loaded) {
          // A measurement within the reservation settles here (the excess goes back now); one
          // beyond it is settled by the pool once the device actor has made room for the rest.
          if ((*loaded)->shortfall() == 0) (*loaded)->settle({});
          result.model = std::make_shared<weights>(std::move(*loaded), self->state.reclaim);
        } else {
          result.error = std::move(loaded).error();
          result.file = seen;
        }
        result.seconds = stats.seconds;
        return result;
      },
  };
}

}  // namespace warm
