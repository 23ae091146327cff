#include <catch2/catch.hpp>

TEST_CASE("placeholder", "[object_url_test]") {}
