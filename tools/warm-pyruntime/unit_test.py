#!/usr/bin/python3
"""warm-pyruntime's pure modules, without gRPC or a framework: flags and sizes (options), model
keys (model_key), V2 tensors (tensors), path resolution (loaders.resolve), and the table of models
(models.ModelTable) driven through a scripted loader whose loads end when the test says so, so
that idempotence, capacity, cancellation, unloads while loading and timeouts are checked without
sleeping on a timer.

Usage: unit_test.py SCHEMAS_DIR (build/schemas: kserve_v2_pb2). Exits 77 (skipped) without numpy
or protobuf. The black-box test with real models is tests/pyruntime_test.py.
"""
import logging
import os
import sys
import tempfile
import threading
import unittest

sys.path[0:0] = [os.path.dirname(os.path.abspath(__file__)), os.path.abspath(sys.argv.pop(1))
                 if len(sys.argv) > 1 else "build/schemas"]
try:
    import numpy as np
    import kserve_v2_pb2 as v2
except ImportError as e:
    print(f"unit_test: skipped, {e}")
    sys.exit(77)

from warm_pyruntime import errors, model_key, options, tensors  # noqa: E402
from warm_pyruntime.loaders import LoadedModel, Loader, Registry, resolve  # noqa: E402
from warm_pyruntime.models import MIN_SIZE, ModelTable, predicted_size  # noqa: E402
from warm_pyruntime.sizes import array_bytes  # noqa: E402

FP64_4 = tensors.TensorSpec("input", "FP64", (-1, 4))
logging.getLogger("warm-pyruntime").setLevel(logging.ERROR)  # the table logs each load


def failure_of(fn, *args):
    try:
        fn(*args)
    except errors.Failure as f:
        return f
    raise AssertionError("no Failure raised")


class OptionsTest(unittest.TestCase):
    def test_sizes(self):
        self.assertEqual(options.parse_size("512MiB"), 512 << 20)
        self.assertEqual(options.parse_size("1GiB"), 1 << 30)
        self.assertEqual(options.parse_size("1.5G"), 1_500_000_000)
        self.assertEqual(options.parse_size("4096"), 4096)
        for bad in ("", "lots", "-1MiB", "0", "1QiB"):
            self.assertRaises(ValueError, options.parse_size, bad)

    def test_address_and_repos(self):
        o = options.parse(["--repo", "/tmp"], {"WARM_GRPC_ADDRESS": "unix:rt.sock",
                                               "WARM_RUNTIME_REPOS": "/tmp:/var:"})
        self.assertEqual(o.address, "unix:" + os.path.abspath("rt.sock"))
        self.assertEqual(o.repos, [os.path.realpath("/tmp"), os.path.realpath("/var")])
        o = options.parse(["--address", "unix:///a/b.sock", "--capacity", "1GiB"], {})
        self.assertEqual((o.address, o.capacity), ("unix:/a/b.sock", 1 << 30))
        self.assertEqual(options.parse(["--address", "[::1]:0"], {}).address, "[::1]:0")
        for argv, env, says in (([], {}, "WARM_GRPC_ADDRESS"),
                                (["--address", "nowhere"], {}, "--address"),
                                ([], {"WARM_GRPC_ADDRESS": "h:99999"}, "WARM_GRPC_ADDRESS"),
                                (["--address", "h:1", "--capacity", "x"], {}, "--capacity"),
                                (["--address", "h:1", "--threads", "0"], {}, "--threads")):
            with self.assertRaises(options.UsageError) as e:
                options.parse(argv, env)
            self.assertIn(says, str(e.exception))


class ModelKeyTest(unittest.TestCase):
    def test_settings(self):
        self.assertEqual(model_key.parse("", "sklearn"), {})
        self.assertEqual(model_key.parse("opaque-key", "sklearn"), {})
        self.assertEqual(model_key.parse('{"input_dtype": "FP32", "storage_key": "s"}', "sklearn"),
                         {"input_dtype": "FP32"})
        self.assertEqual(model_key.parse('{"threads": 4, "n_features": 3}', "xgboost"),
                         {"threads": 4, "n_features": 3})

    def test_refusals_name_the_key(self):
        for text, says in (('{"bogus": 1}', "'bogus'"), ('{"threads": 2}', "xgboost"),
                           ('{"input_dtype": "BYTES"}', "input_dtype"), ("{", "JSON"),
                           ('{"n_features": true}', "n_features"), ('{"n_features": 0}', "n_features")):
            f = failure_of(model_key.parse, text, "sklearn")
            self.assertEqual(f.kind, errors.INVALID_ARGUMENT)
            self.assertIn(says, f.message)


