"""Constants of the `.oxe` layout shared by the writer and the reader."""
from __future__ import annotations

FILE_IDENTIFIER = b"OXE1"   # bytes 4..8 of every .oxe file (the FlatBuffers file_identifier)
FORMAT_MAJOR = 1            # a reader refuses files whose major version is newer than this
FORMAT_MINOR = 0            # additions a reader of the same major version may ignore
ALIGN = 64                  # the data region and every tensor in it start at a multiple of this
MAX_DEPTH = 64              # nesting limit for subgraphs and type infos
MAX_RANK = 32               # the most dimensions a tensor may have (numpy 1.17's limit)
PACKED_BITS = {21: 4, 22: 4, 23: 4, 25: 2, 26: 2}   # uint4, int4, float4e2m1, uint2, int2
SIGNED_PACKED = {22, 26}


def is_oxe(head: bytes) -> bool:
    """True when `head` (a file's first 8 bytes or more) carries the `.oxe` file identifier."""
    return len(head) >= 8 and bytes(head[4:8]) == FILE_IDENTIFIER


def align(n: int) -> int:
    """`n` rounded up to a multiple of ALIGN."""
    return (n + ALIGN - 1) // ALIGN * ALIGN
