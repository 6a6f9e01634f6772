#include "ui/override_menu.h"

#include <QMenu>
#include <tuple>

#include "ui/app_state.h"

namespace relulens::ui {

QString attentionLabel(core::AttentionKind kind) {
    switch (kind) {
        case core::AttentionKind::Relu:
            return "ReLU";
        case core::AttentionKind::ReluLen:
            return "ReLU ÷ n";
        case core::AttentionKind::ReluFormer:
            return "ReLUFormer";
        case core::AttentionKind::Family:
            return "family h(s) ÷ nᵃ";
        case core::AttentionKind::Sigmoid:
            return "sigmoid σ(s + b)";
        case core::AttentionKind::Softmax1:
            return "softmax₁ (off by one)";
        case core::AttentionKind::Entmax15:
            return "1.5-entmax";
        case core::AttentionKind::Ssmax:
            return "scalable softmax";
        case core::AttentionKind::StickBreaking:
            return "stick-breaking";
        default:
            return QString::fromStdString(core::attentionKindName(kind));
    }
}

QMenu* overrideMenu(AppState* state, int layer, int head, QWidget* parent) {
    auto* menu = new QMenu(parent);
    menu->setObjectName("overrideMenu");
    menu->setAttribute(Qt::WA_DeleteOnClose);
    auto set = [state](core::AttentionOverride o) { state->setOverride(o); };
    auto addVariants = [&](QMenu* sub, int target, const QString& prefix) {
        for (auto kind : core::attentionKinds()) {
            auto* action = sub->addAction(attentionLabel(kind));
            action->setObjectName(prefix + QString::fromStdString(core::attentionKindName(kind)));
            QObject::connect(action, &QAction::triggered, state, [set, layer, target, kind] {
                core::AttentionOverride o;
                o.layer = layer;
                o.head = target;
                o.spec.kind = kind;
                set(o);
            });
        }
    };
    if (head >= 0) {
        addVariants(menu->addMenu(QString("Head %1 of layer %2 runs").arg(head).arg(layer)), head,
                    "head:");
    }
    addVariants(menu->addMenu(QString("Every head of layer %1 runs").arg(layer)), -1, "layer:");
    if (head >= 0) {
        menu->addSeparator();
        for (auto [ablation, name, text] :
             {std::tuple{core::Ablation::Zero, "zero",
                         QString("Switch head %1 of layer %2 off (output 0)")},
              std::tuple{core::Ablation::Uniform, "uniform",
                         QString("Make head %1 of layer %2 uniform (1/n to every key it sees)")}}) {
            auto* action = menu->addAction(text.arg(head).arg(layer));
            action->setObjectName(name);
            QObject::connect(action, &QAction::triggered, state,
                             [set, layer, head, ablation = ablation] {
                                 core::AttentionOverride o;
                                 o.layer = layer;
                                 o.head = head;
                                 o.ablation = ablation;
                                 set(o);
                             });
        }
    }
    menu->addSeparator();
    auto* clear = menu->addAction("Clear every override");
    clear->setObjectName("clear");
    clear->setEnabled(!state->run().overrides.empty());
    QObject::connect(clear, &QAction::triggered, state, [state] { state->clearOverrides(); });
    return menu;
}

QString overridesText(const core::RunSpec& run) {
    if (run.overrides.empty()) return "none";
    QStringList parts;
    for (const auto& o : run.overrides) {
        QString where = QString("layer %1").arg(o.layer);
        if (o.head >= 0) where += QString(" head %1").arg(o.head);
        QString what;
        switch (o.ablation) {
            case core::Ablation::Zero:
                what = "off";
                break;
            case core::Ablation::Uniform:
                what = "uniform";
                break;
            case core::Ablation::None:
                what = attentionLabel(o.spec.kind);
                break;
        }
        parts << where + ": " + what;
    }
    return parts.join(" · ");
}

}  // namespace relulens::ui
