"""onnxedge.reduced_build: see DESIGN.md; filled in by its own issue."""
