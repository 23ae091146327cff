// register, unregister, status, ensure, models and vmodel: one RPC each (models: one per page).
#include <chrono>
#include <iostream>
#include <memory>
#include <optional>

#include <unistd.h>

#include "commands.hpp"
#include "format.hpp"
#include "rpc/convert.hpp"
#include "warm/units.hpp"

namespace warm::ctl {
namespace {

namespace r = warm::rpc;

// Prints a settled action: `text` for people, {"ok": true, ...fields} for --json.
int done(const command_context& ctx, const std::string& text, json fields) {
  if (ctx.options.json) {
    json doc = {{"ok", true}};
    doc.update(fields);
    std::cout << dump_json(doc, 2) << "\n";
  } else {
    std::cout << text << "\n";
  }
  return exit_ok;
}

void add_register(CLI::App& app, command_context& ctx) {
  auto* cmd =
      app.add_subcommand("register", "Register model ID at PATH (relative to a repository root)");
  struct args_t {
    std::string id, path, size_hint, max_queue_delay;
    std::uint64_t version = 0;
    bool load = false, sync = false;
    std::optional<std::uint64_t> max_batch, batch_queue;
    std::vector<std::uint64_t> preferred_batch;
  };
  auto a = std::make_shared<args_t>();
  cmd->add_option("ID", a->id, "Model id")->required();
  cmd->add_option("PATH", a->path,
                  "Model directory relative to a repository root (NAME or NAME/VERSION), or a "
                  "model's URL (s3://BUCKET/KEY, https://HOST/PATH)")
      ->required();
  cmd->add_option("--version", a->version, "Version directory (default: the highest present)");
  cmd->add_option("--size-hint", a->size_hint,
                  "Bytes on a device, e.g. 64MiB (default: from the file header)");
  cmd->add_flag("--load", a->load, "Queue a load right away");
  cmd->add_flag("--sync", a->sync, "Answer once the model is loaded (or failed to load)");
  auto* batching = "Batching (any of these replaces the server's batching settings for this model)";
  cmd->add_option("--max-batch", a->max_batch,
                  "Most rows in one pass over the weights (0 or 1: not batched)")
      ->group(batching);
  cmd->add_option("--max-queue-delay", a->max_queue_delay,
                  "How long the oldest request waits for more, e.g. 500us (default 0: no waiting)")
      ->group(batching);
  cmd->add_option("--preferred-batch", a->preferred_batch,
                  "Batch sizes run as soon as formed, e.g. 8,16")
      ->delimiter(',')
      ->group(batching);
  cmd->add_option("--batch-queue", a->batch_queue, "Requests queued at most (default 1024)")
      ->group(batching);
  cmd->callback([&ctx, a] {
    std::uint64_t hint = 0;
    if (!a->size_hint.empty()) {
      auto parsed = parse_bytes(a->size_hint);
      if (!parsed) {
        ctx.exit_code = usage_error("--size-hint: " + parsed.error().message);
        return;
      }
      hint = *parsed;
    }
    model_info info(a->path, a->version ? std::optional(a->version) : std::nullopt,
                    hint ? std::optional(hint) : std::nullopt);
    if (a->max_batch || a->batch_queue || !a->max_queue_delay.empty() ||
        !a->preferred_batch.empty()) {
      if (!a->max_batch) {
        ctx.exit_code = usage_error("--max-batch is required with the other batching options");
        return;
      }
      batching_options b;
      b.max_batch = a->max_batch.value_or(0);
      b.max_queue = a->batch_queue.value_or(b.max_queue);
      b.preferred_batch = a->preferred_batch;
      if (!a->max_queue_delay.empty()) {
        auto delay = parse_duration(a->max_queue_delay);
        if (!delay) {
          ctx.exit_code = usage_error("--max-queue-delay: " + delay.error().message);
          return;
        }
        b.max_queue_delay = std::chrono::duration_cast<std::chrono::microseconds>(*delay);
      }
      info.batching = std::move(b);
    }
    run_rpc(ctx, [&](connection& c) {
      auto req = c.warm().registerModelRequest();
      req.setId(a->id);
      r::to_capnp(info, req.initInfo());
      req.setLoadNow(a->load || a->sync);
      req.setSync(a->sync);
      auto reply = ctx.s.wait(req.send());
      if (int rc = check_status(reply.getStatus())) return rc;
      return done(ctx,
                  "registered " + a->id +
                      (a->sync   ? " (loaded)"
                       : a->load ? " (load queued)"
                                 : ""),
                  {{"id", a->id}, {"path", a->path}});
    });
  });
}

void add_unregister(CLI::App& app, command_context& ctx) {
  auto* cmd =
      app.add_subcommand("unregister", "Unregister model ID (it unloads in the background)");
  auto id = std::make_shared<std::string>();
  cmd->add_option("ID", *id, "Model id")->required();
  cmd->callback([&ctx, id] {
    run_rpc(ctx, [&](connection& c) {
      auto req = c.warm().unregisterModelRequest();
      req.setId(*id);
      auto reply = ctx.s.wait(req.send());
      if (int rc = check_status(reply.getStatus())) return rc;
      return done(ctx, "unregistered " + *id, {{"id", *id}});
    });
  });
}

void add_retry(CLI::App& app, command_context& ctx) {
  auto* cmd = app.add_subcommand(
      "retry",
      "Forget model ID's load failures: its next use loads it at once (after fixing its file)");
  auto id = std::make_shared<std::string>();
  cmd->add_option("ID", *id, "Model or vmodel id")->required();
  cmd->callback([&ctx, id] {
    run_rpc(ctx, [&](connection& c) {
      auto req = c.warm().retryRequest();
      req.setId(*id);
      auto reply = ctx.s.wait(req.send());
      if (int rc = check_status(reply.getStatus())) return rc;
      return done(ctx, "failures of " + *id + " forgotten", {{"id", *id}});
    });
  });
}

int print_error(const warm::error& err) {
  std::cerr << "warmctl: " << err.to_string() << "\n";
  return exit_server_error;
}

void add_status(CLI::App& app, command_context& ctx) {
  auto* cmd =
      app.add_subcommand("status", "Show model ID's state and statistics (unknown id: exit 1)");
  auto id = std::make_shared<std::string>();
  auto version = std::make_shared<std::string>();
  cmd->add_option("ID", *id, "Model id (a served model's version: NAME@VERSION)")->required();
  cmd->add_option("--version", *version, "A served model's version: the same as ID@VERSION");
  cmd->callback([&ctx, id, version] {
    if (!version->empty()) *id += "@" + *version;
    run_rpc(ctx, [&](connection& c) {
      auto resolved = resolve_status(ctx, c, *id);
      if (!resolved) return print_error(resolved.error());
      const auto& status = resolved->model;
      // In a cluster, where the model's copies are and who loads it (left out when the server
      // runs alone or does not answer clusterInfo).
      std::optional<cluster_copies> where;
      auto reply = ctx.s.wait(c.warm().clusterInfoRequest().send());
      if (reply.getStatus().getCode() == r::Status::Code::OK && reply.getCluster().getEnabled())
        where = copies_of(r::from_capnp(reply.getCluster()), status.id);
      if (ctx.options.json) {
        auto doc = where ? to_json(status, *where) : to_json(status);
        if (!resolved->vmodel.empty()) doc["vmodel"] = resolved->vmodel;
        std::cout << dump_json(doc, 2) << "\n";
      } else {
        print_model_status(std::cout, status, resolved->vmodel);
        if (where) print_copies(std::cout, *where);
      }
      return exit_ok;
    });
  });
}

// While `pending` (ensureLoaded --sync) runs, polls the model's status every 100 ms and draws
// a progress bar of the bytes copied on stderr (a terminal only). Erases it when done.
template <class Pending>
void show_progress(command_context& ctx, connection& c, const std::string& id, Pending& pending) {
  auto& timer = ctx.s.io().provider->getTimer();
  bool drawn = false;
  while (!pending.poll(ctx.s.wait_scope())) {
    timer.afterDelay(100 * kj::MILLISECONDS).wait(ctx.s.wait_scope());
    if (pending.poll(ctx.s.wait_scope())) break;
    auto req = c.warm().getModelStatusRequest();
    req.setId(id);
    auto st = ctx.s.wait(req.send()).getModel();
    if (st.getState() != r::ModelState::LOADING || st.getBytes() == 0) continue;
    double fraction = static_cast<double>(st.getLoadedBytes()) / static_cast<double>(st.getBytes());
    int filled = static_cast<int>(fraction * 30);
    std::cerr << "\r[" << std::string(filled, '#') << std::string(30 - filled, ' ') << "] "
              << format_bytes(st.getLoadedBytes()) << " / " << format_bytes(st.getBytes()) << "   "
              << std::flush;
    drawn = true;
  }
  if (drawn) std::cerr << "\r" << std::string(70, ' ') << "\r" << std::flush;
}

void add_ensure(CLI::App& app, command_context& ctx) {
  auto* cmd = app.add_subcommand("ensure", "Load model (or vmodel) ID if needed; counts as a use");
  auto id = std::make_shared<std::string>();
  auto sync = std::make_shared<bool>(false);
  cmd->add_option("ID", *id, "Model or vmodel id")->required();
  cmd->add_flag("--sync", *sync, "Wait until it is loaded");
  cmd->callback([&ctx, id, sync] {
    run_rpc(ctx, [&](connection& c) {
      auto started = std::chrono::steady_clock::now();
      auto req = c.warm().ensureLoadedRequest();
      req.setId(*id);
      req.setSync(*sync);
      auto pending = req.send();
      if (*sync && !ctx.options.json && isatty(STDERR_FILENO)) show_progress(ctx, c, *id, pending);
      auto reply = ctx.s.wait(std::move(pending));
      if (int rc = check_status(reply.getStatus())) return rc;
      double ms =
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - started)
              .count();
      std::string text =
          *sync ? *id + " loaded (waited " + std::to_string(static_cast<long long>(ms)) + "ms)"
                : *id + ": load requested";
      return done(ctx, text, {{"id", *id}, {"sync", *sync}, {"wait_ms", ms}});
    });
  });
}

void add_models(CLI::App& app, command_context& ctx) {
  auto* cmd =
      app.add_subcommand("models", "List registered models in id order (all pages by default)");
  auto after = std::make_shared<std::string>();
  auto limit = std::make_shared<std::uint32_t>(0);
  cmd->add_option("--after", *after, "Start after this id");
  cmd->add_option("--limit", *limit, "Fetch one page of at most N models (prints the next id)");
  cmd->callback([&ctx, after, limit] {
    run_rpc(ctx, [&](connection& c) {
      std::vector<model_status> models;
      std::string cursor = *after;
      bool one_page = *limit > 0;
      for (;;) {
        auto req = c.warm().listModelsRequest();
        req.setAfter(cursor);
        req.setLimit(*limit);
        auto reply = ctx.s.wait(req.send());
        if (int rc = check_status(reply.getStatus())) return rc;
        for (auto m : reply.getModels())
          models.push_back(r::from_capnp(m));
        std::string next = r::to_std(reply.getNext());
        if (next.empty() || next == cursor || one_page) {
          cursor = next;
          break;
        }
        cursor = next;
      }
      if (ctx.options.json) {
        json list = json::array();
        for (const auto& m : models)
          list.push_back(to_json(m));
        json doc = {{"models", list}};
        if (one_page) doc["next"] = cursor;
        std::cout << dump_json(doc, 2) << "\n";
      } else {
        print_models(std::cout, models);
        if (one_page && !cursor.empty()) std::cout << "next: --after " << cursor << "\n";
      }
      return exit_ok;
    });
  });
}

void add_vmodel(CLI::App& app, command_context& ctx) {
  auto* vm = app.add_subcommand("vmodel", "Virtual models: set, delete, status");
  vm->require_subcommand(1);
  auto vid = std::make_shared<std::string>();
  auto target = std::make_shared<std::string>();
  auto expect = std::make_shared<std::string>();
  auto auto_delete = std::make_shared<bool>(false);

  auto print = [&ctx](r::VModelStatus::Reader reader) {
    auto status = r::from_capnp(reader);
    if (ctx.options.json)
      std::cout << dump_json(to_json(status), 2) << "\n";
    else
      print_vmodel_status(std::cout, status);
    return exit_ok;
  };

  auto* set = vm->add_subcommand(
      "set", "Point VID at model TARGET (the active model serves until TARGET is loaded)");
  set->add_option("VID", *vid, "Vmodel id")->required();
  set->add_option("TARGET", *target, "Model id")->required();
  auto* expect_opt =
      set->add_option("--expect", *expect, "Only if the current target is OLD (compare-and-set)");
  set->add_flag("--auto-delete", *auto_delete, "Unregister TARGET once no vmodel uses it");
  set->callback([&ctx, vid, target, expect, auto_delete, expect_opt, print] {
    run_rpc(ctx, [&](connection& c) {
      auto req = c.warm().setVModelRequest();
      req.setId(*vid);
      req.setTarget(*target);
      req.setAutoDeleteTarget(*auto_delete);
      if (expect_opt->count() > 0) req.setExpectedTarget(*expect);
      auto reply = ctx.s.wait(req.send());
      if (int rc = check_status(reply.getStatus())) return rc;
      return print(reply.getVmodel());
    });
  });

  auto* del = vm->add_subcommand("delete", "Delete vmodel VID");
  del->add_option("VID", *vid, "Vmodel id")->required();
  del->callback([&ctx, vid] {
    run_rpc(ctx, [&](connection& c) {
      auto req = c.warm().deleteVModelRequest();
      req.setId(*vid);
      auto reply = ctx.s.wait(req.send());
      if (int rc = check_status(reply.getStatus())) return rc;
      return done(ctx, "deleted vmodel " + *vid, {{"id", *vid}});
    });
  });

  auto* st = vm->add_subcommand("status", "Show vmodel VID (unknown: exit 1)");
  st->add_option("VID", *vid, "Vmodel id")->required();
  st->callback([&ctx, vid, print] {
    run_rpc(ctx, [&](connection& c) {
      auto req = c.warm().getVModelStatusRequest();
      req.setId(*vid);
      auto reply = ctx.s.wait(req.send());
      if (int rc = check_status(reply.getStatus())) return rc;
      return print(reply.getVmodel());
    });
  });
}

}  // namespace