def request(datatype="FP64", shape=(2, 4), raw=None, typed=None, name="input"):
    r = v2.ModelInferRequest(model_name="m")
    t = r.inputs.add(name=name, datatype=datatype, shape=list(shape))
    if typed:
        getattr(t.contents, typed[0]).extend(typed[1])
    elif raw is not None:
        r.raw_input_contents.append(raw)
    return r


class TensorsTest(unittest.TestCase):
    def test_raw_and_typed(self):
        x = np.arange(8, dtype="<f8").reshape(2, 4)
        np.testing.assert_array_equal(tensors.read_input(request(raw=x.tobytes()), FP64_4, "m"), x)
        got = tensors.read_input(request(typed=("int64_contents", range(8))), FP64_4, "m")
        self.assertEqual(got.dtype, np.float64)
        np.testing.assert_array_equal(got, x)
        spec = tensors.TensorSpec("input", "INT64", (-1, 4))
        f = failure_of(tensors.read_input, request("INT64", typed=("fp64_contents", [0.5] * 8)), spec, "m")
        self.assertIn("not integers", f.message)
        self.assertEqual(tensors.read_input(request(shape=(0, 4), raw=b""), FP64_4, "m").shape, (0, 4))

    def test_refusals_name_what_is_expected(self):
        expects = "model m expects input 'input' FP64 [-1, 4], got "
        for r, says in ((request("FP32", (2, 3), raw=b"\0" * 24), expects + "FP32 [2, 3]"),
                        (request(shape=(2, 5), raw=b"\0" * 80), expects + "FP64 [2, 5]"),
                        (request(shape=(2, 3), raw=b"\0" * 48), expects + "FP64 [2, 3]"),
                        (request(shape=(8,), raw=b"\0" * 64), expects + "FP64 [8]"),
                        (request(shape=(-2, 4), raw=b""), expects + "FP64 [-2, 4]"),
                        (request(name="x", raw=b"\0" * 64), expects + "input 'x'"),
                        (request(raw=b"\0" * 60), "takes 64 bytes, got 60"),
                        (request(typed=("fp32_contents", [1.0] * 7)), "takes 8 elements, got 7"),
                        (request(typed=("bool_contents", [True] * 8)), "bool or bytes")):
            f = failure_of(tensors.read_input, r, FP64_4, "m")
            self.assertEqual(f.kind, errors.INVALID_ARGUMENT)
            self.assertIn(says, f.message)

    def test_outputs(self):
        spec = tensors.TensorSpec("predict_proba", "FP64", (-1, 3))
        out = tensors.check_output(spec, np.ones((2, 3), dtype=np.float32), 2, "m")
        self.assertEqual((out.dtype, out.shape), (np.dtype("<f8"), (2, 3)))
        for bad in (np.ones((2, 2)), np.ones((3, 3)), np.ones(6)):
            self.assertEqual(failure_of(tensors.check_output, spec, bad, 2, "m").kind, errors.INTERNAL)
        r = v2.ModelInferResponse()
        tensors.write_outputs(r, [spec], [out])
        self.assertEqual((list(r.outputs[0].shape), len(r.raw_output_contents[0])), ([2, 3], 48))


class Script:
    """What the scripted loader does for one path: wait for `go`, then answer or raise."""

    def __init__(self, floor=100_000, raises=None):
        self.go = threading.Event()
        self.started = threading.Event()
        self.floor, self.raises = floor, raises
        self.model = None


class ScriptedLoader(Loader):
    name = "scripted"
    extensions = (".m",)

    def __init__(self):
        self.scripts = {}
        self.loads = 0

    def version(self):
        return "1"

    def load(self, path, settings):
        self.loads += 1
        s = self.scripts[os.path.basename(path)]
        s.started.set()
        s.go.wait(30)
        if s.raises:
            raise s.raises
        m = LoadedModel()
        m.floor_bytes, m.inputs, m.outputs = s.floor, (FP64_4,), ()
        s.model = m
        return m


class ModelTableTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.repo = os.path.realpath(self.tmp.name)
        self.loader = ScriptedLoader()
        registry = Registry()
        registry.add(self.loader)
        self.now = [0.0]
        self.opts = options.Options(address="unix:x", capacity=1_000_000, repos=[self.repo],
                                    loading_threads=2, load_timeout_ms=0)
        self.table = ModelTable(registry, self.opts, clock=lambda: self.now[0])

    def tearDown(self):
        for s in self.loader.scripts.values():
            s.go.set()
        self.table.close()
        self.tmp.cleanup()

    def file(self, name, size=10, **script):
        with open(os.path.join(self.repo, name), "wb") as f:
            f.write(b"\0" * size)
        self.loader.scripts[name] = Script(**script)
        return self.loader.scripts[name]

    def load(self, model_id, name):
        return self.table.load(model_id, "scripted", os.path.join(self.repo, name), "")

    def test_load_is_idempotent_and_measured(self):
        s = self.file("a.m", floor=200_000)
        e1, e2 = self.load("a", "a.m"), self.load("a", "a.m")
        self.assertIs(e1, e2)
        s.go.set()
        size = self.table.wait(e1)
        self.assertGreaterEqual(size, 200_000)
        self.assertEqual(self.table.wait(e2), size)
        self.assertEqual(self.table.wait(self.load("a", "a.m")), size)
        self.assertEqual(self.loader.loads, 1)
        self.assertEqual(self.table.size("a"), size)
        self.assertIs(self.table.get("a"), s.model)
        self.table.unload("a")
        self.assertEqual(failure_of(self.table.get, "a").kind, errors.NOT_FOUND)
        self.table.unload("a")  # unknown: nothing

    def test_small_models_count_a_minimum(self):
        self.file("t.m", floor=1).go.set()
        self.assertGreaterEqual(self.table.wait(self.load("t", "t.m")), MIN_SIZE)

    def test_capacity(self):
        self.file("big.m", size=2_000_000)
        f = failure_of(self.load, "big", "big.m")
        self.assertEqual(f.kind, errors.RESOURCE_EXHAUSTED)
        self.file("measured.m", floor=1_500_000).go.set()
        f = failure_of(self.table.wait, self.load("measured", "measured.m"))
        self.assertEqual(f.kind, errors.RESOURCE_EXHAUSTED)
        self.assertIn("whole capacity of 1000000 bytes", f.message)
        self.assertEqual(self.table.loaded(), [])
        # Models that fit alone are loaded even past the capacity together: the cache above
        # charges them and evicts (its unload may arrive after the next load).
        self.file("half.m", floor=600_000).go.set()
        self.table.wait(self.load("half", "half.m"))
        self.file("other.m", floor=600_000).go.set()
        self.assertGreaterEqual(self.table.wait(self.load("other", "other.m")), 600_000)
        self.assertEqual([i for i, _ in self.table.loaded()], ["half", "other"])
        self.file("exact.m", floor=1_000_000).go.set()  # exactly the capacity: fits alone
        self.assertEqual(self.table.wait(self.load("exact", "exact.m")), 1_000_000)

    def test_unload_while_loading_leaves_nothing(self):
        s = self.file("s.m")
        e = self.load("s", "s.m")
        s.started.wait(10)
        waiter = threading.Thread(target=lambda: setattr(self, "f", failure_of(self.table.wait, e)))
        waiter.start()
        threading.Timer(0.2, s.go.set).start()  # the load ends while unload waits for it
        self.table.unload("s")
        self.assertTrue(e.done.is_set())
        waiter.join(10)
        self.assertEqual(self.f.kind, errors.CANCELLED)
        self.assertEqual(self.table.loaded(), [])
        self.assertEqual(failure_of(self.table.size, "s").kind, errors.NOT_FOUND)

    def test_a_cancelled_caller_gives_the_load_up_unless_others_wait(self):
        s = self.file("c.m")
        e = self.load("c", "c.m")
        e2 = self.load("c", "c.m")  # a second caller: the load goes on
        self.table.cancel_wait(e)
        self.assertEqual(self.table.loaded(), [("c", "loading")])
        e2.waiters -= 1  # the second caller left (as wait's finally does)
        self.table.cancel_wait(e)
        self.assertEqual(self.table.loaded(), [])
        s.go.set()
        e.done.wait(10)
        self.assertEqual(self.table.loaded(), [])

    def test_timeout(self):
        self.opts.load_timeout_ms = 1000
        s = self.file("slow.m")
        e = self.load("slow", "slow.m")
        self.now[0] = 5.0  # past the deadline: wait does not wait
        f = failure_of(self.table.wait, e)
        self.assertEqual(f.kind, errors.DEADLINE_EXCEEDED)
        self.assertEqual(self.table.loaded(), [])
        s.go.set()
        e.done.wait(10)
        self.assertEqual(self.table.loaded(), [])

    def test_load_failure_holds_nothing(self):
        self.file("bad.m", raises=ValueError("no good")).go.set()
        f = failure_of(self.table.wait, self.load("bad", "bad.m"))
        self.assertEqual(f.kind, errors.INVALID_ARGUMENT)
        self.assertIn("ValueError: no good", f.message)
        self.file("exit.m", raises=SystemExit(3)).go.set()
        self.assertEqual(failure_of(self.table.wait, self.load("exit", "exit.m")).kind,
                         errors.INVALID_ARGUMENT)
        self.assertEqual(self.table.loaded(), [])

    def test_refusals_before_a_load(self):
        self.file("a.m")
        for args, says in ((("", "scripted", "a.m", ""), "modelId"),
                           (("x", "onnx", "a.m", ""), "scripted"),
                           (("x", "scripted", "/etc/passwd", ""), "outside"),
                           (("x", "scripted", "a.m", '{"bogus": 1}'), "bogus")):
            f = failure_of(self.table.load, *args)
            self.assertEqual(f.kind, errors.INVALID_ARGUMENT)
            self.assertIn(says, f.message)
        self.assertEqual(self.loader.loads, 0)
        self.assertEqual(self.table.predict_size("scripted", "a.m", ""), predicted_size(10))


