"""onnxedge.reduced_build: slim onnxedge builds holding only the kernels some models need.

- `scan`: the operators models need (subgraphs, model-local functions, ops the optimizer fuses at
  load time) and onnxruntime's `required_operators.config` format.
- `wheel`: a slim wheel of the core, the kernel modules those ops need and chosen extra packages
  (e.g. `onnxedge.edge.neon` with its aarch64 library), with a platform tag and full dist-info.
- `report`: its size report (bytes, files, ops and kernel modules kept and dropped).
"""
