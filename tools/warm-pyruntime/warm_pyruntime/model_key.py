"""A load's modelKey (docs/pyruntime.md, Model keys). The key is the repository's string, opaque to
the cache. warm-pyruntime reads it when it is a JSON object: its settings below, ModelMesh's own
fields ignored, anything else refused naming the key. An empty key, or one that does not start
with '{', carries no settings. Pure code."""

import json

from .errors import invalid

DTYPES = ("FP32", "FP64", "INT32", "INT64")

# Fields ModelMesh's serving writes into a model's key (storage and type), read by others.
IGNORED = ("storage_key", "storage_params", "bucket", "disk_size_bytes", "model_type", "storage")


def _dtype(name, value):
    if value not in DTYPES:
        raise invalid(f"model key: {name} must be one of {', '.join(DTYPES)}, got {value!r}")
    return value


def _positive(name, value):
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise invalid(f"model key: {name} must be a positive integer, got {value!r}")
    return value


# Every setting: its check, and the model types it applies to.
SETTINGS = {
    "input_dtype": (_dtype, ("sklearn", "xgboost")),
    "n_features": (_positive, ("sklearn", "xgboost")),
    "threads": (_positive, ("xgboost",)),
}


def parse(text, model_type):
    """The settings of a key for a model of model_type, as a dict of checked values (absent keys
    absent). Raises Failure(INVALID_ARGUMENT) naming the key for malformed JSON, a key that is
    not a setting (listing those there are), a setting of another type, or a bad value."""
    if not text.strip().startswith("{"):
        return {}
    try:
        obj = json.loads(text)
    except ValueError as e:
        raise invalid(f"model key is not valid JSON: {e}")
    if not isinstance(obj, dict):
        raise invalid("model key must be a JSON object")
    settings = {}
    for name, value in obj.items():
        if name in IGNORED:
            continue
        if name not in SETTINGS:
            known = sorted(n for n, (_, types) in SETTINGS.items() if model_type in types)
            raise invalid(f"model key: unknown setting {name!r} (settings for {model_type}: "
                          f"{', '.join(known)})")
        check, types = SETTINGS[name]
        if model_type not in types:
            raise invalid(f"model key: {name!r} applies to {', '.join(types)} models, "
                          f"not {model_type}")
        settings[name] = check(name, value)
    return settings
