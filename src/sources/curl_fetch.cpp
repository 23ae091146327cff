#include "sources/curl_fetch.hpp"

#include <curl/curl.h>

#include <algorithm>
#include <cctype>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <thread>

#include "sources/s3_xml.hpp"

namespace warm::sources {
namespace {

using steady = std::chrono::steady_clock;

constexpr std::size_t max_body = 32u << 20;  // a listing page or an error document
constexpr std::size_t max_error_body = 64u << 10;

void global_init() {
  static std::once_flag once;
  std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
}

struct easy_deleter {
  void operator()(CURL* c) const { curl_easy_cleanup(c); }
};
using easy_handle = std::unique_ptr<CURL, easy_deleter>;
struct slist_deleter {
  void operator()(curl_slist* l) const { curl_slist_free_all(l); }
};
using header_list = std::unique_ptr<curl_slist, slist_deleter>;
struct multi_deleter {
  void operator()(CURLM* m) const { curl_multi_cleanup(m); }
};

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

std::string trim(const std::string& s) {
  const auto a = s.find_first_not_of(" \t\r\n");
  if (a == std::string::npos) return {};
  return s.substr(a, s.find_last_not_of(" \t\r\n") - a + 1);
}

// An ETag header's value without W/ and quotes.
std::string entity_tag(std::string t) {
  if (t.rfind("W/", 0) == 0) t = t.substr(2);
  if (t.size() >= 2 && t.front() == '"' && t.back() == '"') t = t.substr(1, t.size() - 2);
  return t;
}

// Records one header line into `headers` (a new response's status line clears them).
void take_header(std::map<std::string, std::string>& headers, const char* data, std::size_t n) {
  std::string line(data, n);
  if (line.rfind("HTTP/", 0) == 0) {
    headers.clear();
    return;
  }
  const auto colon = line.find(':');
  if (colon == std::string::npos) return;
  headers[lower(trim(line.substr(0, colon)))] = trim(line.substr(colon + 1));
}

// The options every handle gets.
void configure(CURL* c, const request_auth& auth, const fetch_options& options) {
  curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 0L);
#if LIBCURL_VERSION_NUM >= 0x075500
  curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
#else
  curl_easy_setopt(c, CURLOPT_PROTOCOLS, CURLPROTO_HTTP | CURLPROTO_HTTPS);
#endif
  curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS,
                   static_cast<long>(options.connect_timeout.count()));
  // Stalled: less than one byte a second for the stall timeout.
  curl_easy_setopt(c, CURLOPT_LOW_SPEED_LIMIT, 1L);
  curl_easy_setopt(c, CURLOPT_LOW_SPEED_TIME,
                   std::max(1L, static_cast<long>(options.stall_timeout.count() / 1000)));
  curl_easy_setopt(c, CURLOPT_TCP_KEEPALIVE, 1L);
  if (!auth.ca_file.empty()) curl_easy_setopt(c, CURLOPT_CAINFO, auth.ca_file.c_str());
  if (!auth.sigv4.empty()) {
    curl_easy_setopt(c, CURLOPT_AWS_SIGV4, auth.sigv4.c_str());
    curl_easy_setopt(c, CURLOPT_USERNAME, auth.access_key.c_str());
    curl_easy_setopt(c, CURLOPT_PASSWORD, auth.secret_key.c_str());
  }
}

header_list make_headers(const request_auth& auth, const std::vector<std::string>& extra) {
  curl_slist* list = nullptr;
  for (const auto& h : auth.headers)
    list = curl_slist_append(list, h.c_str());
  for (const auto& h : extra)
    list = curl_slist_append(list, h.c_str());
  return header_list(list);
}

bool transient_curl(CURLcode code) {
  switch (code) {
    case CURLE_COULDNT_CONNECT:
    case CURLE_OPERATION_TIMEDOUT:
    case CURLE_PARTIAL_FILE:
    case CURLE_RECV_ERROR:
    case CURLE_SEND_ERROR:
    case CURLE_GOT_NOTHING:
    case CURLE_HTTP2:
    case CURLE_HTTP2_STREAM:
    case CURLE_COULDNT_RESOLVE_HOST:
      return true;
    default:
      return false;
  }
}

