"""What a model takes in memory (docs/pyruntime.md, Sizes): the process's resident memory, and a
floor from the bytes a model's numpy arrays hold. Pure code."""

import os
import sys
import types

import numpy as np

_PAGE = os.sysconf("SC_PAGE_SIZE")
_SKIP = (type, types.ModuleType, types.FunctionType, types.BuiltinFunctionType, types.MethodType)


def resident_bytes():
    """This process's resident memory now (/proc/self/statm); 0 where it cannot be read."""
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * _PAGE
    except (OSError, ValueError, IndexError):
        return 0


def array_bytes(obj, max_objects=1_000_000):
    """A floor on the memory obj holds: the bytes of every numpy array it reaches through
    attributes, containers and __getstate__ (scikit-learn's Cython trees), each array counted
    once (a view counts its base), plus str and bytes. Classes, modules and functions are not
    followed. Stops after max_objects objects (the floor is then lower than it could be)."""
    seen = set()
    stack = [obj]
    total = 0
    while stack and len(seen) < max_objects:
        o = stack.pop()
        if id(o) in seen or isinstance(o, _SKIP):
            continue
        seen.add(id(o))
        if isinstance(o, np.ndarray):
            if isinstance(o.base, np.ndarray):
                stack.append(o.base)
                continue
            total += o.nbytes
            if o.dtype == object:
                stack.extend(o.ravel().tolist())
            continue
        if isinstance(o, (str, bytes, bytearray)):
            total += sys.getsizeof(o)
        elif isinstance(o, dict):
            stack.extend(o.keys())
            stack.extend(o.values())
        elif isinstance(o, (list, tuple, set, frozenset)):
            stack.extend(o)
        elif isinstance(o, (int, float, complex, bool)) or o is None:
            continue
        else:
            state = getattr(o, "__dict__", None)
            if state is None:
                try:
                    state = o.__getstate__()
                except Exception:
                    state = None
            if isinstance(state, (dict, tuple, list)):
                stack.append(state)
    return total
