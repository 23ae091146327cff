#include "http/v2_plain.hpp"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

namespace warm::http {
namespace {

constexpr std::size_t max_dimensions = 32;  // as the other parsers

// A cursor over the body; every read checks the end.
struct cursor {
  const char* at;
  const char* end;

  void skip_blank() {
    while (at < end && (*at == ' ' || *at == '\t' || *at == '\n' || *at == '\r'))
      ++at;
  }
  // Skips blanks, then `token` if it comes next.
  bool take(std::string_view token) {
    skip_blank();
    if (static_cast<std::size_t>(end - at) < token.size() ||
        std::memcmp(at, token.data(), token.size()) != 0)
      return false;
    at += token.size();
    return true;
  }
  bool digit() const { return at < end && *at >= '0' && *at <= '9'; }
};

// A quoted name of printable ASCII, no quote or backslash (so no escapes).
bool plain_string(cursor& c, std::string_view& out) {
  if (!c.take("\"")) return false;
  const char* start = c.at;
  while (c.at < c.end && *c.at != '"') {
    if (*c.at < 0x20 || *c.at > 0x7e || *c.at == '\\') return false;
    ++c.at;
  }
  if (c.at == c.end) return false;
  out = std::string_view(start, static_cast<std::size_t>(c.at - start));
  ++c.at;
  return true;
}

// A dimension: 1 to 18 digits, no leading zero (so positive, and no overflow).
bool dimension(cursor& c, std::uint64_t& out) {
  c.skip_blank();
  if (!c.digit() || *c.at == '0') return false;
  out = 0;
  int digits = 0;
  for (; c.digit(); ++c.at) {
    if (++digits > 18) return false;
    out = out * 10 + static_cast<std::uint64_t>(*c.at - '0');
  }
  return true;
}

// The powers of ten a double holds exactly.
constexpr double exact_powers[] = {1e0,  1e1,  1e2,  1e3,  1e4,  1e5,  1e6,  1e7,
                                   1e8,  1e9,  1e10, 1e11, 1e12, 1e13, 1e14, 1e15,
                                   1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};

// A JSON number as the other parsers make it a float (see the header); false to decline.
bool number(cursor& c, float& out) {
  c.skip_blank();
  const bool negative = c.at < c.end && *c.at == '-';
  if (negative) ++c.at;
  if (!c.digit()) return false;
  std::uint64_t digits = 0;  // every digit of the literal, as one integer
  int count = 0;             // how many
  int exponent = 0;          // of the last digit
  bool integer = true;
  if (*c.at == '0') {
    ++c.at;
    if (c.digit()) return false;  // a leading zero (not JSON)
    count = 1;
  } else {
    for (; c.digit(); ++c.at) {
      if (++count > 19) return false;
      digits = digits * 10 + static_cast<std::uint64_t>(*c.at - '0');
    }
  }
  if (c.at < c.end && *c.at == '.') {
    integer = false;
    ++c.at;
    if (!c.digit()) return false;
    for (; c.digit(); ++c.at) {
      if (++count > 19) return false;
      digits = digits * 10 + static_cast<std::uint64_t>(*c.at - '0');
      --exponent;
    }
  }
  if (c.at < c.end && (*c.at == 'e' || *c.at == 'E')) {
    integer = false;
    ++c.at;
    bool below = false;
    if (c.at < c.end && (*c.at == '+' || *c.at == '-')) below = *c.at++ == '-';
    if (!c.digit()) return false;
    int e = 0;
    for (int n = 0; c.digit(); ++c.at) {
      if (++n > 3) return false;
      e = e * 10 + (*c.at - '0');
    }
    exponent += below ? -e : e;
  }
  double v;
  if (integer) {
    // As the other parsers: an int64 (so "-0" is 0), converted to double.
    if (digits > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) return false;
    const auto i = static_cast<std::int64_t>(digits);
    v = static_cast<double>(negative ? -i : i);
  } else {
    // Clinger: both operands exact, so the one rounding is the correctly rounded value.
    if (digits > (std::uint64_t{1} << 53) || exponent < -22 || exponent > 22) return false;
    v = static_cast<double>(digits);
    v = exponent < 0 ? v / exact_powers[-exponent] : v * exact_powers[exponent];
    if (negative) v = -v;
  }
  if (!std::isfinite(v) || std::fabs(v) > std::numeric_limits<float>::max()) return false;
  out = static_cast<float>(v);
  return true;
}

}  // namespace

std::optional<v2_request> plain_decode_infer_request(std::string_view json,
                                                     const decode_limits& limits) {
  cursor c{json.data(), json.data() + json.size()};
  std::string_view name;
  if (!c.take("{") || !c.take("\"inputs\"") || !c.take(":") || !c.take("[") || !c.take("{") ||
      !c.take("\"name\"") || !c.take(":") || !plain_string(c, name) || !c.take(",") ||
      !c.take("\"shape\"") || !c.take(":") || !c.take("["))
    return std::nullopt;
  tensor t;
  t.type = dtype::f32;
  const std::uint64_t max_count = limits.max_tensor_bytes / sizeof(float);
  std::uint64_t count = 1;
  do {
    std::uint64_t dim = 0;
    if (t.shape.size() == max_dimensions || !dimension(c, dim) || count > max_count / dim)
      return std::nullopt;
    count *= dim;
    t.shape.push_back(dim);
  } while (c.take(","));
  if (!c.take("]") || !c.take(",") || !c.take("\"datatype\"") || !c.take(":") ||
      !c.take("\"FP32\"") || !c.take(",") || !c.take("\"data\"") || !c.take(":") || !c.take("["))
    return std::nullopt;
  // A body too short to hold `count` numbers is declined before the tensor is sized for them.
  if (count > (json.size() + 1) / 2) return std::nullopt;
  t.data.resize(count * sizeof(float));
  std::uint64_t n = 0;
  do {
    float v;
    if (n == count || !number(c, v)) return std::nullopt;
    std::memcpy(t.data.data() + n * sizeof(float), &v, sizeof v);
    ++n;
  } while (c.take(","));
  if (n != count || !c.take("]") || !c.take("}") || !c.take("]") || !c.take("}"))
    return std::nullopt;
  c.skip_blank();
  if (c.at != c.end) return std::nullopt;
  t.name = std::string(name);
  v2_request out;
  out.request.inputs.push_back(std::move(t));
  return out;
}

}  // namespace warm::http
