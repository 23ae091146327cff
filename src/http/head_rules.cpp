#include "http/conn_gate.hpp"

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

// The gate's pure rules for request heads (conn_gate.hpp): scanning, framing, what decides who
// reads the body.
namespace warm::http {

head_scan scan_head(std::string_view bytes, const head_limits& limits, head_progress* progress) {
  head_progress local;
  auto& p = progress ? *progress : local;
  for (; p.scanned < bytes.size() && p.scanned < limits.max_bytes; ++p.scanned) {
    std::size_t i = p.scanned;
    if (bytes[i] != '\n') continue;
    std::size_t length = i - p.line_start;
    if (length > 0 && bytes[i - 1] == '\r') --length;
    if (length == 0) return head_scan::complete;
    if (++p.lines > limits.max_lines) return head_scan::too_many_lines;
    p.line_start = i + 1;
  }
  return bytes.size() >= limits.max_bytes ? head_scan::too_large : head_scan::incomplete;
}

namespace {

// ASCII's lower case, whatever the C locale says (HTTP's names and tokens are ASCII); inline, where
// std::tolower is a call per byte.
char ascii_lower(char c) {
  return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c;
}

// Whether `line` is a header line named `name` (lower case), matched without regard to case.
bool names(std::string_view line, std::string_view name) {
  if (line.size() <= name.size() || line[name.size()] != ':') return false;
  for (std::size_t i = 0; i < name.size(); ++i)
    if (ascii_lower(line[i]) != name[i]) return false;
  return true;
}

// The value of header line `line` named `name`, without its line ending and the spaces and tabs
// around it.
std::string_view value_of(std::string_view line, std::string_view name) {
  auto value = line.substr(name.size() + 1);
  auto blank = [](char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; };
  while (!value.empty() && blank(value.back()))
    value.remove_suffix(1);
  while (!value.empty() && blank(value.front()))
    value.remove_prefix(1);
  return value;
}

bool is_100_continue(std::string_view line) {
  static constexpr std::string_view expected = "100-continue";
  auto value = value_of(line, "expect");
  if (value.size() != expected.size()) return false;
  for (std::size_t i = 0; i < value.size(); ++i)
    if (ascii_lower(value[i]) != expected[i]) return false;
  return true;
}

// Calls `visit(line, at)` for each header line of a head (`head`: up to its final empty line),
// `line` with its line ending, `at` where it starts; the request line is no header.
template <class F>
void each_header(std::string_view head, F visit) {
  auto first = head.find('\n');
  for (std::size_t at = first == std::string_view::npos ? head.size() : first + 1;
       at < head.size();) {
    auto end = head.find('\n', at);
    auto line =
        head.substr(at, end == std::string_view::npos ? std::string_view::npos : end + 1 - at);
    visit(line, at);
    at += line.size();
  }
}

}  // namespace

bool frame_bodyless_request(std::string& bytes, std::size_t empty_line_start) {
  std::string_view head(bytes.data(), std::min(empty_line_start, bytes.size()));
  bool framed = false;
  each_header(head, [&](std::string_view line, std::size_t) {
    framed = framed || names(line, "content-length") || names(line, "transfer-encoding");
  });
  if (framed) return false;
  bytes.insert(head.size(), bodyless_framing);
  return true;
}

head_facts read_head(std::string_view bytes, std::size_t empty_line_start) {
  head_facts facts;
  auto head = bytes.substr(0, std::min(empty_line_start, bytes.size()));
  facts.size = head.size() + (bytes.substr(head.size(), 2) == "\r\n" ? 2 : 1);
  auto request_line = head.substr(0, head.find('\n'));
  auto space = request_line.find(' ');
  facts.method = request_line.substr(0, space);
  if (space != std::string_view::npos) {
    auto target = request_line.substr(space + 1);
    facts.target = target.substr(0, target.find_first_of(" \r"));
  }
  int lengths = 0;
  bool plain = true;  // every Content-Length a plain number
  bool encoded = false;
  each_header(head, [&](std::string_view line, std::size_t) {
    if (names(line, "content-length")) {
      ++lengths;
      auto value = value_of(line, "content-length");
      plain = plain && !value.empty() && value.size() <= 19 &&
              value.find_first_not_of("0123456789") == std::string_view::npos;
      if (plain) facts.length = std::stoull(std::string(value));
    } else if (names(line, "transfer-encoding")) {
      encoded = true;
    } else if (names(line, "expect") && is_100_continue(line)) {
      facts.expect_continue = true;
    }
  });
  if (encoded || lengths > 1 || !plain) {
    facts.body = head_facts::framing::other;
    facts.length = 0;
  } else if (lengths == 1) {
    facts.body = head_facts::framing::length;
  }
  return facts;
}

std::size_t drop_expect_continue(std::string& bytes, std::size_t empty_line_start) {
  std::string_view head(bytes.data(), std::min(empty_line_start, bytes.size()));
  std::vector<std::pair<std::size_t, std::size_t>> lines;  // where, how long
  each_header(head, [&](std::string_view line, std::size_t at) {
    if (names(line, "expect") && is_100_continue(line)) lines.emplace_back(at, line.size());
  });
  std::size_t removed = 0;
  for (auto it = lines.rbegin(); it != lines.rend();
       ++it) {  // the last first: earlier offsets stay valid
    bytes.erase(it->first, it->second);
    removed += it->second;
  }
  return removed;
}

}  // namespace warm::http
