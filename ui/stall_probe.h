// How long the GUI thread went without turning its event loop: a fine timer notes the gaps
// between its ticks, and an application event filter notes which event took longest inside the
// longest gap. For the responsiveness test and `relulens bench`.
//
// In a virtual machine the host may hold every core of the machine at once (steal time); no
// thread of ReluLens runs then, and the gap it leaves is not the window's doing. On Linux the
// probe reads each core's steal time from /proc/stat at every tick (7.5 µs a read on a 2-core
// machine) and reports, beside the longest gap, the host's share of it, and the longest gap
// once each gap's host share is taken out.
#pragma once
#include <QByteArray>
#include <QElapsedTimer>
#include <QObject>
#include <QString>
#include <QTimer>
#include <vector>

namespace relulens::ui {

// Each core's steal time in /proc/stat's text (clock ticks, the 8th number of each "cpuN"
// line), in the order of the lines; empty when the text has no such line.
std::vector<qint64> stealTicksPerCore(const char* text, qsizetype size);
// The same into *into (cleared first; its storage is reused).
void stealTicksPerCore(const char* text, qsizetype size, std::vector<qint64>* into);

class StallProbe : public QObject {
    Q_OBJECT
public:
    // statPath: where the steal times are read (another file in the probe's own test).
    explicit StallProbe(QObject* parent = nullptr, QByteArray statPath = "/proc/stat");
    ~StallProbe() override;
    void start();
    // Stops and returns the longest gap in milliseconds (the time since the last tick counted).
    double stop();
    double longestMs() const { return longest_ / 1e6; }
    // Whether the host's share could be read (Linux, /proc/stat with steal times).
    bool measuresHost() const { return statFd_ >= 0; }
    // The host's share of the longest gap: the least steal time any core had in it. Every core
    // lost at least that much, though not necessarily at the same moments; steal is counted in
    // clock ticks (10 ms), so the share may be a tick off; a core that was idle accrues none.
    double hostMsInLongest() const { return hostInLongest_ / 1e6; }
    // The longest gap once each gap's host share is taken out: the largest of (gap − its share)
    // over every gap, which may come from another gap than the longest.
    double longestOwnMs() const { return longestOwn_ / 1e6; }
    int ticks() const { return ticks_; }
    // The slowest event handled during the longest gap: "receiver class (parent class), event
    // type N, X ms"; empty when none was handled (the thread was not scheduled, or waited).
    QString culprit() const { return culprit_; }

protected:
    bool eventFilter(QObject* watched, QEvent* event) override;

private:
    void tick();
    void noteGap(qint64 now);
    // The time every core has been held by the host since the last call (nanoseconds).
    qint64 hostHeldSinceLastRead();
    QTimer timer_;
    QElapsedTimer clock_;
    qint64 last_ = 0, longest_ = 0;  // nanoseconds
    qint64 hostInLongest_ = 0, longestOwn_ = 0;
    int ticks_ = 0;
    QByteArray statPath_;
    int statFd_ = -1;
    std::vector<qint64> steal_;      // each core's steal at the last read (ticks)
    std::vector<qint64> readSteal_;  // the read before, its storage reused for the next one
    std::vector<char> statText_;
    // the event being handled since eventStart_, and the slowest one since the last tick
    const char* receiverClass_ = nullptr;
    const char* parentClass_ = nullptr;
    int eventType_ = 0;
    qint64 eventStart_ = 0, slowestEvent_ = 0;
    QString slowest_, culprit_;
};

}  // namespace relulens::ui
