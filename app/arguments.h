// A small command-line parser: `relulens COMMAND [--option value | --option=value | --flag]...`.
// Options may take several values (`--corpus a.txt b.txt`); unknown options are errors.
#pragma once
#include <map>
#include <string>
#include <vector>

#include "core/error.h"

namespace relulens::app {

struct OptionSpec {
    std::string name;  // without the leading dashes
    bool takesValue = true;
    bool multiple = false;  // collects values until the next option
};

class Arguments {
public:
    static core::Result<Arguments> parse(const std::vector<std::string>& args,
                                         const std::vector<OptionSpec>& specs);

    bool has(const std::string& name) const { return values_.count(name) > 0; }
    std::string value(const std::string& name, const std::string& fallback = "") const;
    const std::vector<std::string>& values(const std::string& name) const;
    core::Result<int64_t> integer(const std::string& name, int64_t fallback) const;
    core::Result<double> number(const std::string& name, double fallback) const;

private:
    std::map<std::string, std::vector<std::string>> values_;
};

}  // namespace relulens::app
