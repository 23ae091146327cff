#include "sources/remote_header.hpp"

#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "warm/safetensors.hpp"

namespace warm::sources {
namespace {

// The object's first `bytes` (at most its size), fetched with one ranged GET.
// The object's first `bytes` (at most its size), fetched with one ranged GET; `replaced` is set
// (and an error returned) when the object changed since it was looked at.
expected<std::string> fetch_prefix(const remote_repository& repository, const object_info& object,
                                   std::uint64_t bytes, bool& replaced) {
  auto* store = repository.store_for(object.url);
  if (!store) return invalid_input("no store for '" + object.url.to_string() + "'");
  bytes = std::min(bytes, object.size);
  std::string out(static_cast<std::size_t>(bytes), '\0');
  auto options = repository.fetch();
  options.prefix_bytes = bytes;
  options.part_bytes = std::max<std::uint64_t>(bytes, 1);
  options.streams = 1;
  auto fetched = store->fetch(
      object,
      [&out](std::uint64_t offset, const char* data, std::size_t n) -> expected<void> {
        if (offset + n > out.size()) return make_error(errc::internal, "a range past the prefix");
        std::memcpy(&out[offset], data, n);
        return {};
      },
      options);
  if (!fetched) return std::move(fetched).error();
  replaced = fetched->changed;
  if (fetched->changed)
    return make_error(errc::unavailable, "'" + object.url.to_string() +
                                             "' was replaced while its header was read; try again");
  if (fetched->bytes != bytes)
    return make_error(errc::load_failed, "'" + object.url.to_string() + "': got " +
                                             std::to_string(fetched->bytes) + " of the " +
                                             std::to_string(bytes) + " header bytes asked for");
  return out;
}

std::uint64_t little_endian_u64(const std::string& bytes) {
  std::uint64_t n = 0;
  for (int i = 7; i >= 0; --i)
    n = (n << 8) | static_cast<unsigned char>(bytes[static_cast<std::size_t>(i)]);
  return n;
}

expected<std::shared_ptr<file_arrival>> fetch_header_once(const remote_repository& repository,
                                                          const remote_model& model,
                                                          bool& replaced) {
  const auto& object = model.object;
  const auto shown = object.url.to_string();
  if (object.size < 8)
    return invalid_input(shown + ": " + std::to_string(object.size) +
                         " bytes is too short for a safetensors file");
  auto prefix = fetch_prefix(repository, object, header_first_look, replaced);
  if (!prefix) return std::move(prefix).error();
  const auto header = little_endian_u64(*prefix);
  if (header > max_header_bytes || header > object.size - 8)
    return invalid_input(shown + ": header length " + std::to_string(header) +
                         " exceeds the file or the " + std::to_string(max_header_bytes) +
                         "-byte limit");
  const auto wanted = 8 + header;
  if (wanted > prefix->size()) {
    prefix = fetch_prefix(repository, object, wanted, replaced);
    if (!prefix) return std::move(prefix).error();
  }

  const int fd = ::memfd_create("warm-header", MFD_CLOEXEC);
  if (fd < 0)
    return make_error(errc::load_failed, std::string("memfd_create: ") + std::strerror(errno));
  auto arrival = std::make_shared<file_arrival>(object.size, shown);
  arrival->give_file(fd);
  for (std::size_t done = 0; done < prefix->size();) {
    const auto n =
        ::pwrite(fd, prefix->data() + done, prefix->size() - done, static_cast<off_t>(done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0)
      return make_error(errc::load_failed, std::string("writing a header copy: ") +
                                               std::strerror(n < 0 ? errno : ENOSPC));
    done += static_cast<std::size_t>(n);
  }
  arrival->arrived(0, prefix->size());
  arrival->finish(
      make_error(errc::load_failed, shown + ": only its header was fetched (to describe it)"));
  return arrival;
}

}  // namespace

expected<std::shared_ptr<file_arrival>> fetch_header(const remote_repository& repository,
                                                     remote_model& model) {
  constexpr int tries = 3;
  for (int attempt = 1;; ++attempt) {
    bool replaced = false;
    auto header = fetch_header_once(repository, model, replaced);
    if (header || !replaced || attempt == tries) return header;
    // Replaced since it was looked at: look again, and read the new object's header.
    auto now = repository.store_for(model.object.url)->head(model.object.url);
    if (!now) return std::move(now).error();
    model.object = std::move(*now);
  }
}

}  // namespace warm::sources
