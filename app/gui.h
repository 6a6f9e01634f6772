// The Qt side of the executable: the desktop window and headless rendering of views.
#pragma once
#include <string>
#include <vector>

namespace relulens::app {

// Opens the window; with no display, renders the main views to PNG files instead.
int runGui(int argc, char** argv);
// relulens render ... (see --help)
int renderCommand(int argc, char** argv, const std::vector<std::string>& args);
// relulens bench: toggle-to-redraw latency at several input lengths (see --help)
int benchCommand(int argc, char** argv, const std::vector<std::string>& args);

}  // namespace relulens::app
