"""KServe V2 tensors to numpy and back (docs/pyruntime.md, Inputs and outputs): a request's input
checked against what the model declares, its outputs written as little-endian raw contents. Pure
code over the generated message types; no gRPC."""

from dataclasses import dataclass

import numpy as np

from .errors import Failure, INTERNAL, invalid

# Datatypes warm carries, and numpy's little-endian types for them.
NUMPY = {"FP32": np.dtype("<f4"), "FP64": np.dtype("<f8"), "INT32": np.dtype("<i4"),
         "INT64": np.dtype("<i8")}

# The typed-contents lists that may fill a numeric input, whatever its datatype.
_NUMERIC_CONTENTS = ("fp32_contents", "fp64_contents", "int64_contents", "int_contents",
                     "uint_contents", "uint64_contents")


@dataclass(frozen=True)
class TensorSpec:
    """A declared tensor: name, V2 datatype (a key of NUMPY) and shape, -1 for the batch."""
    name: str
    datatype: str
    shape: tuple

    def describe(self):
        return f"'{self.name}' {self.datatype} {list(self.shape)}"


def read_input(request, spec, model_id):
    """The request's one input as a numpy array of spec's dtype and shape [rows, n_features].
    Raises Failure(INVALID_ARGUMENT) naming what the model expects when the request has another
    number of inputs, another name, datatype, rank or feature count, bytes or elements that do
    not fill the shape, or non-integral values for an integer input."""
    expects = f"model {model_id} expects input {spec.describe()}"
    if len(request.inputs) != 1:
        raise invalid(f"{expects}, got {len(request.inputs)} inputs")
    t = request.inputs[0]
    shape = list(t.shape)
    if t.name != spec.name:
        raise invalid(f"{expects}, got input '{t.name}'")
    if (t.datatype != spec.datatype or len(shape) != len(spec.shape)
            or any(d < 0 for d in shape)
            or any(w != -1 and d != w for d, w in zip(shape, spec.shape))):
        raise invalid(f"{expects}, got {t.datatype} {shape}")
    count = 1
    for d in shape:
        count *= d
    dtype = NUMPY[spec.datatype]
    if request.raw_input_contents:
        if len(request.raw_input_contents) != 1 or t.HasField("contents"):
            raise invalid(f"{expects}: give raw_input_contents (one entry) or contents, not both")
        raw = request.raw_input_contents[0]
        if len(raw) != count * dtype.itemsize:
            raise invalid(f"{expects}: {t.datatype} {shape} takes {count * dtype.itemsize} bytes, "
                          f"got {len(raw)}")
        return np.frombuffer(raw, dtype=dtype).reshape(shape)
    filled = [n for n in _NUMERIC_CONTENTS if len(getattr(t.contents, n))]
    if len(t.contents.bool_contents) or len(t.contents.bytes_contents):
        raise invalid(f"{expects}: bool or bytes contents cannot fill it")
    if len(filled) > 1:
        raise invalid(f"{expects}: contents in more than one list ({', '.join(filled)})")
    values = getattr(t.contents, filled[0]) if filled else []
    if len(values) != count:
        raise invalid(f"{expects}: {t.datatype} {shape} takes {count} elements, "
                      f"got {len(values)}")
    source = np.array(values, dtype=np.float64 if filled and filled[0].startswith("fp")
                      else np.int64)
    if dtype.kind == "i" and source.dtype.kind == "f" and not np.all(np.trunc(source) == source):
        raise invalid(f"{expects}: contents hold values that are not integers")
    return source.astype(dtype).reshape(shape)


def check_output(spec, array, rows, model_id):
    """array as spec's dtype, C-contiguous little-endian, after checking that its shape matches
    spec with `rows` rows. A mismatch is the model's doing: Failure(INTERNAL) naming both."""
    out = np.ascontiguousarray(array, dtype=NUMPY[spec.datatype])
    shape = list(out.shape)
    if (len(shape) != len(spec.shape) or shape[0] != rows
            or any(w != -1 and d != w for d, w in zip(shape, spec.shape))):
        raise Failure(INTERNAL, f"model {model_id} answered output '{spec.name}' of shape {shape} "
                                f"for {rows} rows; it declares {list(spec.shape)}")
    return out


def empty_output(spec):
    """An output of zero rows (a request of zero rows never reaches the model)."""
    return np.zeros([0] + [d for d in spec.shape[1:]], dtype=NUMPY[spec.datatype])


def write_outputs(response, specs, arrays):
    """Appends each (spec, array) as an output with raw contents, in the order given."""
    for spec, array in zip(specs, arrays):
        o = response.outputs.add()
        o.name = spec.name
        o.datatype = spec.datatype
        o.shape.extend(array.shape)
        response.raw_output_contents.append(array.tobytes())
