// Placement of cluster misses (cluster/miss_placement.hpp) and the placement claim's JSON
// (cluster/records.hpp): a live claim is followed, a dead or stale one is replaced against its
// revision, claims reserve bytes and queue their loads until their instance's next record, and cold
// models placed one after another spread.
#include <catch2/catch.hpp>

#include <map>

#include "cluster/miss_placement.hpp"

using namespace warm;
using namespace warm::cluster;

namespace {

constexpr std::int64_t now = 1'800'000'000'000;  // ms
constexpr std::int64_t life = 60'000;

member instance(const std::string& name, std::uint64_t capacity, std::uint64_t used,
                std::int64_t revision, bool self = false) {
  member m;
  m.record.name = name;
  m.record.address = "unix:/run/" + name;
  m.record.loading_threads = 2;
  m.record.devices.push_back({"host", "lru", capacity, used, 0, 0, {}});
  m.mod_revision = revision;
  m.self = self;
  return m;
}

known_claim claim(const std::string& model, const std::string& on, std::uint64_t bytes,
                  std::int64_t revision, std::int64_t age_ms = 0) {
  return {model, {on, "a", bytes, now - age_ms}, revision};
}

placement_inputs inputs(std::vector<member> members, std::vector<known_claim> claims = {}) {
  placement_inputs in;
  in.members = std::move(members);
  in.claims = std::move(claims);
  in.model = "m";
  in.request = {100, 1.0};
  in.now_unix_ms = now;
  in.claim_life_ms = life;
  return in;
}

using action = placement_decision::action;

}  // namespace

TEST_CASE("a placement claim's JSON both ways, refusals naming key and field") {
  placement_claim c{"node-2", "node-1", 123456789012, now};
  auto back = decode_claim("/warm/w/claims/m", encode(c));
  REQUIRE(back);
  CHECK(back->instance == "node-2");
  CHECK(back->by == "node-1");
  CHECK(back->bytes == 123456789012);
  CHECK(back->claimed_unix_ms == now);
  CHECK(claim_key("/warm/w/", "m") == "/warm/w/placement/claims/m");
  CHECK(claims_prefix("/warm/w/") == "/warm/w/placement/claims/");
  CHECK(placed_key("/warm/w/", "i1") == "/warm/w/placement/instances/i1");
  CHECK(placement_prefix("/warm/w/") == "/warm/w/placement/");
  CHECK(encode_placed("m") == R"({"model":"m"})");

  auto refused = [](const char* text) {
    auto r = decode_claim("/warm/w/claims/m", text);
    return r ? std::string() : r.error().message;
  };
  CHECK(refused("[]") == "placement claim at /warm/w/claims/m: not a JSON object");
  CHECK(refused(R"({"instance":"a b","by":"a","bytes":1,"claimed_unix_ms":1})") ==
        "placement claim at /warm/w/claims/m: instance must be a valid instance name");
  CHECK(refused(R"({"instance":"a","by":"a","bytes":-1,"claimed_unix_ms":1})") ==
        "placement claim at /warm/w/claims/m: bytes must be in range");
  CHECK(refused(R"({"instance":"a","by":"a","bytes":1})") ==
        "placement claim at /warm/w/claims/m: claimed_unix_ms must be an integer");
}

TEST_CASE("a live claim is followed; on this instance it is served here") {
  auto in = inputs(
      {instance("a", 1000, 0, 5, true), instance("b", 1000, 900, 5), instance("c", 1000, 0, 5)},
      {claim("m", "b", 100, 9, life - 1)});
  auto d = decide_placement(in);
  CHECK(d.what == action::follow);
  CHECK(d.instance == "b");
  CHECK(d.address == "unix:/run/b");

  in.claims = {claim("m", "a", 100, 9)};
  CHECK(decide_placement(in).what == action::serve_here);
}

