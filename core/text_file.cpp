#include "core/text_file.h"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "core/tokenizer.h"

namespace relulens::core {

Result<std::string> readTextFile(const std::string& path, int64_t maxBytes) {
    std::ifstream in(path, std::ios::binary | std::ios::ate);
    if (!in) return Error{path + ": cannot open (" + std::strerror(errno) + ")"};
    const std::streamoff size = in.tellg();
    if (size < 0) return Error{path + ": cannot open (not a readable file)"};
    if (int64_t(size) > maxBytes) {
        return Error{path + " is larger than " + std::to_string(maxBytes / (1024 * 1024)) +
                     " MB; open a shorter excerpt"};
    }
    in.seekg(0);
    std::ostringstream buffer;
    buffer << in.rdbuf();
    std::string text = buffer.str();
    if (const int64_t bad = firstInvalidUtf8(text); bad >= 0) {
        return Error{path + " is not UTF-8 text (byte " + std::to_string(bad) +
                     "); convert it to UTF-8 first"};
    }
    return text;
}

}  // namespace relulens::core
