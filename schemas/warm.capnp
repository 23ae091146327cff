@0x8de851269d7b0669;
# warm's RPC interface (Cap'n Proto 0.9). One capability, `Warm`, serves everything a client of
# the model cache needs: registration, loading, vmodels, inference, inspection and state-change
# watching. It mirrors the embedding API (include/warm/runtime.hpp) one to one.
#
# Conventions:
#  - Errors are values: every result carries a `status`; the server never answers a bad request
#    by failing the call or dropping the connection. When `status.code` is not `ok`, the other
#    result fields are unset (default).
#  - Ids (models and vmodels share one namespace) are 1..256 bytes of printable ASCII without
#    spaces or '/'.
#  - Sizes are bytes; times are milliseconds unless the name says otherwise.
#  - A server listening on TCP with remote access enabled hands out `Authenticator` as its
#    bootstrap capability instead of `Warm`: present the token to get `Warm`.

$import "/capnp/c++.capnp".namespace("warm::rpc");

struct Status {
  # The outcome of a call: `ok`, or an error code with a human-readable message (no trailing
  # period, names the object and what is wrong).
  code @0 :Code;       # ok, or what went wrong
  message @1 :Text;    # empty when ok

  enum Code {
    ok @0;
    notFound @1;          # no such model, vmodel or file
    invalidArgument @2;   # the request is malformed or inconsistent (bad id, shape, dtype, path)
    modelTooLarge @3;     # the model can never fit on any device
    capacityExhausted @4; # no room now (e.g. the registry's model limit)
    loadFailed @5;        # loading failed (the recorded failure, until it expires)
    unavailable @6;       # the server is shutting down, or a resource is not usable
    timeout @7;           # a deadline passed
    internal @8;          # a bug in warm; never the client's fault
    unauthenticated @9;   # a missing or wrong token
    tooLarge @10;         # the request exceeds a configured limit (bytes, tensors)
  }
}

struct ModelInfo {
  # What a registration says about a model.
  path @0 :Text;           # relative to one of the server's repository roots: "mnist" or "mnist/3"
  version @1 :UInt64;      # a version directory; 0 = the highest present
  sizeHint @2 :UInt64;     # bytes to reserve on a device, at least the weights' size; 0 = the weights' size
  batching @3 :Batching;   # how this model's inferences are batched; absent: the server's settings
}

struct Batching {
  # Dynamic batching of one model's requests; these replace the server's settings as a whole.
  maxBatch @0 :UInt64;         # rows in one pass; 0 or 1: this model is not batched
  maxQueueDelayUs @1 :UInt64;  # how long the oldest queued request may wait for more (microseconds)
  preferredBatch @2 :List(UInt64);  # sizes run as soon as formed, each in 1..maxBatch
  maxQueue @3 :UInt64;         # requests queued at most (past it: unavailable); 0 = 1024
}

enum ModelState {
  # ModelMesh's vocabulary plus QUEUED (a load waits for a loader or for room).
  notFound @0;
  notLoaded @1;
  queued @2;
  loading @3;
  loaded @4;
  loadingFailed @5;
}

struct ModelStatus {
  # A model's state and counters (getModelStatus, listModels, Inspection.models).
  id @0 :Text;                 # the model id (as asked; for an unknown id, state is notFound)
  state @1 :ModelState;        # where it is in the load state machine now
  device @2 :Text;             # where it is loaded or loading; empty otherwise
  bytes @3 :UInt64;            # bytes it takes on a device
  requests @4 :UInt64;         # uses: inferences and ensureLoaded calls
  hits @5 :UInt64;             # uses served without waiting for a load
  requestsPerSecond @6 :Float64; # moving average (60 s time constant)
  inFlight @7 :UInt32;         # inferences running now
  idleSeconds @8 :Float64;     # since the last use; -1 if never used
  loadCount @9 :UInt64;        # successful loads
  loadMeanMs @10 :Float64;     # their mean duration
  loadStddevMs @11 :Float64;   # and standard deviation
  lastError @12 :Status;       # LOADING_FAILED: the recorded failure (code loadFailed or modelTooLarge)
  retryInSeconds @13 :Float64; # LOADING_FAILED: until the next attempt is allowed
  loadedBytes @14 :UInt64;     # LOADING: bytes copied so far (progress); LOADED: bytes
  inputWidth @15 :UInt64;      # a model with one input and one output, both [batch, width]
                               # (every dense model): the input's width; 0 otherwise or unknown
  outputWidth @16 :UInt64;     # such a model's output width; 0 otherwise
  batching @17 :Batching;      # the registration's own batching settings; absent: the server's
  kind @18 :Text;              # its backend: "dense", "torchscript"; empty when its file could
                               # not be read
  inputs @19 :List(TensorSpec);  # what it takes, in forward()'s order
  outputs @20 :List(TensorSpec); # what it gives
  batched @21 :Bool;           # every tensor's first dimension is the batch
  version @22 :UInt64;         # the version directory it is served from (registered, or chosen
                               # at registration: the highest); 0 for a file named directly
  source @23 :Text;            # a model from S3 or HTTP: its object's URL; empty for a model on
                               # the server's disk (then inTier and tierBytes say nothing)
  inTier @24 :Bool;            # the server's disk tier holds a copy of its file now (a load reads
                               # it from local disk); false: its bytes are at the source only
  tierBytes @25 :UInt64;       # inTier: that copy's bytes
}

