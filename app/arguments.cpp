#include "app/arguments.h"

#include <cstdlib>

namespace relulens::app {

core::Result<Arguments> Arguments::parse(const std::vector<std::string>& args,
                                         const std::vector<OptionSpec>& specs) {
    Arguments out;
    const OptionSpec* current = nullptr;
    for (size_t i = 0; i < args.size(); ++i) {
        const std::string& arg = args[i];
        if (arg.size() > 2 && arg.compare(0, 2, "--") == 0) {
            std::string name = arg.substr(2);
            std::string inlineValue;
            bool hasInline = false;
            if (auto eq = name.find('='); eq != std::string::npos) {
                inlineValue = name.substr(eq + 1);
                name = name.substr(0, eq);
                hasInline = true;
            }
            current = nullptr;
            for (const auto& spec : specs) {
                if (spec.name == name) current = &spec;
            }
            if (!current) return core::Error{"unknown option --" + name + " (see --help)"};
            auto& slot = out.values_[name];
            if (!current->takesValue) {
                if (hasInline) return core::Error{"option --" + name + " takes no value"};
                current = nullptr;
                continue;
            }
            if (hasInline) {
                slot.push_back(inlineValue);
                if (!current->multiple) current = nullptr;
                continue;
            }
            if (i + 1 >= args.size()) return core::Error{"option --" + name + " needs a value"};
            slot.push_back(args[++i]);
            if (!current->multiple) current = nullptr;
            continue;
        }
        if (current && current->multiple) {
            out.values_[current->name].push_back(arg);
            continue;
        }
        return core::Error{"unexpected argument '" + arg + "' (see --help)"};
    }
    for (const auto& spec : specs) {
        auto it = out.values_.find(spec.name);
        if (it != out.values_.end() && !spec.multiple && it->second.size() > 1) {
            return core::Error{"option --" + spec.name + " given more than once"};
        }
    }
    return out;
}

std::string Arguments::value(const std::string& name, const std::string& fallback) const {
    auto it = values_.find(name);
    return it == values_.end() || it->second.empty() ? fallback : it->second.back();
}

const std::vector<std::string>& Arguments::values(const std::string& name) const {
    static const std::vector<std::string> none;
    auto it = values_.find(name);
    return it == values_.end() ? none : it->second;
}

core::Result<int64_t> Arguments::integer(const std::string& name, int64_t fallback) const {
    if (!has(name)) return fallback;
    const std::string text = value(name);
    char* end = nullptr;
    const long long v = std::strtoll(text.c_str(), &end, 10);
    if (text.empty() || *end != '\0') {
        return core::Error{"--" + name + " expects a whole number, got '" + text + "'"};
    }
    return int64_t(v);
}

core::Result<double> Arguments::number(const std::string& name, double fallback) const {
    if (!has(name)) return fallback;
    const std::string text = value(name);
    char* end = nullptr;
    const double v = std::strtod(text.c_str(), &end);
    if (text.empty() || *end != '\0') {
        return core::Error{"--" + name + " expects a number, got '" + text + "'"};
    }
    return v;
}

}  // namespace relulens::app
