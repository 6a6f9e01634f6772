#include "ui/png_encoder.h"

#include <png.h>

#include <csetjmp>
#include <cstring>

namespace relulens::ui {

namespace {

struct Sink {
    QByteArray* out;
    char message[256];
};

void append(png_structp png, png_bytep data, png_size_t size) {
    auto* sink = static_cast<Sink*>(png_get_io_ptr(png));
    sink->out->append(reinterpret_cast<const char*>(data), qsizetype(size));
}

void flush(png_structp) {}

// libpng's errors unwind by longjmp to encodePng's setjmp; warnings are dropped.
[[noreturn]] void fail(png_structp png, png_const_charp message) {
    auto* sink = static_cast<Sink*>(png_get_error_ptr(png));
    std::strncpy(sink->message, message ? message : "unknown error", sizeof sink->message - 1);
    png_longjmp(png, 1);
}

void warn(png_structp, png_const_charp) {}

}  // namespace

bool encodePng(const QImage& image, QByteArray* out, QString* error) {
    // Everything with a destructor is made before setjmp: a longjmp skips no destructor.
    const QImage rgb = image.convertToFormat(QImage::Format_RGB888);
    out->clear();
    out->reserve(qsizetype(rgb.sizeInBytes() / 8));
    Sink sink{out, {}};
    png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, &sink, fail, warn);
    png_infop info = png ? png_create_info_struct(png) : nullptr;
    if (!png || !info) {
        png_destroy_write_struct(&png, nullptr);
        *error = "cannot start the PNG encoder (out of memory)";
        return false;
    }
    if (setjmp(png_jmpbuf(png))) {
        png_destroy_write_struct(&png, &info);
        out->clear();
        *error = QString("PNG encoding failed: %1").arg(QString::fromUtf8(sink.message));
        return false;
    }
    png_set_write_fn(png, &sink, append, flush);
    png_set_IHDR(png, info, png_uint_32(rgb.width()), png_uint_32(rgb.height()), 8,
                 PNG_COLOR_TYPE_RGB, PNG_INTERLACE_NONE, PNG_COMPRESSION_TYPE_DEFAULT,
                 PNG_FILTER_TYPE_DEFAULT);
    if (rgb.dotsPerMeterX() > 0 && rgb.dotsPerMeterY() > 0) {
        png_set_pHYs(png, info, png_uint_32(rgb.dotsPerMeterX()), png_uint_32(rgb.dotsPerMeterY()),
                     PNG_RESOLUTION_METER);
    }
    png_set_filter(png, PNG_FILTER_TYPE_BASE, PNG_FILTER_UP);
    png_set_compression_level(png, 1);
    png_write_info(png, info);
    for (int y = 0; y < rgb.height(); ++y) {
        png_write_row(png, const_cast<png_bytep>(rgb.constScanLine(y)));
    }
    png_write_end(png, info);
    png_destroy_write_struct(&png, &info);
    return true;
}

}  // namespace relulens::ui
