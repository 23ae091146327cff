@0x96224fac9aad93d2;
# The model-runtime interface (Cap'n Proto 0.9): what a process that loads and runs models serves
# so that warmd can use it as one of its devices. warmd is the client; it decides what is loaded
# where (placement, eviction, failure records) and the runtime does what it is told. Self-contained:
# a runtime needs only this file. docs/runtimes.md describes the contract and a walkthrough.
#
# Transport: warmd starts a runtime it supervises with the environment variable WARM_RUNTIME_FD
# naming a connected Unix stream socket (fd 3); the runtime serves `ModelRuntime` as the
# bootstrap capability of a two-party connection on it, and exits when it closes. A runtime
# started by someone else listens on a Unix socket and serves the same capability to each
# connection (warmd --runtime NAME=unix:PATH).
#
# Conventions:
#  - Errors are values: results carry `error`; `error.code == ok` means success and the other
#    result fields are set. A load or infer call that throws (or a connection that breaks) fails
#    with `unavailable`; a predictSize that throws is no prediction; an unload that throws counts
#    as done; a status that throws ends the connection.
#  - Sizes are bytes. warmd names each load "<the model file's path in its repository>#<n>", n
#    unique per warmd; one id is loaded at most once.
#  - Tensors are raw little-endian bytes, row-major; dtype names are warm's ("F32", "I64", ...).
#  - A runtime serves one warmd at a time: on connecting, warmd unloads whatever it holds.

$import "/capnp/c++.capnp".namespace("warm::remote");

struct Error {
  code @0 :Code;
  message @1 :Text;  # names the model and what went wrong; empty when ok

  enum Code {
    ok @0;
    notFound @1;           # no such model loaded (infer, unload)
    invalidArgument @2;    # malformed model, unknown kind, wrong tensors
    modelTooLarge @3;      # the model can never fit in the runtime's capacity
    capacityExhausted @4;  # it does not fit now
    loadFailed @5;         # the model's files could not be loaded
    unavailable @6;        # the runtime cannot take the call now (not ready, shutting down)
    internal @7;           # a bug or an unexpected failure inside the runtime
    timeout @8;            # a deadline inside the runtime passed
  }
}

struct RuntimeStatus {
  ready @0 :Bool;              # false: warmd places nothing here and asks again later
  capacityBytes @1 :UInt64;    # memory the runtime can give models; warmd adopts a changed value
                               # (at most 1 PiB)
  loadingThreads @2 :UInt32;   # how many loads it takes at once (0: 1; at most 64)
  defaultModelBytes @3 :UInt64;  # informational: a typical model's size here (warmd reserves
                                 # its own prediction from the model's file)
  version @4 :Text;            # the runtime's name and version, for operators
  kinds @5 :List(Text);        # model kinds it serves: "dense", "torchscript", ...
  loaded @6 :List(Text);       # ids it holds now (loading included); warmd unloads all of them
                               # when it connects (left by an earlier warmd), 16 at a time; a
                               # list of more than 65,536 is refused (none unloaded)
  usedBytes @7 :UInt64;        # memory its models take now (informational)
  rssBytes @8 :UInt64;         # the process's resident memory: the most it held since the
                               # previous status (0: not measured). warmd charges the device what
                               # exceeds baseRssBytes, its models' charges and a slack (64 MiB)
  baseRssBytes @9 :UInt64;     # the process's resident memory before it loaded any model
}

struct TensorSpec {
  name @0 :Text;
  dtype @1 :Text;          # empty when not declared
  shape @2 :List(Int64);   # -1 for a dynamic dimension; empty when the rank is not declared
}

struct Tensor {
  name @0 :Text;
  dtype @1 :Text;          # "F32", "F16", "BF16", "F64", "I64", "I32", "I16", "I8", "U8", "BOOL"
                           # (and "U16", "U32", "U64", "F8_E4M3", "F8_E5M2")
  shape @2 :List(UInt64);
  data @3 :Data;           # exactly product(shape) x size(dtype) bytes
}

struct ModelFile {
  # Where a model's file is. warmd resolved it inside one of its repositories; `path` is below
  # `repository` (both canonical). A runtime that confines files opens it beneath `repository`.
  path @0 :Text;
  repository @1 :Text;
  kind @2 :Text;           # the backend kind warmd chose: "dense", "torchscript", ...
}

interface ModelRuntime {
  status @0 () -> (status :RuntimeStatus);
  # Immediate, even while loads run; warmd calls it when it connects (allowing its start timeout,
  # 15 s by default) and then every 2 s (allowing 5 s). A status not answered in time counts as a
  # hung runtime: warmd drops the connection (and kills and restarts a runtime it supervises).

  predictSize @1 (modelId :Text, file :ModelFile) -> (error :Error, bytes :UInt64);
  # Optional (an error or 0: no prediction): what loading the model will take, asked before each
  # load. A prediction above the capacity fails the load at once with modelTooLarge, without
  # loading. Must not load the model; should answer within 5 s.

  load @2 (modelId :Text, file :ModelFile, reservedBytes :UInt64)
       -> (error :Error, bytes :UInt64, inputs :List(TensorSpec), outputs :List(TensorSpec),
           batched :Bool);
  # Loads the model and answers what it measured it takes (`bytes`; warmd charges that, evicting
  # for any excess over `reservedBytes` or failing the load) and its inputs and outputs (required:
  # warmd refuses a load that describes none). May take long; warmd gives up after its load
  # timeout and then calls unload for the id, which must cancel or undo the load.

  unload @3 (modelId :Text) -> (error :Error);
  # Frees the model once inferences running on it finish. notFound for an id not loaded (warmd
  # treats that as done).

  infer @4 (modelId :Text, inputs :List(Tensor), batch :UInt64) -> (error :Error, outputs :List(Tensor));
  # Runs the model on inputs warmd has checked against the load's inputs (in that order, each
  # with `batch` rows when batched); answers the outputs in the load's output order. warmd checks
  # them against the load's outputs (count, dtype, rank, fixed dimensions, `batch` rows when
  # batched): an answer that breaks them fails the request with `internal`.
}