TEST_CASE(
    "a claim that is stale, or whose instance is gone or draining, is replaced against its "
    "revision") {
  auto members = std::vector<member>{instance("a", 1000, 500, 5, true), instance("b", 1000, 0, 5)};
  SECTION("stale: as old as claim_life") {
    auto d = decide_placement(inputs(members, {claim("m", "a", 100, 9, life)}));
    CHECK(d.what == action::claim);
    CHECK(d.instance == "b");
    CHECK(d.expected_revision == 9);
  }
  SECTION("its instance is gone") {
    auto d = decide_placement(inputs(members, {claim("m", "z", 100, 9)}));
    CHECK(d.what == action::claim);
    CHECK(d.expected_revision == 9);
  }
  SECTION("its instance is draining") {
    members[1].record.draining = true;
    auto d = decide_placement(inputs(members, {claim("m", "b", 100, 9)}));
    CHECK(d.what == action::claim);
    CHECK(d.instance == "a");  // the draining instance is no candidate either
    CHECK(d.self);
    CHECK(d.expected_revision == 9);
  }
  SECTION("no claim: the key must not exist") {
    auto d = decide_placement(inputs(members));
    CHECK(d.what == action::claim);
    CHECK(d.instance == "b");
    CHECK_FALSE(d.self);
    CHECK(d.expected_revision == 0);
    CHECK(d.placed_revision == 0);  // nothing placed on b yet
  }
  SECTION("the chosen instance's placement key is compared too") {
    auto in = inputs(members);
    in.placed_revisions = {{"a", 7}, {"b", 12}};
    auto d = decide_placement(in);
    CHECK(d.instance == "b");
    CHECK(d.placed_revision == 12);
  }
}

TEST_CASE("a failed load keeps placement away from its instance for failure_life") {
  auto members = std::vector<member>{instance("a", 1000, 500, 5, true), instance("b", 1000, 0, 5),
                                     instance("c", 1000, 100, 5)};
  auto in = inputs(members);
  CHECK(decide_placement(in).instance == "b");
  in.failures = {{"m", "b", now - 1000}, {"other", "c", now}};
  auto d = decide_placement(in);
  CHECK(d.what == action::claim);
  CHECK(d.instance == "c");  // b failed m; c's failure is another model's
  in.failures = {{"m", "b", now - in.failure_life_ms}};
  CHECK(decide_placement(in).instance == "b");  // expired
  in.failures = {{"m", "b", now - in.failure_life_ms + 1}};
  CHECK(decide_placement(in).instance == "c");

  // A live claim naming the failed instance is not followed: placed again against its revision.
  in = inputs(members, {claim("m", "b", 100, 9)});
  CHECK(decide_placement(in).what == action::follow);
  in.failures = {{"m", "b", now}};
  d = decide_placement(in);
  CHECK(d.what == action::claim);
  CHECK(d.instance == "c");
  CHECK(d.expected_revision == 9);

  // Failed everywhere: served here.
  in.failures = {{"m", "a", now}, {"m", "b", now}, {"m", "c", now}};
  CHECK(decide_placement(in).what == action::serve_here);
}

TEST_CASE("a placement failure's JSON both ways") {
  auto back = decode_failure("k", encode(placement_failure{"load_failed: bad header", now}));
  REQUIRE(back);
  CHECK(back->error == "load_failed: bad header");
  CHECK(back->failed_unix_ms == now);
  CHECK(failure_key("/warm/w/", "m@2", "i1") == "/warm/w/placement/failures/m@2/i1");
  auto bad = decode_failure("k", R"({"error":1,"failed_unix_ms":1})");
  REQUIRE_FALSE(bad);
  CHECK(bad.error().message == "placement failure at k: error must be a string");
}

TEST_CASE("nowhere to place: served here") {
  CHECK(decide_placement(inputs({})).what == action::serve_here);
  auto draining = instance("b", 1000, 0, 5);
  draining.record.draining = true;
  CHECK(decide_placement(inputs({draining})).what == action::serve_here);
  auto small = instance("b", 50, 0, 5);  // smaller than the model
  CHECK(decide_placement(inputs({small})).what == action::serve_here);
}

