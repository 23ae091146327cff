"""Finding the message modules (model_runtime_pb2, kserve_v2_pb2): a folder that holds them
(build/schemas), or one that holds the .proto files, compiled here with protoc into a temporary
folder. No gRPC stubs are needed: calls are made with the channel's generic methods."""

import os
import shutil
import subprocess
import sys
import tempfile

PROTOS = ("model_runtime.proto", "kserve_v2.proto")
MODULES = ("model_runtime_pb2.py", "kserve_v2_pb2.py")


class SchemasError(Exception):
    """The modules could not be found or made; the message says where it looked."""


def _has(folder, names):
    return all(os.path.isfile(os.path.join(folder, n)) for n in names)


def candidates(tool_dir):
    """Where to look when --schemas is not given: the build folders beside the source tree."""
    root = os.path.abspath(os.path.join(tool_dir, "..", ".."))
    return [os.path.join(root, "build", "schemas"), os.path.join(root, "schemas")]


def load(folder, tool_dir):
    """Imports and answers (mm, v2): the modules of `folder` (or of the first candidate that
    has them or the .proto files when folder is None). Raises SchemasError."""
    folders = [folder] if folder else candidates(tool_dir)
    for f in folders:
        if _has(f, MODULES):
            return _import(f)
        if _has(f, PROTOS):
            return _import(_compile(f))
    raise SchemasError(f"no {' and '.join(MODULES)} (nor {' and '.join(PROTOS)}) in "
                       f"{', '.join(folders)}; give --schemas DIR")


def _compile(folder):
    protoc = shutil.which("protoc")
    if not protoc:
        raise SchemasError(f"{folder} holds .proto files but protoc is not installed; give "
                           f"--schemas a folder with {' and '.join(MODULES)}")
    out = tempfile.mkdtemp(prefix="spi-conformance-schemas-")
    run = subprocess.run([protoc, f"-I{folder}", f"--python_out={out}"] +
                         [os.path.join(folder, p) for p in PROTOS],
                         capture_output=True, text=True)
    if run.returncode != 0:
        raise SchemasError(f"protoc failed on {folder}: {run.stderr.strip()}")
    return out


def _import(folder):
    sys.path.insert(0, folder)
    import kserve_v2_pb2 as v2
    import model_runtime_pb2 as mm
    return mm, v2
