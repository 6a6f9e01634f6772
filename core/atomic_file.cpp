#include "core/atomic_file.h"

#include <cstdio>
#include <filesystem>
#include <fstream>

namespace relulens::core {

Status writeFileAtomically(const std::string& path,
                           const std::function<void(std::ostream&)>& write) {
    const std::string temporary = path + ".partial";
    {
        std::ofstream out(temporary, std::ios::binary | std::ios::trunc);
        if (!out) return Error{path + ": cannot write the file"};
        write(out);
        out.flush();
        if (!out) {
            out.close();
            std::remove(temporary.c_str());
            return Error{path + ": writing failed (disk full?)"};
        }
    }
    std::error_code ec;
    std::filesystem::rename(temporary, path, ec);
    if (ec) {
        std::remove(temporary.c_str());
        return Error{path + ": could not replace the file (" + ec.message() + ")"};
    }
    return {};
}

Status writeTextAtomically(const std::string& path, const std::string& text) {
    return writeFileAtomically(path, [&](std::ostream& out) { out << text; });
}

}  // namespace relulens::core
