#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <memory>
#include <sstream>

#include "app/commands.h"
#include "core/text_file.h"

namespace relulens::app {

int fail(const std::string& message) {
    std::fprintf(stderr, "relulens: %s\n", message.c_str());
    return 1;
}

core::LoadOptions terminalLoadOptions(const std::string& device) {
    core::LoadOptions options;
    options.device = device;
    struct Progress {
        std::chrono::steady_clock::time_point started = std::chrono::steady_clock::now();
        int shown = -1;  // last percentage printed
    };
    auto state = std::make_shared<Progress>();
    const bool terminal = isatty(fileno(stderr)) != 0;
    options.progress = [state, terminal](double fraction, const std::string&) {
        const double seconds =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - state->started)
                .count();
        if (seconds < 0.5 && state->shown < 0) return;  // quick loads print nothing
        const int percent = int(fraction * 100.0);
        const int step = terminal ? 1 : 10;
        if (percent / step == state->shown / step && percent < 100) return;
        state->shown = percent;
        std::fprintf(stderr,
                     terminal ? "\rloading the model: %3d %% (%.0f s)"
                              : "loading the model: %d %% (%.0f s)\n",
                     percent, seconds);
        if (terminal && percent >= 100) std::fputc('\n', stderr);
        std::fflush(stderr);
    };
    return options;
}

core::Result<core::LoadedModel> openModel(const std::string& folder, const std::string& device) {
    return core::loadModelFolder(folder, terminalLoadOptions(device));
}

std::vector<OptionSpec> withVariantOptions(std::vector<OptionSpec> own) {
    for (const char* name : {"attention", "h", "a", "sigmoid-bias", "ssmax-sigma", "ffn"}) {
        own.push_back({name});
    }
    return own;
}

core::Result<core::RunSpec> runSpecFromArguments(const Arguments& args,
                                                 const core::RunSpec& defaults) {
    core::RunSpec run = defaults;
    if (args.has("attention")) {
        auto kind = core::parseAttentionKind(args.value("attention"));
        if (!kind) return core::Error{kind.error()};
        run.attention.kind = *kind;
        if (!args.has("a")) run.attention.lengthExponent = 1.0;
    }
    if (args.has("h")) {
        auto h = core::parseFamilyFunction(args.value("h"));
        if (!h) return core::Error{h.error()};
        run.attention.familyFunction = *h;
    }
    auto a = args.number("a", run.attention.lengthExponent);
    if (!a) return core::Error{a.error()};
    run.attention.lengthExponent = *a;
    if (args.has("sigmoid-bias")) {
        if (args.value("sigmoid-bias") == "log-n") {
            run.attention.sigmoidBias.reset();
        } else {
            auto b = args.number("sigmoid-bias", 0.0);
            if (!b) return core::Error{b.error() + " (or log-n for b_i = -log n_i)"};
            run.attention.sigmoidBias = *b;
        }
    }
    auto sigma = args.number("ssmax-sigma", run.attention.ssmaxSigma);
    if (!sigma) return core::Error{sigma.error()};
    run.attention.ssmaxSigma = *sigma;
    if (auto s = core::validateAttentionSpec(run.attention); !s) return core::Error{s.error()};
    if (args.has("ffn")) {
        auto ffn = core::parseFfnKind(args.value("ffn"));
        if (!ffn) return core::Error{ffn.error()};
        run.ffn = *ffn;
    }
    for (const auto& text : args.values("override")) {
        auto o = core::parseOverride(text);
        if (!o) return core::Error{"--override " + o.error()};
        run.overrides.push_back(*o);
    }
    for (const auto& text : args.values("ablate")) {
        auto o = core::parseAblation(text);
        if (!o) return core::Error{"--ablate " + o.error()};
        run.overrides.push_back(*o);
    }
    return run;
}

core::Result<std::string> textFromArguments(const Arguments& args) {
    if (args.has("text") == args.has("file")) {
        return core::Error{"give the text with exactly one of --text TEXT or --file FILE"};
    }
    if (args.has("text")) return args.value("text");
    return core::readTextFile(args.value("file"));
}

}  // namespace relulens::app
