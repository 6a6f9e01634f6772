#include "ui/exportable_view.h"

#include <QBuffer>
#include <QEvent>
#include <QFileInfo>
#include <QFontMetrics>
#include <QPageSize>
#include <QPdfWriter>
#include <QSaveFile>
#include <QSvgGenerator>

#include "qcustomplot.h"
#include "ui/png_encoder.h"

namespace relulens::ui {

ExportableView::ExportableView(AppState* state, QWidget* parent) : QWidget(parent), state_(state) {}

QSize ExportableView::figureSize() const {
    // The widget's size, but never smaller than a legible figure.
    return size().expandedTo(QSize(800, 600));
}

void ExportableView::setHeading(QCPTextElement* heading, const QString& text) {
    if (!headings_.contains(heading)) heading->parentPlot()->installEventFilter(this);
    headings_[heading] = text;
    fitHeading(heading);
}

void ExportableView::fitHeading(QCPTextElement* heading) {
    const QString text = headings_.value(heading);
    QCustomPlot* plot = heading->parentPlot();
    const int width = std::max(120, plot->width() - 16);
    const QFontMetrics metrics(heading->font());
    QStringList lines;
    for (const QString& line : text.split('\n')) {
        QString current;
        for (const QString& word : line.split(' ')) {
            const QString candidate = current.isEmpty() ? word : current + ' ' + word;
            if (!current.isEmpty() && metrics.horizontalAdvance(candidate) > width) {
                lines << current;
                current = word;
            } else {
                current = candidate;
            }
        }
        lines << current;
    }
    bool cut = false;
    constexpr int kMaxLines = 3;
    if (lines.size() > kMaxLines) {
        lines = lines.mid(0, kMaxLines);
        lines.back() += " …";
        cut = true;
    }
    for (QString& line : lines) {
        if (metrics.horizontalAdvance(line) > width) {
            line = metrics.elidedText(line, Qt::ElideRight, width);
            cut = true;
        }
    }
    heading->setText(lines.join('\n'));
    plot->setToolTip(cut ? text : QString());
}

bool ExportableView::eventFilter(QObject* watched, QEvent* event) {
    if (event->type() == QEvent::Resize) {
        bool fitted = false;
        for (auto it = headings_.begin(); it != headings_.end(); ++it) {
            if (it.key()->parentPlot() == watched) {
                fitHeading(it.key());
                fitted = true;
            }
        }
        if (fitted) static_cast<QCustomPlot*>(watched)->replot(QCustomPlot::rpQueuedReplot);
    }
    return QWidget::eventFilter(watched, event);
}

void ExportableView::setFontScale(double scale) {
    const double factor = scale / fontScale_;
    fontScale_ = scale;
    auto grow = [factor](QFont font) {
        font.setPointSizeF(std::max(4.0, font.pointSizeF() * factor));
        return font;
    };
    for (auto* plot : findChildren<QCustomPlot*>()) {
        for (auto* axis : plot->axisRect()->axes()) {
            axis->setLabelFont(grow(axis->labelFont()));
            axis->setTickLabelFont(grow(axis->tickLabelFont()));
        }
        for (int i = 0; i < plot->plotLayout()->elementCount(); ++i) {
            auto* element = plot->plotLayout()->elementAt(i);
            if (auto* text = qobject_cast<QCPTextElement*>(element))
                text->setFont(grow(text->font()));
            if (auto* scaleElement = qobject_cast<QCPColorScale*>(element)) {
                scaleElement->axis()->setLabelFont(grow(scaleElement->axis()->labelFont()));
                scaleElement->axis()->setTickLabelFont(grow(scaleElement->axis()->tickLabelFont()));
            }
        }
        plot->legend->setFont(grow(plot->legend->font()));
        for (int i = 0; i < plot->itemCount(); ++i) {
            if (auto* text = qobject_cast<QCPItemText*>(plot->item(i)))
                text->setFont(grow(text->font()));
        }
        plot->replot(QCustomPlot::rpQueuedReplot);
    }
    for (auto it = headings_.begin(); it != headings_.end(); ++it) fitHeading(it.key());
    setFont(grow(font()));
    update();
}

QImage ExportableView::renderImage(double scale) {
    const QSize size = figureSize();
    QImage image(QSize(int(size.width() * scale), int(size.height() * scale)),
                 QImage::Format_ARGB32);
    image.fill(Qt::white);
    QCPPainter painter(&image);
    painter.setRenderHint(QPainter::Antialiasing);
    painter.scale(scale, scale);
    renderFigure(&painter, size);
    painter.end();
    return image;
}

bool ExportableView::exportTo(const QString& path, double scale, QString* error) {
    const QString suffix = QFileInfo(path).suffix().toLower();
    QByteArray bytes;
    QBuffer buffer(&bytes);
    buffer.open(QIODevice::WriteOnly);
    const QSize size = figureSize();
    if (suffix == "png") {
        if (!(scale > 0) || scale > 8) {
            *error = "the PNG scale must be between 0 and 8";
            return false;
        }
        // Drawn on white, so three bytes a pixel; one row filter and zlib's fastest level (see
        // png_encoder.h).
        if (!encodePng(renderImage(scale), &bytes, error)) {
            *error = path + ": " + *error;
            return false;
        }
    } else if (suffix == "svg") {
        QSvgGenerator generator;
        generator.setOutputDevice(&buffer);
        generator.setSize(size);
        generator.setViewBox(QRect(QPoint(0, 0), size));
        generator.setTitle("ReluLens — " + title());
        QCPPainter painter(&generator);
        renderFigure(&painter, size);
        painter.end();
    } else if (suffix == "pdf") {
        QPdfWriter writer(&buffer);
        writer.setResolution(72);
        writer.setPageSize(QPageSize(QSizeF(size), QPageSize::Point));
        writer.setPageMargins(QMarginsF(0, 0, 0, 0));
        writer.setCreator("ReluLens");
        writer.setTitle(title());
        QCPPainter painter(&writer);
        renderFigure(&painter, size);
        painter.end();
    } else if (suffix == "csv") {
        bytes = csv().toUtf8();
    } else {
        *error =
            QString("%1: unknown format '%2' (use .png, .svg, .pdf or .csv)").arg(path, suffix);
        return false;
    }
    buffer.close();
    QSaveFile file(path);
    if (!file.open(QIODevice::WriteOnly)) {
        *error = QString("%1: cannot write (%2)").arg(path, file.errorString());
        return false;
    }
    if (file.write(bytes) != bytes.size() || !file.commit()) {
        *error = QString("%1: writing failed (%2); any earlier file is unchanged")
                     .arg(path, file.errorString());
        file.cancelWriting();
        return false;
    }
    return true;
}

}  // namespace relulens::ui