std::string curl_text(CURLcode code, const char* detail) {
  std::string d = detail && *detail ? detail : curl_easy_strerror(code);
  return d;
}

// ---- one request --------------------------------------------------------------------------

struct capture {
  http_answer* answer;
  std::size_t limit;
};

std::size_t on_body(char* data, std::size_t size, std::size_t n, void* user) {
  auto* c = static_cast<capture*>(user);
  const auto bytes = size * n;
  const auto room = c->limit - std::min(c->limit, c->answer->body.size());
  c->answer->body.append(data, std::min(bytes, room));
  return bytes;
}

std::size_t on_header(char* data, std::size_t size, std::size_t n, void* user) {
  take_header(static_cast<capture*>(user)->answer->headers, data, size * n);
  return size * n;
}

// ---- the ranged fetch ------------------------------------------------------------------------

struct part {
  std::uint64_t offset = 0, length = 0;  // what is still wanted of it
  std::uint32_t attempts = 0;
  steady::time_point not_before{};
};

struct transfer {
  easy_handle handle;
  header_list headers;
  char error_text[CURL_ERROR_SIZE] = {};
  part wanted;
  std::uint64_t received = 0;  // bytes given to the sink
  long status = 0;
  bool checked = false;  // status and headers looked at, on the first body bytes
  std::map<std::string, std::string> response_headers;
  std::string error_body;
  std::optional<warm::error> failed;  // permanent: stops the fetch
  bool changed = false;
  const object_info* object = nullptr;
  const fetch_sink* sink = nullptr;
  std::string shown;
  bool busy = false;
  steady::time_point last_progress{};  // started, or the last header or body bytes
};

// Checks a ranged answer's status and headers once its body starts.
void check_answer(transfer& t) {
  t.checked = true;
  curl_easy_getinfo(t.handle.get(), CURLINFO_RESPONSE_CODE, &t.status);
  // 412: If-Match failed. 416: a range within the size the object had is past its end now.
  // Either way the object changed.
  if (t.status == 412 || t.status == 416) {
    t.changed = true;
    return;
  }
  if (t.status != 206 && t.status != 200) return;  // an error document: kept for the message
  auto tag = t.response_headers.find("etag");
  if (!t.object->etag.empty() && tag != t.response_headers.end()) {
    if (entity_tag(tag->second) != t.object->etag) {
      t.changed = true;
      return;
    }
  }
  if (t.status == 200) {
    // The whole object: acceptable only when the whole object was asked for.
    if (t.wanted.offset != 0 || t.wanted.length != t.object->size)
      t.failed = make_error(errc::load_failed, t.shown + ": the server ignored a range request");
    return;
  }
  auto range = t.response_headers.find("content-range");
  // Another total size: the object changed (whatever range came with it).
  if (range != t.response_headers.end()) {
    const auto slash = range->second.rfind('/');
    if (slash != std::string::npos) {
      const auto total = range->second.substr(slash + 1);
      if (total != "*" && total != std::to_string(t.object->size)) {
        t.changed = true;
        return;
      }
    }
  }
  const std::string expect = "bytes " + std::to_string(t.wanted.offset) + "-" +
                             std::to_string(t.wanted.offset + t.wanted.length - 1) + "/";
  if (range == t.response_headers.end() || range->second.rfind(expect, 0) != 0) {
    t.failed = make_error(errc::load_failed,
                          t.shown + ": the server answered another range than asked (" +
                              (range == t.response_headers.end() ? "none" : range->second) + ")");
    return;
  }
}

std::size_t on_range_header(char* data, std::size_t size, std::size_t n, void* user) {
  auto& t = *static_cast<transfer*>(user);
  t.last_progress = steady::now();
  take_header(t.response_headers, data, size * n);
  return size * n;
}

