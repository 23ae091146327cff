#include "actors/registry_writer.hpp"

#include <caf/all.hpp>

#include "actors/protocol/registry_writer_protocol.hpp"

namespace warm {

namespace {

registry_writer_actor::behavior_type writer_behavior(registry_writer_actor::pointer self,
                                                     std::shared_ptr<registry_storage> store) {
  return {
      [store](msg::store_commit& m) {
        msg::store_committed out;
        out.result = m.changes.empty() ? expected<void>{} : store->apply(m.changes);
        if (!out.result)
          if (auto disk = store->load()) out.disk = std::move(*disk);
        return out;
      },
      [self, store](msg::store_close& m) {
        if (!m.changes.empty()) (void)store->apply(m.changes);  // nobody is left to tell
        self->quit();
      },
      [store](msg::store_seen& m) { store->seen(*m.update); },
  };
}

}  // namespace

registry_writer_actor spawn_registry_writer(caf::actor_system& system,
                                            std::unique_ptr<registry_storage> store) {
  return system.spawn<caf::detached>(writer_behavior,
                                     std::shared_ptr<registry_storage>(std::move(store)));
}

}  // namespace warm
