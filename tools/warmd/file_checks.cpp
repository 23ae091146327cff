#include "file_checks.hpp"

#include <sys/stat.h>

#include <cstdio>

namespace warm::warmd {

namespace {
std::string octal(mode_t mode) {
  char text[8];
  std::snprintf(text, sizeof text, "%04o", static_cast<unsigned>(mode & 07777));
  return text;
}
}  // namespace

expected<std::vector<std::string>> check_token_file(const std::string& path) {
  std::vector<std::string> warnings;
  struct stat link {};
  if (::lstat(path.c_str(), &link) != 0) return warnings;
  if (S_ISLNK(link.st_mode)) warnings.push_back("token file " + path + " is a symlink");
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0 && (st.st_mode & (S_IRGRP | S_IROTH | S_IWGRP | S_IWOTH)) != 0)
    return make_error(errc::invalid_argument, "token file " + path +
                                                  " may be read or written by other users (mode " +
                                                  octal(st.st_mode) + "); chmod 600 it");
  return warnings;
}

expected<std::vector<std::string>> check_state_dir(const std::string& path) {
  std::vector<std::string> warnings;
  struct stat link {};
  if (::lstat(path.c_str(), &link) != 0) return warnings;
  if (S_ISLNK(link.st_mode)) warnings.push_back("state directory " + path + " is a symlink");
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return warnings;
  if (S_ISDIR(st.st_mode) && (st.st_mode & (S_IWOTH | S_IWGRP)) != 0)
    return make_error(errc::invalid_argument, "state directory " + path +
                                                  " is writable by other users (mode " +
                                                  octal(st.st_mode) + "); chmod go-w it");
  return warnings;
}

expected<std::vector<std::string>> check_repository(const std::string& path) {
  std::vector<std::string> warnings;
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
    return warnings;  // the runtime reports it
  if ((st.st_mode & S_IWOTH) != 0)
    return make_error(errc::invalid_argument,
                      "repository " + path + " is writable by every user (mode " +
                          octal(st.st_mode) + "): anyone could publish a model; chmod o-w it");
  if ((st.st_mode & S_IWGRP) != 0)
    warnings.push_back("repository " + path + " is writable by its group (mode " +
                       octal(st.st_mode) + "): every member may publish models");
  return warnings;
}

}  // namespace warm::warmd
