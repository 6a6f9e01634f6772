// Map work that views ask for (pooled tiles, head thumbnails, compare panels, head means) runs
// on one background thread, never on the GUI thread. Each view posts on its own channel, and a
// channel keeps only its newest request: an older one not yet started is skipped, and the result
// of one superseded while it ran is dropped. Results come back on the view's thread, ready to draw.
#pragma once
#include <QObject>
#include <QPointer>
#include <QString>
#include <QThread>
#include <atomic>
#include <condition_variable>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>

namespace relulens::ui {

// One view's stream of requests.
class MapChannel {
public:
    MapChannel() : latest_(std::make_shared<std::atomic<quint64>>(0)) {}
    // Forgets every request made so far: their results will be dropped.
    void supersede() { ++*latest_; }
    bool pending() const { return pendingCount_ > 0; }

private:
    friend class MapJobs;
    std::shared_ptr<std::atomic<quint64>> latest_;
    int pendingCount_ = 0;  // GUI thread only
};

class MapJobs : public QObject {
    Q_OBJECT
public:
    // The shared thread, made on first use as a child of the application (stopped with it).
    static MapJobs& instance();
    ~MapJobs() override;

    // Runs work() on the map thread unless a newer post on the channel supersedes it first, then
    // done(result) on owner's thread unless a newer post came meanwhile. work must not touch
    // widgets: it gets what it needs by value (shared results are immutable).
    template <class R>
    void post(MapChannel& channel, QObject* owner, std::function<R()> work,
              std::function<void(R)> done) {
        const quint64 id = ++*channel.latest_;
        auto latest = channel.latest_;
        ++channel.pendingCount_;
        ++pending_;
        auto* counter = &channel.pendingCount_;
        // The answer goes through this object (on the GUI thread, as every owner is): an owner
        // destroyed meanwhile is noticed there, never touched from the map thread.
        QPointer<QObject> guard(owner);
        QMetaObject::invokeMethod(
            worker_, [this, id, latest, guard, counter, work = std::move(work),
                      done = std::move(done)]() mutable {
                configureThread();
                auto result = std::make_shared<R>();
                const bool current = latest->load() == id;
                // An exception (out of memory on a huge map, a LibTorch error) becomes a message
                // for the window; it never unwinds through the event loop.
                QString error;
                if (current) {
                    try {
                        *result = work();
                    } catch (const std::exception& e) {
                        error = QString::fromUtf8(e.what()).section('\n', 0, 0);
                    }
                }
                QMetaObject::invokeMethod(
                    this, [this, id, latest, guard, counter, current, result, done, error] {
                        if (guard) {  // the channel lives in its owner
                            --*counter;
                            if (!error.isEmpty()) {
                                Q_EMIT failed(error);
                            } else if (current && latest->load() == id) {
                                done(std::move(*result));
                            }
                        }
                        if (--pending_ == 0) Q_EMIT idle();
                    });
                noteAnswerPosted();
            });
    }

    // Blocks the calling (GUI) thread until every request posted on `channel` is answered, its
    // answers delivered as usual (and those of requests queued before them on other channels).
    // Only these answers are delivered meanwhile: no other event (input, timers, deletions)
    // runs inside the wait. For an export that needs the tile its view already asked for.
    void finish(MapChannel& channel);

    // Requests posted and not yet answered, over every channel (for tests and the benchmark).
    int pending() const { return pending_; }

Q_SIGNALS:
    void idle();  // the last pending request was answered
    // A request's work threw: what it said (its first line); the view keeps what it showed.
    void failed(const QString& message);

private:
    explicit MapJobs(QObject* parent);
    static void configureThread();
    void noteAnswerPosted();  // on the map thread, after an answer is posted to this object

    std::mutex answersMutex_;
    std::condition_variable answered_;
    quint64 answersPosted_ = 0;  // under answersMutex_

    QThread thread_;
    QObject* worker_;  // lives on thread_: the context the work runs in
    int pending_ = 0;  // GUI thread only
};

}  // namespace relulens::ui
