#include <cstdio>
#include <fstream>
#include <sstream>

#include "app/commands.h"

namespace relulens::app {

int fail(const std::string& message) {
    std::fprintf(stderr, "relulens: %s\n", message.c_str());
    return 1;
}

core::Result<core::RunSpec> runSpecFromArguments(const Arguments& args,
                                                 const core::RunSpec& defaults) {
    core::RunSpec run = defaults;
    if (args.has("attention")) {
        auto kind = core::parseAttentionKind(args.value("attention"));
        if (!kind) return core::Error{kind.error()};
        run.attention.kind = *kind;
        if (!args.has("a")) run.attention.a = 1.0;
    }
    if (args.has("h")) {
        auto h = core::parseFamilyFunction(args.value("h"));
        if (!h) return core::Error{h.error()};
        run.attention.h = *h;
    }
    auto a = args.number("a", run.attention.a);
    if (!a) return core::Error{a.error()};
    run.attention.a = *a;
    if (auto s = core::validateAttentionSpec(run.attention); !s) return core::Error{s.error()};
    if (args.has("ffn")) {
        auto ffn = core::parseFfnKind(args.value("ffn"));
        if (!ffn) return core::Error{ffn.error()};
        run.ffn = *ffn;
    }
    return run;
}

core::Result<std::string> textFromArguments(const Arguments& args) {
    if (args.has("text") == args.has("file")) {
        return core::Error{"give the text with exactly one of --text TEXT or --file FILE"};
    }
    if (args.has("text")) return args.value("text");
    const std::string path = args.value("file");
    std::ifstream in(path, std::ios::binary);
    if (!in) return core::Error{path + ": cannot open the file"};
    std::ostringstream buffer;
    buffer << in.rdbuf();
    return buffer.str();
}

}  // namespace relulens::app
