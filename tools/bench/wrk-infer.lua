-- wrk script: POST one batch-1 KServe V2 inference request, the same body on every call.
-- See docs/performance.md. Usage (a dense model whose first layer is WIDTH wide, default 256):
--
--   wrk -t2 -c8 -d10s -s tools/bench/wrk-infer.lua http://127.0.0.1:PORT/v2/models/MODEL/infer [-- WIDTH]
--
-- The body is {"inputs":[{"name":"input","shape":[1,WIDTH],"datatype":"FP32","data":[...]}]}
-- with WIDTH pseudo-random values in [-1, 1) (fixed seed, so every thread sends the same bytes).
-- wrk counts answers other than 2xx/3xx itself ("Non-2xx or 3xx responses"); no response()
-- hook is defined, because one makes wrk hand every answer to Lua and slows the client down.

local function v2_body(width)
  math.randomseed(42)
  local data = {}
  for i = 1, width do
    data[i] = string.format("%.9g", math.random() * 2 - 1)
  end
  return '{"inputs":[{"name":"input","shape":[1,' .. width .. '],"datatype":"FP32","data":[' ..
         table.concat(data, ",") .. ']}]}'
end

wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
wrk.body = v2_body(256)

-- Runs in each thread before its first request; args are what follows "--" on wrk's command line.
function init(args)
  local width = tonumber(args[1])
  if width then
    wrk.body = v2_body(width)
  end
end
