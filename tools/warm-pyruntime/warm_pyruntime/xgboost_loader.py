"""XGBoost boosters (docs/pyruntime.md, XGBoost): a model saved by Booster.save_model or by the
scikit-learn wrapper's save_model, as JSON (.json), UBJSON (.ubj) or XGBoost's binary format
(.bst), loaded into an xgboost.Booster. No code runs at load.

Output: "predict" FP32, whatever Booster.predict answers for the model's objective: [-1] for
regression, binary:logistic and multi:softmax, [-1, n_classes] for multi:softprob. The shape is
read from a prediction on one row of zeros at load. Booster.predict is thread-safe since XGBoost
1.4 (its Prediction notes); each prediction uses `threads` threads (key setting, default 1:
parallelism comes from concurrent requests)."""

import numpy as np

from .errors import invalid
from .loaders import Loader, LoadedModel
from .tensors import NUMPY, TensorSpec


class XGBoostModel(LoadedModel):
    platform = "xgboost"

    def __init__(self, xgb, booster, threads, inputs, outputs, floor_bytes):
        self._xgb = xgb
        self.booster = booster
        self._threads = threads
        self.inputs = inputs
        self.outputs = outputs
        self.floor_bytes = floor_bytes

    def predict(self, x, names):
        y = self.booster.predict(self._xgb.DMatrix(x, nthread=self._threads),
                                 validate_features=False)
        return {name: y for name in names}


class XGBoostLoader(Loader):
    name = "xgboost"
    extensions = (".json", ".ubj", ".bst")

    def __init__(self):
        import xgboost
        self._xgb = xgboost

    def version(self):
        return self._xgb.__version__

    def load(self, path, settings):
        booster = self._xgb.Booster()
        booster.load_model(path)  # XGBoostError names what is wrong with the file
        n = booster.num_features()
        if n <= 0:
            n = settings.get("n_features", 0)
            if n <= 0:
                raise invalid(f"{path}: the booster does not say its feature count; give "
                              f"n_features in the model key")
        elif settings.get("n_features", n) != n:
            raise invalid(f"{path}: the booster takes {n} features; the key says "
                          f"{settings['n_features']}")
        threads = settings.get("threads", 1)
        booster.set_param({"nthread": threads})
        dtype = settings.get("input_dtype", "FP32")
        probe = booster.predict(self._xgb.DMatrix(np.zeros((1, n), dtype=NUMPY[dtype])),
                                validate_features=False)
        if probe.ndim == 1:
            shape = (-1,)
        elif probe.ndim == 2:
            shape = (-1, int(probe.shape[1]))
        else:
            raise invalid(f"{path}: Booster.predict answers rank {probe.ndim}; served are "
                          f"[rows] and [rows, k]")
        floor = len(booster.save_raw("ubj"))
        return XGBoostModel(self._xgb, booster, threads, (TensorSpec("input", dtype, (-1, n)),),
                            (TensorSpec("predict", "FP32", shape),), floor)
