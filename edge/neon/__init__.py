"""NeonExecutionProvider: onnxedge's C kernels (NEON on aarch64, SSE/AVX2 on the x86 host build)."""
from __future__ import annotations
