// versions and reload: the served models (docs/versions.md) and re-reading their configuration.
#include <iomanip>
#include <iostream>
#include <sstream>

#include "commands.hpp"
#include "format.hpp"
#include "rpc/convert.hpp"

namespace warm::ctl {
namespace {

namespace r = warm::rpc;

json to_json(const served_model_status& s) {
  json versions = json::array();
  for (auto& v : s.versions)
    versions.push_back({{"version", v.version},
                        {"state", std::string(to_string(v.state))},
                        {"aspired", v.aspired},
                        {"error", v.error},
                        {"retry_in_seconds", v.retry_in_seconds},
                        {"failures", v.failures}});
  json labels = json::object();
  for (auto& [name, version] : s.labels)
    labels[name] = version;
  return {{"name", s.config.name},
          {"base_path", s.config.base_path},
          {"version_policy", to_string(s.config.versions)},
          {"load_policy", std::string(to_string(s.config.loading))},
          {"default_version", s.default_version ? json(*s.default_version) : json(nullptr)},
          {"labels", labels},
          {"versions", versions},
          {"source_error", s.source_error},
          {"rolling", s.rolling}};
}

// NAME  versions POLICY  LOAD-POLICY  default V  labels a=1,b=2 [rolling]
//   V  STATE  aspired|-  error
std::string to_text(const served_model_status& s) {
  std::ostringstream out;
  out << s.config.name << "  versions " << to_string(s.config.versions) << "  "
      << to_string(s.config.loading) << "  default "
      << (s.default_version ? std::to_string(*s.default_version) : std::string("-"));
  if (!s.labels.empty()) {
    out << "  labels ";
    bool first = true;
    for (auto& [name, version] : s.labels) {
      out << (first ? "" : ",") << name << "=" << version;
      first = false;
    }
  }
  if (s.rolling) out << "  rolling";
  out << "\n";
  if (!s.source_error.empty()) out << "  source: " << s.source_error << "\n";
  for (auto& v : s.versions) {
    out << "  " << std::setw(6) << v.version << "  " << std::left << std::setw(9)
        << to_string(v.state) << std::right << (v.aspired ? "aspired" : "-      ");
    if (!v.error.empty()) {
      out << "  " << v.error;
      if (v.state == version_state::error)
        out << " (retry in " << std::fixed << std::setprecision(1) << v.retry_in_seconds
            << "s, failures " << v.failures << ")";
    }
    out << "\n";
  }
  return out.str();
}

void add_versions(CLI::App& app, command_context& ctx) {
  auto* cmd =
      app.add_subcommand("versions", "Served models: versions, their states, default and labels");
  auto name = std::make_shared<std::string>();
  cmd->add_option("NAME", *name, "Only this served model");
  cmd->callback([&ctx, name] {
    run_rpc(ctx, [&](connection& c) {
      auto reply = ctx.s.wait(c.warm().servedModelsRequest().send());
      if (int rc = check_status(reply.getStatus())) return rc;
      std::vector<served_model_status> models;
      for (auto m : reply.getModels()) {
        auto s = r::from_capnp(m);
        if (name->empty() || s.config.name == *name) models.push_back(std::move(s));
      }
      if (!name->empty() && models.empty()) {
        std::cerr << "warmctl: not_found: no served model '" << *name << "'\n";
        return exit_server_error;
      }
      if (ctx.options.json) {
        json doc = json::array();
        for (auto& m : models)
          doc.push_back(to_json(m));
        std::cout << dump_json(name->empty() ? doc : doc[0], 2) << "\n";
      } else {
        if (models.empty()) std::cout << "no served models\n";
        for (auto& m : models)
          std::cout << to_text(m);
      }
      return exit_ok;
    });
  });
}

void add_reload(CLI::App& app, command_context& ctx) {
  auto* cmd = app.add_subcommand(
      "reload", "Re-read warmd's served-models file (and repositories) and apply it");
  cmd->callback([&ctx] {
    run_rpc(ctx, [&](connection& c) {
      auto reply = ctx.s.wait(c.warm().reloadRequest().send());
      if (int rc = check_status(reply.getStatus())) return rc;
      auto n = reply.getModels();
      if (ctx.options.json)
        std::cout << dump_json({{"ok", true}, {"models", n}}, 2) << "\n";
      else
        std::cout << "reloaded: serving " << n << " versioned model(s)\n";
      return exit_ok;
    });
  });
}

}  // namespace

void add_version_commands(CLI::App& app, command_context& ctx) {
  add_versions(app, ctx);
  add_reload(app, ctx);
}

}  // namespace warm::ctl