expected<resolved_status> resolve_status(command_context& ctx, connection& c,
                                         const std::string& id) {
  auto model_status_of = [&](const std::string& model) -> expected<model_status> {
    auto req = c.warm().getModelStatusRequest();
    req.setId(model);
    auto reply = ctx.s.wait(req.send());
    if (auto st = r::from_capnp(reply.getStatus()); !st) return st.error();
    return r::from_capnp(reply.getModel());
  };
  auto status = model_status_of(id);
  if (!status) return status.error();
  if (status->state != model_state::not_found) return resolved_status{std::move(*status), {}};
  auto active_of =
      [&](const std::string& vmodel) -> expected<std::string> {  // a vmodel's active model
    auto req = c.warm().getVModelStatusRequest();
    req.setId(vmodel);
    auto reply = ctx.s.wait(req.send());
    if (auto st = r::from_capnp(reply.getStatus()); !st) return st.error();
    return r::to_std(reply.getVmodel().getActive());
  };
  auto active = active_of(id);
  if (!active && active.error().code == errc::not_found) {
    // NAME@V: a model registered on its own from version directory V is that model (its version
    // is not part of its id). Otherwise say what NAME is, when it is something: a model
    // registered from another version, or a served model that does not serve V.
    std::string hint;
    if (auto at = id.rfind('@'); at != std::string::npos && at > 0) {
      auto name = id.substr(0, at);
      auto wanted = id.substr(at + 1);
      auto model = model_status_of(name);
      if (model && model->state != model_state::not_found) {
        if (model->version && std::to_string(*model->version) == wanted)
          return resolved_status{std::move(*model), {}};
        hint = ": '" + name + "' is a model registered on its own, " +
               (model->version ? "from version " + std::to_string(*model->version)
                               : std::string("from a file named directly")) +
               ", not a served model with versions";
      } else if (active_of(name))
        hint =
            "; `warmctl versions " + name + "` lists the versions and labels '" + name + "' serves";
    }
    return make_error(errc::not_found, "no model or vmodel '" + id + "' is registered" + hint);
  }
  if (!active) return active.error();
  if (active->empty())
    return make_error(errc::not_found, "vmodel '" + id + "' serves no model yet");
  status = model_status_of(*active);
  if (!status) return status.error();
  if (status->state == model_state::not_found)
    return make_error(errc::not_found,
                      "vmodel '" + id + "' serves '" + *active + "', which is not registered");
  return resolved_status{std::move(*status), id};
}

void add_model_commands(CLI::App& app, command_context& ctx) {
  add_register(app, ctx);
  add_unregister(app, ctx);
  add_retry(app, ctx);
  add_status(app, ctx);
  add_ensure(app, ctx);
  add_models(app, ctx);
  add_vmodel(app, ctx);
}

}  // namespace warm::ctl
