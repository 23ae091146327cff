"""warm-pyruntime's start and stop: flags, the gRPC server on its address, the frameworks
imported while it already answers runtimeStatus (STARTING), then READY; SIGTERM or SIGINT stop
it, and a unix socket's file is removed. Exit status: 0 stopped by a signal, 1 could not serve,
2 bad flags (docs/pyruntime.md)."""

import concurrent.futures
import logging
import os
import signal
import stat
import sys
import threading

from .options import UsageError, parse, unix_path

log = logging.getLogger("warm-pyruntime")
MAX_MESSAGE = 64 << 20  # the largest request and answer, bytes


def worker_count(options):
    """gRPC workers: predictions run --threads at once (server.Services), and up to three times
    as many more requests (at least 32 in all) may wait for them holding a worker, with workers
    to spare for loads and for status and unloads. Beyond that, requests queue in gRPC."""
    return max(4 * options.threads, 32) + options.loading_threads + 4


def build_registry():
    """The loaders whose frameworks import; why the others did not is kept in registry.failed."""
    from .loaders import Registry
    registry = Registry()
    for name, module, cls in (("sklearn", "sklearn_loader", "SklearnLoader"),
                              ("xgboost", "xgboost_loader", "XGBoostLoader")):
        try:
            mod = __import__(f"warm_pyruntime.{module}", fromlist=[cls])
            registry.add(getattr(mod, cls)())
        except Exception as ex:  # ImportError, or a framework broken at import
            registry.failed[name] = f"{type(ex).__name__}: {ex}"
            log.warning("%s models are not served: %s", name, registry.failed[name])
    return registry


def _serve(options, stop):
    import grpc
    from .server import Services

    sock = unix_path(options.address)
    if sock and os.path.lexists(sock):
        if not stat.S_ISSOCK(os.lstat(sock).st_mode):
            log.error("%s exists and is not a socket; refusing to replace it", sock)
            return 1
        os.unlink(sock)  # a socket left by a runtime that did not stop cleanly

    services = Services(options)
    server = grpc.server(concurrent.futures.ThreadPoolExecutor(worker_count(options),
                                                               thread_name_prefix="rpc"),
                         handlers=services.handlers(),
                         options=[("grpc.max_receive_message_length", MAX_MESSAGE),
                                  ("grpc.max_send_message_length", MAX_MESSAGE),
                                  ("grpc.so_reuseport", 0)])
    old_mask = os.umask(0o077)  # the socket: its owner only
    try:
        port = server.add_insecure_port(options.address)
    except RuntimeError as ex:
        port, why = 0, str(ex)
    else:
        why = "gRPC could not bind it"
    finally:
        os.umask(old_mask)
    if port == 0:
        log.error("cannot listen on %s: %s", options.address, why)
        return 1
    server.start()
    where = options.address if sock else f"{options.address.rpartition(':')[0]}:{port}"
    log.info("listening on %s (STARTING); repositories: %s", where,
             ", ".join(options.repos) or "none")
    try:
        if not stop.is_set():
            services.become_ready(build_registry())
            log.info("%s", services.runtime_status(None, None).runtimeVersion + " ready")
        while not stop.wait(0.5):
            pass
        log.info("stopping")
        server.stop(grace=2).wait(5)
        services.close()
    finally:
        if sock:
            try:
                os.unlink(sock)
            except FileNotFoundError:
                pass
    return 0


def main(argv):
    """Runs the runtime until SIGTERM or SIGINT; the process ends here (os._exit), without
    waiting for a load whose model code never returns."""
    stop = threading.Event()  # set by SIGTERM or SIGINT, from the first moment on
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    logging.basicConfig(stream=sys.stderr, level=logging.INFO,
                        format="warm-pyruntime: %(levelname)s %(message)s")
    try:
        options = parse(argv, os.environ)
    except UsageError as ex:
        print(f"warm-pyruntime: {ex}", file=sys.stderr)
        return 2
    try:
        code = _serve(options, stop)
    except ImportError as ex:
        log.error("cannot start: %s (python3-grpcio, python3-protobuf and build/schemas' "
                  "modules are needed)", ex)
        code = 1
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


if __name__ == "__main__":
    main(sys.argv[1:])
