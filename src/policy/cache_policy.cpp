#include "policy/cache_policy.hpp"

#include "policy/arc_policy.hpp"
#include "policy/expert_policy.hpp"
#include "policy/gdsf_policy.hpp"
#include "policy/iam_policy.hpp"
#include "policy/kdf_policy.hpp"
#include "policy/lecar_policy.hpp"
#include "policy/lfu_policy.hpp"
#include "policy/lhd_policy.hpp"
#include "policy/lru_policy.hpp"
#include "policy/s3fifo_policy.hpp"
#include "policy/sieve_policy.hpp"
#include "policy/srrip_policy.hpp"

namespace warm {

const std::vector<std::string>& policy_names() {
  static const std::vector<std::string> names{"lru",   "lfu",    "arc", "srrip",
                                              "sieve", "s3fifo", "lhd", "lecar",
                                              "gdsf",  "iam",    "kdf", "kdf-adaptive"};
  return names;
}

expected<std::unique_ptr<cache_policy>> make_policy(std::string_view name,
                                                    const policy_options& options) {
  std::unique_ptr<cache_policy> p;
  if (name == "lru") p = std::make_unique<lru_policy>();
  if (name == "lfu") p = std::make_unique<lfu_policy>();
  if (name == "arc") p = std::make_unique<arc_policy>(options.capacity);
  if (name == "srrip") p = std::make_unique<srrip_policy>();
  if (name == "sieve") p = std::make_unique<sieve_policy>();
  if (name == "s3fifo") p = std::make_unique<s3fifo_policy>(options.capacity);
  if (name == "lhd") p = std::make_unique<lhd_policy>();
  if (name == "lecar") p = std::make_unique<lecar_policy>(options.capacity);
  if (name == "gdsf") p = std::make_unique<gdsf_policy>();
  if (name == "iam") {
    if (options.iam_rate != "ewma" && options.iam_rate != "window")
      return make_error(errc::invalid_argument, "iam rate estimator must be ewma or window, not '" +
                                                    options.iam_rate + "'");
    if (options.rate_tau.count() <= 0 || options.rate_window.count() <= 0 || options.iam_bias <= 0)
      return make_error(errc::invalid_argument,
                        "iam needs a positive rate time constant, window and bias");
    p = std::make_unique<iam_policy>(options);
  }
  if (name == "kdf" || name == "kdf-adaptive") {
    if ((options.kdf_tau && options.kdf_tau->count() < 0) || options.kdf_horizon < 0 ||
        options.kdf_window.count() <= 0 || (options.kdf_memory && !(*options.kdf_memory > 0)))
      return make_error(
          errc::invalid_argument,
          "kdf needs tau >= 0, horizon >= 0, a positive memory and a positive window");
    if (name == "kdf")
      p = std::make_unique<kdf_policy>(options);
    else
      p = std::make_unique<expert_policy>(options, expert_policy::default_experts(options));
  }
  if (!p) {
    std::string known;
    for (auto& n : policy_names())
      known += (known.empty() ? "" : ", ") + n;
    return make_error(errc::invalid_argument,
                      "unknown policy '" + std::string(name) + "' (known: " + known + ")");
  }
  return p;
}

}  // namespace warm
