"""warm-pyruntime's flags and environment (docs/pyruntime.md, Flags): parse() validates all of
them and answers an Options or raises UsageError; nothing is started before that. Pure code."""

import argparse
import os
import re
from dataclasses import dataclass, field

MIB = 1 << 20
_UNITS = {"": 1, "B": 1, "K": 1000, "KB": 1000, "KIB": 1 << 10, "M": 1000**2, "MB": 1000**2,
          "MIB": 1 << 20, "G": 1000**3, "GB": 1000**3, "GIB": 1 << 30, "T": 1000**4, "TB": 1000**4,
          "TIB": 1 << 40}


class UsageError(Exception):
    """A flag or environment value that cannot be used; the message names it."""


@dataclass
class Options:
    """What the runtime was asked for. Defaults are documented in docs/pyruntime.md."""
    address: str = ""               # "unix:/abs/path" or "host:port"
    capacity: int = 0               # bytes the models may take
    repos: list = field(default_factory=list)  # real paths of repository roots
    threads: int = 1                # gRPC worker threads for inference
    loading_threads: int = 1        # loads at once
    load_timeout_ms: int = 120000   # a load past this is given up (0: never)
    default_model_size: int = 16 * MIB


def parse_size(text):
    """'512MiB', '1GiB', '1.5G', '4096' to bytes; raises ValueError for anything else or <= 0."""
    m = re.fullmatch(r"\s*([0-9]+(?:\.[0-9]+)?)\s*([A-Za-z]*)\s*", text)
    if not m or m.group(2).upper() not in _UNITS:
        raise ValueError(f"not a size: {text!r} (examples: 512MiB, 1GiB, 4096)")
    value = int(float(m.group(1)) * _UNITS[m.group(2).upper()])
    if value <= 0:
        raise ValueError(f"size must be positive: {text!r}")
    return value


def check_address(address):
    """Returns the address gRPC binds: unix:PATH (made absolute) or host:port; raises ValueError."""
    if address.startswith("unix:"):
        path = address[len("unix:"):]
        if path.startswith("//"):
            path = path[2:]  # unix:///abs/path
        if not path:
            raise ValueError(f"unix address without a path: {address!r}")
        return "unix:" + os.path.abspath(path)
    host, sep, port = address.rpartition(":")
    if not sep or not host or not port.isdigit() or int(port) > 65535:
        raise ValueError(f"not an address: {address!r} (unix:PATH or host:port)")
    return address


def unix_path(address):
    """The socket's path of a unix: address, None for TCP."""
    return address[len("unix:"):] if address.startswith("unix:") else None


def default_capacity():
    """Half of the memory this process may use: physical memory, or the cgroup's limit if lower."""
    total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    try:
        with open("/sys/fs/cgroup/memory.max") as f:
            limit = f.read().strip()
        if limit.isdigit():
            total = min(total, int(limit))
    except OSError:
        pass
    return max(total // 2, 64 * MIB)


def _positive_int(text):
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1: {text}")
    return value


def _non_negative_int(text):
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must not be negative: {text}")
    return value


class _Parser(argparse.ArgumentParser):
    def error(self, message):
        raise UsageError(message)


def parse(argv, env):
    """Options from the command line and the environment (WARM_GRPC_ADDRESS, WARM_RUNTIME_REPOS).
    Raises UsageError naming the bad flag or variable; --help prints and exits (SystemExit)."""
    p = _Parser(prog="warm-pyruntime",
                description="A model runtime for scikit-learn and XGBoost models: ModelMesh's "
                            "model-runtime interface and KServe V2 inference over gRPC.")
    p.add_argument("--address", help="where to listen: unix:PATH or host:port "
                                     "(default: $WARM_GRPC_ADDRESS)")
    p.add_argument("--capacity", help="memory the models may take, e.g. 512MiB, 4GiB "
                                      "(default: half of the memory this process may use)")
    p.add_argument("--repo", action="append", default=[],
                   help="a repository root models may be loaded from (repeatable; "
                        "$WARM_RUNTIME_REPOS adds colon-separated roots)")
    p.add_argument("--threads", type=_positive_int, default=os.cpu_count() or 1,
                   help="threads serving inference (default: the CPU count)")
    p.add_argument("--loading-threads", type=_positive_int, default=1,
                   help="loads at once (default 1)")
    p.add_argument("--load-timeout-ms", type=_non_negative_int, default=120000,
                   help="a load past this is given up, DEADLINE_EXCEEDED "
                        "(default 120000; 0: never)")
    a = p.parse_args(argv)

    o = Options(threads=a.threads, loading_threads=a.loading_threads,
                load_timeout_ms=a.load_timeout_ms)
    address = a.address or env.get("WARM_GRPC_ADDRESS", "")
    if not address:
        raise UsageError("no address: give --address or set WARM_GRPC_ADDRESS")
    try:
        o.address = check_address(address)
    except ValueError as e:
        raise UsageError(("--address: " if a.address else "WARM_GRPC_ADDRESS: ") + str(e))
    try:
        o.capacity = parse_size(a.capacity) if a.capacity else default_capacity()
    except ValueError as e:
        raise UsageError(f"--capacity: {e}")
    roots = list(a.repo) + [r for r in env.get("WARM_RUNTIME_REPOS", "").split(":") if r]
    for root in roots:
        real = os.path.realpath(root)  # one missing now is kept: it may appear later
        if real not in o.repos:
            o.repos.append(real)
    return o
