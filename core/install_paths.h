// Where ReluLens finds what it ships, relative to the running executable: in the build tree
// (build/bin -> resources/) and installed (/usr/bin -> /usr/share/relulens/,
// /usr/lib/relulens/). One place for the command line, the window and the tokenizer module.
#pragma once
#include <string>

namespace relulens::core {

// The folder holding the running executable (/proc/self/exe), or "." when it cannot be read.
std::string executableDir();

// The bundled resources (models/, lessons/, sample.txt): $RELULENS_RESOURCES when it is a
// folder, else the first of <exe>/../share/relulens (installed) and <exe>/../../resources (build
// tree) that holds models/; the build tree's path when neither does.
std::string resourcesDir();

}  // namespace relulens::core
