// AWS credentials and region (sources/aws_credentials.hpp) from a given environment and files:
// the order they are looked for in, profiles, malformed files, and that no key is ever shown.
#include <catch2/catch.hpp>

#include <map>

#include "sources/aws_credentials.hpp"

using namespace warm;
using namespace warm::sources;

namespace {

env_lookup env_of(std::map<std::string, std::string> vars) {
  return [vars](const std::string& name) -> std::optional<std::string> {
    auto it = vars.find(name);
    if (it == vars.end()) return std::nullopt;
    return it->second;
  };
}

file_reader files_of(std::map<std::string, std::string> files) {
  return [files](const std::string& path) -> expected<std::string> {
    auto it = files.find(path);
    if (it == files.end()) return make_error(errc::not_found, path + ": none");
    return it->second;
  };
}

const char* two_profiles = R"(# comment
[default]
aws_access_key_id = AKIADEFAULT
aws_secret_access_key=secretdefault

; another
[ci]
aws_access_key_id = AKIACI
aws_secret_access_key = secretci
aws_session_token = tokenci
)";

}  // namespace

TEST_CASE("the environment comes first, with its session token") {
  auto c = find_credentials(env_of({{"AWS_ACCESS_KEY_ID", "AKIAENV"},
                                    {"AWS_SECRET_ACCESS_KEY", "secretenv"},
                                    {"AWS_SESSION_TOKEN", "tok"},
                                    {"HOME", "/home/u"}}),
                            files_of({{"/home/u/.aws/credentials", two_profiles}}));
  REQUIRE(c);
  REQUIRE(*c);
  CHECK((*c)->access_key == "AKIAENV");
  CHECK((*c)->secret_key == "secretenv");
  CHECK((*c)->session_token == "tok");
  CHECK((*c)->origin == "environment");
}

TEST_CASE("then the shared credentials file: its default profile, or AWS_PROFILE's") {
  auto files = files_of({{"/home/u/.aws/credentials", two_profiles}, {"/etc/creds", two_profiles}});
  auto d =
      find_credentials(env_of({{"HOME", "/home/u"}, {"AWS_ACCESS_KEY_ID", "only-one"}}), files);
  REQUIRE(d);
  REQUIRE(*d);
  CHECK((*d)->access_key == "AKIADEFAULT");
  CHECK((*d)->secret_key == "secretdefault");
  CHECK((*d)->session_token.empty());
  CHECK((*d)->origin == "/home/u/.aws/credentials [default]");
  auto ci = find_credentials(
      env_of({{"AWS_SHARED_CREDENTIALS_FILE", "/etc/creds"}, {"AWS_PROFILE", "ci"}}), files);
  REQUIRE(ci);
  REQUIRE(*ci);
  CHECK((*ci)->access_key == "AKIACI");
  CHECK((*ci)->session_token == "tokenci");
  CHECK((*ci)->origin == "/etc/creds [ci]");
}

TEST_CASE("no credentials anywhere means anonymous requests") {
  auto none = find_credentials(env_of({{"HOME", "/home/u"}}), files_of({}));
  REQUIRE(none);
  CHECK_FALSE(*none);
  auto other = find_credentials(env_of({{"HOME", "/home/u"}, {"AWS_PROFILE", "absent"}}),
                                files_of({{"/home/u/.aws/credentials", two_profiles}}));
  REQUIRE(other);
  CHECK_FALSE(*other);
}

TEST_CASE("a malformed file or a half profile is an error that shows no key") {
  struct bad {
    const char* text;
    const char* says;
  };
  for (auto b : {bad{"[default]\naws_access_key_id = AKIASECRETID\n",
                     "aws_access_key_id without aws_secret_access_key"},
                 bad{"[default]\naws_secret_access_key = verysecret\n",
                     "aws_secret_access_key without aws_access_key_id"},
                 bad{"aws_access_key_id = AKIASECRETID\n", "line 1"},
                 bad{"[default\naws_access_key_id = AKIASECRETID\n", "line 1"},
                 bad{"[default]\njust words verysecret\n", "line 2"}}) {
    INFO(b.text);
    auto r =
        find_credentials(env_of({{"HOME", "/h"}}), files_of({{"/h/.aws/credentials", b.text}}));
    REQUIRE_FALSE(r);
    CHECK(r.error().code == errc::invalid_argument);
    CHECK_THAT(r.error().message,
               Catch::Contains(b.says) && Catch::Contains("/h/.aws/credentials"));
    CHECK_THAT(r.error().message,
               !Catch::Contains("AKIASECRETID") && !Catch::Contains("verysecret"));
  }
}

TEST_CASE("the region: configured, then AWS_REGION, AWS_DEFAULT_REGION, us-east-1") {
  CHECK(find_region("eu-west-1", env_of({{"AWS_REGION", "x"}})) == "eu-west-1");
  CHECK(find_region("", env_of({{"AWS_REGION", "ap-south-1"}, {"AWS_DEFAULT_REGION", "y"}})) ==
        "ap-south-1");
  CHECK(find_region("", env_of({{"AWS_DEFAULT_REGION", "ca-central-1"}})) == "ca-central-1");
  CHECK(find_region("", env_of({})) == "us-east-1");
}
