"""onnxedge.web: see DESIGN.md; filled in by its own issue."""
