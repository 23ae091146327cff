// warm.json manifests: models a model runtime serves, whose files warm does not read. Parsing
// (untrusted text), resolution in a repository, confinement of the manifest's path, and the
// description registration makes of one.
#include <catch2/catch.hpp>

#include <filesystem>
#include <string>

#include "storage/runtime_manifest.hpp"
#include "support/test_files.hpp"
#include "warm/backend.hpp"
#include "warm/model_repository.hpp"

namespace fs = std::filesystem;
using warm::test::temp_dir;
using warm::test::write_file;

namespace {

std::string refusal(const std::string& text) {
  auto parsed = warm::parse_runtime_manifest(text, "m/1/warm.json");
  REQUIRE_FALSE(parsed);
  CHECK(parsed.error().code == warm::errc::invalid_argument);
  CHECK(parsed.error().message.rfind("m/1/warm.json: ", 0) == 0);
  return parsed.error().message;
}

}  // namespace

TEST_CASE("a manifest names the type, the path and an opaque key") {
  auto m = warm::parse_runtime_manifest(
      R"({"type": "sklearn", "path": "model.joblib", "key": {"input_dtype": "FP32"}})", "x");
  REQUIRE(m);
  CHECK(m->type == "sklearn");
  CHECK(m->path == "model.joblib");
  CHECK(m->key == R"({"input_dtype":"FP32"})");  // compact JSON, as the runtime is given it
  auto plain = warm::parse_runtime_manifest(R"({"type": "xgboost", "key": "k 1"})", "x");
  REQUIRE(plain);
  CHECK(plain->path == ".");  // the version directory itself
  CHECK(plain->key == "k 1");
}

TEST_CASE("a malformed or hostile manifest is refused, naming what is wrong") {
  CHECK(refusal("not json").find("not valid JSON") != std::string::npos);
  CHECK(refusal("[1]").find("object") != std::string::npos);
  CHECK(refusal("{}").find("no \"type\"") != std::string::npos);
  CHECK(refusal(R"({"type": 3})").find("\"type\" must be a string") != std::string::npos);
  CHECK(refusal(R"({"type": "Sk learn"})").find("a-z") != std::string::npos);
  CHECK(refusal(R"({"type": ")" + std::string(65, 'a') + "\"}").find("1..64") != std::string::npos);
  CHECK(refusal(R"({"type": "dense"})").find("warm serves itself") != std::string::npos);
  CHECK(refusal(R"({"type": "torchscript"})").find("warm serves itself") != std::string::npos);
  CHECK(refusal(R"({"type": "sklearn", "modelPath": "x"})").find("unknown field \"modelPath\"") !=
        std::string::npos);
  CHECK(refusal(R"({"type": "sklearn", "path": "/etc/passwd"})").find("relative") !=
        std::string::npos);
  CHECK(refusal(R"({"type": "sklearn", "path": "a/../../b"})").find("..") != std::string::npos);
  CHECK(refusal(R"({"type": "sklearn", "path": 1})").find("\"path\" must be a string") !=
        std::string::npos);
  CHECK(refusal(R"({"type": "sklearn", "key": ")" + std::string(warm::manifest_max_key + 1, 'k') +
                "\"}")
            .find("\"key\" is longer") != std::string::npos);
  CHECK(refusal(std::string(warm::manifest_max_bytes + 1, ' ')).find("larger than") !=
        std::string::npos);
  // At the limit exactly, a key is taken.
  CHECK(warm::parse_runtime_manifest(
      R"({"type": "sklearn", "key": ")" + std::string(warm::manifest_max_key, 'k') + "\"}", "x"));
}

TEST_CASE("a version directory holding warm.json is a model of the manifest's type") {
  temp_dir dir;
  write_file(dir / "iris/1/warm.json", R"({"type": "sklearn", "path": "model.joblib"})");
  write_file(dir / "iris/1/model.joblib", std::string(1000, 'p'));
  write_file(dir / "iris/2/warm.json", R"({"type": "sklearn", "path": "files"})");
  write_file(dir / "iris/2/files/a.bin", std::string(300, 'a'));
  write_file(dir / "iris/2/files/sub/b.bin", std::string(200, 'b'));
  auto repo = warm::model_repository::create({dir.path()});
  REQUIRE(repo);
  auto versions = warm::list_versions(dir / "iris");
  REQUIRE(versions);
  CHECK(*versions == std::vector<std::uint64_t>{1, 2});

  auto v1 = repo->resolve("iris", 1);
  REQUIRE(v1);
  CHECK(v1->kind == "sklearn");
  CHECK(v1->path == fs::canonical(dir / "iris/1/warm.json").string());
  auto described = warm::describe_model(*v1);
  REQUIRE(described);
  CHECK(described->kind == "sklearn");
  CHECK(described->predicted_bytes == 1000);  // the file's bytes until a runtime measures it
  CHECK(described->io.inputs.empty());        // known once a runtime has loaded it
  auto manifest = warm::read_runtime_manifest(*v1);
  REQUIRE(manifest);
  CHECK(warm::manifest_target(*v1, *manifest).value() ==
        fs::canonical(dir / "iris/1/model.joblib").string());

  auto v2 = repo->resolve("iris");  // the highest version: a directory of files
  REQUIRE(v2);
  CHECK(v2->version == 2u);
  auto d2 = warm::describe_model(*v2);
  REQUIRE(d2);
  CHECK(d2->predicted_bytes == 500);
}

TEST_CASE("a manifest beside a model file, a bad one, or one leading outside is refused") {
  temp_dir dir;
  write_file(dir / "both/1/warm.json", R"({"type": "sklearn"})");
  write_file(dir / "both/1/model.pt", "x");
  write_file(dir / "bad/1/warm.json", R"({"type": "sklearn", "path": "/tmp"})");
  write_file(dir / "away/1/warm.json", R"({"type": "sklearn", "path": "out"})");
  write_file(dir / "missing/1/warm.json", R"({"type": "sklearn", "path": "nothing"})");
  fs::create_directories(dir / "elsewhere");
  auto root = dir / "repo";
  fs::create_directories(root);
  for (auto name : {"both", "bad", "away", "missing"})
    fs::rename(dir / name, root + "/" + name);
  fs::create_symlink(dir / "elsewhere", root + "/away/1/out");  // leads outside the root
  auto repo = warm::model_repository::create({root});
  REQUIRE(repo);

  auto both = repo->resolve("both");
  REQUIRE_FALSE(both);
  CHECK(both.error().message.find("holds both") != std::string::npos);
  auto bad = repo->resolve("bad");
  REQUIRE_FALSE(bad);
  CHECK(bad.error().message.find("relative") != std::string::npos);
  auto away = repo->resolve("away");
  REQUIRE(away);  // the manifest itself is fine; its path is checked where it is used
  auto d = warm::describe_model(*away);
  REQUIRE_FALSE(d);
  CHECK(d.error().code == warm::errc::invalid_argument);
  CHECK(d.error().message.find("outside the repository root") != std::string::npos);
  auto missing = repo->resolve("missing");
  REQUIRE(missing);
  auto dm = warm::describe_model(*missing);
  REQUIRE_FALSE(dm);
  CHECK(dm.error().code == warm::errc::not_found);
}
