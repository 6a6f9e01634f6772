// The window's Qt Test suites: Qt Test and the shared helpers.
#pragma once
#include <QString>
#include <QtTest>

#include "support.h"

#define RL_COMPARE_ROWS(actual, expected, tol)                                                 \
    do {                                                                                       \
        std::string why_;                                                                      \
        if (!relulens::test::matches((actual), (expected), (tol), &why_)) QFAIL(why_.c_str()); \
    } while (0)