class ResolveTest(unittest.TestCase):
    def test_paths(self):
        with tempfile.TemporaryDirectory() as tmp:
            tmp = os.path.realpath(tmp)
            repo, out = os.path.join(tmp, "repo"), os.path.join(tmp, "out")
            os.makedirs(os.path.join(repo, "d"))
            os.makedirs(os.path.join(repo, "two"))
            os.makedirs(out)
            for p in ("d/model.m", "d/.hidden.m", "d/notes.txt", "two/a.m", "two/b.m", "x.m"):
                open(os.path.join(repo, p), "w").close()
            open(os.path.join(out, "e.m"), "w").close()
            os.symlink(os.path.join(out, "e.m"), os.path.join(repo, "link.m"))
            os.symlink(out, os.path.join(repo, "d", "escape"))
            loader = ScriptedLoader()
            self.assertEqual(resolve(os.path.join(repo, "d"), loader, [repo]),
                             os.path.join(repo, "d", "model.m"))
            self.assertEqual(resolve("x.m", loader, [repo]), os.path.join(repo, "x.m"))
            for path, says in ((os.path.join(repo, "link.m"), "outside"),
                               (os.path.join(repo, "d", "escape", "e.m"), "outside"),
                               (os.path.join(repo, "..", "out", "e.m"), "outside"),
                               (os.path.join(repo, "two"), "a.m, b.m"),
                               (os.path.join(repo, "d", "notes.txt"), ".m"),
                               (os.path.join(repo, "nope.m"), "does not exist")):
                f = failure_of(resolve, path, loader, [repo])
                self.assertIn(says, f.message)
            self.assertIn("no repository", failure_of(resolve, "x.m", loader, []).message)


class SizesTest(unittest.TestCase):
    def test_array_bytes(self):
        a = np.zeros(1000)
        holder = type("Holder", (), {})()
        holder.a, holder.view, holder.more = a, a[10:], [np.zeros(10, dtype=np.int32), {"k": a}]
        names = sum(sys.getsizeof(k) for k in ("a", "view", "more", "k"))  # attribute names too
        self.assertEqual(array_bytes(holder), 8000 + 40 + names)  # the view counted once, as a


if __name__ == "__main__":
    unittest.main(verbosity=1)
