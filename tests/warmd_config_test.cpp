// warmd's config file and durations (tools/warmd/config.hpp), from strings: what each key takes,
// that the command line wins, and that nothing malformed throws (fuzz/warmd_config_fuzz.cpp
// fuzzes the same function).
#include <sys/stat.h>
#include <unistd.h>
#include <CLI/CLI.hpp>
#include <catch2/catch.hpp>

#include <chrono>
#include <cstdlib>
#include <map>
#include <string>

#include "../tools/warmd/config.hpp"
#include "../tools/warmd/served_config.hpp"

namespace {

struct parsed {
  CLI::App app{"warmd"};
  warm::warmd::config c;
  std::string config_file;
  parsed() { warm::warmd::add_options(app, c, config_file); }
  warm::expected<void> apply(const std::string& text) {
    return warm::warmd::apply_config_text(text, "test.toml", app, c);
  }
};

}  // namespace

TEST_CASE("config: the documented example sets every key it names") {
  parsed p;
  REQUIRE(p.apply(R"(repo = ["/srv/models", "/srv/more-models"]
state = "/var/lib/warm"
device = ["host:8GiB", "cuda:0:20GiB"]
policy = "kdf"
max-concurrent-loads = 4
failure-expiry = "5m"
listen = ["unix:/run/warm/warm.sock", "127.0.0.1:7411"]
http = "127.0.0.1:8000"
http-threads = 64
log-level = "info"
allow-remote = false
max-models = 10
inline-inference-limit = 0
)"));
  CHECK(p.c.repo == std::vector<std::string>{"/srv/models", "/srv/more-models"});
  CHECK(p.c.state == "/var/lib/warm");
  CHECK(p.c.device.size() == 2);
  CHECK(p.c.max_concurrent_loads == 4);
  CHECK(p.c.failure_expiry == "5m");
  CHECK(p.c.listen.size() == 2);
  CHECK(p.c.http == "127.0.0.1:8000");
  CHECK(p.c.http_threads == 64);
  CHECK(p.c.max_models == 10);
  CHECK(p.c.inline_inference_limit == 0);
}

TEST_CASE("config: inline-inference-limit from the file and the command line") {
  parsed defaults;
  CHECK(defaults.c.inline_inference_limit == (256 * 256 + 256) * 16);  // 256→256 at batch 16
  parsed file;
  REQUIRE(file.apply("inline-inference-limit = 9223372036854775807\n"));
  CHECK(file.c.inline_inference_limit == 9223372036854775807ull);
  parsed flag;
  const char* argv[] = {"warmd", "--inline-inference-limit", "18446744073709551615"};
  flag.app.parse(3, argv);
  REQUIRE(flag.apply("inline-inference-limit = 5\n"));
  CHECK(flag.c.inline_inference_limit == UINT64_MAX);
}

TEST_CASE("config: a flag given on the command line wins over the file") {
  parsed p;
  const char* argv[] = {"warmd", "--state", "from-flag", "--http-threads", "3"};
  p.app.parse(5, argv);
  REQUIRE(p.apply("state = \"from-file\"\nhttp-threads = 9\npolicy = \"lru\"\n"));
  CHECK(p.c.state == "from-flag");
  CHECK(p.c.http_threads == 3);
  CHECK(p.c.policy == "lru");
}

TEST_CASE("config: malformed text, unknown keys and mistyped values are errors naming the file") {
  for (const char* text : {
           "repo = [\"/m\",\n",          // TOML syntax
           "port = 7411\n",              // unknown key
           "[server]\nrepo = \"/m\"\n",  // a table is an unknown key
           "max-concurrent-loads = \"4\"\n",
           "max-concurrent-loads = 65\n",
           "http-threads = 0\n",
           "max-models = -1\n",
           "inline-inference-limit = -1\n",
           "inline-inference-limit = 1.5\n",
           "inline-inference-limit = \"1M\"\n",
           "device = [\"host:1GiB\", 2]\n",
           "state = 1\n",
           // Integers and booleans take exactly that TOML type (toml++ would convert these).
           "max-models = 4.0\n",
           "max-models = true\n",
           "allow-remote = 1\n",
           "metrics-per-model = \"true\"\n",
           // A float past int64's range: undefined behaviour in toml++'s own conversion.
           "http-threads = 37095592233720368547758081.14\n",
       }) {
    INFO(text);
    parsed p;
    auto r = p.apply(text);
    REQUIRE_FALSE(r);
    CHECK(r.error().code == warm::errc::invalid_argument);
    CHECK(r.error().message.rfind("test.toml: ", 0) == 0);
  }
}

// The promise of docs/configuration.md: a config error names the key and its line.
TEST_CASE("config: errors name the key and the line it is on") {
  struct want {
    const char* text;
    const char* key;
    const char* line;
  };
  for (auto w :
       {want{"state = \"s\"\n\nport = 7411\n", "\"port\"", "(line 3)"},
        want{"# c\nmax-concurrent-loads = \"4\"\n", "\"max-concurrent-loads\"", "(line 2)"},
        want{"repo = \"/m\"\nstate = \"s\"\nhttp-threads = 0\n", "\"http-threads\"", "(line 3)"},
        want{"\n\n\ndevice = [\"host:1GiB\", 2]\n", "\"device\"", "(line 4)"},
        want{"allow-remote = 1\n", "\"allow-remote\"", "(line 1)"},
        want{"\n[server]\nrepo = \"/m\"\n", "\"server\"", "(line 2)"}}) {
    INFO(w.text);
    parsed p;
    auto r = p.apply(w.text);
    REQUIRE_FALSE(r);
    CHECK(r.error().code == warm::errc::invalid_argument);
    CHECK_THAT(r.error().message, Catch::StartsWith("test.toml: ") && Catch::Contains(w.key) &&
                                      Catch::Contains(w.line));
  }
  parsed syntax;  // TOML syntax: the line where toml++ stopped
  auto r = syntax.apply("state = \"s\"\nrepo = [\"/m\",\n");
  REQUIRE_FALSE(r);
  CHECK_THAT(r.error().message, Catch::Contains("(line 3)") || Catch::Contains("(line 2)"));
}

// toml++ 3.3 builds a table per dotted part by recursion: 50,000 parts overflowed the stack.
TEST_CASE("config: a dotted key of 50,000 parts is refused before parsing, naming its line") {
  std::string parts = "a";
  for (int i = 1; i < 50'000; ++i)
    parts += ".a";
  for (const std::string& text :
       {"state = \"s\"\n" + parts + " = 1\n", "state = \"s\"\n[" + parts + "]\n",
        "state = \"s\"\n" + std::string("\"q\"") + std::string(parts, 1) + " = 1\n"}) {
    parsed p;
    auto r = p.apply(text);
    REQUIRE_FALSE(r);
    CHECK(r.error().code == warm::errc::invalid_argument);
    CHECK_THAT(r.error().message,
               Catch::Contains("dotted key of more than 64 parts") && Catch::Contains("(line 2)"));
  }
  // 64 dots on a line are still toml++'s to judge (an unknown key here), and dots in strings and
  // comments never count.
  std::string sixty_five = "a";
  for (int i = 0; i < 64; ++i)
    sixty_five += ".b";
  parsed deep;
  auto r = deep.apply(sixty_five + " = 1\n");
  REQUIRE_FALSE(r);
  CHECK_THAT(r.error().message, Catch::Contains("unknown key \"a\""));
  parsed strings;
  CHECK(
      strings.apply("state = \"" + std::string(200, '.') + "\" # " + std::string(200, '.') + "\n"));
  CHECK(strings.c.state == std::string(200, '.'));
}

TEST_CASE("config: durations") {
  using namespace std::chrono;
  CHECK(warm::warmd::parse_duration("500ms").value() == milliseconds(500));
  CHECK(warm::warmd::parse_duration("30s").value() == seconds(30));
  CHECK(warm::warmd::parse_duration("30").value() == seconds(30));
  CHECK(warm::warmd::parse_duration("10m").value() == minutes(10));
  CHECK(warm::warmd::parse_duration("1min").value() == minutes(1));
  CHECK(warm::warmd::parse_duration("1h").value() == hours(1));
  CHECK(warm::warmd::parse_duration("1.5s").value() == milliseconds(1500));
  for (const char* bad :
       {"", "s", ".", "-1s", "1d", "1.2.3s", "1..2s", "1e3s", "99999999999999999999h", " 1s"}) {
    INFO(bad);
    auto r = warm::warmd::parse_duration(bad);
    REQUIRE_FALSE(r);
    CHECK(r.error().code == warm::errc::invalid_argument);
  }
}

TEST_CASE(
    "config: non-ASCII text is fine in strings and comments, refused elsewhere (toml++ 3.3 UB)") {
  // Debian's toml++ 3.3 reaches __builtin_unreachable() asking whether some non-ASCII characters
  // are whitespace (found by fuzz/warmd_config_fuzz; marzer/tomlplusplus#190, #295): it is handed
  // ASCII only, strings escaped, so values keep every character.
  parsed ok;
  REQUIRE(ok.apply(
      "# mod\xC3\xA8les \xE2\x80\x94 a comment\nrepo = [\"/srv/mod\xC3\xA8les\", "
      "'/srv/\xD0\xBC\\d\"']\n"
      "state = \"\"\"\n\xC3\xA9t\xC3\xA9 \\u00e9 \xF0\x9F\x98\x80\"\"\"\npolicy = '''\xC3\xA9''''\n"
      "http = \"\"\"\\\n   \xC2\xA7\"\"\"\n"));
  CHECK(ok.c.repo == std::vector<std::string>{"/srv/mod\xC3\xA8les", "/srv/\xD0\xBC\\d\""});
  CHECK(ok.c.state == "\xC3\xA9t\xC3\xA9 \xC3\xA9 \xF0\x9F\x98\x80");
  CHECK(ok.c.policy == "\xC3\xA9'");
  CHECK(ok.c.http == "\xC2\xA7");  // a line-ending backslash before a non-ASCII character (#190)

  for (const char* text : {
           "\xC9\xBBrepo = \"/x\"\n", "repo = \"/x\"\xC2\xA7\n", "state = \"a\"\n\xC3\xA9 = 2\n",
           "state = \"\xC3\"\n",                // malformed UTF-8
           "state = \"\"\"\\\xC2\xA7\"\"\"\n",  // no escape
       }) {
    INFO(text);
    parsed p;
    auto r = p.apply(text);
    REQUIRE_FALSE(r);
    CHECK(r.error().message.rfind("test.toml: ", 0) == 0);
    CHECK(r.error().message.find("(line ") != std::string::npos);
  }
  // toml++'s look-ahead through a malformed value ran into the string: now a plain parse error.
  parsed p;
  auto r = p.apply("# x\nrepo =0[\"/srv/mod\xC3\xA8les\"]\n");
  REQUIRE_FALSE(r);
  CHECK(r.error().message.find("(line 2)") != std::string::npos);
}

TEST_CASE("config: per-device policies and the policies' tuning") {
  parsed p;
  REQUIRE(p.apply(R"(device = ["host.0:1GiB@lru", "host.1:2GiB"]
rescore-period = "250ms"
iam-rate = "window"
iam-rate-period = "2m"
iam-bias = 2
kdf-tau = "10m"
kdf-horizon = 0.5
kdf-memory = 20
)"));
  auto devices = warm::warmd::split_device_policies(p.c.device);
  CHECK(devices.specs == std::vector<std::string>{"host.0:1GiB", "host.1:2GiB"});
  CHECK(devices.policies == std::vector<std::string>{"lru", ""});

  warm::policy_options tuning;
  std::chrono::milliseconds period{0};
  REQUIRE(warm::warmd::apply_policy_tuning(p.c, tuning, period));
  CHECK(period == std::chrono::milliseconds(250));
  CHECK(tuning.iam_rate == "window");
  CHECK(tuning.rate_window.count() == Approx(120));
  CHECK(tuning.rate_tau.count() == Approx(120));
  CHECK(tuning.iam_bias == 2);
  CHECK(tuning.kdf_tau->count() == Approx(600));
  CHECK(tuning.kdf_horizon == 0.5);
  CHECK(tuning.kdf_memory == 20);

  auto refused = [&](auto change, const std::string& flag) {
    warm::warmd::config c = p.c;
    change(c);
    auto r = warm::warmd::apply_policy_tuning(c, tuning, period);
    REQUIRE_FALSE(r);
    CHECK(r.error().code == warm::errc::invalid_argument);
    CHECK(r.error().message.find(flag) != std::string::npos);
  };
  refused([](auto& c) { c.rescore_period = "1ms"; }, "--rescore-period");
  refused([](auto& c) { c.rescore_period = "soon"; }, "--rescore-period");
  refused([](auto& c) { c.iam_rate = "median"; }, "--iam-rate");
  refused([](auto& c) { c.iam_rate_period = "0s"; }, "--iam-rate-period");
  refused([](auto& c) { c.iam_bias = 0; }, "--iam-bias");
  refused([](auto& c) { c.kdf_horizon = -1; }, "--kdf-horizon");
  refused([](auto& c) { c.kdf_memory = "0"; }, "--kdf-memory");
  refused([](auto& c) { c.kdf_memory = "20x"; }, "--kdf-memory");
  refused([](auto& c) { c.kdf_memory = "often"; }, "--kdf-memory");
  warm::warmd::config defaults;  // kdf-tau = "auto": no fixed time constant
  warm::policy_options automatic;
  REQUIRE(warm::warmd::apply_policy_tuning(defaults, automatic, period));
  CHECK_FALSE(automatic.kdf_tau.has_value());
  CHECK_FALSE(automatic.kdf_memory.has_value());  // chosen online
  CHECK_FALSE(p.apply("iam-bias = \"two\"\n"));
  CHECK_FALSE(parsed().apply("kdf-memory = true\n"));
  parsed named;
  REQUIRE(named.apply("kdf-memory = \"auto\"\n"));
  CHECK(named.c.kdf_memory == "auto");
}

TEST_CASE("config: the connection, login and watch bounds from the file, with their ranges") {
  parsed p;
  REQUIRE(p.apply(R"(max-connections = 7
max-pending-logins = 3
login-timeout = "2s"
max-failed-logins = 0
max-watchers = 9
max-watchers-per-connection = 2
max-queued-events = 16
)"));
  CHECK(p.c.max_connections == 7);
  CHECK(p.c.max_pending_logins == 3);
  CHECK(p.c.login_timeout == "2s");
  CHECK(p.c.max_failed_logins == 0);
  CHECK(p.c.max_watchers == 9);
  CHECK(p.c.max_watchers_per_connection == 2);
  CHECK(p.c.max_queued_events == 16);
  for (std::string key : {"max-connections", "max-pending-logins", "max-watchers",
                          "max-watchers-per-connection", "max-queued-events"}) {
    parsed bad;
    auto r = bad.apply(key + " = 0\n");
    REQUIRE_FALSE(r);
    CHECK(r.error().message ==
          "test.toml: key \"" + key + "\" must be an integer from 1 to 1048576 (line 1)");
  }
  parsed negative;
  auto r = negative.apply("max-failed-logins = -1\n");
  REQUIRE_FALSE(r);
  CHECK(r.error().message ==
        "test.toml: key \"max-failed-logins\" must be an integer from 0 to 1048576 (line 1)");
}

TEST_CASE("config: cluster mode from the file and the command line, with the lease TTL's range") {
  parsed p;
  REQUIRE(p.apply(R"(cluster = ["http://10.0.0.1:2379", "http://10.0.0.2:2379"]
instance = "gpu-node-7"
advertise = "10.0.0.7:7411"
cluster-name = "prod"
lease-ttl = 20
drain-seconds = 0
)"));
  CHECK(p.c.cluster == std::vector<std::string>{"http://10.0.0.1:2379", "http://10.0.0.2:2379"});
  CHECK(p.c.instance == "gpu-node-7");
  CHECK(p.c.advertise == "10.0.0.7:7411");
  CHECK(p.c.cluster_name == "prod");
  CHECK(p.c.lease_ttl == 20);
  CHECK(p.c.drain_seconds == 0);
  for (auto bad_drain : {"-1", "3601", "\"30s\""}) {
    parsed bad;
    auto r = bad.apply(std::string("drain-seconds = ") + bad_drain + "\n");
    REQUIRE_FALSE(r);
    CHECK(r.error().message ==
          "test.toml: key \"drain-seconds\" must be an integer from 0 to 3600 (seconds) (line 1)");
  }
  for (auto bad_ttl : {"1", "301", "\"10s\""}) {
    parsed bad;
    auto r = bad.apply(std::string("lease-ttl = ") + bad_ttl + "\n");
    REQUIRE_FALSE(r);
    CHECK(r.error().message ==
          "test.toml: key \"lease-ttl\" must be an integer from 2 to 300 (seconds) (line 1)");
  }
  parsed cli;
  const char* argv[] = {"warmd", "--lease-ttl", "5", "--cluster", "http://a:1,http://b:2"};
  cli.app.parse(5, argv);
  REQUIRE(cli.apply("lease-ttl = 30\ncluster = [\"http://c:3\"]\n"));
  CHECK(cli.c.lease_ttl == 5);  // the command line wins
  CHECK(cli.c.cluster == std::vector<std::string>{"http://a:1", "http://b:2"});
  CHECK(cli.c.cluster_name == "warm");
  parsed out_of_range;
  const char* short_ttl[] = {"warmd", "--lease-ttl", "1"};
  CHECK_THROWS(out_of_range.app.parse(3, short_ttl));
}

TEST_CASE("config: a secured etcd from the file and the command line; the password file") {
  parsed p;
  REQUIRE(p.apply(R"(cluster = ["https://10.0.0.1:2379"]
etcd-ca = "/etc/warm/etcd-ca.pem"
etcd-cert = "/etc/warm/node.pem"
etcd-key = "/etc/warm/node.key"
etcd-user = "warm"
etcd-password-file = "/etc/warm/etcd-password"
)"));
  CHECK(p.c.etcd_ca == "/etc/warm/etcd-ca.pem");
  CHECK(p.c.etcd_cert == "/etc/warm/node.pem");
  CHECK(p.c.etcd_key == "/etc/warm/node.key");
  CHECK(p.c.etcd_user == "warm");
  CHECK(p.c.etcd_password_file == "/etc/warm/etcd-password");
  parsed cli;
  const char* argv[] = {"warmd", "--etcd-user", "other", "--etcd-ca", "/ca.pem"};
  cli.app.parse(5, argv);
  REQUIRE(cli.apply("etcd-user = \"warm\"\netcd-ca = \"/file-ca.pem\"\n"));
  CHECK(cli.c.etcd_user == "other");  // the command line wins
  CHECK(cli.c.etcd_ca == "/ca.pem");
  parsed bad;
  auto r = bad.apply("etcd-password-file = 1\n");
  REQUIRE_FALSE(r);
  CHECK(r.error().message == "test.toml: key \"etcd-password-file\" must be a string (line 1)");

  // The password file: its line end dropped; refused when others may read it, or empty, never
  // quoting the password.
  char name[] = "/tmp/warm-etcd-password-XXXXXX";
  const int fd = ::mkstemp(name);  // mode 0600
  REQUIRE(fd >= 0);
  const std::string path = name;
  REQUIRE(::write(fd, "s3cret pass\n", 12) == 12);
  ::close(fd);
  auto read = warm::warmd::read_etcd_password(path);
  REQUIRE(read);
  CHECK(*read == "s3cret pass");
  REQUIRE(::chmod(name, 0640) == 0);
  read = warm::warmd::read_etcd_password(path);
  REQUIRE_FALSE(read);
  CHECK(read.error().code == warm::errc::invalid_argument);
  CHECK(read.error().message.find(path) != std::string::npos);
  CHECK(read.error().message.find("chmod 600") != std::string::npos);
  CHECK(read.error().message.find("s3cret") == std::string::npos);
  REQUIRE(::chmod(name, 0600) == 0);
  REQUIRE(::truncate(name, 0) == 0);
  CHECK_FALSE(warm::warmd::read_etcd_password(path));
  ::unlink(name);
  CHECK_FALSE(warm::warmd::read_etcd_password(path));
}

TEST_CASE("config: dynamic batching from the file and the command line, with its ranges") {
  parsed defaults;
  CHECK(defaults.c.max_batch == 0);  // off
  CHECK(defaults.c.max_queue_delay == "0");
  CHECK(defaults.c.batch_queue == 1024);
  CHECK(defaults.c.auto_batch == 32);  // automatic batching on
  parsed file;
  REQUIRE(
      file.apply("max-batch = 64\nmax-queue-delay = \"500us\"\npreferred-batch = [16, "
                 "64]\nbatch-queue = 9\nauto-batch = 0\n"));
  CHECK(file.c.max_batch == 64);
  CHECK(file.c.auto_batch == 0);
  CHECK(warm::warmd::parse_duration(file.c.max_queue_delay).value() ==
        std::chrono::microseconds(500));
  CHECK(file.c.preferred_batch == std::vector<std::uint64_t>{16, 64});
  CHECK(file.c.batch_queue == 9);
  parsed flag;
  const char* argv[] = {"warmd", "--max-batch",  "8", "--preferred-batch",
                        "2,4",   "--auto-batch", "64"};
  flag.app.parse(7, argv);
  REQUIRE(flag.apply("max-batch = 64\npreferred-batch = [16]\nauto-batch = 4\n"));
  CHECK(flag.c.max_batch == 8);
  CHECK(flag.c.auto_batch == 64);
  CHECK(flag.c.preferred_batch == std::vector<std::uint64_t>{2, 4});
  struct refusal {
    const char* text;
    const char* message;
  };
  for (auto [text, message] : std::vector<refusal>{
           {"max-batch = 65537\n", "key \"max-batch\" must be an integer from 0 to 65536 (line 1)"},
           {"max-batch = -1\n", "key \"max-batch\" must be an integer from 0 to 65536 (line 1)"},
           {"auto-batch = 65537\n",
            "key \"auto-batch\" must be an integer from 0 to 65536 (line 1)"},
           {"batch-queue = 0\n",
            "key \"batch-queue\" must be an integer from 1 to 1048576 (line 1)"},
           {"\npreferred-batch = [4, 0]\n",
            "key \"preferred-batch\" must be an array of integers from 1 to 65536 (line 2)"},
           {"preferred-batch = 4\n",
            "key \"preferred-batch\" must be an array of integers from 1 to 65536 (line 1)"},
       }) {
    parsed bad;
    auto r = bad.apply(text);
    REQUIRE_FALSE(r);
    CHECK(r.error().message == std::string("test.toml: ") + message);
  }
}

TEST_CASE("config: remote sources and the disk tier from the file and the command line") {
  parsed defaults;
  CHECK(defaults.c.fetch_streams == 8);
  CHECK(defaults.c.cache_bytes == "auto");
  CHECK(defaults.c.cache_dir.empty());
  parsed file;
  REQUIRE(
      file.apply("repo = [\"s3://models/prod\", \"/srv/models\"]\n"
                 "s3-endpoint = \"http://127.0.0.1:9000\"\ns3-region = \"eu-west-1\"\n"
                 "fetch-streams = 16\ncache-dir = \"/var/cache/warm\"\n"
                 "cache-bytes = \"20GiB\"\nfetch-part-bytes = \"1MiB\"\n"
                 "load-after-fetch = true\nsource-ca = \"/etc/warm/ca.pem\"\n"));
  CHECK(file.c.repo == std::vector<std::string>{"s3://models/prod", "/srv/models"});
  CHECK(file.c.s3_endpoint == "http://127.0.0.1:9000");
  CHECK(file.c.s3_region == "eu-west-1");
  CHECK(file.c.fetch_streams == 16);
  CHECK(file.c.cache_dir == "/var/cache/warm");
  CHECK(file.c.cache_bytes == "20GiB");
  CHECK(file.c.fetch_part_bytes == "1MiB");
  CHECK(defaults.c.fetch_part_bytes == "8MiB");
  CHECK_FALSE(defaults.c.load_after_fetch);
  CHECK(file.c.load_after_fetch);
  CHECK(file.c.source_ca == "/etc/warm/ca.pem");
  parsed flag;
  const char* argv[] = {"warmd", "--fetch-streams", "2", "--cache-bytes", "1GiB"};
  flag.app.parse(5, argv);
  REQUIRE(flag.apply("fetch-streams = 16\ncache-bytes = \"20GiB\"\n"));
  CHECK(flag.c.fetch_streams == 2);
  CHECK(flag.c.cache_bytes == "1GiB");
  for (const char* text :
       {"fetch-streams = 0\n", "fetch-streams = 65\n", "fetch-streams = \"8\"\n"}) {
    parsed bad;
    auto r = bad.apply(text);
    REQUIRE_FALSE(r);
    CHECK(r.error().message ==
          "test.toml: key \"fetch-streams\" must be an integer from 1 to 64 (line 1)");
  }
}

TEST_CASE("the served-models file: every key, and each error refused whole with its line") {
  auto parsed = warm::warmd::parse_served_models(R"(
[[model]]
name = "mnist"
base-path = "vision/mnist"
versions = "latest:2"
load-policy = "resource-preserving"
labels = { stable = 1, canary = 2 }
force-labels = true
size-hint = "64MiB"
max-batch = 8
max-queue-delay = "2ms"
preferred-batch = [4, 8]
batch-queue = 100

[[model]]
name = "resnet"
)",
                                                 "models.toml");
  REQUIRE(parsed);
  REQUIRE(parsed->models.size() == 2);
  auto& m = parsed->models[0];
  CHECK(m.name == "mnist");
  CHECK(m.base_path == "vision/mnist");
  CHECK(warm::to_string(m.versions) == "latest:2");
  CHECK(m.loading == warm::load_policy::resource_preserving);
  CHECK(m.labels == std::map<std::string, std::uint64_t>{{"canary", 2}, {"stable", 1}});
  CHECK(m.force_labels);
  CHECK(m.size_hint == 64ull << 20);
  REQUIRE(m.batching);
  CHECK(m.batching->max_batch == 8);
  CHECK(m.batching->max_queue_delay == std::chrono::milliseconds(2));
  CHECK(m.batching->preferred_batch == std::vector<std::uint64_t>{4, 8});
  CHECK(m.batching->max_queue == 100);
  auto& r = parsed->models[1];
  CHECK(r.base_path.empty());
  CHECK(warm::to_string(r.versions) == "latest:1");
  CHECK(r.loading == warm::load_policy::availability_preserving);
  CHECK_FALSE(r.batching);
  CHECK_FALSE(r.force_labels);

  auto refused = [](const std::string& text, const std::string& says) {
    INFO(text);
    auto r = warm::warmd::parse_served_models(text, "models.toml");
    REQUIRE_FALSE(r);
    CHECK(r.error().code == warm::errc::invalid_argument);
    INFO(r.error().message);
    CHECK(r.error().message.rfind("models.toml: ", 0) == 0);
    CHECK(r.error().message.find(says) != std::string::npos);
  };
  refused("[[model]]\nname = \"m\"\nversion = \"all\"\n",
          "\"version\" is not known (docs/versions.md lists the keys) (line 3)");
  refused("[[model]]\nname = \"m\"\nversions = \"newest\"\n", "newest");
  refused("[[model]]\nname = \"m\"\nload-policy = \"fast\"\n", "fast");
  refused("[[model]]\nname = \"m\"\nlabels = { stable = \"1\" }\n", "labels.stable");
  refused("[[model]]\nname = \"m\"\nlabels = { stable = 0 }\n", "labels.stable");
  refused("[[model]]\nname = \"m\"\nforce-labels = 1\n", "true or false");
  refused("[[model]]\nname = \"m\"\nsize-hint = \"lots\"\n", "size-hint");
  refused("[[model]]\nname = \"m\"\npreferred-batch = [0]\n", "preferred-batch");
  refused("[[model]]\nversions = \"all\"\n", "has no name");
  refused("[[model]]\nname = \"m@1\"\n", "may not hold '@'");
  refused("[[model]]\nname = \"m\"\n[[model]]\nname = \"m\"\n", "listed twice");
  refused("[[model]]\nname = \"m\"\nbase-path = \"../etc\"\n", "'..'");
  refused("model = \"m\"\n", "[[model]] tables");
  refused("name = \"m\"\n", "\"name\" is not known; models are [[model]] tables");
  refused("[[model]\nname = \"m\"\n", "models.toml");
  auto empty = warm::warmd::parse_served_models("", "models.toml");
  REQUIRE(empty);
  CHECK(empty->models.empty());
}

TEST_CASE(
    "--serve-repo over a remote root: its listing's names, or its error with nothing served") {
  std::vector<std::string> asked;
  warm::expected<std::vector<std::string>> answer =
      std::vector<std::string>{"mnist", "a@b", "bert"};
  warm::warmd::remote_models_fn remote = [&](const std::string& root) {
    asked.push_back(root);
    return answer;
  };
  auto models = warm::warmd::repository_models({"s3://models/prod"}, remote);
  REQUIRE(models);
  CHECK(*models == std::vector<std::string>{"bert", "mnist"});  // a@b cannot be a served model
  CHECK(asked == std::vector<std::string>{"s3://models/prod"});
  auto served = warm::warmd::served_models_for("", true, {"s3://models/prod"}, remote);
  REQUIRE(served);
  CHECK(served->models.size() == 2);

  // A root that cannot be listed now is an error, never an empty repository (which would retire
  // everything it serves).
  answer = warm::make_error(warm::errc::unavailable, "503 SlowDown");
  CHECK(warm::warmd::repository_models({"s3://models/prod"}, remote).error().code ==
        warm::errc::unavailable);
  CHECK(!warm::warmd::served_models_for("", true, {"s3://models/prod"}, remote));
  CHECK(!warm::warmd::repository_models({"HTTPS://files.example/models"}));  // no lister given
}

TEST_CASE("config: a model runtime's memory slack from the file and the command line") {
  parsed defaults;
  CHECK(defaults.c.runtime_rss_slack == "64MiB");
  parsed file;
  REQUIRE(file.apply("runtime-rss-slack = \"4MiB\"\n"));
  CHECK(file.c.runtime_rss_slack == "4MiB");
  parsed flag;
  const char* argv[] = {"warmd", "--runtime-rss-slack", "0"};
  flag.app.parse(3, argv);
  REQUIRE(flag.apply("runtime-rss-slack = \"4MiB\"\n"));
  CHECK(flag.c.runtime_rss_slack == "0");
  parsed bad;
  REQUIRE_FALSE(bad.apply("runtime-rss-slack = 4\n"));
}
