"""Zoo family: transformer models as onnxruntime's tools leave them.

Tiny random-weight `transformers` models (2 layers, hidden 32, fixed seeds) exported with torch's
TorchScript exporter (`dynamo=False`, opset 17, dynamic batch and sequence axes), then:

- `onnxruntime.transformers.optimizer.optimize_model` (BERT, DistilBERT, RoBERTa, GPT-2, ViT):
  EmbedLayerNormalization, Attention, SkipLayerNormalization, BiasGelu / FastGelu; the build
  checks that the fused ops are really there, so a change in the optimizer cannot quietly
  turn a record into a plain model. (onnxruntime 1.31 does not fuse the attention of
  transformers 5's GPT-2, whose causal mask it does not recognise: that record has
  SkipLayerNormalization and FastGelu; unidirectional Attention and past/present are covered
  by tests/unit/test_contrib_transformer.py);
- the same optimized BERT converted to float16 (`convert_float_to_float16(keep_io_types=True)`);
- sessions saved with `optimized_model_filepath` at ORT_ENABLE_EXTENDED and ORT_ENABLE_ALL
  (onnxruntime's own graph fusions: FusedMatMul, BiasGelu, LayerNormalization for BERT;
  FusedGemm for an MLP).

Feeds use a padded attention mask (batch 2, the second row padded) where the model takes one.
"""
from __future__ import annotations

import collections
import os
from typing import Any, Callable, Dict, List, Sequence

import numpy as np

from .zoo import ZooModel

REQUIRES = ("torch", "transformers", "onnx", "onnxruntime")
BATCH, SEQ, HIDDEN, HEADS, VOCAB = 2, 12, 32, 2, 100


def _version(dist: str) -> str:
    try:
        from importlib.metadata import version
        return version(dist)
    except Exception:   # not installed (the record is skipped) or no metadata
        return "missing"


VERSIONS = "transformers %s, torch %s (TorchScript exporter, opset 17), onnxruntime %s" % (
    _version("transformers"), _version("torch"), _version("onnxruntime"))


