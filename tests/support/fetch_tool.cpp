// fetch_tool: drives src/sources from the command line so tests/fetch_test.py can run the S3 and
// HTTP stores against real servers on loopback.
//
//   fetch_tool [--endpoint URL] [--region R] [--anonymous] [--page-keys N] list URL
//   fetch_tool ... head URL
//   fetch_tool ... get URL --out FILE [--streams N] [--part-bytes B] [--attempts A]
//                          [--retry-delay-ms D] [--stall-ms S]
//
// Credentials come from the environment or the shared credentials file (find_credentials), unless
// --anonymous. Output: list prints one JSON line per object ({"key","size","etag"}); head prints
// one JSON line; get writes the object with pwrite at its offsets and prints one JSON line of its
// stats. Exit status: 0 done; 1 an error ("code: message" on stderr); 2 bad usage; 3 the object
// changed during the fetch (the stats line says "changed": true).
#include <fcntl.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cerrno>
#include <cstring>
#include <iostream>
#include <nlohmann/json.hpp>

#include "sources/aws_credentials.hpp"
#include "sources/http_store.hpp"
#include "sources/s3_store.hpp"

namespace {

using namespace warm;
using namespace warm::sources;

int fail(const error& e) {
  std::cerr << e.to_string() << "\n";
  return 1;
}

// The store for `url`: S3 (with the endpoint, region and credentials) or plain HTTP(S).
expected<std::unique_ptr<object_store>> store_for(const object_url& url,
                                                  const std::string& endpoint,
                                                  const std::string& region, bool anonymous,
                                                  std::uint32_t page_keys) {
  if (url.kind != object_url::scheme::s3) return make_http_store();
  s3_options o;
  o.endpoint = endpoint;
  o.region = find_region(region, process_environment());
  o.list_page_keys = page_keys;
  if (!anonymous) {
    auto creds = find_credentials(process_environment(), local_files());
    if (!creds) return std::move(creds).error();
    o.credentials = *creds;
  }
  return make_s3_store(std::move(o));
}

nlohmann::json describe(const object_info& o) {
  return {{"url", o.url.to_string()}, {"key", o.url.key}, {"size", o.size}, {"etag", o.etag}};
}

// Fetches `object` into `out_path` (created or truncated), writing each range where it belongs.
int get(object_store& store, const object_info& object, const std::string& out_path,
        const fetch_options& options) {
  const int fd = ::open(out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0) return fail(make_error(errc::load_failed, out_path + ": " + std::strerror(errno)));
  fetch_sink sink = [fd, &out_path](std::uint64_t offset, const char* data,
                                    std::size_t bytes) -> expected<void> {
    while (bytes > 0) {
      const auto n = ::pwrite(fd, data, bytes, static_cast<off_t>(offset));
      if (n < 0) {
        if (errno == EINTR) continue;
        return make_error(errc::load_failed, out_path + ": " + std::strerror(errno));
      }
      data += n;
      bytes -= static_cast<std::size_t>(n);
      offset += static_cast<std::uint64_t>(n);
    }
    return {};
  };
  auto stats = store.fetch(object, sink, options);
  ::close(fd);
  if (!stats) return fail(stats.error());
  nlohmann::json j{{"size", object.size},       {"etag", object.etag},
                   {"bytes", stats->bytes},     {"requests", stats->requests},
                   {"retries", stats->retries}, {"seconds", stats->seconds},
                   {"changed", stats->changed}};
  std::cout << j.dump() << std::endl;
  return stats->changed ? 3 : 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"fetch_tool: list, head and get objects with warm's S3 and HTTP stores"};
  std::string endpoint, region, location, out_path;
  bool anonymous = false;
  std::uint32_t page_keys = 0;
  fetch_options options;
  std::uint64_t retry_ms = 200, stall_ms = 30000, connect_ms = 5000;
  app.add_option("--endpoint", endpoint, "S3 endpoint http(s)://HOST:PORT (path-style)");
  app.add_option("--region", region, "S3 region (default: AWS_REGION, else us-east-1)");
  app.add_flag("--anonymous", anonymous, "send S3 requests unsigned");
  app.add_option("--page-keys", page_keys, "keys per listing page (max-keys)");
  app.require_subcommand(1);
  auto* list = app.add_subcommand("list", "list a prefix");
  auto* head = app.add_subcommand("head", "describe one object");
  auto* getc = app.add_subcommand("get", "fetch one object into a file");
  for (auto* c : {list, head, getc})
    c->add_option("url", location, "s3://BUCKET/KEY or http(s)://HOST/PATH")->required();
  getc->add_option("--out", out_path, "file to write")->required();
  getc->add_option("--streams", options.streams, "ranged GETs in flight")
      ->check(CLI::Range(1, 256));
  getc->add_option("--part-bytes", options.part_bytes, "bytes per ranged GET")
      ->check(CLI::PositiveNumber);
  getc->add_option("--attempts", options.attempts, "tries per range")->check(CLI::Range(1, 100));
  getc->add_option("--retry-delay-ms", retry_ms, "delay before the second try");
  getc->add_option("--stall-ms", stall_ms, "abandon a range silent this long");
  getc->add_option("--connect-ms", connect_ms, "connect timeout");
  CLI11_PARSE(app, argc, argv);
  options.retry_delay = std::chrono::milliseconds(retry_ms);
  options.stall_timeout = std::chrono::milliseconds(stall_ms);
  options.connect_timeout = std::chrono::milliseconds(connect_ms);

  auto url = parse_object_url(location);
  if (!url) return fail(url.error());
  auto store = store_for(*url, endpoint, region, anonymous, page_keys);
  if (!store) return fail(store.error());

  if (list->parsed()) {
    auto objects = (*store)->list(*url);
    if (!objects) return fail(objects.error());
    for (const auto& o : *objects)
      std::cout << describe(o).dump() << "\n";
    return 0;
  }
  auto info = (*store)->head(*url);
  if (!info) return fail(info.error());
  if (head->parsed()) {
    std::cout << describe(*info).dump() << "\n";
    return 0;
  }
  return get(**store, *info, out_path, options);
}
