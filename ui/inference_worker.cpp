#include "ui/inference_worker.h"

#include <QElapsedTimer>

#include "core/checkpoint.h"
#include "core/device.h"
#include "ui/app_state.h"

namespace relulens::ui {

namespace {

std::shared_ptr<core::LoadedModel> loadModel(const QString& folder, QString* error) {
    auto loaded = core::loadModelFolder(folder.toStdString());
    if (!loaded) {
        *error = QString::fromStdString(loaded.error());
        return nullptr;
    }
    auto device = core::selectDevice("auto");
    if (device) loaded->model.to(*device);
    return std::make_shared<core::LoadedModel>(std::move(*loaded));
}

core::SlotVocabulary slotVocabularyOf(const core::LoadedModel& model) {
    std::vector<std::string> pieces;
    std::vector<int64_t> bytePieces;  // and control symbols: never listed as promoted
    for (int64_t id = 0; id < model.tokenizer.vocabSize(); ++id) {
        pieces.push_back(model.tokenizer.piece(id));
        if (model.tokenizer.isSpecial(id)) bytePieces.push_back(id);
    }
    auto vocabulary = core::computeSlotVocabulary(model.model, 10, bytePieces);
    vocabulary.pieces = std::move(pieces);
    return vocabulary;
}

InferenceResponse runCapture(const InferenceRequest& request, core::LoadedModel& model,
                             const std::atomic<bool>* cancel) {
    InferenceResponse response;
    response.id = request.id;
    QElapsedTimer timer;
    timer.start();
    auto result = core::capture(model.model, model.tokenizer, request.text, request.capture, cancel);
    response.milliseconds = double(timer.nsecsElapsed()) / 1e6;
    if (!result) {
        response.error = QString::fromStdString(result.error());
        return response;
    }
    response.result = std::make_shared<const core::CaptureResult>(std::move(*result));
    response.final = !request.comparison;
    return response;
}

InferenceResponse runComparison(const InferenceRequest& request, core::LoadedModel& model,
                                const std::atomic<bool>* cancel) {
    InferenceResponse response;
    response.id = request.id;
    auto other = core::capture(model.model, model.tokenizer, request.text, *request.comparison, cancel);
    if (other) response.comparison = std::make_shared<const core::CaptureResult>(std::move(*other));
    return response;
}

}  // namespace

InferenceWorker::InferenceWorker(std::atomic<bool>* cancel) : cancel_(cancel) {}
InferenceWorker::~InferenceWorker() = default;

void InferenceWorker::compute(const InferenceRequest& request) {
    // LibTorch's thread count is per thread under OpenMP: set it here, on the worker's own
    // thread (a second spinning thread on a two-core machine made every pass several times
    // slower).
    static thread_local bool configured = false;
    if (!configured) {
        core::configureThreads();
        configured = true;
    }
    auto it = models_.find(request.folder);
    if (it == models_.end()) {
        QString error;
        auto model = loadModel(request.folder, &error);
        if (!model) {
            InferenceResponse response;
            response.id = request.id;
            response.error = error;
            Q_EMIT finished(response);
            return;
        }
        if (models_.size() >= 4) models_.clear();  // keep memory bounded
        auto vocabulary = std::make_shared<const core::SlotVocabulary>(slotVocabularyOf(*model));
        it = models_.emplace(request.folder, Cached{model, vocabulary}).first;
    }
    auto response = runCapture(request, *it->second.model, cancel_);
    response.vocabulary = it->second.vocabulary;
    Q_EMIT finished(response);
    if (response.final) return;
    Q_EMIT finished(runComparison(request, *it->second.model, cancel_));
}

InferenceController::InferenceController(AppState* state, QObject* parent)
    : QObject(parent), state_(state), worker_(new InferenceWorker(&cancel_)) {
    qRegisterMetaType<InferenceRequest>();
    qRegisterMetaType<InferenceResponse>();
    worker_->moveToThread(&thread_);
    connect(&thread_, &QThread::finished, worker_, &QObject::deleteLater);
    connect(this, &InferenceController::requestToWorker, worker_, &InferenceWorker::compute,
            Qt::QueuedConnection);
    connect(worker_, &InferenceWorker::finished, this, &InferenceController::onFinished,
            Qt::QueuedConnection);
    thread_.start();
    coalesce_.setSingleShot(true);
    coalesce_.setInterval(15);
    connect(&coalesce_, &QTimer::timeout, this, &InferenceController::dispatch);
    connect(state_, &AppState::inputChanged, this, &InferenceController::schedule);
}

InferenceController::~InferenceController() {
    cancel_ = true;
    thread_.quit();
    thread_.wait();
}

core::CaptureRequest InferenceController::captureRequestFor(const AppState& state) {
    // Maps are rebuilt on demand from queries and keys, so memory grows linearly with the
    // input: up to 16,384 tokens (a long chapter) can be inspected.
    return core::viewerRequest(state.run(), state.tauScale());
}

core::CaptureRequest InferenceController::comparisonRequestFor(const AppState& state) {
    core::CaptureRequest capture = captureRequestFor(state);
    capture.run = state.comparisonRun();
    capture.slotActivations = false;
    capture.topK = 1;
    return capture;
}

InferenceResponse InferenceController::computeNow(const InferenceRequest& request) {
    QString error;
    auto model = loadModel(request.folder, &error);
    if (!model) {
        InferenceResponse response;
        response.error = error;
        return response;
    }
    auto response = runCapture(request, *model, nullptr);
    if (!response.final) response.comparison = runComparison(request, *model, nullptr).comparison;
    response.final = true;
    response.vocabulary = std::make_shared<const core::SlotVocabulary>(slotVocabularyOf(*model));
    return response;
}

void InferenceController::schedule() { coalesce_.start(); }

void InferenceController::dispatch() {
    InferenceRequest request;
    request.id = ++nextId_;
    request.folder = state_->effectiveFolder();
    request.text = state_->text().toStdString();
    request.capture = captureRequestFor(*state_);
    request.comparison = comparisonRequestFor(*state_);
    latestId_ = request.id;
    if (running_) {
        pending_ = std::move(request);  // supersedes any older pending request
        cancel_ = true;
        return;
    }
    start(std::move(request));
}

void InferenceController::start(InferenceRequest request) {
    cancel_ = false;
    running_ = true;
    ++computeCount_;
    Q_EMIT busyChanged(true);
    Q_EMIT requestToWorker(request);
}

void InferenceController::onFinished(const InferenceResponse& response) {
    if (response.final) {
        running_ = false;
        if (pending_) {
            auto next = std::move(*pending_);
            pending_.reset();
            start(std::move(next));
        } else {
            Q_EMIT busyChanged(false);
        }
    }
    if (response.id != latestId_) return;  // superseded
    if (!response.error.isEmpty()) {
        state_->setError(response.error);
        return;
    }
    if (response.result) {
        state_->setResult(response.result, response.comparison, response.vocabulary);
        Q_EMIT computed(response.milliseconds, QString::fromStdString(response.result->device));
    } else if (response.comparison) {
        state_->setComparison(response.comparison);
    }
}

}  // namespace relulens::ui
