// warmd's config file: TOML text made ASCII for toml++ (toml_text.hpp), then applied key by key to
// the flags the command line left unset (apply_config_text, config.hpp).
#include <CLI/CLI.hpp>

#include <toml++/toml.h>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <optional>
#include <sstream>

#include "config.hpp"
#include "toml_text.hpp"

namespace warm::warmd {

namespace {

// Debian's toml++ 3.3 reaches __builtin_unreachable() (undefined behaviour) when it asks whether a
// non-ASCII character in U+00A1..U+0499 or U+2F3E..U+3337 (and a few more) is whitespace, which it
// does wherever whitespace may stand (`é = 1`), after a backslash in a multi-line string, and while
// looking ahead through a malformed value (`repo = 0["é"]`): marzer/tomlplusplus#190 and #295,
// fixed upstream after 3.3. So toml++ is handed ASCII only: every non-ASCII character of a string
// becomes a \u escape (literal strings become basic strings with the same value), comments lose
// theirs, and one anywhere else (never valid TOML) is refused, like malformed UTF-8. Lines stay
// where they were, so toml++'s line numbers still point into the file.
struct ascii_toml {
  std::string text;
  std::size_t line = 0;  // where the text was refused; 0 when it was not
  const char* problem = "";
};

// One UTF-8 sequence at text[i]: its code point and length, or false when malformed (overlong,
// surrogate, past U+10FFFF, truncated).
bool decode_utf8(std::string_view text, std::size_t i, char32_t& cp, std::size_t& length) {
  unsigned b0 = static_cast<unsigned char>(text[i]);
  if (b0 >= 0xC2 && b0 <= 0xDF)
    length = 2, cp = b0 & 0x1F;
  else if (b0 >= 0xE0 && b0 <= 0xEF)
    length = 3, cp = b0 & 0x0F;
  else if (b0 >= 0xF0 && b0 <= 0xF4)
    length = 4, cp = b0 & 0x07;
  else
    return false;
  if (text.size() - i < length) return false;
  for (std::size_t k = 1; k < length; ++k) {
    unsigned b = static_cast<unsigned char>(text[i + k]);
    if ((b & 0xC0) != 0x80) return false;
    cp = (cp << 6) | (b & 0x3F);
  }
  if ((length == 3 && cp < 0x800) || (length == 4 && (cp < 0x10000 || cp > 0x10FFFF))) return false;
  return cp < 0xD800 || cp > 0xDFFF;
}

// A dotted key (`a.b.c = 1`, `[a.b.c]`) is a table per part, and toml++ 3.3 builds and frees
// them by recursion: a key of 50,000 parts overflowed the stack. warm's keys are all top-level,
// so a line holding more dots than this outside its strings and comments is refused before toml++
// sees it (a key cannot span lines; arrays and inline tables are bounded by toml++ itself, at 256).
constexpr std::size_t max_dots_per_line = 64;

ascii_toml to_ascii_toml(std::string_view in) {
  ascii_toml r;
  std::string& out = r.text;
  out.reserve(in.size() + in.size() / 4);
  std::size_t i = 0, line = 1, dots = 0;
  if (in.substr(0, 3) == "\xEF\xBB\xBF") i = 3;  // a UTF-8 byte order mark
  auto refuse = [&](const char* problem) {
    r.line = line;
    r.problem = problem;
    return r;
  };
  auto at = [&](std::size_t k) -> unsigned {
    return k < in.size() ? static_cast<unsigned char>(in[k]) : 0u;
  };
  // Copies one character of a string; a non-ASCII one as an escape. In a literal string (copied
  // into a basic one) a backslash or a double quote is escaped too. false on malformed UTF-8.
  auto string_char = [&](bool literal) {
    unsigned b = at(i);
    if (b < 0x80) {
      if (literal && (b == '\\' || b == '"')) out += '\\';
      out += static_cast<char>(b);
      line += b == '\n';
      ++i;
      return true;
    }
    char32_t cp = 0;
    std::size_t length = 0;
    if (!decode_utf8(in, i, cp, length)) return false;
    char escape[12];
    std::snprintf(escape, sizeof escape, cp <= 0xFFFF ? "\\u%04X" : "\\U%08X",
                  static_cast<unsigned>(cp));
    out += escape;
    i += length;
    return true;
  };
  // After a backslash in a basic string: the escaped character (a quote or a backslash must not
  // end or start anything). A non-ASCII one is no valid escape: refused rather than turned into
  // one.
  auto escaped = [&] {
    out += '\\';
    ++i;
    if (at(i) >= 0x80) return false;
    if (at(i) == '"' || at(i) == '\\') out += in[i++];
    return true;
  };
  while (i < in.size()) {
    unsigned b = at(i);
    if (b == '#') {  // a comment, to the end of the line: its non-ASCII characters are dropped
      while (i < in.size() && in[i] != '\n') {
        if (at(i) < 0x80) {
          out += in[i++];
          continue;
        }
        char32_t cp = 0;
        std::size_t length = 0;
        if (!decode_utf8(in, i, cp, length)) return refuse("malformed UTF-8");
        i += length;
      }
    } else if (in.substr(i, 3) == R"(""")" || in.substr(i, 3) == "'''") {  // multi-line strings
      const char quote = in[i];
      const bool literal = quote == '\'';
      const std::string delimiter(3, quote);
      out += R"(""")";
      i += 3;
      while (i < in.size() && in.substr(i, 3) != delimiter) {
        if (!literal && at(i) == '\\') {
          if (!escaped()) return refuse("a backslash before a non-ASCII character");
        } else if (!string_char(literal)) {
          return refuse("malformed UTF-8");
        }
      }
      if (i < in.size()) {  // the closing quotes; up to two more belong to the string
        i += 3;
        for (int extra = 0; extra < 2 && at(i) == static_cast<unsigned char>(quote); ++extra)
          out += in[i++];
        out += R"(""")";
      }
    } else if (b == '"' || b == '\'') {  // basic and literal strings end with their line
      const bool literal = b == '\'';
      out += '"';
      ++i;
      while (i < in.size() && at(i) != b && at(i) != '\n') {
        if (!literal && at(i) == '\\') {
          if (!escaped()) return refuse("a backslash before a non-ASCII character");
        } else if (!string_char(literal)) {
          return refuse("malformed UTF-8");
        }
      }
      if (at(i) == b) {
        out += '"';
        ++i;
      }
    } else if (b >= 0x80) {
      return refuse("a non-ASCII character outside a string or comment");
    } else {
      if (b == '\n') dots = 0;
      if (b == '.' && ++dots > max_dots_per_line)
        return refuse(
            "a dotted key of more than 64 parts (more than 64 dots outside strings on one line)");
      out += static_cast<char>(b);
      line += b == '\n';
      ++i;
    }
  }
  return r;
}

}  // namespace

expected<toml::table> parse_toml(std::string_view text, const std::string& name) {
  auto ascii = to_ascii_toml(text);
  if (ascii.line != 0)
    return make_error(errc::invalid_argument,
                      name + ": " + ascii.problem + " (line " + std::to_string(ascii.line) + ")");
  try {
    return toml::parse(ascii.text, name);
  } catch (const toml::parse_error& e) {
    std::ostringstream msg;
    msg << name << ": " << e.description() << " (line " << e.source().begin.line << ")";
    return make_error(errc::invalid_argument, msg.str());
  }
}

expected<void> apply_config_text(std::string_view text, const std::string& name, CLI::App& app,
                                 config& c) {
  auto parsed = parse_toml(text, name);
  if (!parsed) return std::move(parsed).error();
  toml::table table = std::move(*parsed);
  // Errors about a key name it and the line it is on.
  auto line_of = [](const toml::node& node) {
    return " (line " + std::to_string(node.source().begin.line) + ")";
  };
  const toml::node* current = nullptr;  // the value being applied
  auto bad = [&](const std::string& key, const char* want) {
    return make_error(errc::invalid_argument, name + ": key \"" + key + "\" must be " + want +
                                                  (current ? line_of(*current) : ""));
  };
  // A key the command line gave is left alone. Every key below is a flag of add_options; one that
  // is not (a programming error) counts as not given rather than throwing.
  auto given = [&](const std::string& key) {
    const CLI::Option* option = app.get_option_no_throw("--" + key);
    return option != nullptr && option->count() > 0;
  };
  for (auto&& [k, value] : table) {
    std::string key(k.str());
    auto& node = value;  // a reference the lambdas can capture (C++17 cannot capture a binding)
    current = &node;
    // Integer and boolean keys take exactly that TOML type. toml++'s lax value<T>() would also
    // turn `true` into 1, 5 into true and 4.0 into 4, and for a float outside int64's range it
    // casts anyway: undefined behaviour inside toml++ 3.3 (found by fuzz/warmd_config_fuzz).
    auto integer = [&] { return node.value_exact<std::int64_t>(); };
    auto boolean = [&] { return node.value_exact<bool>(); };
    auto number = [&]() -> std::optional<double> {
      if (auto f = node.value_exact<double>()) return *f;
      if (auto i = node.value_exact<std::int64_t>()) return static_cast<double>(*i);
      return std::nullopt;
    };
    auto string_list = [&](std::vector<std::string>& out) -> expected<void> {
      std::vector<std::string> values;
      if (auto s = node.value<std::string>()) {
        values.push_back(*s);
      } else if (auto* arr = node.as_array()) {
        for (auto& item : *arr) {
          auto s2 = item.value<std::string>();
          if (!s2) return bad(key, "a string or an array of strings");
          values.push_back(*s2);
        }
      } else {
        return bad(key, "a string or an array of strings");
      }
      if (!given(key)) out = std::move(values);
      return {};
    };
    auto string_value = [&](std::string& out) -> expected<void> {
      auto s = node.value<std::string>();
      if (!s) return bad(key, "a string");
      if (!given(key)) out = *s;
      return {};
    };
    expected<void> r;
    if (key == "repo")
      r = string_list(c.repo);
    else if (key == "device")
      r = string_list(c.device);
    else if (key == "runtime")
      r = string_list(c.runtime);
    else if (key == "runtime-load-timeout")
      r = string_value(c.runtime_load_timeout);
    else if (key == "runtime-rss-slack")
      r = string_value(c.runtime_rss_slack);
    else if (key == "runtime-start-timeout")
      r = string_value(c.runtime_start_timeout);
    else if (key == "listen")
      r = string_list(c.listen);
    else if (key == "state")
      r = string_value(c.state);
    else if (key == "policy")
      r = string_value(c.policy);
    else if (key == "failure-expiry")
      r = string_value(c.failure_expiry);
    else if (key == "token-file")
      r = string_value(c.token_file);
    else if (key == "s3-endpoint")
      r = string_value(c.s3_endpoint);
    else if (key == "s3-region")
      r = string_value(c.s3_region);
    else if (key == "cache-dir")
      r = string_value(c.cache_dir);
    else if (key == "cache-bytes")
      r = string_value(c.cache_bytes);
    else if (key == "fetch-part-bytes")
      r = string_value(c.fetch_part_bytes);
    else if (key == "source-ca")
      r = string_value(c.source_ca);
    else if (key == "tls-cert")
      r = string_value(c.tls_cert);
    else if (key == "tls-key")
      r = string_value(c.tls_key);
    else if (key == "tls-client-ca")
      r = string_value(c.tls_client_ca);
    else if (key == "describe-helper")
      r = string_value(c.describe_helper);
    else if (key == "describe-timeout")
      r = string_value(c.describe_timeout);
    else if (key == "log-level")
      r = string_value(c.log_level);
    else if (key == "max-request-bytes")
      r = string_value(c.max_request_bytes);
    else if (key == "max-tensor-bytes")
      r = string_value(c.max_tensor_bytes);
    else if (key == "http")
      r = string_value(c.http);
    else if (key == "grpc")
      r = string_value(c.grpc);
    else if (key == "request-timeout")
      r = string_value(c.request_timeout);
    else if (key == "max-queue-delay")
      r = string_value(c.max_queue_delay);
    else if (key == "http-header-timeout")
      r = string_value(c.http_header_timeout);
    else if (key == "http-body-timeout")
      r = string_value(c.http_body_timeout);
    else if (key == "login-timeout")
      r = string_value(c.login_timeout);
    else if (key == "rescore-period")
      r = string_value(c.rescore_period);
    else if (key == "iam-rate")
      r = string_value(c.iam_rate);
    else if (key == "iam-rate-period")
      r = string_value(c.iam_rate_period);
    else if (key == "kdf-tau")
      r = string_value(c.kdf_tau);
    else if (key == "model-config")
      r = string_value(c.model_config);
    else if (key == "cluster")
      r = string_list(c.cluster);
    else if (key == "instance")
      r = string_value(c.instance);
    else if (key == "advertise")
      r = string_value(c.advertise);
    else if (key == "cluster-name")
      r = string_value(c.cluster_name);
    else if (key == "etcd-ca")
      r = string_value(c.etcd_ca);
    else if (key == "etcd-cert")
      r = string_value(c.etcd_cert);
    else if (key == "etcd-key")
      r = string_value(c.etcd_key);
    else if (key == "etcd-user")
      r = string_value(c.etcd_user);
    else if (key == "etcd-password-file")
      r = string_value(c.etcd_password_file);
    else if (key == "version-settle")
      r = string_value(c.version_settle);
    else if (key == "poll-seconds") {
      auto v = number();
      if (!v || !(*v > 0) || *v > 86400)
        return bad(key, "a number of seconds above 0 (at most 86400)");
      if (!given(key)) c.poll_seconds = std::to_string(*v);
    } else if (key == "iam-bias" || key == "kdf-horizon") {
      auto v = number();
      if (!v || !std::isfinite(*v)) return bad(key, "a number");
      if (!given(key)) (key == "iam-bias" ? c.iam_bias : c.kdf_horizon) = *v;
    } else if (key == "kdf-memory") {
      if (auto v = number()) {
        if (!std::isfinite(*v)) return bad(key, "\"auto\" or a number");
        char text[32];
        std::snprintf(text, sizeof text, "%.17g", *v);
        if (!given(key)) c.kdf_memory = text;
      } else if (auto s = node.value<std::string>()) {
        if (!given(key)) c.kdf_memory = *s;
      } else {
        return bad(key, "\"auto\" or a number");
      }
    } else if (key == "max-models") {
      auto v = integer();
      if (!v || *v < 1) return bad(key, "a positive integer");
      if (!given(key)) c.max_models = static_cast<std::uint64_t>(*v);
    } else if (key == "max-batch" || key == "batch-queue" || key == "auto-batch") {
      const bool queue = key == "batch-queue";
      auto v = integer();
      if (!v || *v < (queue ? 1 : 0) || *v > (queue ? (1 << 20) : 65536))
        return bad(key, queue ? "an integer from 1 to 1048576" : "an integer from 0 to 65536");
      auto& into = queue ? c.batch_queue : key == "auto-batch" ? c.auto_batch : c.max_batch;
      if (!given(key)) into = static_cast<std::uint64_t>(*v);
    } else if (key == "preferred-batch") {
      auto* list = node.as_array();
      if (!list) return bad(key, "an array of integers from 1 to 65536");
      std::vector<std::uint64_t> sizes;
      for (auto&& item : *list) {
        auto v = item.value_exact<std::int64_t>();
        if (!v || *v < 1 || *v > 65536) return bad(key, "an array of integers from 1 to 65536");
        sizes.push_back(static_cast<std::uint64_t>(*v));
      }
      if (!given(key)) c.preferred_batch = std::move(sizes);
    } else if (key == "inline-inference-limit") {
      auto v = integer();
      if (!v || *v < 0) return bad(key, "a non-negative integer");
      if (!given(key)) c.inline_inference_limit = static_cast<std::uint64_t>(*v);
    } else if (key == "max-connections" || key == "max-pending-logins" || key == "max-watchers" ||
               key == "max-watchers-per-connection" || key == "max-failed-logins" ||
               key == "max-queued-events") {
      bool zero_ok = key == "max-failed-logins";
      auto v = integer();
      if (!v || *v < (zero_ok ? 0 : 1) || *v > (1 << 20))
        return bad(key, zero_ok ? "an integer from 0 to 1048576" : "an integer from 1 to 1048576");
      auto& field = key == "max-connections"      ? c.max_connections
                    : key == "max-pending-logins" ? c.max_pending_logins
                    : key == "max-watchers"       ? c.max_watchers
                    : key == "max-failed-logins"  ? c.max_failed_logins
                    : key == "max-queued-events"  ? c.max_queued_events
                                                  : c.max_watchers_per_connection;
      if (!given(key)) field = static_cast<std::uint32_t>(*v);
    } else if (key == "lease-ttl") {
      auto v = integer();
      if (!v || *v < 2 || *v > 300) return bad(key, "an integer from 2 to 300 (seconds)");
      if (!given(key)) c.lease_ttl = static_cast<std::uint32_t>(*v);
    } else if (key == "drain-seconds") {
      auto v = integer();
      if (!v || *v < 0 || *v > 3600) return bad(key, "an integer from 0 to 3600 (seconds)");
      if (!given(key)) c.drain_seconds = static_cast<std::uint32_t>(*v);
    } else if (key == "copy-queue") {
      auto v = number();
      if (!v || !std::isfinite(*v) || *v < 0 || *v > 1e6)
        return bad(key, "a number from 0 to 1e6 (requests)");
      if (!given(key)) c.copy_queue = *v;
    } else if (key == "copy-cool-seconds") {
      auto v = integer();
      if (!v || *v < 1 || *v > 86400) return bad(key, "an integer from 1 to 86400 (seconds)");
      if (!given(key)) c.copy_cool_seconds = static_cast<std::uint32_t>(*v);
    } else if (key == "http-threads") {
      auto v = integer();
      if (!v || *v < 1 || *v > 1024) return bad(key, "an integer from 1 to 1024");
      if (!given(key)) c.http_threads = static_cast<std::uint32_t>(*v);
    } else if (key == "console") {
      auto v = boolean();
      if (!v) return bad(key, "true or false");
      if (!given("no-console")) c.no_console = !*v;
    } else if (key == "metrics-per-model") {
      auto v = boolean();
      if (!v) return bad(key, "true or false");
      if (!given(key)) c.metrics_per_model = *v;
    } else if (key == "fetch-streams") {
      auto v = integer();
      if (!v || *v < 1 || *v > 64) return bad(key, "an integer from 1 to 64");
      if (!given(key)) c.fetch_streams = static_cast<std::uint32_t>(*v);
    } else if (key == "max-concurrent-loads") {
      auto v = integer();
      if (!v || *v < 1 || *v > 64) return bad(key, "an integer from 1 to 64");
      if (!given(key)) c.max_concurrent_loads = static_cast<std::uint32_t>(*v);
    } else if (key == "load-after-fetch") {
      auto v = boolean();
      if (!v) return bad(key, "true or false");
      if (!given(key)) c.load_after_fetch = *v;
    } else if (key == "serve-repo") {
      auto v = boolean();
      if (!v) return bad(key, "true or false");
      if (!given(key)) c.serve_repo = *v;
    } else if (key == "allow-remote") {
      auto v = boolean();
      if (!v) return bad(key, "true or false");
      if (!given(key)) c.allow_remote = *v;
    } else if (key == "in-process-code") {
      auto v = boolean();
      if (!v) return bad(key, "true or false");
      if (!given(key)) c.in_process_code = *v;
    } else {
      return make_error(errc::invalid_argument,
                        name + ": unknown key \"" + key + "\"" + line_of(node));
    }
    if (!r) return r;
  }
  return {};
}

expected<void> apply_config_file(const std::string& path, CLI::App& app, config& c) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return make_error(errc::not_found, path + ": cannot read the config file");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) return make_error(errc::not_found, path + ": cannot read the config file");
  return apply_config_text(text, path, app, c);
}

}  // namespace warm::warmd