TEST_CASE(
    "a claim reserves its bytes until its instance's next record, or until it lists the model") {
  // a and b equally empty: a wins ties (by order) unless a claim made after a's record reserves
  // room on it.
  auto members = std::vector<member>{instance("a", 1000, 0, 10), instance("b", 1000, 0, 10)};
  CHECK(decide_placement(inputs(members)).instance == "a");
  CHECK(decide_placement(inputs(members, {claim("x", "a", 300, 11)})).instance == "b");
  // The claim is older than a's record: the record counts the load already.
  CHECK(decide_placement(inputs(members, {claim("x", "a", 300, 10)})).instance == "a");
  // A stale claim reserves nothing.
  CHECK(decide_placement(inputs(members, {claim("x", "a", 300, 11, life)})).instance == "a");
  // A claim whose model a already lists as resident reserves nothing either.
  members[0].record.residents = {"x"};
  CHECK(decide_placement(inputs(members, {claim("x", "a", 300, 11)})).instance == "a");
}

TEST_CASE("cold models placed one after another spread over equal instances") {
  // The herd: records published before the storm, so without reservations every placement would
  // choose the same instance.
  std::vector<member> members;
  for (const char* name : {"a", "b", "c", "d"})
    members.push_back(instance(name, 10'000, 0, 100));
  std::vector<known_claim> claims;
  std::map<std::string, int> placed;
  for (int i = 0; i < 40; ++i) {
    auto in = inputs(members, claims);
    in.model = "cold-" + std::to_string(i);
    in.request.bytes = 100 + 10 * (i % 3);
    auto d = decide_placement(in);
    REQUIRE(d.what == action::claim);
    ++placed[d.instance];
    claims.push_back({in.model, {d.instance, "a", in.request.bytes, now}, 101 + i});
  }
  for (const auto& [name, count] : placed) {
    INFO(name);
    CHECK(count >= 9);
    CHECK(count <= 11);
  }
}

TEST_CASE("small cold models spread by their queued loads even onto fuller instances") {
  // Every instance has room for all of them, one much more than the others: without counting
  // the loads claimed on it, every placement would queue behind the same instance's loads.
  std::vector<member> members{instance("a", 10'000, 0, 100), instance("b", 10'000, 6'000, 100),
                              instance("c", 10'000, 6'000, 100)};
  std::vector<known_claim> claims;
  std::map<std::string, int> placed;
  for (int i = 0; i < 12; ++i) {
    auto in = inputs(members, claims);
    in.model = "small-" + std::to_string(i);
    in.request = {10, 1.0};
    auto d = decide_placement(in);
    REQUIRE(d.what == action::claim);
    ++placed[d.instance];
    claims.push_back({in.model, {d.instance, "a", in.request.bytes, now}, 101 + i});
  }
  CHECK(placed["a"] == 4);
  CHECK(placed["b"] == 4);
  CHECK(placed["c"] == 4);
}

TEST_CASE("a miss goes to the copy with the fewest of this instance's requests in flight") {
  std::vector<holder> holders{{"a", "unix:/a", 0, false, true},  // this instance: never
                              {"b", "unix:/b", 0, false, false},
                              {"c", "unix:/c", 0, false, false},
                              {"d", "unix:/d", 0, true, false}};  // draining: never
  std::map<std::string, std::uint32_t> requests{{"unix:/b", 3}, {"unix:/c", 2}, {"unix:/d", 0}};
  auto asked = [&](const std::string& address) { return requests[address]; };
  REQUIRE(choose_holder(holders, asked));
  CHECK(choose_holder(holders, asked)->name == "c");
  requests["unix:/c"] = 3;  // a tie: the fewest loads, then by name
  CHECK(choose_holder(holders, asked)->name == "b");
  holders[1].loads_in_flight = 1;
  CHECK(choose_holder(holders, asked)->name == "c");
  // One copy to choose from: its requests are not asked for.
  int calls = 0;
  std::vector<holder> one{{"b", "unix:/b", 0, false, false}};
  CHECK(choose_holder(one, [&](const std::string&) {
          ++calls;
          return 0u;
        })->name == "b");
  CHECK(calls == 0);
  CHECK(choose_holder({holders[0], holders[3]}, asked) == nullptr);
}
