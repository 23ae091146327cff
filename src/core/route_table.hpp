// The hit path's index: which loaded slot serves a model id, and which model a vmodel id names.
// Readers (client threads calling infer) look up without locks or shared writes: the table is an
// immutable snapshot published by copy-on-write, and each thread keeps the snapshot it last saw
// until the version changes. Writers (model actors on load and unload, the registry on vmodel
// flips) are rare; they serialize on a mutex that guards only the copy-and-publish.
//
// A snapshot may name a slot that was withdrawn since: the slot itself refuses the lease, and the
// caller takes the slow path. The table never keeps weights alive (a withdrawn slot frees them).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

#include "core/serving_slot.hpp"

namespace warm {

class route_table {
 public:
  struct snapshot {
    std::unordered_map<std::string, std::shared_ptr<serving_slot>> slots;  // model id → slot
    std::unordered_map<std::string, std::string> aliases;                   // vmodel id → model id
  };

  route_table();

  // The current snapshot, cached per thread (one atomic load when nothing changed).
  const snapshot& current() const;

  // Resolves a vmodel id to its active model (or returns `id`) and finds its slot; null when the
  // model has no slot in this snapshot. Sets *model_id to the resolved model id.
  static serving_slot* find(const snapshot& s, const std::string& id, const std::string** model_id);

  void put_slot(const std::string& model, std::shared_ptr<serving_slot> slot);
  // Removes the model's slot if it is still `slot` (a newer load may have replaced it).
  void erase_slot(const std::string& model, const serving_slot* slot);
  void put_alias(const std::string& vmodel, const std::string& model);
  void erase_alias(const std::string& vmodel);
  // Replaces every alias at once, in one published snapshot (a registry reload: n vmodels cost
  // one copy of the table, not n).
  void replace_aliases(std::unordered_map<std::string, std::string> aliases);

 private:
  template <class Edit>
  void update(Edit&& edit);

  const std::uint64_t instance_;  // distinguishes tables in one process for the thread caches
  std::atomic<std::uint64_t> version_{1};
  std::shared_ptr<const snapshot> published_;
  std::mutex writers_;
};

}  // namespace warm
