#include "ui/stall_probe.h"

#include <algorithm>

namespace relulens::ui {

StallProbe::StallProbe(QObject* parent) : QObject(parent) {
    timer_.setTimerType(Qt::PreciseTimer);
    timer_.setInterval(5);
    connect(&timer_, &QTimer::timeout, this, &StallProbe::tick);
}

void StallProbe::start() {
    longest_ = 0;
    ticks_ = 0;
    clock_.start();
    last_ = 0;
    timer_.start();
}

void StallProbe::tick() {
    const qint64 now = clock_.nsecsElapsed();
    longest_ = std::max(longest_, now - last_);
    last_ = now;
    ++ticks_;
}

double StallProbe::stop() {
    timer_.stop();
    longest_ = std::max(longest_, clock_.nsecsElapsed() - last_);
    return longestMs();
}

}  // namespace relulens::ui
