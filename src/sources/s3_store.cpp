#include "sources/s3_store.hpp"

#include <algorithm>
#include <cctype>

#include "sources/curl_fetch.hpp"
#include "sources/s3_xml.hpp"

namespace warm::sources {
namespace {

// The SHA-256 of an empty body: S3 wants x-amz-content-sha256 on every signed request, and
// libcurl 7.88 signs it as given.
constexpr const char* empty_sha256 =
    "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";

class s3_store final : public object_store {
 public:
  s3_store(s3_options o, std::string base) : options_(std::move(o)), base_(std::move(base)) {
    if (options_.credentials) {
      auth_.sigv4 = "aws:amz:" + options_.region + ":s3";
      auth_.access_key = options_.credentials->access_key;
      auth_.secret_key = options_.credentials->secret_key;
      if (!options_.credentials->session_token.empty())
        auth_.headers.push_back("x-amz-security-token: " + options_.credentials->session_token);
    }
    auth_.headers.push_back(std::string("x-amz-content-sha256: ") + empty_sha256);
    auth_.ca_file = options_.ca_file;
  }

  expected<std::vector<object_info>> list(const object_url& prefix) override {
    std::vector<object_info> out;
    std::string token;
    for (int pages = 0; pages < 100000; ++pages) {
      // Query parameters in sorted order: SigV4's canonical query string is, and curl signs
      // the URL as given.
      std::string query = "?";
      if (!token.empty()) query += "continuation-token=" + percent_encode(token, false) + "&";
      query += "list-type=2&";
      if (options_.list_page_keys > 0)
        query += "max-keys=" + std::to_string(options_.list_page_keys) + "&";
      query += "prefix=" + percent_encode(prefix.key, false);
      const auto url = bucket_url(prefix.bucket) + "/" + query;
      auto answer = request("GET", url, prefix.to_string(), auth_, fetch_options{});
      if (!answer) return std::move(answer).error();
      if (auto e = status_error(*answer, prefix.to_string())) return *e;
      auto page = parse_list_page(answer->body);
      if (!page)
        return make_error(page.error().code, prefix.to_string() + ": " + page.error().message);
      for (auto& o : page->objects) {
        object_info info;
        info.url = prefix;
        info.url.key = o.key;
        info.size = o.size;
        info.etag = o.etag;
        out.push_back(std::move(info));
      }
      if (out.size() > max_list_objects)
        return invalid_input(prefix.to_string() + ": more than " +
                             std::to_string(max_list_objects) +
                             " objects under this prefix, more than warm lists");
      if (!page->truncated) break;
      token = page->next_token;
    }
    std::sort(out.begin(), out.end(),
              [](const object_info& a, const object_info& b) { return a.url.key < b.url.key; });
    return out;
  }

  expected<object_info> head(const object_url& url) override {
    auto answer = request("HEAD", object_url_of(url), url.to_string(), auth_, fetch_options{});
    if (!answer) return std::move(answer).error();
    if (auto e = status_error(*answer, url.to_string())) return *e;
    return described_by(url, *answer);
  }

  expected<fetch_stats> fetch(const object_info& object, const fetch_sink& sink,
                              const fetch_options& options) override {
    return ranged_fetch(object_url_of(object.url), object.url.to_string(), object, auth_, sink,
                        options);
  }

 private:
  std::string bucket_url(const std::string& bucket) const {
    if (!base_.empty()) return base_ + "/" + bucket;  // path style
    return "https://" + bucket + ".s3." + options_.region + ".amazonaws.com";
  }
  std::string object_url_of(const object_url& url) const {
    return bucket_url(url.bucket) + "/" + encode_path(url.key);
  }
  s3_options options_;
  std::string base_;  // the endpoint without a trailing '/'; empty: AWS
  request_auth auth_;
};

}  // namespace

expected<std::unique_ptr<object_store>> make_s3_store(s3_options options) {
  std::string base = options.endpoint;
  while (!base.empty() && base.back() == '/')
    base.pop_back();
  if (!base.empty()) {
    auto parsed = parse_object_url(base);
    if (!parsed || parsed->kind == object_url::scheme::s3 || parsed->path != "/")
      return invalid_input("the S3 endpoint must be http(s)://HOST[:PORT], not '" +
                           (parsed ? base : std::string("(malformed)")) + "'");
  }
  if (options.region.empty()) return invalid_input("an empty S3 region");
  for (char c : options.region)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '-'))
      return invalid_input("S3 region '" + options.region + "' is not a region name");
  return std::unique_ptr<object_store>(new s3_store(std::move(options), std::move(base)));
}

}  // namespace warm::sources
