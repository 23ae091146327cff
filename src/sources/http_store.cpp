#include "sources/http_store.hpp"

#include "sources/curl_fetch.hpp"

namespace warm::sources {
namespace {

class http_store final : public object_store {
 public:
  explicit http_store(http_options o) { auth_.ca_file = std::move(o.ca_file); }

  expected<std::vector<object_info>> list(const object_url& prefix) override {
    return invalid_input(prefix.to_string() +
                         ": an HTTP source cannot be listed: name the model file");
  }

  expected<object_info> head(const object_url& url) override {
    auto answer = request("HEAD", address(url), url.to_string(), auth_, fetch_options{});
    if (!answer) return std::move(answer).error();
    if (auto e = status_error(*answer, url.to_string())) return *e;
    return described_by(url, *answer);
  }

  expected<fetch_stats> fetch(const object_info& object, const fetch_sink& sink,
                              const fetch_options& options) override {
    return ranged_fetch(address(object.url), object.url.to_string(), object, auth_, sink, options);
  }

 private:
  static std::string address(const object_url& url) {
    return std::string(url.kind == object_url::scheme::https ? "https://" : "http://") +
           url.authority + encode_path(url.path);
  }
  request_auth auth_;
};

}  // namespace

std::unique_ptr<object_store> make_http_store(http_options options) {
  return std::make_unique<http_store>(std::move(options));
}

}  // namespace warm::sources
