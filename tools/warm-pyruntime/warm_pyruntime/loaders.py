"""The loader interface and registry (docs/pyruntime.md, Model types). A loader turns a model file
into a LoadedModel; the registry maps a modelType to its loader and holds only the loaders whose
framework imported. Paths are resolved here, once, for every type: a model's file must lie inside
a repository root, checked on its real path (a pickle is code). Pure code; no gRPC."""

import os

from .errors import invalid


class LoadedModel:
    """A model ready to predict. Fixed after load; predict may be called from many threads at
    once (each loader says why that is safe for its framework).

    platform     "scikit-learn" or "xgboost", for ModelMetadata
    inputs       [TensorSpec]: one input "input" [-1, n_features]
    outputs      [TensorSpec] in metadata order
    floor_bytes  a floor on the memory the model holds (sizes.array_bytes or the like)
    """
    platform = ""
    inputs = ()
    outputs = ()
    floor_bytes = 0

    def predict(self, x, names):
        """{name: array} for each output name in names (a subset of outputs' names, in any
        order) for the rows of x (a numpy array of inputs[0]'s dtype, [rows, n_features],
        rows >= 1). Raises what the framework raises; the caller maps ValueError to
        INVALID_ARGUMENT and the rest to INTERNAL."""
        raise NotImplementedError


class Loader:
    """One model type. name: the modelType it serves; extensions: the file names it recognises
    (lower case, with the dot); version(): the framework's version; load(path, settings): a
    LoadedModel from the file at path (resolved, inside a repository) with the key's settings
    (model_key.parse), raising Failure(INVALID_ARGUMENT) or the framework's exception for a file
    it cannot use. load runs on a loading thread, never two at once for the same model id."""
    name = ""
    extensions = ()

    def version(self):
        raise NotImplementedError

    def load(self, path, settings):
        raise NotImplementedError


class Registry:
    """modelType -> Loader. Filled once at start, before READY, then only read."""

    def __init__(self):
        self._loaders = {}
        self.failed = {}  # type name -> why its framework did not import

    def add(self, loader):
        self._loaders[loader.name] = loader

    def names(self):
        return sorted(self._loaders)

    def get(self, model_type):
        """The loader for model_type; Failure(INVALID_ARGUMENT) naming the types served."""
        loader = self._loaders.get(model_type)
        if loader is None:
            why = f" ({model_type}: {self.failed[model_type]})" if model_type in self.failed else ""
            raise invalid(f"unknown model type {model_type!r}{why}; this runtime serves "
                          f"{', '.join(self.names()) or 'no types'}")
        return loader


def inside(real, roots):
    """Whether the real path lies inside one of the (real) repository roots."""
    return any(os.path.commonpath([real, root]) == root for root in roots)


def resolve(model_path, loader, roots):
    """The real path of the model file modelPath names: the file itself, or the one file with one
    of loader's extensions in the directory it names (files whose names start with '.' are not
    looked at). A relative path is taken inside each root in turn. Raises Failure
    (INVALID_ARGUMENT) naming the path when there is no such file, when a directory holds none or
    several, when the extension is not the loader's, or when the real path (symlinks followed) is
    outside every repository root."""
    if not model_path:
        raise invalid("no modelPath")
    if not roots:
        raise invalid(f"model path {model_path!r} refused: this runtime has no repository "
                      f"(--repo, WARM_RUNTIME_REPOS)")
    candidates = [model_path] if os.path.isabs(model_path) else [os.path.join(r, model_path)
                                                                 for r in roots]
    path = next((c for c in candidates if os.path.exists(c)), None)
    if path is None:
        raise invalid(f"model path {model_path!r} does not exist")
    real = os.path.realpath(path)
    if not inside(real, roots):
        raise invalid(f"model path {model_path!r} ({real}) is outside the repositories "
                      f"({', '.join(roots)}); refused")
    if os.path.isdir(real):
        names = sorted(n for n in os.listdir(real)
                       if not n.startswith(".")
                       and os.path.splitext(n)[1].lower() in loader.extensions
                       and os.path.isfile(os.path.join(real, n)))
        if len(names) != 1:
            found = f"found {', '.join(names)}" if names else "found none"
            raise invalid(f"model path {model_path!r} is a directory: it must hold one "
                          f"{loader.name} file ({', '.join(loader.extensions)}); {found}")
        real = os.path.realpath(os.path.join(real, names[0]))
        if not inside(real, roots):
            raise invalid(f"model file {os.path.join(model_path, names[0])!r} ({real}) is "
                          f"outside the repositories; refused")
    elif not os.path.isfile(real):
        raise invalid(f"model path {model_path!r} is not a file or directory")
    elif os.path.splitext(path)[1].lower() not in loader.extensions:
        raise invalid(f"model file {model_path!r}: a {loader.name} model is a "
                      f"{', '.join(loader.extensions)} file")
    return real
