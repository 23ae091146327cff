#include <catch2/catch.hpp>

TEST_CASE("placeholder", "[s3_xml_test]") {}
