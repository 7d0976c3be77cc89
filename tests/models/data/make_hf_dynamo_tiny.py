"""How `hf_bert_tiny_dynamo.onnx`, `hf_gpt2_tiny_dynamo.onnx` and the two `torch_sdpa_*_dynamo.onnx`
were made (needs torch 2.13,
transformers 5 and onnxscript, which the test environments do not install; the .onnx files are
checked in): a 2-layer HuggingFace BertModel and GPT2Model (hidden 64, 4 heads, SDPA attention)
with random weights (seed 0; biases and LayerNorm weights randomized too, so that no two
initializers are equal and merged), exported by torch's newer exporter (`dynamo=True`, opset 20)
with dynamic batch and sequence. GPT-2's attention mask is causal and padding together. The
`torch_sdpa_*` models are one attention block calling torch's scaled_dot_product_attention
directly: with is_causal=True (the exporter builds the mask from the shapes of Q and K), and
with a boolean key-padding mask and scale=0.3. Nodes'
metadata_props (torch's per-node trace: module paths, FX node text) are dropped to keep the
files small; the graphs, value infos and weights are as exported.

Run with HF_HUB_OFFLINE=1 from this folder: `python make_hf_dynamo_tiny.py`.
"""
import onnx
import torch
import torch.nn.functional as F
from transformers import BertConfig, BertModel, GPT2Config, GPT2Model


class _Wrapper(torch.nn.Module):
    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, ids, mask):
        return self.model(input_ids=ids, attention_mask=mask, use_cache=False).last_hidden_state


class _Attention(torch.nn.Module):
    """Q, K, V projections, SDPA over 4 heads of 8, heads merged back."""

    def __init__(self, causal: bool):
        super().__init__()
        self.causal = causal
        self.q, self.k, self.v = (torch.nn.Linear(32, 32) for _ in range(3))

    def forward(self, x, m):
        b, s, _ = x.shape
        q, k, v = (p(x).view(b, s, 4, 8).transpose(1, 2) for p in (self.q, self.k, self.v))
        if self.causal:
            o = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        else:
            o = F.scaled_dot_product_attention(q, k, v, attn_mask=m[:, None, None, :], scale=0.3)
        return o.transpose(1, 2).reshape(b, s, 32)


def _randomize(model: torch.nn.Module) -> torch.nn.Module:
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "LayerNorm." in name or ".ln_" in name or name.startswith("ln_"):
                p.copy_(1.0 + 0.1 * torch.randn_like(p) if name.endswith("weight")
                        else 0.1 * torch.randn_like(p))
            else:
                p.copy_(0.1 * torch.randn_like(p))
    return model.eval()


def _export(model: torch.nn.Module, path: str) -> None:
    b, s = torch.export.Dim("batch"), torch.export.Dim("seq")
    if isinstance(model, _Attention):
        args, names = (torch.randn(2, 6, 32), torch.ones(2, 6, dtype=torch.bool)), ["x", "m"]
        dynamic, output = {"x": {0: b, 1: s}, "m": {0: b, 1: s}}, "y"
    else:
        model = _Wrapper(model)
        args = (torch.randint(0, 50, (2, 16)), torch.ones(2, 16, dtype=torch.long))
        names, output = ["input_ids", "attention_mask"], "last_hidden_state"
        dynamic = {"ids": {0: b, 1: s}, "mask": {0: b, 1: s}}
    torch.onnx.export(model, args, path, dynamo=True, external_data=False, input_names=names,
                      output_names=[output], dynamic_shapes=dynamic)
    proto = onnx.load(path)
    for node in proto.graph.node:
        del node.metadata_props[:]
    onnx.save(proto, path)


def main() -> None:
    torch.manual_seed(0)
    bert = BertConfig(vocab_size=50, hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                      intermediate_size=64, max_position_embeddings=32, attn_implementation="sdpa")
    _export(_randomize(BertModel(bert, add_pooling_layer=False)), "hf_bert_tiny_dynamo.onnx")
    gpt2 = GPT2Config(vocab_size=50, n_embd=64, n_layer=2, n_head=4, n_inner=64, n_positions=32,
                      attn_implementation="sdpa")
    _export(_randomize(GPT2Model(gpt2)), "hf_gpt2_tiny_dynamo.onnx")
    _export(_randomize(_Attention(causal=True)), "torch_sdpa_causal_dynamo.onnx")
    _export(_randomize(_Attention(causal=False)), "torch_sdpa_mask_scale_dynamo.onnx")


if __name__ == "__main__":
    main()
