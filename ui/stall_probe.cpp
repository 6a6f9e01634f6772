#include "ui/stall_probe.h"

#include <QCoreApplication>
#include <QEvent>

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
    culprit_.clear();
    slowest_.clear();
    slowestEvent_ = 0;
    receiverClass_ = nullptr;
    clock_.start();
    last_ = 0;
    QCoreApplication::instance()->installEventFilter(this);
    timer_.start();
}

bool StallProbe::eventFilter(QObject* watched, QEvent* event) {
    // An event begins: the one before it (or the time since the last one) ended. Nested events
    // cut their parent's time short; the probe names a suspect, not an exact account.
    const qint64 now = clock_.nsecsElapsed();
    if (receiverClass_ && now - eventStart_ > slowestEvent_) {
        slowestEvent_ = now - eventStart_;
        slowest_ = QString("%1 (in %2), event type %3, %4 ms")
                       .arg(receiverClass_, parentClass_)
                       .arg(eventType_)
                       .arg(slowestEvent_ / 1e6, 0, 'f', 1);
    }
    // class names are static strings: they outlive a receiver its own event deletes
    receiverClass_ = watched->metaObject()->className();
    parentClass_ = watched->parent() ? watched->parent()->metaObject()->className() : "-";
    eventType_ = int(event->type());
    eventStart_ = now;
    return false;
}

void StallProbe::tick() {
    const qint64 now = clock_.nsecsElapsed();
    if (now - last_ > longest_) {
        longest_ = now - last_;
        culprit_ = slowest_;
    }
    last_ = now;
    slowest_.clear();
    slowestEvent_ = 0;
    receiverClass_ = nullptr;  // the tick's own event is not counted
    ++ticks_;
}

double StallProbe::stop() {
    timer_.stop();
    QCoreApplication::instance()->removeEventFilter(this);
    if (clock_.nsecsElapsed() - last_ > longest_) {
        longest_ = clock_.nsecsElapsed() - last_;
        culprit_ = slowest_;
    }
    return longestMs();
}

}  // namespace relulens::ui
