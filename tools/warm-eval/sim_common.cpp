#include "sim_common.hpp"

#include <chrono>
#include <cmath>
#include <stdexcept>

#include "warm/units.hpp"

namespace warm::eval_cli {

void add_tuning_flags(CLI::App& cmd, tuning_flags& flags) {
  cmd.add_option("--kdf-tau", flags.kdf_tau,
                 "kdf: decay time constant of request counts: auto, or seconds (0 = none)")
      ->capture_default_str()
      ->check([](const std::string& v) -> std::string {
        if (v == "auto") return "";
        try {
          std::size_t used = 0;
          double s = std::stod(v, &used);
          if (used == v.size() && s >= 0 && std::isfinite(s)) return "";
        } catch (const std::exception&) {
        }
        return "--kdf-tau must be auto or seconds >= 0";
      });
  cmd.add_option("--kdf-memory", flags.kdf_memory,
                 "kdf: automatic tau = memory x characteristic time; auto: memory chosen online")
      ->capture_default_str()
      ->check([](const std::string& v) -> std::string {
        if (v == "auto") return "";
        try {
          std::size_t used = 0;
          double m = std::stod(v, &used);
          if (used == v.size() && m >= 0.001 && m <= 1e6) return "";
        } catch (const std::exception&) {
        }
        return "--kdf-memory must be auto or a number in [0.001, 1e6]";
      });
  cmd.add_option("--kdf-window", flags.kdf_window_s,
                 "kdf: time constant of the experts' costs, seconds")
      ->capture_default_str();
  cmd.add_option("--kdf-horizon", flags.kdf_horizon, "kdf: value saturation h (0 = linear)")
      ->capture_default_str();
  cmd.add_option("--rescore", flags.rescore_s, "iam: seconds of trace time between heap rebuilds")
      ->capture_default_str()
      ->check(CLI::Range(0.001, 86400.0));
}

policy_options to_policy_options(const tuning_flags& flags) {
  policy_options tuning;
  tuning.rescore_period = std::chrono::duration<double>(flags.rescore_s);
  if (flags.kdf_tau != "auto")
    tuning.kdf_tau = std::chrono::duration<double>(std::stod(flags.kdf_tau));
  if (flags.kdf_memory != "auto") tuning.kdf_memory = std::stod(flags.kdf_memory);
  tuning.kdf_horizon = flags.kdf_horizon;
  tuning.kdf_window = std::chrono::duration<double>(flags.kdf_window_s);
  return tuning;
}

expected<std::uint64_t> parse_capacity(const std::string& text, const eval::catalog& models) {
  if (!text.empty() && text.back() == '%') {
    try {
      std::size_t used = 0;
      double pct = std::stod(text.substr(0, text.size() - 1), &used);
      if (used != text.size() - 1 || !(pct > 0) || pct > 1000) throw std::invalid_argument("range");
      return static_cast<std::uint64_t>(static_cast<double>(eval::total_bytes(models)) * pct / 100);
    } catch (const std::exception&) {
      return make_error(errc::invalid_argument,
                        "bad capacity '" + text + "' (expected BYTES or P%, e.g. 60%)");
    }
  }
  return parse_bytes(text);
}

nlohmann::ordered_json to_json(const eval::sim_result& r) {
  return nlohmann::ordered_json{{"policy", r.policy},
                                {"capacity_bytes", r.capacity_bytes},
                                {"requests", r.requests},
                                {"hits", r.hits},
                                {"misses", r.misses},
                                {"hit_ratio", r.hit_ratio},
                                {"byte_miss_ratio", r.byte_miss_ratio},
                                {"load_ms_total", r.load_ms_total},
                                {"load_ms_per_request", r.load_ms_per_request},
                                {"evictions", r.evictions}};
}

nlohmann::ordered_json to_json(const eval::cluster_result& r) {
  return nlohmann::ordered_json{{"policy", r.policy},
                                {"placement", r.placement},
                                {"instances", r.instances},
                                {"instance_capacity_bytes", r.instance_capacity},
                                {"requests", r.requests},
                                {"cold_starts", r.cold_starts},
                                {"waited", r.waited},
                                {"hit_ratio", r.hit_ratio},
                                {"load_ms_total", r.load_ms_total},
                                {"wait_ms_total", r.wait_ms_total},
                                {"wait_ms_per_request", r.wait_ms_per_request},
                                {"evictions", r.evictions},
                                {"forced", r.forced},
                                {"max_share", r.max_share}};
}

}  // namespace warm::eval_cli
