// The text's SentencePiece pieces as chips, wrapped to the width, coloured by a per-token
// quantity of the selected layer and head (sparsity or entropy). Clicking a chip selects that
// query token everywhere.
#pragma once
#include <QHash>
#include <QVector>
#include <QWidget>

namespace relulens::ui {

class AppState;

class TokenStrip : public QWidget {
    Q_OBJECT
public:
    // Effect: the KL divergence the overrides make in predicting the next token.
    enum class Colouring { None, Sparsity, Entropy, Slot, Effect };
    explicit TokenStrip(AppState* state, QWidget* parent = nullptr);
    void setColouring(Colouring colouring);
    QSize sizeHint() const override;
    int heightForWidth(int width) const override;
    bool hasHeightForWidth() const override { return true; }
    // Chip rectangle of a token (for tests and hit testing).
    QRect chipRect(int token) const;

protected:
    void paintEvent(QPaintEvent* event) override;
    void changeEvent(QEvent* event) override;
    void mousePressEvent(QMouseEvent* event) override;
    void resizeEvent(QResizeEvent* event) override;

private:
    void measureChips();
    void layoutChips();

    AppState* state_;
    Colouring colouring_ = Colouring::Sparsity;
    QVector<QRect> chips_;
    QVector<QString> labels_;
    QVector<int> widths_;  // of each chip, in the current font
    // Chip widths by label in the current font, kept across results: a text of 10,000 tokens
    // has a few thousand distinct pieces, and shaping each token's label anew took 40-70 ms of
    // the GUI thread per result at 10,744 tokens.
    QHash<QString, int> widthOfLabel_;
    int contentHeight_ = 30;
};

}  // namespace relulens::ui