std::size_t on_range_body(char* data, std::size_t size, std::size_t n, void* user) {
  auto& t = *static_cast<transfer*>(user);
  const auto bytes = size * n;
  t.last_progress = steady::now();
  if (!t.checked) check_answer(t);
  if (t.failed || t.changed) return 0;  // stops this transfer (CURLE_WRITE_ERROR)
  if (t.status != 206 && t.status != 200) {
    const auto room = max_error_body - std::min(max_error_body, t.error_body.size());
    t.error_body.append(data, std::min(bytes, room));
    return bytes;
  }
  if (t.received + bytes > t.wanted.length) {
    t.failed = make_error(errc::load_failed, t.shown + ": the server sent more than the range");
    return 0;
  }
  if (auto r = (*t.sink)(t.wanted.offset + t.received, data, bytes); !r) {
    t.failed = r.error();
    return 0;
  }
  t.received += bytes;
  return bytes;
}

// Starts `t` on `p` (its handle reused, so its connection is too).
void start(CURLM* multi, transfer& t, const std::string& url, const request_auth& auth,
           const fetch_options& options, const part& p) {
  if (!t.handle) t.handle.reset(curl_easy_init());
  CURL* c = t.handle.get();
  curl_easy_reset(c);
  configure(c, auth, options);
  t.wanted = p;
  t.received = 0;
  t.status = 0;
  t.checked = false;
  t.response_headers.clear();
  t.error_body.clear();
  t.error_text[0] = 0;
  t.last_progress = steady::now();
  std::vector<std::string> extra{"Range: bytes=" + std::to_string(p.offset) + "-" +
                                 std::to_string(p.offset + p.length - 1)};
  if (!t.object->etag.empty()) extra.push_back("If-Match: \"" + t.object->etag + "\"");
  t.headers = make_headers(auth, extra);
  curl_easy_setopt(c, CURLOPT_URL, url.c_str());
  curl_easy_setopt(c, CURLOPT_HTTPHEADER, t.headers.get());
  curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_range_body);
  curl_easy_setopt(c, CURLOPT_WRITEDATA, &t);
  curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_range_header);
  curl_easy_setopt(c, CURLOPT_HEADERDATA, &t);
  curl_easy_setopt(c, CURLOPT_ERRORBUFFER, t.error_text);
  curl_easy_setopt(c, CURLOPT_PRIVATE, &t);
  t.busy = true;
  curl_multi_add_handle(multi, c);
}

}  // namespace

std::string percent_encode(const std::string& text, bool keep_slash) {
  static const char* hex = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : text) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~' ||
        (keep_slash && c == '/')) {
      out.push_back(static_cast<char>(c));
    } else {
      out.push_back('%');
      out.push_back(hex[c >> 4]);
      out.push_back(hex[c & 15]);
    }
  }
  return out;
}

std::string encode_path(const std::string& path) {
  return percent_encode(path, true);
}

expected<object_info> described_by(const object_url& url, const http_answer& answer) {
  object_info info;
  info.url = url;
  info.etag = etag_of(answer);
  auto length = answer.headers.find("content-length");
  if (length == answer.headers.end())
    return make_error(errc::load_failed, url.to_string() + ": the store gave no Content-Length");
  try {
    std::size_t used = 0;
    info.size = std::stoull(length->second, &used);
    if (used != length->second.size() || length->second[0] == '-')
      throw std::invalid_argument("size");
  } catch (const std::exception&) {
    return make_error(errc::load_failed, url.to_string() + ": a malformed Content-Length");
  }
  return info;
}

std::string etag_of(const http_answer& answer) {
  auto it = answer.headers.find("etag");
  return it == answer.headers.end() ? std::string() : entity_tag(it->second);
}

std::optional<error> status_error(const http_answer& a, const std::string& shown) {
  if (a.status >= 200 && a.status < 300) return std::nullopt;
  auto said = describe_s3_error(a.body);
  const auto what = "HTTP " + std::to_string(a.status) + (said.empty() ? "" : " (" + said + ")");
  if (a.status == 404) return make_error(errc::not_found, shown + ": not found: " + what);
  if (a.status == 401 || a.status == 403)
    return make_error(errc::load_failed, shown + ": access denied: " + what);
  if (a.status >= 500) return make_error(errc::unavailable, shown + ": the store failed: " + what);
  if (a.status >= 300 && a.status < 400)
    return make_error(errc::load_failed, shown + ": " + what +
                                             ": redirected, and warm follows no " +
                                             "redirects (name the final location)");
  return make_error(errc::load_failed, shown + ": " + what);
}