struct TensorSpec {
  # One input or output of a model.
  name @0 :Text;
  dtype @1 :Text;         # "F32", "I64", ... (as Tensor.dtype); empty when not declared
  shape @2 :List(Int64);  # -1 for a dynamic dimension (the batch when batched); empty when the
                          # rank is not declared (a TorchScript model without warm.json)
}

enum VModelState {
  # A vmodel's state: settled, or moving to a new target.
  notFound @0;          # no such vmodel
  defined @1;           # settled: active == target
  transitioning @2;     # the target is loading; the active model still serves
  transitionFailed @3;  # the target failed to load; the active model still serves
}

struct VModelStatus {
  # A vmodel (an alias that moves between models without a gap in service) and its two models.
  id @0 :Text;                 # the vmodel id
  state @1 :VModelState;       # settled, transitioning or transitionFailed
  active @2 :Text;             # the model serving requests
  target @3 :Text;             # the model it moves to (equal to active when settled)
  activeState @4 :ModelState;  # the active model's state
  targetState @5 :ModelState;  # the target model's state (equal to activeState when settled)
  error @6 :Status;            # why the last transition failed (transitionFailed)
}

struct Tensor {
  # A tensor as raw little-endian bytes, row-major.
  name @0 :Text;        # one of the model's inputs or outputs (ModelStatus.inputs); a model with
                        # a single input also takes an empty name
  dtype @1 :Text;       # "F32", "F16", "BF16", "F64", "I64", "I32", "I16", "I8", "U8", "BOOL"
  shape @2 :List(UInt64); # dimensions, outermost first; a batched model also takes an input
                          # without its batch dimension (one row)
  data @3 :Data;        # exactly product(shape) × size(dtype) bytes
}

struct InferRequest {
  # One inference: the target and its input tensors.
  target @0 :Text;      # a model id or a vmodel id
  inputs @1 :List(Tensor); # the model's inputs, each once, in any order
  forwarded @2 :Bool;   # sent by another instance of the cluster: served there, never passed on
}

struct InferResult {
  # What an inference gave, and how it was served.
  outputs @0 :List(Tensor); # the model's outputs, in its order
  model @1 :Text;       # the model that served it (the vmodel's active model for a vmodel)
  cacheHit @2 :Bool;    # served without waiting for a load
  loadWaitMs @3 :Float64; # time spent waiting for the model to load
}

struct ResidentModel {
  # A model resident on a device (Inspection.devices[].resident).
  model @0 :Text;              # the model id
  bytes @1 :UInt64;            # bytes it holds on the device
  inFlight @2 :UInt32;         # inferences running on it now (it is not evicted while > 0)
  uses @3 :UInt64;             # uses served by this resident copy (since it was loaded)
  idleSeconds @4 :Float64;     # since its last use; -1 if not used since it was loaded
  score @5 :Float64;           # the policy's score, what the eviction order is by (docs/policies.md)
  predicted @6 :UInt64;        # bytes reserved before it loaded (weights, an estimate or a size hint)
  measured @7 :UInt64;         # what its load measured (bytes is settled on it); 0 when its backend's charge is exact
}

