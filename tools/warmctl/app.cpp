// The command tree shared by one-shot mode and the REPL, and the helpers every command uses.
#include <algorithm>
#include <chrono>
#include <iostream>

#include "commands.hpp"
#include "rpc/convert.hpp"
#include "warm/units.hpp"

namespace warm::ctl {

void run_rpc(command_context& ctx, const std::function<int(connection&)>& body) {
  try {
    ctx.exit_code = body(ctx.s.connect(ctx.options.connect));
    return;
  } catch (const connection_error& e) {
    std::cerr << "warmctl: " << e.what() << "\n";
  }
  ctx.s.drop();  // the body's requests are gone: reconnect on the next command
  ctx.exit_code = exit_usage;
}

int check_status(warm::rpc::Status::Reader status) {
  if (status.getCode() == warm::rpc::Status::Code::OK) return exit_ok;
  std::cerr << "warmctl: " << warm::rpc::code_name(status.getCode()) << ": "
            << warm::rpc::to_std(status.getMessage()) << "\n";
  return exit_server_error;
}

int usage_error(const std::string& message) {
  std::cerr << "warmctl: " << message << "\n";
  return exit_usage;
}

std::unique_ptr<CLI::App> make_app(command_context& ctx) {
  auto app =
      std::make_unique<CLI::App>("warmctl: inspect and drive the warm model cache", "warmctl");
  app->require_subcommand(0, 1);
  app->fallthrough();  // global options may follow the command
  app->add_option("--connect", ctx.options.connect.address,
                  "warmd's address: unix:PATH or HOST:PORT")
      ->capture_default_str();
  app->add_option("--token-file", ctx.options.connect.token_file,
                  "File holding the token a TCP listener wants (warmd --token-file)");
  app->add_flag("--tls", ctx.options.connect.tls,
                "Connect over TLS, checking warmd's certificate against the system's roots "
                "(implied by --tls-*)");
  app->add_option("--tls-ca", ctx.options.connect.tls_ca,
                  "Check warmd's TLS certificate against the CAs in this PEM file");
  app->add_option(
      "--tls-cert", ctx.options.connect.tls_cert,
      "Mutual TLS: present this certificate chain (PEM) to warmd (warmd --tls-client-ca)");
  app->add_option("--tls-key", ctx.options.connect.tls_key,
                  "The --tls-cert certificate's private key (PEM)");
  app->add_option("--tls-server-name", ctx.options.connect.tls_server_name,
                  "The name warmd's certificate must carry (default: the host of --connect)");
  app->add_option_function<std::string>(
      "--connect-timeout",
      [&ctx](const std::string& text) {
        auto d = warm::parse_duration(text);
        if (!d || d->count() <= 0)
          throw CLI::ValidationError("--connect-timeout",
                                     "a positive duration (5s, 500ms), not \"" + text + "\"");
        ctx.options.connect.timeout =
            std::max(std::chrono::milliseconds(1),
                     std::chrono::duration_cast<std::chrono::milliseconds>(*d));
      },
      "Longest wait for warmd to answer a new connection (default 5s)");
  app->add_flag("--json", ctx.options.json, "Print one JSON document per command");
  add_offline_commands(*app, ctx.options.json, ctx.exit_code);
  add_model_commands(*app, ctx);
  add_infer_command(*app, ctx);
  add_inspect_commands(*app, ctx);
  add_version_commands(*app, ctx);
  return app;
}

}  // namespace warm::ctl
