// The load queue's ordering: waiting loads (earliest request first) before proactive loads (most
// recently used first), promotion, cancellation, and skipping entries that are not ready.
#include <catch2/catch.hpp>

#include "core/load_queue.hpp"

using namespace std::chrono_literals;
using warm::load_queue;

namespace {

warm::timestamp at(std::chrono::milliseconds ms) {
  return warm::timestamp{} + ms;
}

std::vector<std::string> order(const load_queue& q) {
  std::vector<std::string> out;
  for (const auto& e : q.snapshot())
    out.push_back(e.model);
  return out;
}

}  // namespace

TEST_CASE("waiting loads come first, earliest request first; proactive by most recent use") {
  load_queue q;
  CHECK(q.push_proactive("old", at(100ms)));
  CHECK(q.push_proactive("recent", at(900ms)));
  CHECK(q.push_waiting("late", at(50ms)));
  CHECK(q.push_waiting("early", at(10ms)));
  CHECK(q.push_proactive("middle", at(500ms)));
  CHECK(order(q) == std::vector<std::string>{"early", "late", "recent", "middle", "old"});
  CHECK(q.pop()->model == "early");
  CHECK(q.pop()->model == "late");
  CHECK(q.pop()->model == "recent");
  CHECK(q.size() == 2);
}

TEST_CASE("a request promotes a queued proactive load at once") {
  load_queue q;
  q.push_waiting("a", at(1ms));
  q.push_proactive("b", at(999ms));
  q.push_proactive("c", at(5ms));
  CHECK_FALSE(q.push_waiting("c", at(20ms)));  // already queued: promoted, not added
  CHECK(q.size() == 3);
  CHECK(q.find("c")->kind == load_queue::priority::waiting);
  CHECK(order(q) == std::vector<std::string>{"a", "c", "b"});
}

TEST_CASE("each model is queued once; the earliest wait and the latest use win") {
  load_queue q;
  q.push_waiting("a", at(30ms));
  q.push_waiting("b", at(20ms));
  CHECK_FALSE(q.push_waiting("a", at(10ms)));  // an earlier waiter moves it up
  CHECK(order(q) == std::vector<std::string>{"a", "b"});
  CHECK_FALSE(q.push_waiting("a", at(40ms)));  // a later one changes nothing
  CHECK(q.find("a")->first_wait == at(10ms));

  q.push_proactive("p", at(1ms));
  q.push_proactive("r", at(2ms));
  CHECK_FALSE(q.push_proactive("p", at(3ms)));  // used again: now the most recent
  CHECK(order(q) == std::vector<std::string>{"a", "b", "p", "r"});
  CHECK_FALSE(q.push_proactive("a", at(99ms)));  // a waiting load stays waiting
  CHECK(q.find("a")->kind == load_queue::priority::waiting);
  CHECK(order(q) == std::vector<std::string>{"a", "b", "p", "r"});
  CHECK(q.size() == 4);
}

TEST_CASE("ties keep arrival order") {
  load_queue q;
  for (const char* m : {"x", "y", "z"})
    q.push_waiting(m, at(7ms));
  CHECK(order(q) == std::vector<std::string>{"x", "y", "z"});
}

TEST_CASE("ties keep arrival order, not name order") {
  // Names arrive in reverse alphabetical order: a tie-break by name would reverse them.
  load_queue q;
  for (const char* m : {"zeta", "mu", "alpha"})
    q.push_waiting(m, at(7ms));
  for (const char* m : {"omega", "kappa", "beta"})
    q.push_proactive(m, at(3ms));
  CHECK(order(q) == std::vector<std::string>{"zeta", "mu", "alpha", "omega", "kappa", "beta"});
  // A promoted load ties with the waiting ones by arrival of its request, after them.
  CHECK_FALSE(q.push_waiting("kappa", at(7ms)));
  CHECK(order(q) == std::vector<std::string>{"zeta", "mu", "alpha", "kappa", "omega", "beta"});
  CHECK(q.pop()->model == "zeta");
  CHECK(q.pop_first([](const load_queue::entry& e) { return e.model != "mu"; })->model == "alpha");
}

TEST_CASE("cancel removes a queued load (unregistration)") {
  load_queue q;
  q.push_waiting("a", at(1ms));
  q.push_proactive("b", at(1ms));
  CHECK(q.cancel("a"));
  CHECK_FALSE(q.cancel("a"));
  CHECK_FALSE(q.contains("a"));
  CHECK(q.pop()->model == "b");
  CHECK(q.empty());
  CHECK_FALSE(q.pop());
}

TEST_CASE("pop_first skips loads that cannot start yet and leaves them in place") {
  load_queue q;
  q.push_waiting("big", at(1ms));
  q.push_waiting("small", at(2ms));
  q.push_proactive("idle", at(3ms));
  auto e = q.pop_first([](const load_queue::entry& x) { return x.model != "big"; });
  REQUIRE(e);
  CHECK(e->model == "small");
  CHECK(order(q) == std::vector<std::string>{"big", "idle"});
  CHECK_FALSE(q.pop_first([](const load_queue::entry&) { return false; }));
  CHECK(q.size() == 2);
}
