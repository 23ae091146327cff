// Catch2's main for builds that take Catch2 from subprojects/ (Debian's package ships it prebuilt
// as libCatch2WithMain.a, which tests/meson.build links instead).
#define CATCH_CONFIG_MAIN
#include <catch2/catch.hpp>
