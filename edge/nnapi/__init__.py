"""NNAPI bridge: `NnapiExecutionProvider` translates the subgraphs Android's Neural Networks API
supports into NNAPI models (documented `.nnapi` files), runs them through libneuralnetworks.so on
Android, and in a numpy reference interpreter elsewhere (docs/providers/NNAPI.md)."""
from __future__ import annotations