struct DeviceInfo {
  # A device, its memory and what it holds (Inspection.devices).
  name @0 :Text;               # as --device names it: "host", "host.1", "cuda:0", ...
  policy @1 :Text;             # its eviction policy: lru, lfu, arc, srrip, gdsf, iam or kdf
  capacity @2 :UInt64;         # bytes models may take on it
  used @3 :UInt64;             # charged now: resident, reserved for loads and draining
  draining @4 :UInt64;         # evicted models still finishing inferences
  evictions @5 :UInt64;        # models evicted since the server started
  scoreSwaps @6 :UInt64;       # importance heaps swapped in (iam)
  resident @7 :List(ResidentModel);  # in eviction order: the policy's next victim first
  state @8 :Text;              # a model runtime's own state (pid, restarts, why not ready);
                               # empty for warm's own devices
}

struct QueuedLoad {
  # A load waiting for a loader or for room on a device (Inspection.queue).
  model @0 :Text;              # the model id
  waiting @1 :Bool;            # a request waits on it (else proactive)
  ageMs @2 :Float64;           # waiting: since the first waiting request; proactive: since last use
  attempts @3 :UInt32;         # loads of it already started (each failed; retried elsewhere)
  waiters @4 :UInt32;          # requests waiting on it now (0 for a proactive load)
}

struct RunningLoad {
  # A load that has left the queue (Inspection.running).
  model @0 :Text;              # the model id
  device @1 :Text;             # the device it goes to
  phase @2 :Text;              # "reserving" (making room: evictions) or "loading" (copying)
  attempt @3 :UInt32;          # which attempt this is, from 1
  waiters @4 :UInt32;          # requests waiting on it now
  elapsedMs @5 :Float64;       # since it left the queue
  bytes @6 :UInt64;            # what it is expected to take on its device
}

struct FailureRecord {
  # A recorded load failure: it keeps the model off that device until it expires.
  model @0 :Text;              # the model id
  device @1 :Text;             # the device the load failed on
  error @2 :Status;            # why (loadFailed or modelTooLarge)
  ageSeconds @3 :Float64;      # since the failure
  expiresInSeconds @4 :Float64; # until the device may be tried again for this model
}

struct TierFile {
  # A file the disk tier holds (Tier.held).
  source @0 :Text;             # the object's URL it is a copy of
  bytes @1 :UInt64;            # its size
  models @2 :List(Text);       # the registered models whose file it is, sorted
}

struct Tier {
  # The disk tier of remote model files (Inspection.tier): its budget, its contents and what it has
  # done since the server started. All zero while no tier is open (open false).
  open @0 :Bool;               # a tier directory is open
  dir @1 :Text;                # its directory
  capacity @2 :UInt64;         # its byte budget (--cache-bytes)
  used @3 :UInt64;             # bytes of complete files
  reserved @4 :UInt64;         # bytes reserved for fetches in flight
  files @5 :UInt64;            # complete files
  hits @6 :UInt64;             # copies asked for that it held
  misses @7 :UInt64;           # copies it had to fetch
  evictions @8 :UInt64;        # files evicted to make room
  fetches @9 :UInt64;          # fetches that ended with their file kept
  fetchFailures @10 :UInt64;   # fetches that failed
  fetchBytes @11 :UInt64;      # bytes the fetches received
  fetchSeconds @12 :Float64;   # the successful fetches' durations together
  held @13 :List(TierFile);    # its files, first to be evicted first
}

struct Inspection {
  # One snapshot of every actor's state.
  devices @0 :List(DeviceInfo);       # every device the server uses
  queue @1 :List(QueuedLoad);          # in start order
  running @2 :List(RunningLoad);       # at most maxConcurrentLoads
  failures @3 :List(FailureRecord);    # failure records that have not expired
  models @4 :List(ModelStatus);        # models that have been used (have a model actor)
  registeredModels @5 :UInt64;         # models registered now
  vmodels @6 :UInt64;                  # vmodels defined now
  maxConcurrentLoads @7 :UInt32;       # loads that may run at once (the loader pool's size)
  loadsStarted @8 :UInt64;             # loads started since the server started (attempts)
  loadsFailed @9 :UInt64;              # of those, the ones that failed
  importanceRebuilds @10 :UInt64;      # importance heaps built by the scorer (iam policy)
  importanceRebuildSeconds @11 :Float64; # how long the last one took
  tier @12 :Tier;                      # the disk tier of remote model files
}

