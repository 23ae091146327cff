#include "metrics/text_format.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <stdexcept>

namespace warm::prometheus {

namespace {

bool name_char(char c, bool first, bool colon) {
  bool alpha = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || (colon && c == ':');
  return alpha || (!first && c >= '0' && c <= '9');
}

const char* kind_name(kind k) {
  switch (k) {
    case kind::counter:
      return "counter";
    case kind::gauge:
      return "gauge";
    case kind::histogram:
      return "histogram";
  }
  return "untyped";
}

}  // namespace

bool valid_metric_name(std::string_view name) noexcept {
  if (name.empty()) return false;
  for (std::size_t i = 0; i < name.size(); ++i)
    if (!name_char(name[i], i == 0, true)) return false;
  return true;
}

bool valid_label_name(std::string_view name) noexcept {
  if (name.empty() || name.substr(0, 2) == "__") return false;
  for (std::size_t i = 0; i < name.size(); ++i)
    if (!name_char(name[i], i == 0, false)) return false;
  return true;
}

std::string escape_label_value(std::string_view value) {
  std::string out;
  out.reserve(value.size());
  for (char c : value) {
    if (c == '\\')
      out += "\\\\";
    else if (c == '"')
      out += "\\\"";
    else if (c == '\n')
      out += "\\n";
    else
      out += c;
  }
  return out;
}

std::string escape_help(std::string_view help) {
  std::string out;
  out.reserve(help.size());
  for (char c : help) {
    if (c == '\\')
      out += "\\\\";
    else if (c == '\n')
      out += "\\n";
    else
      out += c;
  }
  return out;
}

std::string format_value(double value) {
  if (std::isnan(value)) return "NaN";
  if (std::isinf(value)) return value > 0 ? "+Inf" : "-Inf";
  char buffer[64];
  auto [end, ec] = std::to_chars(buffer, buffer + sizeof buffer, value);  // shortest round-trip
  return std::string(buffer, ec == std::errc() ? end : buffer);
}

void text_writer::family(std::string_view name, kind k, std::string_view help) {
  if (!valid_metric_name(name))
    throw std::invalid_argument("invalid metric name '" + std::string(name) + "'");
  if (std::find(seen_.begin(), seen_.end(), name) != seen_.end())
    throw std::invalid_argument("metric family '" + std::string(name) + "' written twice");
  seen_.emplace_back(name);
  name_ = std::string(name);
  kind_ = k;
  out_ += "# HELP " + name_ + " " + escape_help(help) + "\n";
  out_ += "# TYPE " + name_ + " " + kind_name(k) + "\n";
}

void text_writer::series(std::string_view suffix, const labels& l,
                         const std::pair<std::string, std::string>* extra, double value) {
  out_ += name_;
  out_ += suffix;
  if (!l.empty() || extra) {
    out_ += '{';
    bool first = true;
    auto put = [&](const std::pair<std::string, std::string>& label) {
      if (!valid_label_name(label.first) ||
          (label.first == "le" && kind_ == kind::histogram && &label != extra))
        throw std::invalid_argument("invalid label name '" + label.first + "' on " + name_);
      if (!first) out_ += ',';
      first = false;
      out_ += label.first + "=\"" + escape_label_value(label.second) + "\"";
    };
    for (auto& label : l)
      put(label);
    if (extra) put(*extra);
    out_ += '}';
  }
  out_ += ' ';
  out_ += format_value(value);
  out_ += '\n';
}

void text_writer::sample(const labels& l, double value) {
  if (name_.empty()) throw std::invalid_argument("a sample before any family");
  if (kind_ == kind::histogram)
    throw std::invalid_argument(name_ + " is a histogram: write it with histogram()");
  series("", l, nullptr, value);
}

void text_writer::histogram(const labels& l, const warm::histogram::reading& r) {
  if (kind_ != kind::histogram) throw std::invalid_argument(name_ + " is not a histogram");
  for (std::size_t i = 0; i < r.upper_bounds.size(); ++i) {
    std::pair<std::string, std::string> le{"le", format_value(r.upper_bounds[i])};
    series("_bucket", l, &le, static_cast<double>(r.cumulative[i]));
  }
  std::pair<std::string, std::string> inf{"le", "+Inf"};
  series("_bucket", l, &inf, static_cast<double>(r.count));
  series("_sum", l, nullptr, r.sum);
  series("_count", l, nullptr, static_cast<double>(r.count));
}

}  // namespace warm::prometheus
