// Runs forward passes off the GUI thread. The worker owns the loaded models (cached by folder);
// the controller coalesces bursts of requests, lets a newer request supersede an older one
// (cancelling it), and delivers only the newest result to the AppState.
#pragma once
#include <QElapsedTimer>
#include <QObject>
#include <QString>
#include <QThread>
#include <QTimer>
#include <atomic>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "core/capture.h"
#include "core/slot_vocabulary.h"

#include "core/model_folder.h"

namespace relulens::ui {

class AppState;

struct InferenceRequest {
    quint64 id = 0;
    QString folder;
    std::string text;
    core::CaptureRequest capture;
    std::optional<core::CaptureRequest> comparison;  // the same text under another variant
};

struct InferenceResponse {
    quint64 id = 0;
    QString folder;            // the model folder the request named
    bool modelFailed = false;  // the folder could not be opened (error says why)
    std::shared_ptr<const core::CaptureResult> result;
    std::shared_ptr<const core::CaptureResult> comparison;
    std::shared_ptr<const core::SlotVocabulary> vocabulary;
    QString error;
    double milliseconds = 0;
    // A request is answered in two parts: the result first (so the views redraw as soon as
    // possible), then the comparison, once the views have drawn the result; `lastPart` marks the
    // last one.
    bool lastPart = true;
};

class InferenceWorker : public QObject {
    Q_OBJECT
public:
    // cancel stops the running capture (a newer request supersedes it); cancelLoad stops a model
    // load only when the user asks, so that typing during a long load does not restart it;
    // drawn holds the id of the last result the window's views have drawn.
    InferenceWorker(std::atomic<bool>* cancel, std::atomic<bool>* cancelLoad,
                    const std::atomic<quint64>* drawn);
    ~InferenceWorker() override;
public Q_SLOTS:
    void compute(const relulens::ui::InferenceRequest& request);
    void forgetMemory();  // the next capture runs every token and layer (the benchmark)
Q_SIGNALS:
    void finished(const relulens::ui::InferenceResponse& response);
    // While a model folder is read: the share done (0..1).
    void loadProgress(const QString& folder, double fraction);

private:
    struct Cached {
        std::shared_ptr<core::LoadedModel> model;
        std::shared_ptr<const core::SlotVocabulary> vocabulary;
    };
    const Cached* modelFor(const InferenceRequest& request, QString* error);

    // Waits (a short while at most) until the views have drawn result `id`: a comparison started
    // at once takes a core from the map thread drawing it.
    void waitUntilDrawn(quint64 id) const;
    // Puts the memory that serves the request's capture in memory_ and the one that serves its
    // comparison in comparisonMemory_, and lets go of a memory that serves neither.
    void keepUsefulMemory(const InferenceRequest& request, const core::LanguageModel& model);

    std::atomic<bool>* cancel_;
    std::atomic<bool>* cancelLoad_;
    const std::atomic<quint64>* drawn_;
    std::map<QString, Cached> models_;
    // What the last captures of memoryFolder_'s model keep, so that a text extended at the end
    // runs only its new tokens.
    QString memoryFolder_;
    std::shared_ptr<const core::CaptureMemory> memory_, comparisonMemory_;
};

class InferenceController : public QObject {
    Q_OBJECT
public:
    static constexpr int64_t kLensMaxTokens = 2048;  // the window's logit lens, up to this length
    explicit InferenceController(AppState* state, QObject* parent = nullptr);
    ~InferenceController() override;

    // A request is running (the worker may still be making room after its comparison).
    bool busy() const { return running_; }
    // (The benchmark times forward passes.) Without recent results a variant or text is
    // captured again, taking from the worker's memory what it can; without that memory too,
    // from scratch.
    void forgetRecent() { recent_.clear(); }
    void forgetMemory();
    // Answers taken from the recent results instead of a forward pass.
    int reuseCount() const { return reuseCount_; }
    // The folder of the last result delivered (what the window shows).
    const QString& shownFolder() const { return shownFolder_; }
    int computeCount() const { return computeCount_; }
    // Runs one request synchronously on the calling thread (headless rendering).
    static InferenceResponse computeNow(const InferenceRequest& request,
                                        const core::LoadOptions& options = {});
    static core::CaptureRequest captureRequestFor(const AppState& state);
    static core::CaptureRequest comparisonRequestFor(const AppState& state);

public Q_SLOTS:
    void schedule();  // coalesces: the request goes out after a short quiet period
    void cancel();    // stops the running request (a model load included)

Q_SIGNALS:
    // Whether the person waits for something: true from a request's start until its
    // comparison has come (the worker's work after that, done while the person reads, is not
    // shown as waiting; busy() stays true through it).
    void busyChanged(bool busy);
    void loadProgress(const QString& folder, double fraction);
    // A model folder could not be opened (or its loading was cancelled): the message.
    void modelFailed(const QString& folder, const QString& message);
    void computed(double milliseconds, const QString& device);
    void requestToWorker(const relulens::ui::InferenceRequest& request);

private:
    // Recent answers by what produced them (model folder, text, variants, τ): going back to a
    // variant or a text seen moments ago redraws without a forward pass.
    struct Recent {
        QString key;
        std::shared_ptr<const core::CaptureResult> result, comparison;
        std::shared_ptr<const core::SlotVocabulary> vocabulary;
        int64_t bytes = 0;
    };
    static QString keyOf(const InferenceRequest& request);
    void remember(const QString& key, const InferenceResponse& response);

    InferenceRequest currentRequest() const;  // what the state asks for now (no id yet)
    static constexpr int kCoalesceMs = 15;    // edits within this time start one pass
    void dispatch();
    void start(InferenceRequest request);
    void onFinished(const InferenceResponse& response);
    // Marks result `id` drawn once the map thread has answered what the views asked for it.
    void markDrawn(quint64 id);

    AppState* state_;
    QThread thread_;
    InferenceWorker* worker_;
    std::atomic<bool> cancel_{false};
    std::atomic<bool> cancelLoad_{false};
    std::atomic<quint64> drawn_{0};
    QString shownFolder_;
    QTimer coalesce_;
    bool running_ = false;
    bool shownBusy_ = false;  // what busyChanged said last
    void showBusy(bool busy);
    std::optional<InferenceRequest> pending_;
    quint64 nextId_ = 0;
    quint64 latestId_ = 0;
    int computeCount_ = 0;
    int reuseCount_ = 0;
    std::optional<std::string> dispatchedText_;  // the text and folder of the last request sent
    QString dispatchedFolder_;
    std::vector<Recent> recent_;       // newest last
    std::map<quint64, QString> keys_;  // request id -> its key, until answered
};

}  // namespace relulens::ui

Q_DECLARE_METATYPE(relulens::ui::InferenceRequest)
Q_DECLARE_METATYPE(relulens::ui::InferenceResponse)
