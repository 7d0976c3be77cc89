"""How `hf_bert_tiny_opset14.onnx` was made (needs torch 2.13 and transformers 5, which the test
environments do not install; the .onnx is checked in): a 2-layer HuggingFace BertModel with
random weights (seed 0), exported by torch's TorchScript-based exporter with dynamic batch and
sequence, as most BERT .onnx files in the wild were made."""
import torch
from transformers import BertConfig, BertModel


class _Wrapper(torch.nn.Module):
    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, ids, mask):
        return self.model(input_ids=ids, attention_mask=mask).last_hidden_state


def main() -> None:
    torch.manual_seed(0)
    cfg = BertConfig(vocab_size=50, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                     intermediate_size=64, max_position_embeddings=32, attn_implementation="eager")
    model = BertModel(cfg, add_pooling_layer=False).eval()
    ids = torch.randint(0, 50, (2, 16))
    mask = torch.ones(2, 16, dtype=torch.long)
    dynamic = {"input_ids": {0: "b", 1: "s"}, "attention_mask": {0: "b", 1: "s"}}
    torch.onnx.export(_Wrapper(model), (ids, mask), "hf_bert_tiny_opset14.onnx", dynamo=False,
                      input_names=["input_ids", "attention_mask"],
                      output_names=["last_hidden_state"], opset_version=14, dynamic_axes=dynamic)


if __name__ == "__main__":
    main()
