#include "ui/stall_probe.h"

#include <QCoreApplication>
#include <QEvent>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <cstring>
#include <utility>

#ifdef __linux__
#include <fcntl.h>
#include <unistd.h>
#endif

namespace relulens::ui {

std::vector<qint64> stealTicksPerCore(const char* text, qsizetype size) {
    std::vector<qint64> steal;
    stealTicksPerCore(text, size, &steal);
    return steal;
}

void stealTicksPerCore(const char* text, qsizetype size, std::vector<qint64>* into) {
    std::vector<qint64>& steal = *into;
    steal.clear();
    const char* p = text;
    const char* end = text + size;
    while (p < end) {
        const char* lineEnd = static_cast<const char*>(std::memchr(p, '\n', size_t(end - p)));
        if (!lineEnd) lineEnd = end;
        // "cpuN user nice system idle iowait irq softirq steal ..." (the "cpu" line without a
        // number sums every core)
        if (lineEnd - p > 4 && std::strncmp(p, "cpu", 3) == 0 &&
            std::isdigit(static_cast<unsigned char>(p[3]))) {
            // (numbers read by hand within the line: the text need not end in a NUL)
            const char* q = p + 3;
            while (q < lineEnd && !std::isspace(static_cast<unsigned char>(*q))) ++q;
            qint64 value = -1;
            for (int field = 0; field < 8; ++field) {
                while (q < lineEnd && *q == ' ') ++q;
                if (q == lineEnd || !std::isdigit(static_cast<unsigned char>(*q))) {
                    value = -1;
                    break;
                }
                value = 0;
                while (q < lineEnd && std::isdigit(static_cast<unsigned char>(*q)))
                    value = value * 10 + (*q++ - '0');
            }
            if (value >= 0) steal.push_back(value);
        }
        p = lineEnd + 1;
    }
}

StallProbe::StallProbe(QObject* parent, QByteArray statPath)
    : QObject(parent), statPath_(std::move(statPath)) {
    timer_.setTimerType(Qt::PreciseTimer);
    timer_.setInterval(5);
    connect(&timer_, &QTimer::timeout, this, &StallProbe::tick);
}

StallProbe::~StallProbe() {
#ifdef __linux__
    if (statFd_ >= 0) ::close(statFd_);
#endif
}

qint64 StallProbe::hostHeldSinceLastRead() {
#ifdef __linux__
    if (statFd_ < 0) return 0;
    // The whole file, however many cores it lists (the buffer grows and is kept).
    if (statText_.empty()) statText_.resize(16384);
    ssize_t n = 0;
    while ((n = ::pread(statFd_, statText_.data(), statText_.size(), 0)) ==
           ssize_t(statText_.size())) {
        statText_.resize(statText_.size() * 2);
    }
    if (n <= 0) return 0;
    // (read into the buffer of the read before last: no allocation at each tick)
    stealTicksPerCore(statText_.data(), qsizetype(n), &readSteal_);
    const auto& steal = readSteal_;
    qint64 held = 0;
    if (!steal.empty() && steal.size() == steal_.size()) {
        held = steal[0] - steal_[0];
        for (size_t i = 1; i < steal.size(); ++i) held = std::min(held, steal[i] - steal_[i]);
    }
    std::swap(steal_, readSteal_);
    static const long ticksPerSecond = sysconf(_SC_CLK_TCK);
    return ticksPerSecond > 0 ? std::max<qint64>(held, 0) * (1000000000LL / ticksPerSecond) : 0;
#else
    return 0;
#endif
}

void StallProbe::start() {
    longest_ = hostInLongest_ = longestOwn_ = 0;
    ticks_ = 0;
    culprit_.clear();
    slowest_.clear();
    slowestEvent_ = 0;
    receiverClass_ = nullptr;
#ifdef __linux__
    if (statFd_ < 0) statFd_ = ::open(statPath_.constData(), O_RDONLY | O_CLOEXEC);
    steal_.clear();
    hostHeldSinceLastRead();
    if (steal_.empty() && statFd_ >= 0) {  // no steal times to read
        ::close(statFd_);
        statFd_ = -1;
    }
#endif
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

void StallProbe::noteGap(qint64 now) {
    const qint64 gap = now - last_;
    const qint64 host = std::min(hostHeldSinceLastRead(), gap);
    if (gap > longest_) {
        longest_ = gap;
        hostInLongest_ = host;
        culprit_ = slowest_;
    }
    longestOwn_ = std::max(longestOwn_, gap - host);
}

void StallProbe::tick() {
    const qint64 now = clock_.nsecsElapsed();
    noteGap(now);
    last_ = now;
    slowest_.clear();
    slowestEvent_ = 0;
    receiverClass_ = nullptr;  // the tick's own event is not counted
    ++ticks_;
}

double StallProbe::stop() {
    timer_.stop();
    QCoreApplication::instance()->removeEventFilter(this);
    noteGap(clock_.nsecsElapsed());
    return longestMs();
}

}  // namespace relulens::ui
