// warmctl's output of the disk tier: where a remote model's bytes are (status, models) and the
// tier's totals and files (inspect tier).
#include <cstdio>

#include "format.hpp"
#include "warm/units.hpp"

namespace warm::ctl {
namespace {

std::string bytes_text(std::uint64_t bytes) {
  return format_bytes(bytes) + " (" + std::to_string(bytes) + " bytes)";
}

std::string seconds_text(double seconds) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2fs", seconds);
  return buf;
}

std::string joined(const std::vector<std::string>& items) {
  std::string out;
  for (const auto& item : items)
    out += (out.empty() ? "" : ",") + item;
  return out.empty() ? "-" : out;
}

}  // namespace

void add_tier_fields(json& doc, const model_status& s) {
  if (s.source.empty()) return;
  doc["source"] = s.source;
  doc["tier"] = {{"held", s.in_tier}, {"bytes", s.tier_bytes}};
}

void add_tier_rows(table& t, const model_status& s) {
  if (s.source.empty()) return;
  t.add({"source:", s.source});
  t.add({"disk tier:",
         s.in_tier ? "held, " + bytes_text(s.tier_bytes) : "not held (at the source only)"});
}

json to_json(const tier_info& t) {
  json held = json::array();
  for (const auto& h : t.held)
    held.push_back({{"source", h.source}, {"bytes", h.bytes}, {"models", h.models}});
  return {{"open", t.open},
          {"dir", t.dir},
          {"capacity", t.capacity},
          {"used", t.used},
          {"reserved", t.reserved},
          {"files", t.files},
          {"hits", t.hits},
          {"misses", t.misses},
          {"evictions", t.evictions},
          {"fetches", {{"ok", t.fetches}, {"failed", t.fetch_failures}}},
          {"fetch_bytes", t.fetch_bytes},
          {"fetch_seconds", t.fetch_seconds},
          {"held", std::move(held)}};
}

void print_tier(std::ostream& out, const tier_info& t) {
  if (!t.open) {
    out << "disk tier: not open (no remote model met yet)\n";
    return;
  }
  out << "disk tier " << t.dir << ": " << format_bytes(t.used) << " of " << format_bytes(t.capacity)
      << " used (" << t.used << " of " << t.capacity << " bytes, " << t.reserved << " reserved), "
      << t.files << " files\n"
      << "hits " << t.hits << ", misses " << t.misses << ", evictions " << t.evictions
      << "; fetches " << t.fetches << " ok, " << t.fetch_failures << " failed, "
      << format_bytes(t.fetch_bytes) << " (" << t.fetch_bytes << " bytes) in "
      << seconds_text(t.fetch_seconds) << "\n";
  table files({"SOURCE", "SIZE", "MODELS"});
  for (const auto& h : t.held)
    files.add({h.source, format_bytes(h.bytes), joined(h.models)});
  files.print(out);
}

}  // namespace warm::ctl
