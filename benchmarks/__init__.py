"""Benchmark models and the onnxedge-vs-onnxruntime benchmark runner."""
