#include "sources/s3_xml.hpp"

#include <pugixml.hpp>

#include <cctype>
#include <cstdint>

namespace warm::sources {
namespace {

std::string unquote(std::string s) {
  if (s.size() >= 2 && s.front() == '"' && s.back() == '"') return s.substr(1, s.size() - 2);
  return s;
}

// Printable text, at most `limit` bytes.
std::string printable(const std::string& s, std::size_t limit) {
  std::string out;
  for (unsigned char c : s) {
    if (out.size() >= limit) break;
    if (c >= 0x20 && c != 0x7f) out.push_back(static_cast<char>(c));
  }
  return out;
}

expected<std::uint64_t> parse_size(const char* text) {
  const std::string t = text;
  auto bad = [&] {
    return invalid_input("a listed object's Size '" + printable(t, 40) + "' is not a size");
  };
  if (t.empty() || t.size() > 20) return bad();
  std::uint64_t v = 0;
  for (char c : t) {
    if (!std::isdigit(static_cast<unsigned char>(c))) return bad();
    const auto digit = static_cast<std::uint64_t>(c - '0');
    if (v > (UINT64_MAX - digit) / 10) return bad();
    v = v * 10 + digit;
  }
  return v;
}

}  // namespace

expected<list_page> parse_list_page(const std::string& xml) {
  pugi::xml_document doc;
  auto parsed = doc.load_buffer(xml.data(), xml.size(), pugi::parse_default, pugi::encoding_utf8);
  if (!parsed)
    return invalid_input(std::string("S3 answered a listing that is not XML: ") +
                         parsed.description());
  auto root = doc.child("ListBucketResult");
  if (!root) return invalid_input("S3 answered a listing without <ListBucketResult>");
  list_page page;
  page.truncated = std::string(root.child_value("IsTruncated")) == "true";
  page.next_token = root.child_value("NextContinuationToken");
  if (page.truncated && page.next_token.empty())
    return invalid_input("S3 answered a truncated listing without NextContinuationToken");
  for (auto c : root.children("Contents")) {
    listed_object o;
    o.key = c.child_value("Key");
    if (o.key.empty()) return invalid_input("S3 listed an object without a Key");
    auto size = parse_size(c.child_value("Size"));
    if (!size) return std::move(size).error();
    o.size = *size;
    o.etag = unquote(c.child_value("ETag"));
    page.objects.push_back(std::move(o));
  }
  return page;
}

std::string describe_s3_error(const std::string& xml) {
  pugi::xml_document doc;
  if (!doc.load_buffer(xml.data(), xml.size())) return {};
  auto e = doc.child("Error");
  if (!e) return {};
  std::string code = e.child_value("Code"), message = e.child_value("Message");
  std::string out = code.empty() ? message : (message.empty() ? code : code + ": " + message);
  return printable(out, 200);
}

}  // namespace warm::sources
