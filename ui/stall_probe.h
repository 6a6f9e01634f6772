// How long the GUI thread went without turning its event loop: a fine timer notes the gaps
// between its ticks, and an application event filter notes which event took longest inside the
// longest gap. For the responsiveness test and `relulens bench`.
#pragma once
#include <QElapsedTimer>
#include <QObject>
#include <QString>
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
    // The slowest event handled during the longest gap: "receiver class (parent class), event
    // type N, X ms"; empty when none was handled (the thread was not scheduled, or waited).
    QString culprit() const { return culprit_; }

protected:
    bool eventFilter(QObject* watched, QEvent* event) override;

private:
    void tick();
    QTimer timer_;
    QElapsedTimer clock_;
    qint64 last_ = 0, longest_ = 0;  // nanoseconds
    int ticks_ = 0;
    // the event being handled since eventStart_, and the slowest one since the last tick
    const char* receiverClass_ = nullptr;
    const char* parentClass_ = nullptr;
    int eventType_ = 0;
    qint64 eventStart_ = 0, slowestEvent_ = 0;
    QString slowest_, culprit_;
};

}  // namespace relulens::ui
