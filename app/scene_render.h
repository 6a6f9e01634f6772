// A scene's views drawn offscreen into files, exactly as the window draws them: what
// `relulens render` and the window started without a display share. Needs a QApplication.
#pragma once
#include <QString>
#include <QStringList>
#include <functional>

#include "core/error.h"
#include "core/scene.h"

namespace relulens::app {

struct Frame {
    int width = 1100, height = 850;
    double scale = 1.0;  // PNG pixels per point
};

// The state is set from the scene (model by bundled name or folder), one pass computes what the
// views need, and each view is written to pathFor(view) (PNG, SVG, PDF or CSV by its suffix).
// Returns the run's provenance ("attention softmax, FFN relu — as trained"). A selected token
// past the text is an error when strict, else a note and the last token.
core::Result<QString> renderScene(const core::Scene& scene, const QStringList& views,
                                  const std::function<QString(const QString&)>& pathFor,
                                  const Frame& frame, bool strict = false);
// Qt's offscreen platform, unless another was chosen.
void startOffscreen();

}  // namespace relulens::app
