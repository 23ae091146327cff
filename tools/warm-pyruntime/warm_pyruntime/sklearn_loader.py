"""scikit-learn models: an estimator (or Pipeline) saved with joblib or pickle
(docs/pyruntime.md, scikit-learn). Loading one runs the code the pickle names: only files inside
a repository root reach this loader (loaders.resolve).

Outputs: "predict" [-1] (or [-1, k] for multi-output models); INT64 for integer or bool labels
and for string labels (indices into classes_, warm carries no BYTES), FP64 for float labels and
regressors. "predict_proba" FP64 [-1, n_classes] for classifiers that have it. predict is called
from many threads at once: fitted scikit-learn estimators do not change when they predict."""

import warnings

import numpy as np

from .errors import invalid
from .loaders import Loader, LoadedModel
from .sizes import array_bytes
from .tensors import NUMPY, TensorSpec


class SklearnModel(LoadedModel):
    platform = "scikit-learn"

    def __init__(self, estimator, inputs, outputs, label_index):
        self.estimator = estimator
        self.inputs = inputs
        self.outputs = outputs
        self._label_index = label_index  # label -> index into classes_, for string labels
        self.floor_bytes = array_bytes(estimator)

    def predict(self, x, names):
        out = {}
        for name in names:
            if name == "predict":
                y = self.estimator.predict(x)
                if self._label_index is not None:
                    y = np.fromiter((self._label_index[v] for v in y), dtype=np.int64,
                                    count=len(y))
                out[name] = y
            elif name == "predict_proba":
                out[name] = self.estimator.predict_proba(x)
        return out


class SklearnLoader(Loader):
    name = "sklearn"
    extensions = (".joblib", ".pkl", ".pickle")

    # Imported at start, so that the memory a first load measures is not these modules'.
    COMMON = ("sklearn.base", "sklearn.compose", "sklearn.ensemble", "sklearn.linear_model",
              "sklearn.naive_bayes", "sklearn.neighbors", "sklearn.pipeline",
              "sklearn.preprocessing", "sklearn.svm", "sklearn.tree")

    def __init__(self):
        import importlib

        import joblib
        import sklearn
        for module in self.COMMON:
            importlib.import_module(module)
        self._joblib = joblib
        self._sklearn = sklearn

    def version(self):
        return self._sklearn.__version__

    def load(self, path, settings):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # e.g. a model pickled by another sklearn version
            est = self._joblib.load(path)
        if not callable(getattr(est, "predict", None)):
            raise invalid(f"{path} holds a {type(est).__name__}, not a model with predict")
        n = getattr(est, "n_features_in_", None)
        if n is None:
            n = settings.get("n_features")
            if n is None:
                raise invalid(f"{path}: the model does not say its feature count "
                              f"(n_features_in_); give n_features in the model key")
        elif settings.get("n_features", n) != n:
            raise invalid(f"{path}: the model takes {n} features; the key says "
                          f"{settings['n_features']}")
        n = int(n)
        dtype = settings.get("input_dtype", "FP64")
        inputs = (TensorSpec("input", dtype, (-1, n)),)

        probe = None
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                probe = np.asarray(est.predict(np.zeros((1, n), dtype=NUMPY[dtype])))
        except Exception:
            pass  # a model that refuses zeros still loads: its declaration follows its attributes

        classes = getattr(est, "classes_", None)
        classifier = self._sklearn.base.is_classifier(est)
        single = classes is not None and isinstance(classes, np.ndarray) and classes.ndim == 1
        label_index = None
        if probe is not None:
            rank = probe.ndim
            kind = probe.dtype.kind
        else:
            outputs = getattr(est, "n_outputs_", 1)
            rank = 1 if outputs == 1 else 2
            kind = classes.dtype.kind if single else ("i" if classifier else "f")
        if probe is not None and rank == 2:
            width = probe.shape[1]
        else:
            width = getattr(est, "n_outputs_", None) if rank == 2 else None
        if rank not in (1, 2) or (rank == 2 and not width):
            raise invalid(f"{path}: predict answers rank {rank}; served are [rows] and "
                          f"[rows, k]")
        if kind in "iub":
            predict_type = "INT64"
        elif kind == "f":
            predict_type = "FP64"
        elif kind in "OUS" and single and rank == 1:
            predict_type = "INT64"
            label_index = {label: i for i, label in enumerate(classes.tolist())}
        else:
            raise invalid(f"{path}: predict answers {probe.dtype if probe is not None else kind} "
                          f"values, which this runtime cannot carry")
        outputs = [TensorSpec("predict", predict_type, (-1,) if rank == 1 else (-1, int(width)))]
        if classifier and single and hasattr(est, "predict_proba"):
            outputs.append(TensorSpec("predict_proba", "FP64", (-1, len(classes))))
        return SklearnModel(est, inputs, tuple(outputs), label_index)
