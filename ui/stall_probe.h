// How long the GUI thread went without turning its event loop: a fine timer notes the gaps
// between its ticks. For the responsiveness test and `relulens bench`.
#pragma once
#include <QElapsedTimer>
#include <QObject>
#include <QTimer>

namespace relulens::ui {

class StallProbe : public QObject {
    Q_OBJECT
public:
    explicit StallProbe(QObject* parent = nullptr);
    void start();
    // Stops and returns the longest gap in milliseconds (the time since the last tick counted).
    double stop();
    double longestMs() const { return longest_ / 1e6; }
    int ticks() const { return ticks_; }

private:
    void tick();
    QTimer timer_;
    QElapsedTimer clock_;
    qint64 last_ = 0, longest_ = 0;  // nanoseconds
    int ticks_ = 0;
};

}  // namespace relulens::ui
