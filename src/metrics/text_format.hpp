// A writer for the Prometheus text exposition format, version 0.0.4:
//   https://prometheus.io/docs/instrumenting/exposition_formats/
// Rules it enforces: metric names match [a-zA-Z_:][a-zA-Z0-9_:]*, label names
// [a-zA-Z_][a-zA-Z0-9_]* and not reserved (`__` prefix); label values escape \ " and newline;
// HELP text escapes \ and newline; each family's HELP and TYPE come once, before its samples;
// values print as Go's strconv would read them (+Inf, -Inf, NaN, shortest round-trip decimal).
// Histograms write cumulative `_bucket{le=…}` series ending with le="+Inf", then `_sum` and
// `_count`. A broken name is the program's bug, so it throws std::invalid_argument.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "warm/metrics.hpp"

namespace warm::prometheus {

using labels = std::vector<std::pair<std::string, std::string>>;

enum class kind { counter, gauge, histogram };

class text_writer {
 public:
  // Starts a family: "# HELP name help" and "# TYPE name kind". A family may be started once.
  void family(std::string_view name, kind k, std::string_view help);
  // One sample of the current family (a counter's or gauge's value).
  void sample(const labels& l, double value);
  // One histogram series of the current family.
  void histogram(const labels& l, const warm::histogram::reading& r);

  const std::string& text() const { return out_; }

 private:
  void series(std::string_view suffix, const labels& l,
              const std::pair<std::string, std::string>* extra, double value);

  std::string out_;
  std::string name_;
  kind kind_ = kind::counter;
  std::vector<std::string> seen_;
};

bool valid_metric_name(std::string_view name) noexcept;
bool valid_label_name(std::string_view name) noexcept;
std::string escape_label_value(std::string_view value);
std::string escape_help(std::string_view help);
std::string format_value(double value);

}  // namespace warm::prometheus