def _text_feeds(names: Sequence[str], vocab: int = VOCAB) -> Dict[str, np.ndarray]:
    rng = np.random.RandomState(0)
    feeds: Dict[str, np.ndarray] = {}
    for name in names:
        if name == "attention_mask":
            mask = np.ones((BATCH, SEQ), dtype=np.int64)
            mask[1, SEQ - 3:] = 0
            feeds[name] = mask
        elif name == "token_type_ids":
            feeds[name] = (np.arange(BATCH * SEQ).reshape(BATCH, SEQ) >= SEQ // 2).astype(np.int64)
        else:
            feeds[name] = rng.randint(3, vocab, (BATCH, SEQ)).astype(np.int64)
    return feeds


def _match_input_types(path: str, feeds: Dict[str, np.ndarray]) -> Dict[str, np.ndarray]:
    """Feeds cast to the types the written model declares (the optimizer may make them int32)."""
    import onnx
    from onnx import helper
    model = onnx.load(path, load_external_data=False)
    out = {}
    for inp in model.graph.input:
        if inp.name in feeds:
            dt = helper.tensor_dtype_to_np_dtype(inp.type.tensor_type.elem_type)
            out[inp.name] = feeds[inp.name].astype(dt)
    return out


class _Wrap:
    """A torch module returning the model's first output only (TorchScript export wants plain
    tensors, transformers returns ModelOutput objects)."""

    @staticmethod
    def make(model: Any, names: Sequence[str]) -> Any:
        import torch

        class Wrapped(torch.nn.Module):
            def __init__(self) -> None:
                super().__init__()
                self.model = model

            def forward(self, *args: Any) -> Any:
                return self.model(**dict(zip(names, args)))[0]

        return Wrapped().eval()


def _export(make_model: Callable[[], Any], names: Sequence[str], feeds: Dict[str, np.ndarray],
            path: str) -> None:
    """Export the tiny model with the TorchScript exporter, batch and sequence axes dynamic."""
    import torch
    torch.manual_seed(0)
    model = _Wrap.make(make_model(), names)
    args = tuple(torch.from_numpy(feeds[n]) for n in names)
    axes = {n: ({0: "batch", 1: "seq"} if feeds[n].ndim == 2 else {0: "batch"}) for n in names}
    axes["output"] = {0: "batch", 1: "seq"}
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with torch.no_grad():
            torch.onnx.export(model, args, path, input_names=list(names), output_names=["output"],
                              dynamic_axes=axes, opset_version=17, dynamo=False)


def _op_counts(model: Any) -> Dict[str, int]:
    return dict(collections.Counter(n.op_type for n in model.graph.node))


def _require_ops(what: str, counts: Dict[str, int], needed: Dict[str, int]) -> None:
    missing = {op: n for op, n in needed.items() if counts.get(op, 0) < n}
    if missing:
        raise AssertionError("%s: expected fused ops %s, the model has %s" % (what, missing, counts))


def _bert_like(kind: str) -> Callable[[], Any]:
    def make() -> Any:
        import transformers
        common = dict(vocab_size=VOCAB, hidden_size=HIDDEN, num_hidden_layers=2,
                      num_attention_heads=HEADS, intermediate_size=64,
                      max_position_embeddings=32, attn_implementation="eager")
        if kind == "bert":
            return transformers.BertModel(transformers.BertConfig(**common)).eval()
        if kind == "roberta":
            return transformers.RobertaModel(transformers.RobertaConfig(**common)).eval()
        if kind == "gpt2":
            cfg = transformers.GPT2Config(vocab_size=VOCAB, n_embd=HIDDEN, n_layer=2, n_head=HEADS,
                                          n_positions=32, attn_implementation="eager")
            return transformers.GPT2Model(cfg).eval()
        if kind == "distilbert":
            cfg = transformers.DistilBertConfig(vocab_size=VOCAB, dim=HIDDEN, n_layers=2,
                                                n_heads=HEADS, hidden_dim=64,
                                                max_position_embeddings=32,
                                                attn_implementation="eager")
            return transformers.DistilBertModel(cfg).eval()
        if kind == "vit":
            cfg = transformers.ViTConfig(hidden_size=HIDDEN, num_hidden_layers=2,
                                         num_attention_heads=HEADS, intermediate_size=64,
                                         image_size=32, patch_size=8, num_channels=3,
                                         attn_implementation="eager")
            return transformers.ViTModel(cfg, add_pooling_layer=False).eval()
        raise ValueError(kind)
    return make


INPUTS = {
    "bert": ("input_ids", "attention_mask", "token_type_ids"),
    "roberta": ("input_ids", "attention_mask"),
    "distilbert": ("input_ids", "attention_mask"),
    "gpt2": ("input_ids", "attention_mask"),
    "vit": ("pixel_values",),
}


def _feeds(kind: str) -> Dict[str, np.ndarray]:
    if kind == "vit":
        rng = np.random.RandomState(0)
        return {"pixel_values": rng.standard_normal((BATCH, 3, 32, 32)).astype(np.float32)}
    return _text_feeds(INPUTS[kind])


def _export_to(kind: str, path: str) -> Dict[str, np.ndarray]:
    feeds = _feeds(kind)
    _export(_bert_like(kind), INPUTS[kind], feeds, path)
    return feeds


def _optimized(kind: str, model_type: str, needed: Dict[str, int], fp16: bool = False
               ) -> Callable[[str], Dict[str, Any]]:
    """Recipe: export, optimize_model(model_type), check the fused ops, optionally float16."""
    def build(path: str) -> Dict[str, Any]:
        from onnxruntime.transformers import optimizer
        raw = path + ".raw.onnx"
        feeds = _export_to(kind, raw)
        opt = optimizer.optimize_model(raw, model_type=model_type, num_heads=HEADS,
                                       hidden_size=HIDDEN)
        _require_ops("%s optimize_model(%s)" % (kind, model_type), _op_counts(opt.model), needed)
        if fp16:
            opt.convert_float_to_float16(keep_io_types=True)
        opt.save_model_to_file(path)
        os.remove(raw)
        return _match_input_types(path, feeds)
    return build


def _session_saved(kind: str, level: str, needed: Dict[str, int]
                   ) -> Callable[[str], Dict[str, Any]]:
    """Recipe: export, let an onnxruntime session optimize it and save `optimized_model_filepath`."""
    def build(path: str) -> Dict[str, Any]:
        import onnx
        import onnxruntime as ort
        raw = path + ".raw.onnx"
        feeds = _export_to(kind, raw) if kind != "mlp" else _export_mlp(raw)
        so = ort.SessionOptions()
        so.graph_optimization_level = getattr(ort.GraphOptimizationLevel, level)
        so.optimized_model_filepath = path
        ort.InferenceSession(raw, so, providers=["CPUExecutionProvider"])
        os.remove(raw)
        _require_ops("%s saved at %s" % (kind, level), _op_counts(onnx.load(path)), needed)
        return _match_input_types(path, feeds)
    return build


def _export_mlp(path: str) -> Dict[str, np.ndarray]:
    """A Linear-ReLU-Linear-Tanh MLP (Gemm + activation: FusedGemm in a saved session)."""
    import torch
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 8),
                              torch.nn.Tanh()).eval()
    x = np.random.RandomState(0).standard_normal((4, 16)).astype(np.float32)
    with torch.no_grad():
        torch.onnx.export(net, (torch.from_numpy(x),), path, input_names=["x"],
                          output_names=["output"], dynamic_axes={"x": {0: "batch"}},
                          opset_version=17, dynamo=False)
    return {"x": x}


