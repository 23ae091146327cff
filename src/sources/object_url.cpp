#include "sources/object_url.hpp"

#include <algorithm>
#include <cctype>
#include <optional>

namespace warm::sources {
namespace {

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

bool has_prefix_nocase(const std::string& s, const std::string& prefix) {
  return s.size() >= prefix.size() && lower(s.substr(0, prefix.size())) == prefix;
}

// S3's bucket naming rules: 3 to 63 of [a-z0-9.-], starting and ending with a letter or digit,
// no "..".
bool valid_bucket(const std::string& b) {
  if (b.size() < 3 || b.size() > 63) return false;
  for (char c : b)
    if (!(std::islower(static_cast<unsigned char>(c)) ||
          std::isdigit(static_cast<unsigned char>(c)) || c == '.' || c == '-'))
      return false;
  auto alnum = [](char c) {
    return std::islower(static_cast<unsigned char>(c)) ||
           std::isdigit(static_cast<unsigned char>(c));
  };
  return alnum(b.front()) && alnum(b.back()) && b.find("..") == std::string::npos;
}

// A path (or key) whose segments are never "." or "..": an object may not name its way out of
// its prefix. Empty segments ("a//b") are refused too: S3 keys may hold them, repositories don't.
expected<void> check_segments(const std::string& path, const std::string& whole) {
  std::size_t start = 0;
  while (start < path.size()) {
    auto end = path.find('/', start);
    if (end == std::string::npos) end = path.size();
    const auto seg = path.substr(start, end - start);
    if (seg == "." || seg == "..")
      return invalid_input("'" + whole + "': a path may not contain '.' or '..' segments");
    if (seg.empty() && end != path.size())
      return invalid_input("'" + whole + "': a path may not contain empty segments");
    start = end + 1;
  }
  return {};
}

// host[:port]: letters, digits, '.', '-', an IPv6 literal in brackets, and a numeric port.
bool valid_authority(const std::string& a) {
  if (a.empty() || a.size() > 255) return false;
  std::string host = a, port;
  if (a.front() == '[') {
    auto close = a.find(']');
    if (close == std::string::npos) return false;
    host = a.substr(1, close - 1);
    if (close + 1 < a.size()) {
      if (a[close + 1] != ':') return false;
      port = a.substr(close + 2);
      if (port.empty()) return false;
    }
    if (host.empty()) return false;
    for (char c : host)
      if (!(std::isxdigit(static_cast<unsigned char>(c)) || c == ':' || c == '.')) return false;
  } else {
    auto colon = a.find(':');
    if (colon != std::string::npos) {
      host = a.substr(0, colon);
      port = a.substr(colon + 1);
      if (port.empty()) return false;
    }
    if (host.empty()) return false;
    for (char c : host)
      if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-')) return false;
  }
  if (port.size() > 5) return false;
  for (char c : port)
    if (!std::isdigit(static_cast<unsigned char>(c))) return false;
  return port.empty() || std::stoul(port) <= 65535;
}

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// `text` with each %XX replaced by its byte; nullopt for a '%' not followed by two hex digits.
std::optional<std::string> percent_decode(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (text[i] != '%') {
      out.push_back(text[i]);
      continue;
    }
    if (i + 2 >= text.size()) return std::nullopt;
    const int hi = hex_value(text[i + 1]), lo = hex_value(text[i + 2]);
    if (hi < 0 || lo < 0) return std::nullopt;
    out.push_back(static_cast<char>(hi * 16 + lo));
    i += 2;
  }
  return out;
}

// A decoded key or path as URLs show it: the bytes parse would refuse or misread (controls,
// space, '%', '?', '#') percent-encoded, all others as they are, so parse(to_string()) round-trips.
std::string shown_path(const std::string& raw) {
  static const char* hex = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : raw) {
    if (c <= 0x20 || c == 0x7f || c == '%' || c == '?' || c == '#') {
      out.push_back('%');
      out.push_back(hex[c >> 4]);
      out.push_back(hex[c & 15]);
    } else {
      out.push_back(static_cast<char>(c));
    }
  }
  return out;
}

