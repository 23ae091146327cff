#include <catch2/catch.hpp>

TEST_CASE("placeholder", "[disk_tier_test]") {}
