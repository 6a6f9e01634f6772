#include "app/bench_options.h"

#include <cstdlib>

#include "app/bench_baseline.h"
#include "core/install_paths.h"

namespace relulens::app {

core::Result<BenchOptions> benchOptions(const Arguments& args) {
    BenchOptions o;
    const std::string resources = core::resourcesDir();
    o.modelAsked = args.has("model");
    o.modelFolder = o.modelAsked ? args.value("model") : resources + "/models/softmax";
    o.textFile = args.has("file") ? args.value("file") : resources + "/sample.txt";
    if (args.has("tokenizer")) {
        o.tokenizer = args.value("tokenizer");
        auto megabytes = args.number("megabytes", 1.0);
        if (!megabytes || !(*megabytes > 0) || *megabytes > 64)
            return core::Error{"--megabytes must be in (0, 64]"};
        o.megabytes = *megabytes;
    }
    if (args.has("sizes")) {
        o.sizes.clear();
        for (const auto& s : args.values("sizes")) {
            char* end = nullptr;
            const long v = std::strtol(s.c_str(), &end, 10);
            if (!end || *end || v < 2 || v > 16384)
                return core::Error{"--sizes takes token counts from 2 to 16384"};
            o.sizes.push_back(size_t(v));
        }
    }
    auto repeats = args.integer("repeats", 5);
    if (!repeats || *repeats < 1) return core::Error{"--repeats must be positive"};
    o.repeats = *repeats;
    auto baselineRepeats = args.integer("baseline-repeats", 3);
    if (!baselineRepeats || *baselineRepeats < 1)
        return core::Error{"--baseline-repeats must be positive"};
    o.baselineRepeats = *baselineRepeats;
    if (args.has("device")) o.device = args.value("device");
    o.baseline = args.has("baseline");
    if (args.has("python")) o.python = args.value("python");
    o.script = baselineScript();
    if (o.baseline && !fileExists(o.script))
        return core::Error{o.script + ": the baseline script is missing"};
    o.gui = !args.has("no-gui");
#ifndef RELULENS_WITH_GUI
    o.gui = false;
#endif
    if (args.has("json")) o.json = args.value("json");
    return o;
}

}  // namespace relulens::app
