// The `relulens` subcommands. Each takes the arguments after its name, prints results to
// stdout and errors to stderr, and returns the process exit code.
#pragma once
#include <string>
#include <vector>

#include "app/arguments.h"
#include "core/model_folder.h"
#include "core/variants.h"

namespace relulens::app {

int inspectCommand(const std::vector<std::string>& args);
int trainTokenizerCommand(const std::vector<std::string>& args);
int initModelCommand(const std::vector<std::string>& args);
int importLlama2cCommand(const std::vector<std::string>& args);
int trainCommand(const std::vector<std::string>& args);
int evalCommand(const std::vector<std::string>& args);
// relulens bench (see --help); argc/argv start the Qt side when the window is built in.
int benchCommand(int argc, char** argv, const std::vector<std::string>& args);

// `own` options followed by the variant options runSpecFromArguments reads: --attention, --h,
// --a, --sigmoid-bias, --ssmax-sigma and --ffn.
std::vector<OptionSpec> withVariantOptions(std::vector<OptionSpec> own);
// Reads --attention/--h/--a/--sigmoid-bias/--ssmax-sigma/--ffn over the defaults (the variants
// the model was trained with), then --override L[:H]=VARIANT and --ablate L:H[=zero|uniform]
// (both repeatable, applied in order) where the command takes them.
core::Result<core::RunSpec> runSpecFromArguments(const Arguments& args,
                                                 const core::RunSpec& defaults);
// The text of --text or --file (exactly one of them).
core::Result<std::string> textFromArguments(const Arguments& args);

// Load options for a command: the device, and progress on stderr when loading takes a while.
core::LoadOptions terminalLoadOptions(const std::string& device);
// Opens a model folder of any family on a device (auto | cpu | cuda[:N]), with progress.
core::Result<core::LoadedModel> openModel(const std::string& folder, const std::string& device);

// Prints "relulens: <message>" to stderr and returns 1.
int fail(const std::string& message);

}  // namespace relulens::app
