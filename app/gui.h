// The Qt side of the executable: the desktop window and headless rendering of views.
#pragma once
#include <string>
#include <vector>

#include "core/error.h"

namespace relulens::core {
struct LoadedModel;
}

namespace relulens::app {

// Leaves out Qt's messages that mean nothing to a user (the offscreen platform's
// "does not support propagateSizeHints()"); every other message is printed as before.
void installMessageFilter();
// "Qt 6.4.2" (the Qt the window runs with).
std::string qtVersionLine();
// Opens the window; with no display, renders the main views to PNG files instead.
int runGui(int argc, char** argv);
// relulens render ... (see --help)
int renderCommand(int argc, char** argv, const std::vector<std::string>& args);
struct GuiTimings {
    double toggleMs = 0;         // activation toggle → attention map and sparsity views redrawn
    double coldToggleMs = 0;     // the same with nothing kept by the worker: a whole capture
    double textToPictureMs = 0;  // text → capture → attention map view written to a PNG
    double toggleBackMs = 0;     // toggle back to a variant seen moments ago → both redrawn
    double appendWordMs = 0;     // one more word typed at the end → both redrawn
    double appendLetterMs = 0;   // one more letter of a word typed at the end → both redrawn
    double stallMs = 0;          // the GUI thread's longest stall during the toggles and typing
    std::string stallEvent;      // the slowest event handled inside it (empty: none was)
    // (Linux, where steal times can be read; otherwise negative) the time the host held every
    // core inside that stall, and the longest stall less the time the host held every core
    double stallHostMs = -1;
    double stallOwnMs = -1;
};
// The window's part of `relulens bench`: medians through the real state, worker thread and
// widgets, offscreen. Creates the QApplication on first use.
core::Result<GuiTimings> benchGui(int argc, char** argv, const core::LoadedModel& model,
                                  const std::string& folder, const std::string& text, int repeats);
// Tears the benchmark's widgets and QApplication down (before static destruction begins).
void endBenchGui();

}  // namespace relulens::app
