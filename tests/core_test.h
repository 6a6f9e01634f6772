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

namespace relulens::test {

// An attention variant with its length exponent a and (for the family) its function h.
inline core::AttentionSpec spec(core::AttentionKind kind, double a = 1.0,
                                core::FamilyFunction h = core::FamilyFunction::Relu) {
    core::AttentionSpec s;
    s.kind = kind;
    s.lengthExponent = a;
    s.familyFunction = h;
    return s;
}

}  // namespace relulens::test
