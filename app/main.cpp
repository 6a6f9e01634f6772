// relulens: the command line (and, from the GUI issue on, the desktop application).
#include <malloc.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "app/commands.h"
#ifdef RELULENS_WITH_GUI
#include "app/gui.h"
#endif
#include "core/about.h"
#include "core/device.h"
#include "core/large_tensors.h"
#include "core/tokenizer.h"

namespace {

const char* kHelp =
    R"(ReluLens — see inside a transformer and switch its attention from softmax to ReLU.

usage: relulens                     open the desktop window (with no display: render the
                                    main views to PNG files in ./relulens-views)
       relulens COMMAND [options]

commands:
  inspect           run a model on a text and summarise attention, sparsity and predictions
      --model DIR              model folder: ReluLens's own, or a Hugging Face checkpoint
                               (llama, mistral, qwen2, qwen3, gemma: config.json, safetensors
                               weights or shards, tokenizer.model)
      --text TEXT | --file F   the text to run on
      --attention V            the papers': softmax | relu | relu_len | reluformer | family
                               later ones: sigmoid | softpick | softmax1 | sparsemax |
                               entmax15 | ssmax | stickbreaking
                               (default: the variant the model was trained with)
      --h H                    family function: relu | relu2 | gelu | softplus | sigmoid
      --a A                    length exponent of relu_len and family, in [0, 2] (default 1)
      --sigmoid-bias B         sigmoid's bias b in sigma(s + b), in [-50, 50] (default log-n:
                               b_i = -log n_i)
      --ssmax-sigma S          ssmax's scale in softmax(S * log n_i * s), in (0, 10] (0.43)
      --ffn V                  relu | gelu | softmax | softmax_ln; gated FFNs (Hugging Face
                               models) swap the gate's activation: silu | gelu | gelu_tanh | relu
      --device D               auto | cpu | cuda | cuda:N (default auto: CUDA when available)
      --maps L:H[,L:H...]      add these heads' weights and raw scores to the JSON
      --all-maps               add every head's weights to the JSON
      --top-k K                next-token predictions per position (default 5)
      --tau T                  softmax sparsity threshold scale, tau_i = T / n_i (default 0.1)
      --sink-threshold E       a head whose mean weight on the first token exceeds E is a sink
                               head (default 0.3)
      --override L[:H]=V       layer L (or head H of it) runs attention V instead (repeatable;
                               a head's override beats its layer's, a later one an earlier one)
      --ablate L:H[=zero|uniform]  switch head H of layer L off: output 0 (zero, the default)
                               or 1/n_i to every visible key (uniform); repeatable
                               With overrides, the text's loss with and without them and each
                               token's change (log-probability, KL) are measured.
      --lens-at P              logit lens: each layer's top-k after token P (repeatable;
                               default -1, the last token); the JSON also has, per layer,
                               the probability of every actual next token
      --json OUT               write everything to OUT as JSON
  train-tokenizer   train a SentencePiece tokenizer
      --corpus FILE...  --out FILE.model  [--vocab N (4096)] [--model-type unigram|bpe] [--force]
  train             train a model on a corpus (AdamW, warm-up + cosine decay, clipping)
      --corpus FILE... --tokenizer FILE --out DIR [--attention V --h H --a A --ffn V]
      [--layers 4 --heads 4 --d-model 256 --d-ff 1024 --context 256] [--steps 3000]
      [--batch 16] [--lr 2e-3] [--warmup 200] [--seed 1] [--lambda 0.01 (reluformer regulariser)]
      [--eval-every 200] [--eval-batches 8] [--checkpoint-every 200] [--validation 0.05]
      [--dtype f16|bf16|f32] [--name N] [--resume] [--force]
      Ctrl-C stops cleanly and keeps a checkpoint; --resume continues from it.
  eval              loss and perplexity at several context lengths
      --model DIR --corpus FILE... [--context N...] [--split all|validation]
      [--max-tokens 65536] [--attention V --h H --a A --ffn V] [--device D] [--json OUT]
  init-model        write a randomly initialised model folder (for tests and as a training start)
      --tokenizer FILE --out DIR [--layers 2 --heads 2 --d-model 32 --d-ff 64 --context 64]
      [--attention V --h H --a A --ffn V] [--seed 1] [--dtype f32|f16|bf16] [--name N] [--force]
      [--init-std S (0.02)] [--perturb-all (also randomise norms, biases and gamma)]

  import-llama2c    convert a llama2.c model (.bin, v0 or v1) to a Hugging Face folder
      --model FILE.bin --tokenizer tokenizer.model --out DIR [--dtype f32|f16|bf16] [--force]

  render            render a view headless, exactly as the window draws it
      --model DIR (--text TEXT | --file F) --out FILE (.png, .svg, .pdf or .csv)
      --view attention|heads|compare|sparsity|memory|predictions|diagnostics|sinks|
             effect|lens
      [--layer L] [--head H|mean] [--query Q] [--log]
      [--attention V --h H --a A --ffn V --tau T] [--override L[:H]=V] [--ablate L:H[=MODE]]
      [--width 1100 --height 850] [--scale S]
      [--force]
      or every view of a saved scene, or of each step of a lesson (.relulens files):
      (--scene FILE | --lesson FILE) --out DIR [--view V|all (default: the one each
      scene shows)] [--format png|svg|pdf] [--width --height --scale] [--force]
      files are named NAME-VIEW.png for a scene, step-01-VIEW.png ... for a lesson,
      with each caption in NAME-caption.txt / step-01-caption.txt beside them
  bench             forward, capture, one map, toggle → redrawn views, text → PNG and peak
                    memory at several input lengths, against the machine's matmul floor
      [--model DIR (bundled softmax)] [--file TEXT] [--sizes 128 512 2048 8192]
      [--repeats 5] [--device auto|cpu|cuda[:N]] [--json OUT] [--no-gui]
      [--baseline [--baseline-repeats 3] [--python /usr/bin/python3]]
      [--tokenizer tokenizer.json|tokenizer.model [--megabytes 1]]
                    --baseline also runs bench/baseline.py (PyTorch eager, every map
                    returned, matplotlib) on the same tokens and prints the ratios;
                    --tokenizer times encoding --megabytes MB of --file with a tokenizer
                    (alone, unless --model is given too)
  --version         print the version and the compute back-ends
  --help            print this help
)";

