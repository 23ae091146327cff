"""warm-pyruntime: a model runtime for scikit-learn and XGBoost models (docs/pyruntime.md).

Modules, bottom first: errors (the failure value), options (flags and sizes), model_key (a
load's settings), tensors (V2 tensors to numpy and back), sizes (what a model takes), loaders and
its two loaders (sklearn_loader, xgboost_loader), models (the table of models, capacity, loads),
server (the two gRPC services), __main__ (start and stop). Only server.py knows gRPC.
"""

VERSION = "0.1"
