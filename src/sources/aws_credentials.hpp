// AWS credentials and region, found the way the AWS tools find them: the environment first, then
// the shared credentials file. Pure given its inputs (the environment and file reader are passed
// in), so tests never touch the real ones.
#pragma once

#include <functional>
#include <optional>
#include <string>

#include "warm/error.hpp"

namespace warm::sources {

struct aws_credentials {
  std::string access_key;
  std::string secret_key;
  std::string session_token;  // empty when none
  // Where they came from ("environment", "/root/.aws/credentials [default]"): for messages,
  // never the values.
  std::string origin;
};

// Looks up an environment variable; nullopt when unset.
using env_lookup = std::function<std::optional<std::string>(const std::string& name)>;
// Reads a whole file; not_found when it does not exist.
using file_reader = std::function<expected<std::string>(const std::string& path)>;

// AWS_ACCESS_KEY_ID + AWS_SECRET_ACCESS_KEY (+ AWS_SESSION_TOKEN) when both are set; else the
// profile AWS_PROFILE (default "default") of the file AWS_SHARED_CREDENTIALS_FILE (default
// $HOME/.aws/credentials): aws_access_key_id, aws_secret_access_key, aws_session_token. nullopt
// when neither has them (anonymous requests); invalid_argument for a file that is malformed or a
// profile with only one of the two keys. No message ever contains a key.
expected<std::optional<aws_credentials>> find_credentials(const env_lookup& env,
                                                          const file_reader& read);

// The region: `configured` when not empty, else AWS_REGION, AWS_DEFAULT_REGION, else "us-east-1".
std::string find_region(const std::string& configured, const env_lookup& env);

// The process's own environment and file system.
env_lookup process_environment();
file_reader local_files();

}  // namespace warm::sources