// The part of the help about one command: its line and the indented lines under it, up to the
// next command; empty for an unknown one.
std::string commandHelp(const std::string& command) {
    const std::string text = kHelp;
    const std::string start = "\n  " + command + " ";
    size_t at = text.find(start);
    if (at == std::string::npos) return {};
    ++at;
    size_t end = at;
    while (true) {
        end = text.find('\n', end);
        if (end == std::string::npos || end + 3 > text.size()) break;
        // a line "  name" (two spaces, then a letter or "--") starts the next command
        const bool next =
            text.compare(end + 1, 2, "  ") == 0 && text[end + 3] != ' ' && text[end + 3] != '\n';
        if (next || text[end + 1] == '\n') break;
        ++end;
    }
    return "usage: relulens " +
           text.substr(at + 2, (end == std::string::npos ? text.size() : end) - at - 2) + "\n";
}

}  // namespace

int main(int argc, char** argv) {
#ifdef __GLIBC__
    // One malloc arena for every thread. The worker, the map thread and the attention helper each
    // kept their own arena of freed blocks, which added 0.9 GB to the window's peak resident
    // memory at 8,192 tokens (relulens bench: 3.4 GB with an arena per thread, 2.5 GB with one)
    // at no measurable cost in time: the engine's allocations are few and large.
    mallopt(M_ARENA_MAX, 1);
#endif
    // Large tensors apart from the heap, in huge pages: what the window holds is what it uses.
    relulens::core::mapLargeTensorsApart();
    std::vector<std::string> args(argv + 1, argv + argc);
#ifdef RELULENS_WITH_GUI
    relulens::app::installMessageFilter();
    if (args.empty()) return relulens::app::runGui(argc, argv);
#endif
    if (args.empty() || args[0] == "--help" || args[0] == "-h" || args[0] == "help") {
        std::fputs(kHelp, args.empty() ? stderr : stdout);
        return args.empty() ? 2 : 0;
    }
    if (args[0] == "--version") {
        relulens::core::configureThreads();
        std::printf("relulens %s\n", RELULENS_VERSION);
        std::printf(
            "licence: %s (the components' licences below; the full text in LICENSE, "
            "or /usr/share/doc/relulens/copyright when installed)\n",
            relulens::core::kLicence);
        std::printf("%s\n", relulens::core::deviceReport().c_str());
#ifdef RELULENS_WITH_GUI
        std::printf("%s\n", relulens::app::qtVersionLine().c_str());
#endif
        const std::string reason = relulens::core::cudaUnavailableReason();
        std::printf("device: %s\n", reason.empty() ? "cuda:0 (CUDA is used when --device is auto)"
                                                   : ("cpu; CUDA is not used: " + reason).c_str());
        auto module = relulens::core::Tokenizer::modulePath();
        std::printf("tokenizer module: %s\n", module ? module->c_str() : module.error().c_str());
        for (const auto& c : relulens::core::components()) {
            std::printf("component: %s, %s; %s\n", c.name.c_str(), c.licence.c_str(),
                        c.role.c_str());
        }
        return 0;
    }
    relulens::core::configureThreads();
    const std::string command = args[0];
    const std::vector<std::string> rest(args.begin() + 1, args.end());
    for (const auto& arg : rest) {
        if (arg == "--help" || arg == "-h") {
            const std::string help = commandHelp(command);
            if (help.empty()) break;  // an unknown command says so below
            std::fputs(help.c_str(), stdout);
            return 0;
        }
    }
    try {
        if (command == "inspect") return relulens::app::inspectCommand(rest);
        if (command == "train-tokenizer") return relulens::app::trainTokenizerCommand(rest);
        if (command == "init-model") return relulens::app::initModelCommand(rest);
        if (command == "import-llama2c") return relulens::app::importLlama2cCommand(rest);
        if (command == "train") return relulens::app::trainCommand(rest);
        if (command == "eval") return relulens::app::evalCommand(rest);
#ifdef RELULENS_WITH_GUI
        if (command == "render") return relulens::app::renderCommand(argc, argv, rest);
#endif
        if (command == "bench") return relulens::app::benchCommand(argc, argv, rest);
    } catch (const std::exception& e) {
        return relulens::app::fail(std::string("internal error: ") + e.what());
    }
    return relulens::app::fail("unknown command '" + command + "' (see relulens --help)");
}
