// S3's XML answers (sources/s3_xml.hpp): listing pages with their continuation, error documents,
// and hostile documents refused without a crash.
#include <catch2/catch.hpp>

#include "sources/s3_xml.hpp"

using namespace warm;
using namespace warm::sources;

TEST_CASE("a ListObjectsV2 page: keys, sizes, entity tags without quotes, continuation") {
  auto page = parse_list_page(R"(<?xml version="1.0" encoding="UTF-8"?>
<ListBucketResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/">
  <Name>models</Name><Prefix>m/</Prefix><KeyCount>2</KeyCount>
  <IsTruncated>true</IsTruncated><NextContinuationToken>tok+/=</NextContinuationToken>
  <Contents><Key>m/1/model.safetensors</Key><Size>18446744073709551615</Size>
    <ETag>&quot;abc123&quot;</ETag></Contents>
  <Contents><Key>m/2/model.pt</Key><Size>0</Size><ETag>"d-2"</ETag></Contents>
</ListBucketResult>)");
  REQUIRE(page);
  REQUIRE(page->objects.size() == 2);
  CHECK(page->objects[0].key == "m/1/model.safetensors");
  CHECK(page->objects[0].size == 18446744073709551615ull);
  CHECK(page->objects[0].etag == "abc123");
  CHECK(page->objects[1].size == 0);
  CHECK(page->objects[1].etag == "d-2");
  CHECK(page->truncated);
  CHECK(page->next_token == "tok+/=");

  auto last =
      parse_list_page("<ListBucketResult><IsTruncated>false</IsTruncated></ListBucketResult>");
  REQUIRE(last);
  CHECK(last->objects.empty());
  CHECK_FALSE(last->truncated);
}

TEST_CASE("hostile or malformed listings are errors, never a crash") {
  for (const char* xml :
       {"", "not xml", "<Error><Code>x</Code></Error>",
        "<ListBucketResult><IsTruncated>true</IsTruncated></ListBucketResult>",
        "<ListBucketResult><Contents><Size>1</Size></Contents></ListBucketResult>",
        "<ListBucketResult><Contents><Key>k</Key><Size>-1</Size></Contents></ListBucketResult>",
        "<ListBucketResult><Contents><Key>k</Key><Size>99999999999999999999</Size></Contents>"
        "</ListBucketResult>",
        "<ListBucketResult><Contents><Key>k</Key><Size>1e3</Size></Contents></ListBucketResult>",
        "<ListBucketResult><Contents><Key>k</Key>"}) {
    INFO(xml);
    auto r = parse_list_page(xml);
    REQUIRE_FALSE(r);
    CHECK(r.error().code == errc::invalid_argument);
  }
}

TEST_CASE("an error document is described by its code and message, printable and short") {
  CHECK(describe_s3_error("<Error><Code>SignatureDoesNotMatch</Code><Message>The request "
                          "signature we calculated does not match</Message></Error>") ==
        "SignatureDoesNotMatch: The request signature we calculated does not match");
  CHECK(describe_s3_error("<Error><Code>NoSuchKey</Code></Error>") == "NoSuchKey");
  CHECK(describe_s3_error("<html>502</html>").empty());
  CHECK(describe_s3_error("").empty());
  auto long_one = describe_s3_error("<Error><Code>X</Code><Message>" + std::string(1000, 'm') +
                                    "\x01\x02</Message></Error>");
  CHECK(long_one.size() == 200);
  CHECK(long_one.find('\x01') == std::string::npos);
}
