#!/usr/bin/python3
"""Builds small TorchScript models: the demo's (tools/run) and the tests' (tests/torchscript_test).

Usage: torch_models.py REPO [CASES]

Writes REPO/<model>/1/model.pt for each model below (cnn, cnn_plain, encoder, pooler), and with
CASES, CASES/<model>.safetensors holding inputs ("input.<name>") and the outputs PyTorch computed
for them ("output.<name>"), and the tests' balloon model. Deterministic for its seed. Exits 77 (meson's "skipped") when this
Python has no torch: run it with /usr/bin/python3, which sees Debian's python3-torch.
"""
import json
import os
import struct
import sys

try:
    import torch
    from torch import nn
except ImportError:
    print("torch_models.py: no torch in " + sys.executable + " (apt install python3-torch)", file=sys.stderr)
    sys.exit(77)

from typing import Tuple

DTYPES = {torch.float32: "F32", torch.int64: "I64", torch.float64: "F64", torch.int32: "I32",
          torch.uint8: "U8", torch.bool: "BOOL", torch.float16: "F16", torch.bfloat16: "BF16"}
V2 = {"F32": "FP32", "I64": "INT64", "F64": "FP64", "I32": "INT32", "U8": "UINT8", "BOOL": "BOOL",
      "F16": "FP16", "BF16": "BF16"}


def write_safetensors(path, tensors):
    header, blobs, offset = {}, [], 0
    for name, t in tensors.items():
        t = t.contiguous()
        data = t.view(torch.uint8).numpy().tobytes() if t.dtype != torch.bool else t.to(torch.uint8).numpy().tobytes()
        header[name] = {"dtype": DTYPES[t.dtype], "shape": list(t.shape), "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(blobs))


class Cnn(nn.Module):
    """Convolution, batch norm, pooling and a linear layer."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.norm = nn.BatchNorm2d(8)
        self.pool = nn.MaxPool2d(2)
        self.head = nn.Linear(8 * 4 * 4, 10)

    def forward(self, image):
        x = self.pool(torch.relu(self.norm(self.conv(image))))
        return self.head(torch.flatten(x, 1))


class Pooler(nn.Module):
    """Two inputs (token ids, a mask) and a tuple of two outputs (logits, the pooled embedding)."""

    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(50, 8)
        self.head = nn.Linear(8, 3)

    def forward(self, ids, mask) -> Tuple[torch.Tensor, torch.Tensor]:
        summed = (self.embed(ids) * mask.unsqueeze(-1)).sum(1)
        pooled = summed / mask.sum(1, keepdim=True).clamp(min=1.0)
        return self.head(pooled), pooled


class Balloon(nn.Module):
    """A model of a few bytes whose forward() makes 16 MiB of scratch per row: a file that says
    nothing of the memory the model takes (tests of measured sizes)."""

    def __init__(self):
        super().__init__()
        self.scale = nn.Parameter(torch.ones(1))

    def forward(self, x):
        scratch = torch.ones(x.shape[0], 1 << 22)
        return x * self.scale + scratch.sum(1, keepdim=True)


def declaration(inputs, outputs, batched=True):
    side = lambda specs: [{"name": n, "datatype": d, "shape": s} for n, d, s in specs]
    return json.dumps({"inputs": side(inputs), "outputs": side(outputs), "batched": batched})


def save(repo, name, module, declared):
    path = os.path.join(repo, name, "1")
    os.makedirs(path, exist_ok=True)
    extra = {"warm.json": declared} if declared else {}
    torch.jit.save(module, os.path.join(path, "model.pt"), _extra_files=extra)


def main():
    if len(sys.argv) not in (2, 3):
        print("usage: torch_models.py REPO [CASES]", file=sys.stderr)
        sys.exit(2)
    repo, cases = sys.argv[1], sys.argv[2] if len(sys.argv) == 3 else None
    torch.manual_seed(7)
    torch.set_num_threads(1)

    cnn = Cnn()
    cnn.train()
    for _ in range(3):  # running statistics that are not the defaults
        cnn(torch.randn(4, 3, 8, 8))
    cnn.eval()
    scripted_cnn = torch.jit.script(cnn)
    cnn_io = declaration([("image", "FP32", [-1, 3, 8, 8])], [("output", "FP32", [-1, 10])])
    save(repo, "cnn", scripted_cnn, cnn_io)
    save(repo, "cnn_plain", scripted_cnn, None)  # no declaration: tensors passed through

    encoder = nn.TransformerEncoderLayer(d_model=16, nhead=2, dim_feedforward=32, batch_first=True).eval()
    traced_encoder = torch.jit.trace(encoder, torch.randn(2, 5, 16), check_trace=False)
    save(repo, "encoder", traced_encoder,
         declaration([("src", "FP32", [-1, 5, 16])], [("output", "FP32", [-1, 5, 16])]))

    pooler = Pooler().eval()
    scripted_pooler = torch.jit.script(pooler)
    save(repo, "pooler", scripted_pooler,
         declaration([("ids", "INT64", [-1, 6]), ("mask", "FP32", [-1, 6])],
                     [("output_0", "FP32", [-1, 3]), ("output_1", "FP32", [-1, 8])]))

    if cases is None:
        return
    save(repo, "balloon", torch.jit.script(Balloon().eval()),
         declaration([("x", "FP32", [-1, 1])], [("output", "FP32", [-1, 1])]))
    os.makedirs(cases, exist_ok=True)
    with torch.inference_mode():
        image = torch.randn(3, 3, 8, 8)
        write_safetensors(os.path.join(cases, "cnn.safetensors"),
                          {"input.image": image, "output.output": scripted_cnn(image)})
        src = torch.randn(2, 5, 16)
        write_safetensors(os.path.join(cases, "encoder.safetensors"),
                          {"input.src": src, "output.output": traced_encoder(src)})
        ids = torch.randint(0, 50, (4, 6), dtype=torch.int64)
        mask = (torch.rand(4, 6) > 0.3).to(torch.float32)
        logits, pooled = scripted_pooler(ids, mask)
        write_safetensors(os.path.join(cases, "pooler.safetensors"),
                          {"input.ids": ids, "input.mask": mask, "output.output_0": logits, "output.output_1": pooled})


if __name__ == "__main__":
    main()
