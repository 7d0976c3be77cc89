"""onnxedge.reduced_build: slim onnxedge builds holding only the kernels some models need.

- `scan`: the operators models need (subgraphs, model-local functions, ops the optimizer fuses at
  load time) and onnxruntime's `required_operators.config` format.
- `wheel`: a slim wheel of the core, the kernel modules those ops need and chosen extra packages
  (e.g. `onnxedge.edge.neon` with its aarch64 library), with a platform tag and full dist-info.
- `report`: its size report (bytes, files, ops and kernel modules kept and dropped).
- `strip`: kernel modules cut to the kept ops' functions, docstrings and comments removed.
- `build.reduce` / `onnxedge reduce` (`cli`): models and configs in; the config, the slim wheel
  (profile "runtime": pre-optimized .oxe models, numpy only), the models as optimized .oxe and the
  size report out.
"""
