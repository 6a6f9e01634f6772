// What ReluLens is made of and under which licences, for `relulens --version`, Help ▸ About and
// the Debian copyright file (installers/copyright lists the same components).
#pragma once
#include <string>
#include <vector>

namespace relulens::core {

constexpr const char* kLicence = "GPL-3.0-or-later";

struct Component {
    std::string name;
    std::string licence;  // SPDX identifier, or "public domain"
    std::string role;     // how ReluLens uses it
};

// Every component shipped in or linked by ReluLens, and the data its models were made from.
const std::vector<Component>& components();

}  // namespace relulens::core