expected<http_answer> request(const std::string& method, const std::string& url,
                              const std::string& shown, const request_auth& auth,
                              const fetch_options& options) {
  global_init();
  auto delay = options.retry_delay;
  for (std::uint32_t attempt = 1;; ++attempt) {
    easy_handle c(curl_easy_init());
    if (!c) return make_error(errc::internal, "curl_easy_init failed");
    configure(c.get(), auth, options);
    http_answer answer;
    capture cap{&answer, max_body};
    char error_text[CURL_ERROR_SIZE] = {};
    auto headers = make_headers(auth, {});
    curl_easy_setopt(c.get(), CURLOPT_URL, url.c_str());
    curl_easy_setopt(c.get(), CURLOPT_HTTPHEADER, headers.get());
    if (method == "HEAD") curl_easy_setopt(c.get(), CURLOPT_NOBODY, 1L);
    curl_easy_setopt(c.get(), CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(c.get(), CURLOPT_WRITEDATA, &cap);
    curl_easy_setopt(c.get(), CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(c.get(), CURLOPT_HEADERDATA, &cap);
    curl_easy_setopt(c.get(), CURLOPT_ERRORBUFFER, error_text);
    const auto code = curl_easy_perform(c.get());
    if (code == CURLE_OK) curl_easy_getinfo(c.get(), CURLINFO_RESPONSE_CODE, &answer.status);
    const bool transient = code != CURLE_OK ? transient_curl(code) : answer.status >= 500;
    if (!transient || attempt >= options.attempts) {
      if (code != CURLE_OK)
        return make_error(errc::unavailable, shown + ": " + curl_text(code, error_text));
      return answer;
    }
    std::this_thread::sleep_for(delay);
    delay *= 2;
  }
}

expected<fetch_stats> ranged_fetch(const std::string& url, const std::string& shown,
                                   const object_info& object, const request_auth& auth,
                                   const fetch_sink& sink, const fetch_options& options) {
  global_init();
  const auto started = steady::now();
  fetch_stats stats;
  std::deque<part> pending;
  const auto part_bytes = std::max<std::uint64_t>(options.part_bytes, 1);
  const auto end = options.prefix_bytes ? std::min(options.prefix_bytes, object.size) : object.size;
  for (std::uint64_t at = 0; at < end; at += part_bytes)
    pending.push_back({at, std::min(part_bytes, end - at), 0, {}});
  if (pending.empty()) {  // an empty object: nothing to fetch
    stats.seconds = 0;
    return stats;
  }
  std::unique_ptr<CURLM, multi_deleter> multi(curl_multi_init());
  if (!multi) return make_error(errc::internal, "curl_multi_init failed");
  const auto streams =
      std::max<std::size_t>(1, std::min<std::size_t>(options.streams, pending.size()));
  std::vector<std::unique_ptr<transfer>> transfers;
  for (std::size_t i = 0; i < streams; ++i) {
    auto t = std::make_unique<transfer>();
    t->object = &object;
    t->sink = &sink;
    t->shown = shown;
    transfers.push_back(std::move(t));
  }
  std::optional<error> failure;
  bool changed = false;
  std::size_t running = 0;
  auto stop_all = [&] {
    for (auto& t : transfers)
      if (t->busy) {
        curl_multi_remove_handle(multi.get(), t->handle.get());
        t->busy = false;
      }
  };
  while (!failure && !changed) {
    // Start what may start.
    const auto now = steady::now();
    for (auto& t : transfers) {
      if (t->busy || pending.empty()) continue;
      auto ready = std::find_if(pending.begin(), pending.end(),
                                [&](const part& p) { return p.not_before <= now; });
      if (ready == pending.end()) break;
      part p = *ready;
      pending.erase(ready);
      ++stats.requests;
      start(multi.get(), *t, url, auth, options, p);
      ++running;
    }
    if (running == 0 && pending.empty()) break;
    int still = 0;
    if (curl_multi_perform(multi.get(), &still) != CURLM_OK) {
      failure = make_error(errc::internal, shown + ": curl_multi_perform failed");
      break;
    }
    // A range that ended without all its bytes is tried again from where it stopped (its bytes
    // so far are in the sink; If-Match and the entity tag check keep the splice one version).
    auto retry = [&](transfer& t, const std::string& why, std::optional<error> exhausted) {
      part again = t.wanted;
      again.offset += t.received;
      again.length -= t.received;
      if (++again.attempts >= options.attempts) {
        const auto tries = " (" + std::to_string(options.attempts) + " tries)";
        failure = exhausted ? make_error(exhausted->code, exhausted->message + tries)
                            : make_error(errc::unavailable, shown + ": " + why + tries);
        return;
      }
      again.not_before = steady::now() + options.retry_delay * (1u << (again.attempts - 1));
      ++stats.retries;
      pending.push_front(again);
    };
    int queued = 0;
    while (CURLMsg* m = curl_multi_info_read(multi.get(), &queued)) {
      if (m->msg != CURLMSG_DONE) continue;
      transfer* t = nullptr;
      curl_easy_getinfo(m->easy_handle, CURLINFO_PRIVATE, reinterpret_cast<char**>(&t));
      const auto code = m->data.result;
      curl_multi_remove_handle(multi.get(), t->handle.get());
      t->busy = false;
      --running;
      if (!t->checked && code == CURLE_OK) check_answer(*t);  // an answer without a body
      stats.bytes += t->received;
      if (t->changed) {
        changed = true;
        break;
      }
      if (t->failed) {
        failure = t->failed;
        break;
      }
      const bool body = t->status == 206 || t->status == 200;
      if (code == CURLE_OK && body && t->received == t->wanted.length) continue;  // done
      if (code == CURLE_OK && body) {
        retry(*t, "the body was cut short", std::nullopt);
      } else if (code == CURLE_OK) {
        http_answer said;
        said.status = t->status;
        said.body = t->error_body;
        auto e = status_error(said, shown)
                     .value_or(make_error(errc::load_failed,
                                          shown + ": HTTP " + std::to_string(t->status)));
        if (t->status >= 500)
          retry(*t, "", e);
        else
          failure = e;
      } else if (transient_curl(code)) {
        retry(*t, curl_text(code, t->error_text), std::nullopt);
      } else {
        failure = make_error(errc::load_failed, shown + ": " + curl_text(code, t->error_text));
      }
      if (failure) break;
    }
    // A range that received nothing for the stall timeout is abandoned and tried again.
    const auto now_after = steady::now();
    for (auto& t : transfers) {
      if (failure || changed || !t->busy || now_after - t->last_progress < options.stall_timeout)
        continue;
      curl_multi_remove_handle(multi.get(), t->handle.get());
      t->busy = false;
      --running;
      stats.bytes += t->received;
      retry(*t, "no bytes for " + std::to_string(options.stall_timeout.count()) + " ms",
            std::nullopt);
    }
    if (failure || changed) break;
    if (running > 0 || !pending.empty()) {
      // Wait for the sockets, or until the next retry may start.
      auto wait = std::chrono::milliseconds(100);
      if (running == 0 && !pending.empty()) {
        auto next =
            std::min_element(pending.begin(), pending.end(), [](const part& a, const part& b) {
              return a.not_before < b.not_before;
            })->not_before;
        wait =
            std::max(std::chrono::milliseconds(1),
                     std::chrono::duration_cast<std::chrono::milliseconds>(next - steady::now()));
        std::this_thread::sleep_for(std::min(wait, std::chrono::milliseconds(1000)));
        continue;
      }
      curl_multi_poll(multi.get(), nullptr, 0, static_cast<int>(wait.count()), nullptr);
    }
  }
  stop_all();
  stats.seconds = std::chrono::duration<double>(steady::now() - started).count();
  if (changed) {
    stats.changed = true;
    return stats;
  }
  if (failure) return *failure;
  return stats;
}

}  // namespace warm::sources
