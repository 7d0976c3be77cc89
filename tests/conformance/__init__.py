"""The ONNX backend node-suite conformance harness (see run.py and docs/CONFORMANCE.md)."""
