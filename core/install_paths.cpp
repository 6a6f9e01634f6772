#include "core/install_paths.h"

#include <cstdlib>
#include <filesystem>

namespace relulens::core {

namespace fs = std::filesystem;

std::string executableDir() {
    std::error_code ec;
    const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
    if (ec || exe.empty()) return ".";
    return exe.parent_path().string();
}

std::string resourcesDir() {
    std::error_code ec;
    if (const char* env = std::getenv("RELULENS_RESOURCES");
        env && *env && fs::is_directory(env, ec)) {
        return fs::absolute(env, ec).lexically_normal().string();
    }
    const fs::path exe = executableDir();
    const fs::path installed = exe / ".." / "share" / "relulens";
    const fs::path tree = exe / ".." / ".." / "resources";
    for (const fs::path& candidate : {installed, tree}) {
        if (fs::is_directory(candidate / "models", ec))
            return candidate.lexically_normal().string();
    }
    return tree.lexically_normal().string();
}

}  // namespace relulens::core
