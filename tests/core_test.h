// The core's test suites: doctest and the shared helpers, no Qt.
#pragma once
#include <doctest/doctest.h>

#include "support.h"

// Fails the test case, naming the first entry that differs, unless actual matches expected.
#define RL_COMPARE_ROWS(actual, expected, tol)                                        \
    do {                                                                              \
        std::string why_;                                                             \
        if (!relulens::test::matches((actual), (expected), (tol), &why_)) FAIL(why_); \
    } while (0)
