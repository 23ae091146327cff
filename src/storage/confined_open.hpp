// Opening a file beneath a directory handle without leaving it. A model repository confines a
// model's path when it is registered; this confines it again at every open, on the descriptor,
// so a version directory or model file swapped for a symlink afterwards cannot lead elsewhere.
//
// The walk starts at the root's descriptor: with openat2(RESOLVE_BENEATH) where the kernel has it
// (symlinks inside the root are followed, any step outside it is refused), otherwise one
// component at a time with O_NOFOLLOW (every symlink is refused; a registered path is canonical,
// so it holds none unless the tree changed). The file is first opened as O_PATH and its type
// checked on that descriptor, so nothing but a regular file is ever opened for reading.
#pragma once

#include <string>

#include "storage/file.hpp"
#include "warm/error.hpp"

namespace warm {

enum class beneath_walk {
  automatic,  // openat2 when the kernel supports it, else per component
  openat2,    // only openat2 (not_supported-style load_failed when the kernel lacks it)
  components  // only the O_NOFOLLOW walk
};

// Opens `relative` (no leading '/', no "." or ".." components) beneath the directory `root_fd`
// for reading. `display` names the file in messages. invalid_argument when the path leads outside
// the root (or, in the component walk, through any symlink) or is not a regular file; not_found
// when it does not exist; load_failed for other OS errors.
expected<read_file> open_beneath(int root_fd, const std::string& relative,
                                 const std::string& display,
                                 beneath_walk walk = beneath_walk::automatic);

}  // namespace warm
