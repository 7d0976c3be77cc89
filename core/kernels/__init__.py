"""The numpy CPU kernels, one module per op family, found through the lazy registry."""
