// The entry point every core test suite links: doctest's runner, with its command line
// (--test-case=NAME, --list-test-cases, --success, ...).
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>
