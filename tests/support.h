// Helpers shared by every ReluLens test, the core's doctest suites and the window's Qt Test suites
// alike: data paths, tensor comparisons, temporary folders, files and child processes. Plain C++
// (std, POSIX, LibTorch, JSON): the core's tests build and run on a machine with no Qt.
#pragma once
#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/torch_include.h"
#include "core/variants.h"

extern char** environ;

namespace relulens::test {

// The per-layer and per-head overrides of a NumPy reference run (tests/reference/*.py):
// [{"layer": L, "head": H (absent: the whole layer), "attention": V | "ablate": zero|uniform}].
inline std::vector<core::AttentionOverride> overridesFromJson(const nlohmann::json& list) {
    std::vector<core::AttentionOverride> out;
    for (const auto& o : list) {
        core::AttentionOverride entry;
        entry.layer = o["layer"];
        entry.head = o.value("head", int64_t(-1));
        if (o.contains("ablate")) {
            entry.ablation = o["ablate"] == "zero" ? core::Ablation::Zero : core::Ablation::Uniform;
        } else {
            entry.spec.kind = *core::parseAttentionKind(o["attention"].get<std::string>());
        }
        out.push_back(entry);
    }
    return out;
}

inline std::string dataPath(const std::string& name) {
    return std::string(RELULENS_TEST_DATA) + "/" + name;
}

inline std::string binPath(const std::string& name) {
    return std::string(RELULENS_BIN_DIR) + "/" + name;
}

// The process's resident memory now (VmRSS), in MB.
inline double residentMb() {
    std::ifstream status("/proc/self/status");
    std::string line;
    while (std::getline(status, line)) {
        if (line.rfind("VmRSS:", 0) == 0) return std::stod(line.substr(6)) / 1024.0;
    }
    return 0;
}

// Compares a (rows, cols) tensor with expected values written out row by row; on a mismatch,
// *why names the first entry that differs.
inline bool matches(const torch::Tensor& actual, const std::vector<std::vector<double>>& expected,
                    double tolerance, std::string* why) {
    auto a = actual.to(torch::kFloat64).contiguous();
    if (a.dim() != 2 || a.size(0) != int64_t(expected.size())) {
        *why = "shape mismatch";
        return false;
    }
    for (size_t i = 0; i < expected.size(); ++i) {
        if (a.size(1) != int64_t(expected[i].size())) {
            *why = "row length mismatch";
            return false;
        }
        for (size_t j = 0; j < expected[i].size(); ++j) {
            const double v = a[int64_t(i)][int64_t(j)].item<double>();
            if (std::abs(v - expected[i][j]) > tolerance) {
                std::ostringstream message;
                message.precision(9);
                message << "entry (" << i << "," << j << ") is " << v << ", expected "
                        << expected[i][j];
                *why = message.str();
                return false;
            }
        }
    }
    return true;
}

// A fresh folder under the system's temporary folder, removed with everything in it when the
// object goes.
class TempDir {
public:
    TempDir() {
        std::string pattern = (std::filesystem::temp_directory_path() / "relulens-test-XXXXXX");
        if (!mkdtemp(pattern.data())) throw std::runtime_error("cannot create a temporary folder");
        path_ = pattern;
    }
    ~TempDir() {
        std::error_code ec;
        std::filesystem::remove_all(path_, ec);
    }
    TempDir(const TempDir&) = delete;
    TempDir& operator=(const TempDir&) = delete;

    const std::string& path() const { return path_; }
    std::string filePath(const std::string& name) const { return path_ + "/" + name; }

private:
    std::string path_;
};

inline bool fileExists(const std::string& path) {
    std::error_code ec;
    return std::filesystem::exists(path, ec);
}

// The whole file as bytes; empty when it cannot be read.
inline std::string readFile(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

inline void writeFile(const std::string& path, const std::string& bytes) {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out << bytes;
    if (!out) throw std::runtime_error("cannot write " + path);
}

inline bool contains(const std::string& text, const std::string& part) {
    return text.find(part) != std::string::npos;
}

// What a child process wrote and how it ended.
struct ProcessResult {
    bool finished = false;  // false: it could not start, or ran past the time limit and was killed
    int exitCode = -1;
    std::string out;
    std::string err;
};

// Runs program with arguments (no shell), waits at most timeoutSeconds, and returns its exit code
// and what it wrote to standard output and standard error.
inline ProcessResult runProcess(const std::string& program,
                                const std::vector<std::string>& arguments,
                                int timeoutSeconds = 120) {
    ProcessResult result;
    TempDir streams;
    const std::string outPath = streams.filePath("stdout"), errPath = streams.filePath("stderr");
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, 1, outPath.c_str(), O_WRONLY | O_CREAT | O_TRUNC,
                                     0600);
    posix_spawn_file_actions_addopen(&actions, 2, errPath.c_str(), O_WRONLY | O_CREAT | O_TRUNC,
                                     0600);
    std::vector<char*> argv;
    argv.push_back(const_cast<char*>(program.c_str()));
    for (const auto& argument : arguments) argv.push_back(const_cast<char*>(argument.c_str()));
    argv.push_back(nullptr);
    pid_t pid = 0;
    const int spawned = posix_spawn(&pid, program.c_str(), &actions, nullptr, argv.data(), environ);
    posix_spawn_file_actions_destroy(&actions);
    if (spawned != 0) {
        result.err = "cannot start " + program;
        return result;
    }
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(timeoutSeconds);
    int status = 0;
    while (waitpid(pid, &status, WNOHANG) == 0) {
        if (std::chrono::steady_clock::now() > deadline) {
            kill(pid, SIGKILL);
            waitpid(pid, &status, 0);
            result.out = readFile(outPath);
            result.err = readFile(errPath) + "\n" + program + " ran past " +
                         std::to_string(timeoutSeconds) + " s and was stopped";
            return result;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    result.finished = WIFEXITED(status);
    result.exitCode = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    result.out = readFile(outPath);
    result.err = readFile(errPath);
    return result;
}

}  // namespace relulens::test
