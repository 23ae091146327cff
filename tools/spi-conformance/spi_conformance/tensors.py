"""V2 tensors for the metadata-and-infer check: a request filled from a model's declared inputs
(every -1 dimension 2, zeros as little-endian raw contents), and the checks of an answer against
the declared outputs. Pure code over the generated message types."""

ROWS = 2  # what a dynamic (-1) dimension becomes in the requests the suite makes

# Bytes per element of the fixed-size V2 datatypes; BYTES elements are 4-byte length + data.
ITEM = {"BOOL": 1, "INT8": 1, "UINT8": 1, "INT16": 2, "UINT16": 2, "FP16": 2, "BF16": 2,
        "INT32": 4, "UINT32": 4, "FP32": 4, "INT64": 8, "UINT64": 8, "FP64": 8}
CONTENTS = {"BOOL": "bool_contents", "INT8": "int_contents", "INT16": "int_contents",
            "INT32": "int_contents", "UINT8": "uint_contents", "UINT16": "uint_contents",
            "UINT32": "uint_contents", "INT64": "int64_contents", "UINT64": "uint64_contents",
            "FP32": "fp32_contents", "FP64": "fp64_contents", "BYTES": "bytes_contents"}


def _count(shape):
    n = 1
    for d in shape:
        n *= d
    return n


def concrete(shape):
    return [ROWS if d < 0 else d for d in shape]


def describe(t):
    return f"'{t.name}' {t.datatype} {list(t.shape)}"


def request_for(v2, metadata):
    """A ModelInferRequest with one zero-filled input per declared input; raises ValueError for
    a declaration the suite cannot fill (no inputs, an unknown datatype)."""
    if not metadata.inputs:
        raise ValueError("the metadata declares no inputs")
    r = v2.ModelInferRequest(id="spi-conformance")
    for spec in metadata.inputs:
        shape = concrete(spec.shape)
        n = _count(shape)
        if spec.datatype == "BYTES":
            data = b"\0\0\0\0" * n  # n empty strings
        elif spec.datatype in ITEM:
            data = bytes(n * ITEM[spec.datatype])
        else:
            raise ValueError(f"input {describe(spec)}: unknown datatype")
        r.inputs.add(name=spec.name, datatype=spec.datatype, shape=shape)
        r.raw_input_contents.append(data)
    return r


def _data_size(t, raw, datatype):
    """(what the answer holds, what its shape takes), both in bytes or both in elements."""
    n = _count(t.shape)
    if raw is not None:
        if datatype == "BYTES":
            return len(raw), None  # variable length: not checked
        return len(raw), n * ITEM.get(datatype, 0)
    field = CONTENTS.get(datatype)
    held = len(getattr(t.contents, field)) if field else 0
    return held, n


def output_problems(metadata, response):
    """What is wrong with response against metadata's outputs: [] when every declared output is
    answered once with the declared datatype, a shape that fits the declaration (rank, fixed
    dimensions, ROWS rows where the first dimension is -1) and data that fills that shape."""
    problems = []
    raw = list(response.raw_output_contents)
    if raw and len(raw) != len(response.outputs):
        problems.append(f"{len(raw)} raw_output_contents for {len(response.outputs)} outputs")
        raw = []
    answered = {}
    for i, t in enumerate(response.outputs):
        answered.setdefault(t.name, (t, raw[i] if raw else None))
    for spec in metadata.outputs:
        if spec.name not in answered:
            problems.append(f"output '{spec.name}' declared, not answered "
                            f"(answered: {', '.join(answered) or 'none'})")
            continue
        t, data = answered[spec.name]
        datatype = t.datatype or spec.datatype
        if spec.datatype and t.datatype and t.datatype != spec.datatype:
            problems.append(f"output '{spec.name}': declared {spec.datatype}, answered "
                            f"{t.datatype}")
        shape, want = list(t.shape), list(spec.shape)
        fits = len(shape) == len(want) and all(w < 0 or d == w for d, w in zip(shape, want))
        if fits and want and want[0] < 0 and shape[0] != ROWS:
            fits = False
        if not fits:
            problems.append(f"output '{spec.name}': declared {want}, answered shape {shape} "
                            f"for {ROWS} rows")
            continue
        held, takes = _data_size(t, data, datatype)
        if takes is not None and held != takes:
            unit = "bytes" if data is not None else "elements"
            problems.append(f"output '{spec.name}' {datatype} {shape} takes {takes} {unit}, "
                            f"answered {held}")
    return problems


def same_answer(a, b):
    """Whether two responses carry the same outputs (names, datatypes, shapes, data)."""
    def key(r):
        raw = list(r.raw_output_contents)
        return sorted((t.name, t.datatype, tuple(t.shape),
                       raw[i] if i < len(raw) else t.contents.SerializeToString())
                      for i, t in enumerate(r.outputs))
    return key(a) == key(b)
