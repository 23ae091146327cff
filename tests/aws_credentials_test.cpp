#include <catch2/catch.hpp>

TEST_CASE("placeholder", "[aws_credentials_test]") {}
