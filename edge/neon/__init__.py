"""The native C engine: onnxedge's C kernels through ctypes, as NeonExecutionProvider on aarch64 and
X64ExecutionProvider on x86-64 (SSE2 baseline, AVX2/AVX-512 chosen at load)."""
from __future__ import annotations
