// relulens bench: how fast ReluLens is at several input lengths, how far its forward pass is
// from the machine's matrix-multiply floor, and (with --baseline) how it compares with running
// the same weights in PyTorch eager mode from a notebook.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>

#include <ATen/Parallel.h>
#include <torch/csrc/autograd/grad_mode.h>
#include <nlohmann/json.hpp>

#include "app/bench_baseline.h"
#include "app/bench_options.h"
#include "app/commands.h"
#include "app/process_resources.h"
#include "core/atomic_file.h"
#include "core/capture.h"
#include "core/checkpoint.h"
#include "core/device.h"
#include "core/install_paths.h"
#ifdef RELULENS_WITH_GUI
#include "app/gui.h"
#endif

namespace relulens::app {

namespace {

using Clock = std::chrono::steady_clock;

double millisecondsSince(Clock::time_point start) {
    return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

// Runs f once to warm up, then `repeats` times; the median in milliseconds.
template <class F>
double medianMs(int repeats, F&& f) {
    f();
    std::vector<double> times;
    for (int r = 0; r < repeats; ++r) {
        const auto start = Clock::now();
        f();
        times.push_back(millisecondsSince(start));
    }
    std::sort(times.begin(), times.end());
    return times[times.size() / 2];
}

// Waits for queued GPU work by reading one number back.
void synchronise(const torch::Tensor& t) {
    if (t.defined() && !t.is_cpu()) t.sum().item<float>();
}

// Floating-point operations of one forward pass over n tokens: the projections, the attention
// products over the visible (causal) pairs only, the FFN and the output layer; a multiply-add
// counts two.
double forwardFlops(const core::ModelInfo& c, int64_t n) {
    const double N = double(n), d = double(c.dModel), f = double(c.dFf), V = double(c.vocabSize);
    const double queries = double(c.nHeads * c.headDim), keys = double(c.nKvHeads * c.headDim);
    const double projections = 2 * N * d * (2 * queries + 2 * keys);  // q and o; k and v
    // q·kᵀ and α·v over the visible pairs (a sliding window is ignored: an upper bound)
    const double attention = 2 * 2 * queries * N * (N + 1) / 2;
    const double ffn = 2 * N * d * f * (c.gatedFfn ? 3 : 2);
    return double(c.nLayers) * (projections + attention + ffn) + 2 * N * d * V;
}

// The best of three timings of 2048 × 2048 float matrix products, in GFLOP/s.
double matmulRate(const torch::Device& device) {
    auto a = torch::randn({2048, 2048}, torch::TensorOptions().device(device));
    auto b = torch::randn({2048, 2048}, torch::TensorOptions().device(device));
    synchronise(torch::mm(a, b));
    double best = 0;
    for (int trial = 0; trial < 3; ++trial) {
        const auto start = Clock::now();
        torch::Tensor c;
        for (int i = 0; i < 8; ++i) c = torch::mm(a, b);
        synchronise(c);
        const double seconds = millisecondsSince(start) / 1e3;
        best = std::max(best, 8 * 2.0 * 2048.0 * 2048.0 * 2048.0 / seconds / 1e9);
    }
    return best;
}

// A text of exactly n tokens: `source` repeated as often as needed, cut after token n.
core::Result<std::string> textOfTokens(const core::Tokenizer& tokenizer, const std::string& source,
                                       size_t n) {
    std::string text = source;
    while (true) {
        auto tokens = tokenizer.encode(text);
        if (!tokens) return core::Error{tokens.error()};
        if (tokens->size() >= n) return text.substr(0, (*tokens)[n - 1].end);
        text += "\n\n" + source;
    }
}

// What every size's row shares: the options, the model, its text and the machine's rate.
struct BenchContext {
    const BenchOptions& options;
    const core::LoadedModel& loaded;
    torch::Device device;
    std::string source;  // the benchmark text, cut to each size
    double rate = 0;     // matrix-multiply GFLOP/s
    int argc;
    char** argv;
};

void printBenchHeader(const BenchContext& c, double loadMs, double loadPeakMb) {
    const auto& config = c.loaded.model->info();
    std::printf("relulens bench: %s on %s, %s\n", c.options.modelFolder.c_str(),
                c.device.str().c_str(), core::deviceReport().c_str());
    std::printf(
        "model: %s, %lld layers × %lld heads (%lld kv heads), d_model %lld, d_ff %lld%s, "
        "vocab %lld, %.3g parameters%s%s; variant %s; matrix multiply %.1f GFLOP/s "
        "(2048², best of 3); medians of %lld runs\n",
        config.family.c_str(), (long long)config.nLayers, (long long)config.nHeads,
        (long long)config.nKvHeads, (long long)config.dModel, (long long)config.dFf,
        config.gatedFfn ? " gated" : "", (long long)config.vocabSize, double(config.parameters),
        config.storage.empty() ? "" : ", stored as ", config.storage.c_str(),
        config.trained.attention.label().c_str(), c.rate, (long long)c.options.repeats);
    const double weightsMb = double(config.parameters) * 4.0 / 1048576.0;
    std::printf(
        "load: %.1f s, peak resident memory %.0f MB after loading = %.2f × the float32 "
        "weights (%.0f MB)\n\n",
        loadMs / 1e3, loadPeakMb, loadPeakMb / weightsMb, weightsMb);
    std::printf("%7s %9s %9s %6s %10s %9s %9s %9s %9s %9s %9s %6s %6s %7s %7s %6s %10s %8s %8s",
                "tokens", "forward", "floor", "×floor", "capture", "maps only", "one map",
                "top ovr", "(full)", "toggle", "(cold)", "back", "+word", "+letter", "stall",
                "(own)", "text→PNG", "peak MB", "window");
    if (c.options.baseline)
        std::printf(" | %10s %6s %10s %6s %8s", "py capture", "ratio", "py →PNG", "ratio",
                    "max |Δ|");
    std::printf("\n");
}

void printBenchLegend(bool baseline) {
    std::printf(
        "\nforward: logits only; floor: its FLOPs at the measured multiply rate; capture: "
        "forward with every diagnostic and maps on demand (what the window asks for); maps "
        "only: the same without diagnostics and slot activations; one "
        "map: rebuilding the last layer's head 0 (L × L); top ovr: the capture after an override "
        "set on the top layer (with its effect), taking the layers below from the capture "
        "before it; (full): the same from scratch; toggle: activation toggle to the "
        "redrawn attention map and sparsity views, with no recent result for the variant "
        "toggled to (a capture taking every layer but the top one from the memory of the "
        "comparison run under that variant while the person looked); (cold): the same with "
        "that memory dropped too (a whole capture); back: toggling "
        "back to a variant seen moments ago (no forward pass); +word: one more word typed at the "
        "end, to both views redrawn (only the new tokens run); +letter: the same for each letter "
        "of "
        "a word typed one at a time (median; a letter that changes the last token goes on from "
        "a few tokens back); stall: the GUI thread's longest "
        "time without turning its event loop during the toggles and typing (the JSON's "
        "gui_stall_event names the slowest event handled inside it); (own): the longest such "
        "stall once each stall's share held by the host of this virtual machine is taken out "
        "(the least steal time of any core in it, from /proc/stat, in 10 ms ticks; the JSON's "
        "gui_stall_host_ms is that share of the longest stall); text→PNG: the "
        "maps-only capture and the attention map view written to a PNG (what relulens render "
        "--view attention does); peak MB: the process's peak resident memory at this size; "
        "window: its peak during the window's figures alone (toggles to text→PNG; the JSON "
        "has engine_peak_rss_mb for the columns before them, and each size's minor page "
        "faults and system CPU time, all its measurements together)%s.\n",
        baseline ? "; py: bench/baseline.py (PyTorch eager, every map returned, matplotlib), "
                   "ratio = its time / ReluLens's; max |Δ|: its map against ReluLens's"
                 : "");
}

// The engine's figures at one size: forward against its floor, the window's capture, the
// maps-only capture, one map, and a top-layer override with and without the layers below reused.
core::Result<nlohmann::json> engineFigures(const BenchContext& c, const std::string& text,
                                           const torch::Tensor& ids,
                                           std::shared_ptr<const core::MapSource>* maps) {
    const core::LanguageModel& model = *c.loaded.model;
    const auto& config = model.info();
    const auto run = config.trained;
    const int repeats = int(c.options.repeats);
    const double forward = medianMs(repeats, [&] { synchronise(model.forward(ids, run)); });
    const double flops = forwardFlops(config, ids.size(1));
    const double floor = flops / (c.rate * 1e9) * 1e3;
    const auto request = core::viewerRequest(run, 0.1);
    std::string error;
    const double captureMs = medianMs(repeats, [&] {
        auto r = core::capture(model, c.loaded.tokenizer, text, request);
        if (!r)
            error = r.error();
        else
            *maps = r->maps;
    });
    if (!error.empty()) return core::Error{error};
    const auto lighter = core::mapsOnlyRequest(run);
    const double mapsOnlyMs = medianMs(repeats, [&] {
        auto r = core::capture(model, c.loaded.tokenizer, text, lighter);
        if (!r) error = r.error();
    });
    if (!error.empty()) return core::Error{error};
    const int64_t layer = config.nLayers - 1;
    const double mapMs = medianMs(repeats, [&] { (*maps)->weights(layer, 0); });
    // An override set on the top layer, with the effect: from the capture of the same text
    // before it (the layers below are taken from it), and from scratch.
    std::shared_ptr<const core::CaptureMemory> memory;
    if (auto before =
            core::capture(model, c.loaded.tokenizer, text, request, nullptr, nullptr, &memory);
        !before) {
        return core::Error{before.error()};
    }
    core::CaptureRequest changed = request;
    core::AttentionOverride top;
    top.layer = config.nLayers - 1;
    top.spec.kind = run.attention.kind == core::AttentionKind::Softmax
                        ? core::AttentionKind::ReluLen
                        : core::AttentionKind::Softmax;
    changed.run.overrides = {top};
    changed.effect = true;
    int64_t reusedLayers = 0;
    const double topReusedMs = medianMs(repeats, [&] {
        auto r = core::capture(model, c.loaded.tokenizer, text, changed, nullptr, memory.get());
        if (!r)
            error = r.error();
        else
            reusedLayers = r->reusedLayers;
    });
    if (!error.empty()) return core::Error{error};
    const double topFullMs = medianMs(repeats, [&] {
        auto r = core::capture(model, c.loaded.tokenizer, text, changed);
        if (!r) error = r.error();
    });
    if (!error.empty()) return core::Error{error};
    return nlohmann::json{{"tokens", ids.size(1)},
                          {"forward_ms", forward},
                          {"forward_gflop", flops / 1e9},
                          {"floor_ms", floor},
                          {"forward_over_floor", forward / floor},
                          {"capture_ms", captureMs},
                          {"maps_only_capture_ms", mapsOnlyMs},
                          {"one_map_ms", mapMs},
                          {"top_override_reused_ms", topReusedMs},
                          {"top_override_reused_layers", reusedLayers},
                          {"top_override_full_ms", topFullMs}};
}

// The window's figures at one size (toggle, toggle back, one more word, stall, text → PNG),
// added to `row`; nothing when the window is not built or --no-gui was given.
core::Status windowFigures(const BenchContext& c, const std::string& text, nlohmann::json& row) {
#ifdef RELULENS_WITH_GUI
    if (!c.options.gui) return {};
    auto timings =
        benchGui(c.argc, c.argv, c.loaded, c.options.modelFolder, text, int(c.options.repeats));
    if (!timings) return core::Error{timings.error()};
    row["toggle_to_redraw_ms"] = timings->toggleMs;
    row["toggle_cold_ms"] = timings->coldToggleMs;
    row["text_to_picture_ms"] = timings->textToPictureMs;
    row["gui_stall_ms"] = timings->stallMs;
    row["gui_stall_event"] = timings->stallEvent;
    if (timings->stallOwnMs >= 0) {
        row["gui_stall_host_ms"] = timings->stallHostMs;
        row["gui_stall_own_ms"] = timings->stallOwnMs;
    }
    row["toggle_back_ms"] = timings->toggleBackMs;
    row["append_word_ms"] = timings->appendWordMs;
    row["append_letter_ms"] = timings->appendLetterMs;
#else
    (void)c;
    (void)text;
    (void)row;
#endif
    return {};
}

// bench/baseline.py on the same tokens, added to `row` and printed after it; an error when its
// map disagrees with ReluLens's.
core::Status baselineFigures(const BenchContext& c, const std::vector<core::Token>& tokens,
                             const core::MapSource& maps, nlohmann::json& row) {
    const int64_t layer = c.loaded.model->info().nLayers - 1;
    auto b = runBaseline(c.options.python, c.options.script, c.options.modelFolder, tokens, maps,
                         layer, int(c.options.baselineRepeats));
    if (!b) return core::Error{b.error()};
    const double captureMs = row["capture_ms"].get<double>();
    const double picture = row.value("text_to_picture_ms", 0.0);
    row["baseline"] = {{"forward_with_maps_ms", b->forwardWithMapsMs},
                       {"text_to_picture_ms", b->textToPictureMs},
                       {"peak_rss_mb", b->peakMb},
                       {"capture_ratio", b->forwardWithMapsMs / captureMs},
                       {"max_map_difference", b->maxDifference}};
    std::printf(
        " | %10.1f %6.2f %10.1f %6s %8.1e", b->forwardWithMapsMs, b->forwardWithMapsMs / captureMs,
        b->textToPictureMs,
        picture > 0 ? (std::to_string(b->textToPictureMs / picture).substr(0, 5)).c_str() : "–",
        b->maxDifference);
    if (picture > 0) row["baseline"]["picture_ratio"] = b->textToPictureMs / picture;
    // Float32 sums in another order through four layers: measured 1.1e-5 apart at 1,024
    // tokens and 1.1e-4 at 8,192. This guards against gross disagreement; the maps'
    // exactness is tested at 1e-5 against independent references (test_attention_maps,
    // test_hf_model).
    if (b->maxDifference > 1e-3) {
        return core::Error{"the baseline's map differs from ReluLens's by " +
                           std::to_string(b->maxDifference) + " (more than 1e-3)"};
    }
    return {};
}

// Every figure at `n` tokens, printed as one line of the table.
core::Result<nlohmann::json> benchSize(const BenchContext& c, size_t n) {
    auto exact = textOfTokens(c.loaded.tokenizer, c.source, n);
    if (!exact) return core::Error{exact.error()};
    const std::string text = *exact;
    auto encoded = c.loaded.tokenizer.encode(text);
    if (!encoded) return core::Error{encoded.error()};
    const std::vector<core::Token> tokens = std::move(*encoded);
    std::vector<int64_t> idValues;
    for (const auto& t : tokens) idValues.push_back(t.id);
    auto ids = torch::tensor(idValues, torch::kLong).view({1, int64_t(n)}).to(c.device);

    std::shared_ptr<const core::MapSource> maps;
    const KernelCost before = kernelCost();
    const bool perPart = resetPeakResident();
    auto row = engineFigures(c, text, ids, &maps);
    if (!row) return row;
    const double enginePeak = peakResidentMb();
    // The window's own peak: from what is resident once the engine's figures are done. The
    // capture whose map the baseline compares (~50 MB at 8,192 tokens) is held only for it.
    if (!c.options.baseline) maps.reset();
    resetPeakResident();
    if (auto s = windowFigures(c, text, *row); !s) return core::Error{s.error()};
    const double windowPeak = peakResidentMb();
    const double peak = perPart ? std::max(enginePeak, windowPeak) : windowPeak;
    (*row)["peak_rss_mb"] = peak;
    if (perPart) {
        (*row)["engine_peak_rss_mb"] = enginePeak;
        if (row->contains("toggle_to_redraw_ms")) (*row)["window_peak_rss_mb"] = windowPeak;
    }
    // (every measurement at this size, warm-ups included)
    const KernelCost after = kernelCost();
    (*row)["minor_page_faults"] = after.minorFaults - before.minorFaults;
    (*row)["system_cpu_ms"] = after.systemMs - before.systemMs;
    auto cell = [&](const char* key) {
        const double v = row->value(key, 0.0);
        return v > 0 ? std::to_string(int64_t(std::lround(v))) : std::string("–");
    };
    const auto& r = *row;
    std::printf(
        "%7zu %9.1f %9.1f %6.2f %10.1f %9.1f %9.1f %9.1f %9.1f %9s %9s %6s %6s %7s %7s %6s %10s "
        "%8.0f "
        "%8s",
        n, r["forward_ms"].get<double>(), r["floor_ms"].get<double>(),
        r["forward_over_floor"].get<double>(), r["capture_ms"].get<double>(),
        r["maps_only_capture_ms"].get<double>(), r["one_map_ms"].get<double>(),
        r["top_override_reused_ms"].get<double>(), r["top_override_full_ms"].get<double>(),
        cell("toggle_to_redraw_ms").c_str(), cell("toggle_cold_ms").c_str(),
        cell("toggle_back_ms").c_str(), cell("append_word_ms").c_str(),
        cell("append_letter_ms").c_str(), cell("gui_stall_ms").c_str(),
        cell("gui_stall_own_ms").c_str(), cell("text_to_picture_ms").c_str(), peak,
        cell("window_peak_rss_mb").c_str());
    if (c.options.baseline) {
        if (auto s = baselineFigures(c, tokens, *maps, *row); !s) {
            std::printf("\n");
            return core::Error{s.error()};
        }
    }
    std::printf("\n");
    std::fflush(stdout);
    return row;
}

}  // namespace

int benchCommand(int argc, char** argv, const std::vector<std::string>& argvRest) {
    auto args = Arguments::parse(argvRest, {{"model"},
                                            {"file"},
                                            {"sizes", true, true},
                                            {"repeats"},
                                            {"json"},
                                            {"device"},
                                            {"baseline", false},
                                            {"baseline-repeats"},
                                            {"python"},
                                            {"no-gui", false},
                                            {"tokenizer"},
                                            {"megabytes"}});
    if (!args) return fail(args.error());
    auto options = benchOptions(*args);
    if (!options) return fail(options.error());
    if (!options->tokenizer.empty()) {
        if (auto s = benchTokenizer(options->tokenizer, options->textFile, options->megabytes);
            !s) {
            return fail(s.error());
        }
        if (!options->modelAsked) return 0;  // only the tokenizer was asked for
    }
    auto device = core::selectDevice(options->device);
    if (!device) return fail(device.error());

    const auto loadStarted = Clock::now();
    auto loaded = openModel(options->modelFolder, device->str());
    if (!loaded) return fail(loaded.error());
    const double loadMs = millisecondsSince(loadStarted);
    const double loadPeakMb = peakResidentMb();
    const auto& config = loaded->model->info();
    if (options->baseline && config.family != "relulens") {
        return fail(
            "--baseline runs ReluLens's own models only (bench/baseline.py knows their layout)");
    }
    BenchContext context{*options, *loaded, *device, readFile(options->textFile), 0, argc, argv};
    if (context.source.empty()) return fail(options->textFile + ": cannot read the benchmark text");
    torch::NoGradGuard noGrad;
    context.rate = matmulRate(*device);
    printBenchHeader(context, loadMs, loadPeakMb);

    nlohmann::json rows = nlohmann::json::array();
    for (size_t n : options->sizes) {
        auto row = benchSize(context, n);
        if (!row) {
#ifdef RELULENS_WITH_GUI
            if (options->gui) endBenchGui();
#endif
            return fail(row.error());
        }
        rows.push_back(*row);
    }
    printBenchLegend(options->baseline);
#ifdef RELULENS_WITH_GUI
    if (options->gui) endBenchGui();
#endif
    if (!options->json.empty()) {
        const auto json =
            nlohmann::json{{"model", options->modelFolder},
                           {"family", config.family},
                           {"parameters", config.parameters},
                           {"load_ms", loadMs},
                           {"load_peak_rss_mb", loadPeakMb},
                           {"weights_f32_mb", double(config.parameters) * 4.0 / 1048576.0},
                           {"device", device->str()},
                           {"report", core::deviceReport()},
                           {"matmul_gflops", context.rate},
                           {"repeats", options->repeats},
                           {"sizes", rows}};
        if (auto s = core::writeTextAtomically(options->json, json.dump(2) + "\n"); !s)
            return fail(s.error());
    }
    return 0;
}

}  // namespace relulens::app
