#include "remote_models.hpp"

#include "sources/aws_credentials.hpp"
#include "sources/remote_versions.hpp"
#include "sources/s3_store.hpp"

namespace warm::warmd {

remote_models_fn remote_models(const config& c) {
  return [endpoint = c.s3_endpoint,
          region = c.s3_region](const std::string& root) -> expected<std::vector<std::string>> {
    auto url = sources::parse_object_url(root);
    if (!url) return std::move(url).error();
    if (url->kind != sources::object_url::scheme::s3)
      return invalid_input("--serve-repo: repository '" + url->to_string() +
                           "' is an HTTP source, which cannot be listed for its model "
                           "directories; serve from S3 or local repositories, or register the "
                           "models of an HTTP source one by one");
    auto env = sources::process_environment();
    auto credentials = sources::find_credentials(env, sources::local_files());
    if (!credentials) return std::move(credentials).error();
    sources::s3_options s3;
    s3.endpoint = endpoint;
    s3.region = sources::find_region(region, env);
    s3.credentials = std::move(*credentials);
    auto store = sources::make_s3_store(std::move(s3));
    if (!store) return std::move(store).error();
    return sources::remote_repository_models(**store, *url);
  };
}

}  // namespace warm::warmd
