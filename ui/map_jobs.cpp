#include "ui/map_jobs.h"

#include <QCoreApplication>
#include <QEvent>

#include "core/device.h"
#include "core/second_core.h"

namespace relulens::ui {

MapJobs& MapJobs::instance() {
    static MapJobs* jobs = nullptr;
    if (!jobs) {
        jobs = new MapJobs(QCoreApplication::instance());
        QObject::connect(jobs, &QObject::destroyed, [] { jobs = nullptr; });
    }
    return *jobs;
}

MapJobs::MapJobs(QObject* parent) : QObject(parent), worker_(new QObject) {
    worker_->moveToThread(&thread_);
    thread_.setObjectName("relulens-maps");
    thread_.start();
}

MapJobs::~MapJobs() {
    thread_.quit();
    thread_.wait();
    delete worker_;  // its thread has stopped (a deleteLater would never run there)
}

void MapJobs::noteAnswerPosted() {
    {
        std::lock_guard<std::mutex> lock(answersMutex_);
        ++answersPosted_;
    }
    answered_.notify_all();
}

void MapJobs::finish(MapChannel& channel) {
    for (;;) {
        quint64 seen = 0;
        {
            std::lock_guard<std::mutex> lock(answersMutex_);
            seen = answersPosted_;
        }
        // Answers are queued calls on this object: deliver those posted so far, nothing else.
        QCoreApplication::sendPostedEvents(this, QEvent::MetaCall);
        if (!channel.pending()) return;
        // An answer posted after `seen` was read ends the wait at once.
        std::unique_lock<std::mutex> lock(answersMutex_);
        answered_.wait(lock, [&] { return answersPosted_ != seen; });
    }
}

void MapJobs::configureThread() {
    // LibTorch's thread count is per thread under OpenMP.
    static thread_local bool configured = false;
    if (!configured) {
        core::configureThreads();
        core::lowerThreadPriority();  // the GUI thread paints first
        configured = true;
    }
}

}  // namespace relulens::ui
