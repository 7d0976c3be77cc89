"""onnxedge.edge.mobile: slim packages for phones (`onnxedge package mobile`).

`package.make_package` builds one (reduced wheel with the target's bridge provider, `.oxe`
models, pre-translated bridge artifacts, manifest, size report); `runtime.session` opens a
packaged model on the device; `report` writes the partition reports of docs/MOBILE.md.
"""
