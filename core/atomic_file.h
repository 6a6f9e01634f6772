// Writing a file so that nobody ever reads half of it: the bytes go to PATH.partial, which
// replaces PATH only once it is complete. When anything fails, PATH keeps what it held and
// the partial file is removed.
#pragma once
#include <functional>
#include <ostream>
#include <string>

#include "core/error.h"

namespace relulens::core {

// `write` streams the contents; a stream that has failed when it returns (full disk, a
// closed descriptor) fails the whole write.
Status writeFileAtomically(const std::string& path,
                           const std::function<void(std::ostream&)>& write);
Status writeTextAtomically(const std::string& path, const std::string& text);

}  // namespace relulens::core
