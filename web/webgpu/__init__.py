"""onnxedge.web.webgpu: the WebGPU execution provider (WGSL kernels over wgpu-py or navigator.gpu).

`device` is the device layer (shared interface, native wgpu backend), `shaders/` the WGSL
templates, `ops/` one module per op family saying how to dispatch them, `provider` the
`WebGpuExecutionProvider` the session finds through its entry point.
"""
from __future__ import annotations