// `location` as messages may show it: any user information before the host is replaced.
std::string shown(const std::string& location) {
  const auto scheme_end = location.find("://");
  const auto start = scheme_end == std::string::npos ? 0 : scheme_end + 3;
  const auto host_end = location.find('/', start);
  const auto at = location.rfind('@', host_end == std::string::npos ? std::string::npos : host_end);
  if (at == std::string::npos || at < start) return location;
  return location.substr(0, start) + "(user information removed)@" + location.substr(at + 1);
}

}  // namespace

bool is_remote(const std::string& location) {
  return has_prefix_nocase(location, "s3://") || has_prefix_nocase(location, "http://") ||
         has_prefix_nocase(location, "https://");
}

std::string object_url::to_string() const {
  switch (kind) {
    case scheme::s3:
      return "s3://" + bucket + (key.empty() ? "" : "/" + shown_path(key));
    case scheme::http:
      return "http://" + authority + shown_path(path);
    case scheme::https:
      return "https://" + authority + shown_path(path);
  }
  return {};
}

object_url object_url::child(const std::string& relative) const {
  object_url out = *this;
  std::string& base = kind == scheme::s3 ? out.key : out.path;
  if (relative.empty()) return out;
  if (!base.empty() && base.back() != '/') base += '/';
  if (kind != scheme::s3 && base.empty()) base = "/";
  base += relative;
  return out;
}

expected<object_url> parse_object_url(const std::string& given) {
  if (given.size() > 4096) return invalid_input("a URL longer than 4096 bytes");
  for (unsigned char c : given)
    if (c < 0x20 || c == 0x7f) return invalid_input("a URL with a control byte or NUL");
  const auto location = shown(given);
  if (location != given)
    return invalid_input("'" + location +
                         "': a URL may not carry user information (credentials never travel in "
                         "URLs)");
  object_url out;
  std::string rest;
  if (has_prefix_nocase(location, "s3://")) {
    out.kind = object_url::scheme::s3;
    rest = location.substr(5);
  } else if (has_prefix_nocase(location, "http://")) {
    out.kind = object_url::scheme::http;
    rest = location.substr(7);
  } else if (has_prefix_nocase(location, "https://")) {
    out.kind = object_url::scheme::https;
    rest = location.substr(8);
  } else {
    return invalid_input("'" + location + "' is not an s3://, http:// or https:// URL");
  }
  if (rest.find_first_of("?#") != std::string::npos)
    return invalid_input("'" + location + "': a query or fragment is not allowed");
  if (rest.find(' ') != std::string::npos)
    return invalid_input("'" + location + "': a space is not allowed (percent-encode it)");
  const auto slash = rest.find('/');
  const auto head = rest.substr(0, slash);
  const auto encoded = slash == std::string::npos ? std::string() : rest.substr(slash + 1);
  const auto decoded = percent_decode(encoded);
  if (!decoded)
    return invalid_input("'" + location + "': a '%' must start a %XX escape (write '%' as %25)");
  for (unsigned char c : *decoded)
    if (c < 0x20 || c == 0x7f)
      return invalid_input("'" + location + "': an escape decodes to a control byte or NUL");
  const auto& tail = *decoded;
  if (auto ok = check_segments(tail, location); !ok) return std::move(ok).error();
  if (out.kind == object_url::scheme::s3) {
    if (!valid_bucket(head))
      return invalid_input("'" + location + "': '" + head +
                           "' is not a valid bucket name (3-63 of a-z, 0-9, '.', '-')");
    out.bucket = head;
    out.key = tail;
    while (!out.key.empty() && out.key.back() == '/')
      out.key.pop_back();
  } else {
    if (!valid_authority(head))
      return invalid_input("'" + location + "': '" + head + "' is not a valid host[:port]");
    out.authority = lower(head);
    out.path = "/" + tail;
    while (out.path.size() > 1 && out.path.back() == '/')
      out.path.pop_back();
  }
  return out;
}

}  // namespace warm::sources
