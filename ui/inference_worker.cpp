#include "ui/inference_worker.h"

#include <QElapsedTimer>
#include <algorithm>

#include "core/device.h"
#include "core/model_folder.h"
#include "core/second_core.h"
#include "ui/app_state.h"
#include "ui/map_jobs.h"

namespace relulens::ui {

namespace {

// Models cached on the worker together hold at most this many parameters (a gigabyte as
// float32): switching among the bundled models is instant, and a large model is never kept
// beside another.
constexpr int64_t kCachedParameters = 256'000'000;

std::shared_ptr<core::LoadedModel> loadModel(const QString& folder,
                                             const core::LoadOptions& options, QString* error) {
    auto loaded = core::loadModelFolder(folder.toStdString(), options);
    if (!loaded) {
        *error = QString::fromStdString(loaded.error());
        return nullptr;
    }
    return std::make_shared<core::LoadedModel>(std::move(*loaded));
}

InferenceResponse runCapture(const InferenceRequest& request, core::LoadedModel& model,
                             const std::atomic<bool>* cancel,
                             std::shared_ptr<const core::CaptureMemory>* memory = nullptr) {
    InferenceResponse response;
    response.id = request.id;
    response.folder = request.folder;
    QElapsedTimer timer;
    timer.start();
    // A capture that fails or is cancelled leaves the memory as it was.
    std::shared_ptr<const core::CaptureMemory> kept;
    auto result = core::capture(*model.model, model.tokenizer, request.text, request.capture,
                                cancel, memory ? memory->get() : nullptr, memory ? &kept : nullptr);
    if (result && kept) *memory = std::move(kept);
    response.milliseconds = double(timer.nsecsElapsed()) / 1e6;
    if (!result) {
        response.error = QString::fromStdString(result.error());
        return response;
    }
    response.result = std::make_shared<const core::CaptureResult>(std::move(*result));
    response.lastPart = !request.comparison;
    return response;
}

InferenceResponse runComparison(const InferenceRequest& request, core::LoadedModel& model,
                                const std::atomic<bool>* cancel,
                                std::shared_ptr<const core::CaptureMemory>* memory = nullptr) {
    InferenceResponse response;
    response.id = request.id;
    response.folder = request.folder;
    std::shared_ptr<const core::CaptureMemory> kept;
    auto other = core::capture(*model.model, model.tokenizer, request.text, *request.comparison,
                               cancel, memory ? memory->get() : nullptr, memory ? &kept : nullptr);
    if (other && kept) *memory = std::move(kept);
    if (other) {
        response.comparison = std::make_shared<const core::CaptureResult>(std::move(*other));
    } else if (!cancel || !cancel->load()) {
        // The result it belongs to is shown; say why the comparison is missing.
        response.error = QString("the comparison under %1 failed: %2")
                             .arg(QString::fromStdString(request.comparison->run.attention.label()),
                                  QString::fromStdString(other.error()));
    }
    return response;
}

}  // namespace

InferenceWorker::InferenceWorker(std::atomic<bool>* cancel, std::atomic<bool>* cancelLoad,
                                 const std::atomic<quint64>* drawn)
    : cancel_(cancel), cancelLoad_(cancelLoad), drawn_(drawn) {}
InferenceWorker::~InferenceWorker() = default;

void InferenceWorker::compute(const InferenceRequest& request) {
    // LibTorch's thread count is per thread under OpenMP: set it here, on the worker's own
    // thread (a second spinning thread on a two-core machine made every pass several times
    // slower).
    static thread_local bool configured = false;
    if (!configured) {
        core::configureThreads();
        core::lowerThreadPriority();  // the GUI thread paints first
        configured = true;
    }
    QString error;
    const Cached* cached = modelFor(request, &error);
    if (!cached) {
        InferenceResponse response;
        response.id = request.id;
        response.folder = request.folder;
        response.error = error;
        response.modelFailed = true;
        Q_EMIT finished(response);
        return;
    }
    auto model = cached->model;  // the cache may change while this runs
    if (memoryFolder_ != request.folder) {
        memory_.reset();
        comparisonMemory_.reset();
        memoryFolder_ = request.folder;
    }
    keepUsefulMemory(request, *model->model);
    auto response = runCapture(request, *model, cancel_, &memory_);
    response.vocabulary = cached->vocabulary;
    Q_EMIT finished(response);
    if (response.lastPart) return;
    waitUntilDrawn(request.id);
    auto comparison = runComparison(request, *model, cancel_, &comparisonMemory_);
    comparison.lastPart = false;
    Q_EMIT finished(comparison);
    // While the person reads: room after the shown text's rows, so that the next word typed at
    // its end is written in place (a newer request stops this and keeps what is done).
    if (memory_ && memory_->needsRoom()) {
        memory_ = memory_->withRoom([this] { return cancel_->load(); });
    }
    InferenceResponse done;
    done.id = request.id;
    done.folder = request.folder;
    Q_EMIT finished(done);
}

void InferenceWorker::forgetMemory() {
    memory_.reset();
    comparisonMemory_.reset();
}

void InferenceWorker::keepUsefulMemory(const InferenceRequest& request,
                                       const core::LanguageModel& model) {
    auto serves = [&](const std::shared_ptr<const core::CaptureMemory>& memory,
                      const std::optional<core::CaptureRequest>& capture) {
        return memory && capture && memory->canServe(model, *capture);
    };
    const std::optional<core::CaptureRequest> main = request.capture;
    // A toggle goes to the variant the comparison was captured under: its memory serves the
    // capture, and the shown variant's memory then serves the new comparison.
    if (!serves(memory_, main) && serves(comparisonMemory_, main)) {
        std::swap(memory_, comparisonMemory_);
    }
    // What serves neither capture is let go before they run, not after (at 8,192 tokens a
    // memory is about 280 MB).
    if (!serves(memory_, main) && !serves(memory_, request.comparison)) memory_.reset();
    if (!serves(comparisonMemory_, request.comparison) && !serves(comparisonMemory_, main)) {
        comparisonMemory_.reset();
    }
}

void InferenceWorker::waitUntilDrawn(quint64 id) const {
    // Long enough for a map tile at the sizes the window stays live at; a view that never
    // answers delays the comparison by no more than this.
    constexpr int kMostMs = 250;
    QElapsedTimer clock;
    clock.start();
    while (drawn_->load() < id && !cancel_->load() && clock.elapsed() < kMostMs)
        QThread::usleep(500);
}

const InferenceWorker::Cached* InferenceWorker::modelFor(const InferenceRequest& request,
                                                         QString* error) {
    auto it = models_.find(request.folder);
    if (it != models_.end()) return &it->second;
    auto info = core::checkModelFolder(request.folder.toStdString());
    if (!info) {
        *error = QString::fromStdString(info.error());
        return nullptr;
    }
    int64_t cached = info->parameters;
    for (const auto& [folder, entry] : models_) cached += entry.model->model->info().parameters;
    if (cached > kCachedParameters) {  // make room before reading a large model
        models_.clear();
        memory_.reset();
        comparisonMemory_.reset();
    }
    core::LoadOptions options;
    options.cancel = cancelLoad_;
    const QString folder = request.folder;
    options.progress = [this, folder](double fraction, const std::string&) {
        Q_EMIT loadProgress(folder, fraction);
    };
    auto model = loadModel(request.folder, options, error);
    if (!model) return nullptr;
    auto vocabulary = std::make_shared<const core::SlotVocabulary>(*model->model, model->tokenizer);
    return &models_.emplace(request.folder, Cached{model, vocabulary}).first->second;
}

InferenceController::InferenceController(AppState* state, QObject* parent)
    : QObject(parent),
      state_(state),
      worker_(new InferenceWorker(&cancel_, &cancelLoad_, &drawn_)) {
    qRegisterMetaType<InferenceRequest>();
    qRegisterMetaType<InferenceResponse>();
    worker_->moveToThread(&thread_);
    connect(&thread_, &QThread::finished, worker_, &QObject::deleteLater);
    connect(this, &InferenceController::requestToWorker, worker_, &InferenceWorker::compute,
            Qt::QueuedConnection);
    connect(worker_, &InferenceWorker::finished, this, &InferenceController::onFinished,
            Qt::QueuedConnection);
    connect(worker_, &InferenceWorker::loadProgress, this, &InferenceController::loadProgress,
            Qt::QueuedConnection);
    thread_.start();
    coalesce_.setSingleShot(true);
    coalesce_.setInterval(kCoalesceMs);
    connect(&coalesce_, &QTimer::timeout, this, &InferenceController::dispatch);
    connect(state_, &AppState::inputChanged, this, &InferenceController::schedule);
}

void InferenceController::forgetMemory() {
    // (queued: it runs on the worker's thread before any request sent after it)
    QMetaObject::invokeMethod(worker_, &InferenceWorker::forgetMemory, Qt::QueuedConnection);
}

InferenceController::~InferenceController() {
    cancel_ = cancelLoad_ = true;
    thread_.quit();
    thread_.wait();
}

core::CaptureRequest InferenceController::captureRequestFor(const AppState& state) {
    // Maps are rebuilt on demand from queries and keys, so memory grows linearly with the
    // input: up to 16,384 tokens (a long chapter) can be inspected.
    core::CaptureRequest request = core::viewerRequest(state.run(), state.tauScale());
    // With overrides, also what they change at every token (a second forward without them).
    request.effect = !state.run().overrides.empty();
    // The logit lens, every token's top next tokens after every layer, while a Lens view is
    // open and for texts it reads at a glance; longer ones keep their fast continuation when
    // typing at the end.
    request.lens = state.lensWanted();
    request.lensEveryPosition = true;
    request.lensMaxTokens = kLensMaxTokens;
    return request;
}

core::CaptureRequest InferenceController::comparisonRequestFor(const AppState& state) {
    core::CaptureRequest capture = captureRequestFor(state);
    capture.run = state.comparisonRun();
    capture.effect = false;
    capture.lens = false;
    capture.slotActivations = false;
    capture.topK = 1;
    return capture;
}

InferenceResponse InferenceController::computeNow(const InferenceRequest& request,
                                                  const core::LoadOptions& options) {
    QString error;
    auto model = loadModel(request.folder, options, &error);
    if (!model) {
        InferenceResponse response;
        response.error = error;
        return response;
    }
    auto response = runCapture(request, *model, nullptr);
    if (!response.lastPart) {
        // The comparison's failure is said beside the result it belongs to, never dropped.
        auto comparison = runComparison(request, *model, nullptr);
        response.comparison = comparison.comparison;
        if (response.error.isEmpty()) response.error = comparison.error;
    }
    response.lastPart = true;
    response.vocabulary =
        std::make_shared<const core::SlotVocabulary>(*model->model, model->tokenizer);
    return response;
}

void InferenceController::schedule() {
    // What was shown moments ago (toggling back, undoing an edit) and a change of the same text's
    // variants (a toggle, a click) go out at the next turn of the event loop; an edit of the
    // text waits for the coalescing interval, so that a burst of typing starts one pass. (A
    // change that arrives while a pass runs supersedes it either way.)
    const InferenceRequest request = currentRequest();
    const QString key = keyOf(request);
    const bool recent = std::any_of(recent_.begin(), recent_.end(),
                                    [&](const Recent& r) { return r.key == key && r.comparison; });
    const bool sameText =
        dispatchedText_ && *dispatchedText_ == request.text && dispatchedFolder_ == request.folder;
    coalesce_.setInterval(recent || sameText ? 0 : kCoalesceMs);
    coalesce_.start();
}

void InferenceController::cancel() {
    pending_.reset();
    if (running_) cancel_ = cancelLoad_ = true;
}

QString InferenceController::keyOf(const InferenceRequest& request) {
    const auto& run = request.capture.run;
    std::string attention = run.attention.label();
    for (const auto& o : run.overrides) attention += " " + o.label();
    if (request.capture.lens) attention += " +lens";
    return QString("%1\n%2 %3 %4 %5\n%6")
        .arg(request.folder, QString::fromStdString(attention),
             QString::fromStdString(core::ffnKindName(run.ffn)))
        .arg(request.capture.tauScale, 0, 'g', 17)
        .arg(request.comparison ? QString::fromStdString(request.comparison->run.attention.label())
                                : QString())
        .arg(QString::fromStdString(request.text));
}

namespace {

// What a result holds in memory, roughly: its tensors.
int64_t bytesOf(const core::CaptureResult& r) {
    int64_t bytes = 0;
    auto add = [&](const torch::Tensor& t) {
        if (t.defined()) bytes += t.numel() * int64_t(t.element_size());
    };
    for (const auto& l : r.layers) {
        add(l.slotActivations);
        add(l.attentionDiagnostics.rowSparsity);
        add(l.attentionDiagnostics.rowEntropy);
        add(l.attentionDiagnostics.rowMass);
    }
    if (r.maps) bytes += r.maps->bytes();
    return bytes;
}

// Kept results hold at most 512 MB, but the newest two are kept whatever their size, so that
// toggling back to the variant seen just before needs no forward pass even on a large model
// (a TinyLlama-shaped capture of 512 tokens holds more than 512 MB).
constexpr int64_t kRecentBytes = int64_t(1) << 29;
constexpr size_t kRecentCount = 8, kRecentAlways = 2;

}  // namespace

void InferenceController::remember(const QString& key, const InferenceResponse& response) {
    auto it =
        std::find_if(recent_.begin(), recent_.end(), [&](const Recent& r) { return r.key == key; });
    if (it == recent_.end()) {
        if (!response.result) return;
        recent_.push_back(
            {key, response.result, nullptr, response.vocabulary, bytesOf(*response.result)});
        it = recent_.end() - 1;
    }
    if (response.comparison) {
        it->comparison = response.comparison;
        it->bytes += bytesOf(*response.comparison);
    }
    int64_t total = 0;
    for (const auto& r : recent_) total += r.bytes;
    while (recent_.size() > kRecentAlways &&
           (recent_.size() > kRecentCount || total > kRecentBytes)) {
        total -= recent_.front().bytes;
        recent_.erase(recent_.begin());
    }
}

InferenceRequest InferenceController::currentRequest() const {
    InferenceRequest request;
    request.folder = state_->effectiveFolder();
    request.text = state_->text().toStdString();
    request.capture = captureRequestFor(*state_);
    request.comparison = comparisonRequestFor(*state_);
    return request;
}

void InferenceController::dispatch() {
    coalesce_.stop();
    InferenceRequest request = currentRequest();
    request.id = ++nextId_;
    latestId_ = request.id;
    dispatchedText_ = request.text;
    dispatchedFolder_ = request.folder;
    const QString key = keyOf(request);
    auto seen =
        std::find_if(recent_.begin(), recent_.end(), [&](const Recent& r) { return r.key == key; });
    if (seen != recent_.end() && seen->comparison) {
        // Seen moments ago: no forward pass. A running request is cancelled, a pending one dropped.
        Recent hit = *seen;
        recent_.erase(seen);
        recent_.push_back(hit);  // most recently used
        pending_.reset();
        if (running_) cancel_ = true;
        ++reuseCount_;
        shownFolder_ = request.folder;
        state_->setResult(hit.result, hit.comparison, hit.vocabulary);
        Q_EMIT computed(0.0, QString::fromStdString(hit.result->device));
        return;
    }
    keys_[request.id] = key;
    if (running_) {
        pending_ = std::move(request);  // supersedes any older pending request
        cancel_ = true;
        return;
    }
    start(std::move(request));
}

void InferenceController::start(InferenceRequest request) {
    cancel_ = cancelLoad_ = false;
    running_ = true;
    ++computeCount_;
    showBusy(true);
    Q_EMIT requestToWorker(request);
}

void InferenceController::showBusy(bool busy) {
    if (busy == shownBusy_) return;
    shownBusy_ = busy;
    Q_EMIT busyChanged(busy);
}

void InferenceController::markDrawn(quint64 id) {
    // The views have asked for their tiles on resultChanged; a turn of the event loop later the
    // map thread is working on them (or has nothing to do), and a replot it queued has run.
    QTimer::singleShot(0, this, [this, id] {
        if (MapJobs::instance().pending() == 0) {
            drawn_ = id;
            return;
        }
        connect(
            &MapJobs::instance(), &MapJobs::idle, this,
            [this, id] {
                QTimer::singleShot(0, this, [this, id] { drawn_ = std::max(drawn_.load(), id); });
            },
            Qt::SingleShotConnection);
    });
}

void InferenceController::onFinished(const InferenceResponse& response) {
    if (auto key = keys_.find(response.id); key != keys_.end()) {
        if (response.error.isEmpty()) remember(key->second, response);
        if (response.lastPart) keys_.erase(key);
    }
    if (response.lastPart) {
        running_ = false;
        if (pending_) {
            auto next = std::move(*pending_);
            pending_.reset();
            start(std::move(next));
        } else {
            showBusy(false);
        }
    } else if (!response.result && !pending_) {
        showBusy(false);  // the comparison: what remains is room for the next word
    }
    if (response.modelFailed) Q_EMIT modelFailed(response.folder, response.error);
    if (response.id != latestId_) return;  // superseded
    if (!response.error.isEmpty()) {
        state_->setError(response.error);
        return;
    }
    if (response.result) {
        shownFolder_ = response.folder;
        state_->setResult(response.result, response.comparison, response.vocabulary);
        Q_EMIT computed(response.milliseconds, QString::fromStdString(response.result->device));
        if (!response.lastPart) markDrawn(response.id);
    } else if (response.comparison) {
        state_->setComparison(response.comparison);
    }
}

}  // namespace relulens::ui
