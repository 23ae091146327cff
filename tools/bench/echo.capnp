@0x8556565284bbb0bc;
# warm-bench rpc's baseline: a bare Cap'n Proto server that answers an infer-shaped request with
# an infer-shaped result (the same message types and sizes as Warm.infer) and no model behind it.

using Warm = import "/warm.capnp";
$import "/capnp/c++.capnp".namespace("warm::bench::echo_rpc");

interface Echo {
  echo @0 (request :Warm.InferRequest) -> (status :Warm.Status, result :Warm.InferResult);
  # Answers status ok, `model` = the request's target, cacheHit true and one F32 output tensor
  # "output" of shape [1, W] (W fixed when the bench starts the server: the model's output width,
  # so the answer is as large as Warm.infer's), its bytes copied from the first input's.
}
