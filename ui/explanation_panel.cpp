#include "ui/explanation_panel.h"

#include "ui/app_state.h"

namespace relulens::ui {

namespace {

QString attentionText(const core::AttentionSpec& a) {
    const QString score =
        "s<sub>ij</sub> = q<sub>i</sub>·k<sub>j</sub> / √d<sub>head</sub>; "
        "query i sees keys j ≤ i, n<sub>i</sub> = i + 1.";
    switch (a.kind) {
        case core::AttentionKind::Softmax:
            return "<h3>Softmax attention</h3><p>α<sub>ij</sub> = exp(s<sub>ij</sub>) / "
                   "Σ<sub>k</sub> exp(s<sub>ik</sub>)</p><p>" +
                   score +
                   "</p><p>Every row sums to 1 and no weight is ever exactly zero. As inputs grow "
                   "the weights spread thin or pile onto a few keys; Shen et al. blame this for "
                   "softmax's weakness on long documents.</p>";
        case core::AttentionKind::Relu:
            return "<h3>ReLU attention (raw)</h3><p>α<sub>ij</sub> = relu(s<sub>ij</sub>)</p><p>" +
                   score +
                   "</p><p>Negative scores give exact zeros: sparse maps. Nothing normalises a "
                   "row, so its mass — and the output's variance — grows with the number of "
                   "keys. Shen et al. found this does not train well.</p>";
        case core::AttentionKind::ReluLen:
            return QString(
                       "<h3>ReLU ÷ n (Wortsman et al.)</h3><p>α<sub>ij</sub> = "
                       "relu(s<sub>ij</sub>) / n<sub>i</sub><sup>%1</sup></p><p>")
                       .arg(a.lengthExponent, 0, 'g', 3) +
                   score +
                   "</p><p>Dividing by the number of visible keys keeps the average weight near "
                   "1/n, as softmax has it, without a row maximum or sum: rows are independent. "
                   "With a = 1 it matched softmax in their vision transformers.</p>";
        case core::AttentionKind::ReluFormer:
            return "<h3>ReLUFormer (Shen et al.)</h3><p>α<sub>ij</sub> = relu(s<sub>ij</sub>) / "
                   "(γ<sub>h</sub> · √(n<sub>i</sub>/2))</p><p>" +
                   score +
                   "</p><p>A learnable scale γ per head and √n keep the output variance in check; "
                   "training adds a regulariser pulling each row's mass towards 1. It matched "
                   "softmax on short documents and beat it on long ones.</p>";
        case core::AttentionKind::Family:
            return QString(
                       "<h3>Family h(s) ÷ n<sup>a</sup></h3><p>α<sub>ij</sub> = %1(s<sub>ij</sub>) "
                       "/ "
                       "n<sub>i</sub><sup>%2</sup></p><p>")
                       .arg(QString::fromStdString(core::familyFunctionName(a.familyFunction)))
                       .arg(a.lengthExponent, 0, 'g', 3) +
                   score +
                   "</p><p>Wortsman et al. swept h ∈ {relu, relu², gelu, softplus, sigmoid, …} and "
                   "a ∈ [0, 2]: for every h the best a was near 1. Only relu and relu² give exact "
                   "zeros; the others are counted sparse below τ.</p>";
        case core::AttentionKind::Sigmoid: {
            const QString bias = a.sigmoidBias ? QString::number(*a.sigmoidBias, 'g', 3)
                                               : QString("−log n<sub>i</sub>");
            return "<h3>Sigmoid attention</h3><p>α<sub>ij</sub> = σ(s<sub>ij</sub> + b), b = " +
                   bias + "</p><p>" + score +
                   "</p><p>Each weight on its own, no sum over the row: rows sum to about 1 on "
                   "average, never exactly. Without the coupling of softmax, Gu et al. saw no "
                   "attention sinks. Not the family's σ(s)/n: here the bias sits inside.</p>"
                   "<p><i>Ramapuram et al. 2024 (ICLR 2025), “Theory, Analysis, and Best "
                   "Practices for Sigmoid Self-Attention”; the per-row n<sub>i</sub> under the "
                   "causal mask is ReluLens's reading.</i></p>";
        }
        case core::AttentionKind::Softpick:
            return "<h3>Softpick</h3><p>α<sub>ij</sub> = relu(e<sup>s<sub>ij</sub></sup> − 1) / "
                   "(Σ<sub>k</sub> |e<sup>s<sub>ik</sub></sup> − 1| + ε), computed with the row "
                   "maximum m<sub>i</sub> subtracted, ε = 10<sup>−8</sup></p><p>" +
                   score +
                   "</p><p>Scores ≤ 0 give exact zeros and a row may sum to less than 1, so a "
                   "head can attend to nothing instead of parking weight on the first token.</p>"
                   "<p><i>Zuhri et al. 2025, “Softpick” (the stable form of the authors' "
                   "code).</i></p>";
        case core::AttentionKind::Softmax1:
            return "<h3>Softmax₁ (“off by one”)</h3><p>α<sub>ij</sub> = e<sup>s<sub>ij</sub></sup> "
                   "/ (1 + Σ<sub>k</sub> e<sup>s<sub>ik</sub></sup>)</p><p>" +
                   score +
                   "</p><p>As if every row had one more key with score 0 and no value: the row "
                   "may give away weight, sums stay below 1, nothing is exactly zero.</p>"
                   "<p><i>Miller 2023, “Attention is off by one”.</i></p>";
        case core::AttentionKind::Sparsemax:
            return "<h3>Sparsemax</h3><p>α<sub>ij</sub> = [s<sub>ij</sub> − "
                   "τ<sub>i</sub>]<sub>+</sub>, "
                   "τ<sub>i</sub> chosen so that the row sums to 1</p><p>" +
                   score +
                   "</p><p>The Euclidean projection of the scores onto the simplex: rows sum to 1 "
                   "and keys far below the top get exact zeros. Shen et al. report it fails to "
                   "converge on long inputs.</p><p><i>Martins &amp; Astudillo 2016.</i></p>";
        case core::AttentionKind::Entmax15:
            return "<h3>1.5-entmax</h3><p>α<sub>ij</sub> = [s<sub>ij</sub>/2 − "
                   "τ<sub>i</sub>]<sub>+</sub>"
                   "<sup>2</sup>, τ<sub>i</sub> chosen so that the row sums to 1</p><p>" +
                   score +
                   "</p><p>Between softmax and sparsemax: rows sum to 1 and low keys get exact "
                   "zeros, but fewer than with sparsemax.</p><p><i>Peters, Niculae &amp; Martins "
                   "2019; Correia et al. 2019 (the exact sort-based τ).</i></p>";
        case core::AttentionKind::Ssmax:
            return QString(
                       "<h3>Scalable softmax</h3><p>α<sub>ij</sub> = softmax<sub>j</sub>(σ · "
                       "log n<sub>i</sub> · s<sub>ij</sub>), σ = %1</p><p>")
                       .arg(a.ssmaxSigma, 0, 'g', 3) +
                   score +
                   "</p><p>The scores grow with log n, so a long row does not flatten out as "
                   "plain softmax does. Rows sum to 1; nothing is exactly zero.</p><p><i>Nakanishi "
                   "2025, “Scalable-Softmax” (σ is learned there; here a fixed scalar you can "
                   "change).</i></p>";
        case core::AttentionKind::StickBreaking:
            return "<h3>Stick-breaking attention</h3><p>β<sub>ij</sub> = σ(s<sub>ij</sub>), "
                   "α<sub>ij</sub> = β<sub>ij</sub> · Π<sub>j&lt;k≤i</sub> (1 − "
                   "β<sub>ik</sub>)</p><p>" +
                   score +
                   "</p><p>The nearest keys break off their share of the stick first; what is "
                   "left passes to earlier keys. Rows sum to at most 1; what is not given "
                   "out stays unassigned.</p><p><i>Tan et al. 2024 (ICLR 2025), "
                   "“Scaling Stick-Breaking Attention”.</i></p>";
    }
    return QString();
}

QString ffnText(core::FfnKind kind) {
    switch (kind) {
        case core::FfnKind::Relu:
            return "<h3>FFN: ReLU memory</h3><p>FFN(x) = relu(x·W1ᵀ + b1)·W2ᵀ + b2</p><p>A "
                   "key-value "
                   "memory: rows of W1 are keys, columns of W2 are values, and m = relu(x·W1ᵀ + "
                   "b1) "
                   "says how much of each value slot is written. Many slots are exactly 0.</p>";
        case core::FfnKind::Gelu:
            return "<h3>FFN: GELU</h3><p>FFN(x) = gelu(x·W1ᵀ + b1)·W2ᵀ + b2</p><p>A smooth ReLU; "
                   "slots are rarely exactly zero.</p>";
        case core::FfnKind::Softmax:
            return "<h3>FFN: softmax memory</h3><p>FFN(x) = "
                   "softmax<sub>slots</sub>(x·W1ᵀ)·W2ᵀ</p><p>"
                   "The classic key-value memory. Shen et al.: normalising over slots shrinks the "
                   "output's variance and piles weight onto few slots, so it does worse.</p>";
        case core::FfnKind::SoftmaxLn:
            return "<h3>FFN: softmax memory + layer norm</h3><p>FFN(x) = LN(softmax<sub>slots</sub>"
                   "(x·W1ᵀ)·W2ᵀ)</p><p>The layer norm restores the output's scale; Shen et al. "
                   "found "
                   "this matches the ReLU FFN except with very many slots.</p>";
    }
    return QString();
}

}  // namespace

ExplanationPanel::ExplanationPanel(AppState* state, QWidget* parent)
    : QTextBrowser(parent), state_(state) {
    setOpenExternalLinks(false);
    connect(state_, &AppState::inputChanged, this, &ExplanationPanel::refresh);
    connect(state_, &AppState::resultChanged, this, &ExplanationPanel::refresh);
    refresh();
}

QString ExplanationPanel::explain(const core::RunSpec& run, const core::RunSpec& trained,
                                  bool sameWeights) {
    QString html = attentionText(run.attention) + ffnText(run.ffn);
    if (core::sameVariants(run, trained)) {
        html += "<p><i>The weights were trained with exactly these variants.</i></p>";
    } else {
        html += QString("<p><i>The weights were trained with attention %1 and FFN %2%3.</i></p>")
                    .arg(QString::fromStdString(trained.attention.label()),
                         QString::fromStdString(core::ffnKindName(trained.ffn)),
                         sameWeights ? ": this swaps the activation on the same weights, so expect "
                                       "the model to read the text worse than it was trained to"
                                     : "");
    }
    return html;
}

void ExplanationPanel::refresh() {
    auto result = state_->result();
    const core::RunSpec trained = result ? result->model.trained : state_->run();
    setHtml(explain(state_->run(), trained, state_->mode() == VariantMode::SameWeights));
}

}  // namespace relulens::ui