def _record(name: str, what: str, build: Callable[[str], Dict[str, Any]],
            rtol: float = 1e-4, atol: float = 1e-4) -> ZooModel:
    return ZooModel(name=name, tool="%s; %s" % (what, VERSIONS), build=build, key="1",
                    rtol=rtol, atol=atol, requires=REQUIRES)


BERT_OPS = {"EmbedLayerNormalization": 1, "Attention": 2, "SkipLayerNormalization": 4,
            "BiasGelu": 2}

MODELS: List[ZooModel] = [
    _record("bert_optimized", "optimize_model(model_type='bert') of BertModel",
            _optimized("bert", "bert", BERT_OPS)),
    _record("bert_optimized_fp16", "optimize_model(model_type='bert') of BertModel, "
            "convert_float_to_float16(keep_io_types=True)",
            _optimized("bert", "bert", BERT_OPS, fp16=True), rtol=2e-2, atol=2e-2),
    _record("distilbert_optimized", "optimize_model(model_type='bert') of DistilBertModel",
            _optimized("distilbert", "bert", {"Attention": 2, "SkipLayerNormalization": 4,
                                              "BiasGelu": 2})),
    _record("roberta_optimized", "optimize_model(model_type='bert') of RobertaModel",
            _optimized("roberta", "bert", {"Attention": 2, "SkipLayerNormalization": 4,
                                           "BiasGelu": 2})),
    _record("gpt2_optimized", "optimize_model(model_type='gpt2') of GPT2Model",
            _optimized("gpt2", "gpt2", {"SkipLayerNormalization": 3, "FastGelu": 2})),
    _record("vit_optimized", "optimize_model(model_type='vit') of ViTModel",
            _optimized("vit", "vit", {"Attention": 2, "SkipLayerNormalization": 3,
                                      "BiasGelu": 2})),
    _record("bert_session_extended", "InferenceSession(optimized_model_filepath, "
            "ORT_ENABLE_EXTENDED) of BertModel",
            _session_saved("bert", "ORT_ENABLE_EXTENDED", {"FusedMatMul": 2, "BiasGelu": 2})),
    _record("bert_session_all", "InferenceSession(optimized_model_filepath, ORT_ENABLE_ALL) "
            "of BertModel",
            _session_saved("bert", "ORT_ENABLE_ALL", {"FusedMatMul": 2, "BiasGelu": 2})),
    _record("mlp_session_fusedgemm", "InferenceSession(optimized_model_filepath, "
            "ORT_ENABLE_EXTENDED) of a torch Linear-ReLU-Linear-Tanh MLP",
            _session_saved("mlp", "ORT_ENABLE_EXTENDED", {"FusedGemm": 2})),
]
