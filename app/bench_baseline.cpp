#include "app/bench_baseline.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include <ATen/Parallel.h>
#include <nlohmann/json.hpp>

#include "core/atomic_file.h"
#include "core/install_paths.h"

namespace relulens::app {

bool fileExists(const std::string& path) {
    struct stat s {};
    return stat(path.c_str(), &s) == 0;
}

std::string baselineScript() {
    const std::string exe = core::executableDir();
    const std::string installed = exe + "/../share/relulens/bench/baseline.py";
    return fileExists(installed) ? installed : exe + "/../../bench/baseline.py";
}

std::string readFile(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
}

namespace {

using Clock = std::chrono::steady_clock;

std::string quoted(const std::string& s) {
    std::string out = "'";
    for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
    return out + "'";
}

}  // namespace

core::Result<BaselineRun> runBaseline(const std::string& python, const std::string& script,
                                      const std::string& model,
                                      const std::vector<core::Token>& tokens,
                                      const core::MapSource& maps, int64_t layer, int repeats) {
    char dir[] = "/tmp/relulens-bench-XXXXXX";
    if (!mkdtemp(dir)) return core::Error{"cannot make a temporary folder for the baseline"};
    const std::string folder = dir;
    std::string idText;
    for (const auto& t : tokens) idText += std::to_string(t.id) + ' ';
    if (auto s = core::writeTextAtomically(folder + "/ids.txt", idText); !s)
        return core::Error{s.error()};
    const std::string command =
        quoted(python) + " " + quoted(script) + " --model " + quoted(model) + " --ids " +
        quoted(folder + "/ids.txt") + " --layer " + std::to_string(layer) + " --head 0" +
        " --repeats " + std::to_string(repeats) + " --threads " +
        std::to_string(at::get_num_threads()) + " --map-out " + quoted(folder + "/map.f32") +
        " --png " + quoted(folder + "/map.png");
    std::string output;
    if (FILE* pipe = popen(command.c_str(), "r")) {
        char buffer[4096];
        while (size_t n = fread(buffer, 1, sizeof(buffer), pipe)) output.append(buffer, n);
        if (pclose(pipe) != 0) {
            return core::Error{"the baseline failed (" + command +
                               "); are python3-torch and python3-matplotlib installed?"};
        }
    } else {
        return core::Error{"cannot run " + python};
    }
    BaselineRun run;
    try {
        const auto j = nlohmann::json::parse(output.substr(output.rfind('{')));
        run.forwardWithMapsMs = j.at("forward_with_maps_ms").get<double>();
        run.textToPictureMs = j.at("text_to_picture_ms").get<double>();
        run.peakMb = j.at("peak_rss_mb").get<double>();
    } catch (const std::exception& e) {
        return core::Error{std::string("unreadable baseline output: ") + e.what() + "\n" + output};
    }
    // Cross-check: the head the baseline drew against ReluLens's map of the same head.
    const std::string raw = readFile(folder + "/map.f32");
    const int64_t L = maps.tokens();
    if (int64_t(raw.size()) != L * L * 4)
        return core::Error{"the baseline's map has the wrong size"};
    auto theirs = torch::from_blob(const_cast<char*>(raw.data()), {L, L}, torch::kFloat32).clone();
    run.maxDifference = (theirs - maps.weights(layer, 0)).abs().max().item<double>();
    std::remove((folder + "/ids.txt").c_str());
    std::remove((folder + "/map.f32").c_str());
    std::remove((folder + "/map.png").c_str());
    rmdir(folder.c_str());
    return run;
}

core::Status benchTokenizer(const std::string& path, const std::string& textFile,
                            double megabytes) {
    const bool json = path.size() >= 5 && path.compare(path.size() - 5, 5, ".json") == 0;
    const std::string source = readFile(textFile);
    if (source.empty()) return core::Error{textFile + ": cannot read the benchmark text"};
    const size_t bytes = size_t(megabytes * 1e6);
    std::string text;
    while (text.size() < bytes) text += source;
    text.resize(bytes);
    while (!text.empty() && core::firstInvalidUtf8(text) >= 0)
        text.pop_back();  // cut on a character
    double best = 0;
    size_t tokens = 0;
    for (int run = 0; run < 3; ++run) {
        auto tokenizer = json ? core::Tokenizer::loadJson(path, "") : core::Tokenizer::load(path);
        if (!tokenizer) return core::Error{tokenizer.error()};
        const auto start = Clock::now();
        auto encoded = tokenizer->encode(text);
        if (!encoded) return core::Error{encoded.error()};
        tokens = encoded->size();
        const double ms = std::chrono::duration<double, std::milli>(Clock::now() - start).count();
        best = run == 0 ? ms : std::min(best, ms);
    }
    std::printf(
        "tokenizer: %s (%s): %.2f MB of %s in %.0f ms (best of 3, fresh tokenizer each) = "
        "%.2f MB/s, %zu tokens\n",
        path.c_str(), json ? "byte-level BPE" : "SentencePiece", double(text.size()) / 1e6,
        textFile.c_str(), best, double(text.size()) / 1e6 / (best / 1e3), tokens);
    return {};
}

}  // namespace relulens::app
