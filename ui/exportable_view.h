// The base of every view: a widget that can draw its figure onto any painter (screen, PNG at a
// print scale, SVG, PDF) and give the data behind it as CSV. Export writes atomically.
#pragma once
#include <QHash>
#include <QString>
#include <QWidget>

class QCPPainter;
class QCPTextElement;

namespace relulens::ui {

class AppState;

class ExportableView : public QWidget {
    Q_OBJECT
public:
    ExportableView(AppState* state, QWidget* parent = nullptr);

    virtual QString viewName() const = 0;  // "attention", "sparsity", ...
    virtual QString title() const = 0;     // human title for docks and menus
    virtual QString csv() const = 0;       // the data behind the figure
    // Draws the figure (no controls) into rect of the painter.
    virtual void renderFigure(QCPPainter* painter, const QSize& size) = 0;
    virtual QSize figureSize() const;

    // Writes PNG (scaled), SVG or PDF by the file's suffix, or CSV for ".csv".
    // Fails with a message (nothing written, an existing file untouched) on error.
    bool exportTo(const QString& path, double scale, QString* error);
    QImage renderImage(double scale);
    // Presentation mode: scales every plot's fonts (1 = normal) for a projector.
    void setFontScale(double scale);

public Q_SLOTS:
    // Redraws from the AppState; views coalesce their own replots.
    virtual void refresh() = 0;

protected:
    // A plot's title: `text` wrapped at spaces to the plot's width and fitted again whenever the
    // plot is resized or its fonts grow; past three lines the rest is elided, and then the whole
    // title is the plot's tooltip.
    void setHeading(QCPTextElement* heading, const QString& text);
    QString headingText(QCPTextElement* heading) const { return headings_.value(heading); }
    bool eventFilter(QObject* watched, QEvent* event) override;

    AppState* state_;
    double fontScale_ = 1.0;

private:
    void fitHeading(QCPTextElement* heading);

    QHash<QCPTextElement*, QString> headings_;  // as set, before wrapping
};

}  // namespace relulens::ui