struct ModelEvent {
  # A model's state changed.
  model @0 :Text;              # the model id
  previous @1 :ModelState;     # the state it left
  state @2 :ModelState;        # the state it entered
  device @3 :Text;             # where it is loaded or loading, or the device it left
  error @4 :Status;            # LOADING_FAILED: why
  sequence @5 :UInt64;         # increases by one per event on this server
  missed @6 :UInt64;           # events of this watch dropped just before this one (the watcher
                               # fell behind by more than the server queues); 0 when none
  reason @7 :Text;             # LOADED to NOT_LOADED: why it left its device, when known:
                               # "capacity", "unload", "replaced" or "lost"; empty otherwise
}

struct VersionStatus {
  # One version of a served model (ServedModel.versions).
  version @0 :UInt64;
  state @1 :Text;              # NEW, LOADING, READY, UNLOADING or ERROR (docs/versions.md)
  aspired @2 :Bool;            # its version policy (or a label) wants it served
  error @3 :Text;              # ERROR: why its last load failed; empty otherwise
  retryInSeconds @4 :Float64;  # ERROR: until its next load
  failures @5 :UInt32;         # failed loads since it was last ready
}

struct VersionLabel {
  # A label in effect: `model@name` serves `version`.
  name @0 :Text;
  version @1 :UInt64;
}

struct ServedModel {
  # A model whose versions come from its directory (docs/versions.md): its name serves the
  # default version, `name@N` version N, `name@label` a label's version.
  name @0 :Text;
  basePath @1 :Text;           # its directory, relative to a repository root
  versionPolicy @2 :Text;      # latest:N, all or specific:V,...
  loadPolicy @3 :Text;         # availability-preserving or resource-preserving
  versions @4 :List(VersionStatus);  # ascending
  defaultVersion @5 :UInt64;   # what the name serves now; 0 = none yet
  labels @6 :List(VersionLabel);     # in effect, by name
  sourceError @7 :Text;        # why its directory (or an alias) could not be handled at the last look
  rolling @8 :Bool;            # a version is being loaded or unloaded, or an alias moved
}

struct ClusterInstance {
  # An instance of the cluster, as its record in etcd says.
  name @0 :Text;
  address @1 :Text;            # where peers reach its Cap'n Proto service
  version @2 :Text;
  self @3 :Bool;               # the instance answering
  draining @4 :Bool;           # stopping: takes no new loads
  capacity @5 :UInt64;         # bytes, all devices
  used @6 :UInt64;
  modelsLoaded @7 :UInt64;
  loadsInFlight @8 :UInt32;    # queued or running
  loadingThreads @9 :UInt32;
  startedUnix @10 :Int64;      # seconds since the epoch
  updatedSecondsAgo @11 :Float64;  # since the answering instance saw its record last written
  residents @12 :List(Text);   # models resident there, sorted
  loading @13 :List(Text);     # models queued or loading there, sorted
  tiered @14 :List(Text);      # models whose files its disk tier holds (it loads them without
                               # fetching), sorted, at most 1024
}

struct ClusterInfo {
  enabled @0 :Bool;            # false: the server runs alone, and the rest is empty
  name @1 :Text;               # the cluster's name
  instance @2 :Text;           # the answering instance's name
  joined @3 :Bool;             # it holds a lease and its record is published
  lastError @4 :Text;          # the last etcd failure; empty while etcd answers
  endpoints @5 :List(Text);    # etcd's client URLs
  instances @6 :List(ClusterInstance);  # by name
  # What the answering instance did for the cluster since it started:
  forwarded @7 :UInt64;        # misses answered by the peer holding the model
  fellBack @8 :UInt64;         # forwards the peer could not serve, served here instead
  placed @9 :UInt64;           # cold models it placed (claims it won)
  claimsLost @10 :UInt64;      # placements another instance claimed first (then followed)
}

interface StateListener {
  # Implemented by a client that watches; the server calls it once per state change, in order.
  modelStateChanged @0 (event :ModelEvent) -> ();
  # One state change. Events that happen while earlier calls are unanswered queue on the server
  # (past its limit the oldest are dropped: the next event delivered counts them in `missed`).
}

interface WatchHandle {
  # Held by a watching client: dropping it (or disconnecting) stops the watch.
}

interface Warm {
  registerModel @0 (id :Text, info :ModelInfo, loadNow :Bool, sync :Bool) -> (status :Status);
  # Registers `id`. Idempotent for the same info; different info is invalidArgument. A path that
  # resolves outside every repository root (.., absolute, symlinks) is invalidArgument. loadNow
  # queues a background load; sync answers only once the model is loaded (or its load failed).
  # Answered once the registration is durable.

  unregisterModel @1 (id :Text) -> (status :Status);
  # Unregisters and unloads asynchronously. invalidArgument while a vmodel references it.

  getModelStatus @2 (id :Text) -> (status :Status, model :ModelStatus);
  # status ok and model.state notFound for an unknown id.

  ensureLoaded @3 (id :Text, sync :Bool) -> (status :Status);
  # Loads the model (or a vmodel's active model) if needed; counts as a use. sync waits for it.

  setVModel @4 (id :Text, target :Text, autoDeleteTarget :Bool, expectedTarget :Text)
      -> (status :Status, vmodel :VModelStatus);
  # Points vmodel `id` at model `target`; the active model keeps serving until the target is
  # loaded, then the alias flips. autoDeleteTarget: unregister the target once no vmodel uses it.
  # expectedTarget, when set (non-null), makes it a compare-and-set on the current target.

  deleteVModel @5 (id :Text) -> (status :Status);
  # Deletes vmodel `id` (notFound if there is none); its models stay registered, except targets
  # set with autoDeleteTarget that no other vmodel references, which are unregistered.

  getVModelStatus @6 (id :Text) -> (status :Status, vmodel :VModelStatus);
  # notFound for an unknown vmodel.

  listModels @7 (after :Text, limit :UInt32) -> (status :Status, models :List(ModelStatus), next :Text);
  # Registered models in id order, starting after `after` (empty = from the start), at most
  # `limit` (0 = the server's page size). `next` is the id to pass as `after` for the next page,
  # empty at the end.

  infer @8 (request :InferRequest) -> (status :Status, result :InferResult);
  # Runs the model (loading it first if needed). Inputs are checked against the model: a wrong
  # dtype, rank, inner dimension or byte count is invalidArgument.

  inspect @9 () -> (status :Status, inspection :Inspection);
  # One snapshot of the server's state: devices and their resident models, queued and running
  # loads, failure records, the models that have been used, and counters.

  watch @10 (listener :StateListener) -> (status :Status, handle :WatchHandle);
  # Calls `listener` on every model state change from now on, until `handle` is dropped.
  # capacityExhausted (and no handle) past the server's watcher limits, per connection and in all.

  retry @11 (id :Text) -> (status :Status);
  # Forgets the load failures of the model (or a vmodel's active model): its next use loads it
  # again at once instead of failing fast until a failure record expires. notFound when unknown.

  servedModels @12 () -> (status :Status, models :List(ServedModel));
  # Every served model (versions from directories), by name; empty when the server serves none.

  reload @13 () -> (status :Status, models :UInt32);
  # Re-reads the server's served-models configuration (warmd: --model-config and --serve-repo)
  # and applies it whole: `models` served now. A file with an error is refused (invalidArgument
  # naming it) and nothing changes; invalidArgument too when the server has nothing to reload.

  clusterInfo @14 () -> (status :Status, cluster :ClusterInfo);
  # This instance's view of its cluster (docs/cluster.md); cluster.enabled is false when the
  # server runs alone.
}

interface Authenticator {
  # The bootstrap capability of a TCP listener with remote access: nothing else is reachable
  # without the token.
  authenticate @0 (token :Text) -> (status :Status, warm :Warm);
  # unauthenticated (and no capability) for a wrong token.

  challenge @1 () -> (nonce :Data);
  # The first step of a login that does not send the token, for the cluster's instances
  # (src/net/peer_proof.hpp): a fresh 32-byte nonce for the next prove on this connection. Each
  # challenge replaces the last one.

  prove @2 (address :Text, nonce :Data, proof :Data) -> (status :Status, warm :Warm, proof :Data);
  # Logs in with a proof of the token instead of the token: `address` is the address the caller
  # dialed, `nonce` the caller's own (32 bytes), `proof` HMAC-SHA256 of the token over them and
  # the challenge's nonce. The answer's `proof` shows the caller that this server holds the token
  # too; a caller must check it before using `warm`. unauthenticated, with no capability, when
  # there was no challenge (each serves one prove), the proof is wrong, or `address` is not the
  # one this server is reached at in its cluster (a server outside a cluster refuses every prove).
}
