"""NNAPI constants, as Android's NeuralNetworks.h defines them (public NDK reference).

Operand types (`OperandCode`), operation codes (`OperationCode`), fuse codes (`FuseCode`),
preferences, result codes, and the feature level at which each operation and operand type
appeared. Feature levels are numbered 1..8 here (FL1 = Android 8.1 / API 27, FL2 = API 28,
FL3 = API 29, FL4 = API 30, FL5 = API 31, FL6..8 = NNAPI updatable releases).
"""
from __future__ import annotations

from typing import Dict

# ------------------------------------------------------------------------ operand types
FLOAT32 = 0
INT32 = 1
UINT32 = 2
TENSOR_FLOAT32 = 3
TENSOR_INT32 = 4
TENSOR_QUANT8_ASYMM = 5
BOOL = 6
TENSOR_QUANT16_SYMM = 7
TENSOR_FLOAT16 = 8
TENSOR_BOOL8 = 9
FLOAT16 = 10
TENSOR_QUANT8_SYMM_PER_CHANNEL = 11
TENSOR_QUANT16_ASYMM = 12
TENSOR_QUANT8_SYMM = 13
TENSOR_QUANT8_ASYMM_SIGNED = 14

OPERAND_NAMES: Dict[int, str] = {
    FLOAT32: "FLOAT32", INT32: "INT32", UINT32: "UINT32", TENSOR_FLOAT32: "TENSOR_FLOAT32",
    TENSOR_INT32: "TENSOR_INT32", TENSOR_QUANT8_ASYMM: "TENSOR_QUANT8_ASYMM", BOOL: "BOOL",
    TENSOR_QUANT16_SYMM: "TENSOR_QUANT16_SYMM", TENSOR_FLOAT16: "TENSOR_FLOAT16",
    TENSOR_BOOL8: "TENSOR_BOOL8", FLOAT16: "FLOAT16",
    TENSOR_QUANT8_SYMM_PER_CHANNEL: "TENSOR_QUANT8_SYMM_PER_CHANNEL",
    TENSOR_QUANT16_ASYMM: "TENSOR_QUANT16_ASYMM", TENSOR_QUANT8_SYMM: "TENSOR_QUANT8_SYMM",
    TENSOR_QUANT8_ASYMM_SIGNED: "TENSOR_QUANT8_ASYMM_SIGNED",
}
SCALARS = (FLOAT32, INT32, UINT32, BOOL, FLOAT16)
QUANT8 = (TENSOR_QUANT8_ASYMM, TENSOR_QUANT8_ASYMM_SIGNED)

# numpy dtype string of each operand type the bridge emits
NUMPY_DTYPE: Dict[int, str] = {
    FLOAT32: "<f4", INT32: "<i4", UINT32: "<u4", BOOL: "u1", TENSOR_FLOAT32: "<f4",
    TENSOR_INT32: "<i4", TENSOR_QUANT8_ASYMM: "u1", TENSOR_QUANT8_ASYMM_SIGNED: "i1",
    TENSOR_BOOL8: "u1", TENSOR_FLOAT16: "<f2", FLOAT16: "<f2",
}

# ------------------------------------------------------------------------ operation codes
ADD = 0
AVERAGE_POOL_2D = 1
CONCATENATION = 2
CONV_2D = 3
DEPTHWISE_CONV_2D = 4
DEQUANTIZE = 6
FULLY_CONNECTED = 9
LOGISTIC = 14
MAX_POOL_2D = 17
MUL = 18
RELU = 19
RELU1 = 20
RELU6 = 21
RESHAPE = 22
SOFTMAX = 25
TANH = 28
DIV = 30
MEAN = 31
SUB = 36
TRANSPOSE = 37
QUANTIZE = 72

OPERATION_NAMES: Dict[int, str] = {
    ADD: "ADD", AVERAGE_POOL_2D: "AVERAGE_POOL_2D", CONCATENATION: "CONCATENATION",
    CONV_2D: "CONV_2D", DEPTHWISE_CONV_2D: "DEPTHWISE_CONV_2D", DEQUANTIZE: "DEQUANTIZE",
    FULLY_CONNECTED: "FULLY_CONNECTED", LOGISTIC: "LOGISTIC", MAX_POOL_2D: "MAX_POOL_2D",
    MUL: "MUL", RELU: "RELU", RELU1: "RELU1", RELU6: "RELU6", RESHAPE: "RESHAPE",
    SOFTMAX: "SOFTMAX", TANH: "TANH", DIV: "DIV", MEAN: "MEAN", SUB: "SUB",
    TRANSPOSE: "TRANSPOSE", QUANTIZE: "QUANTIZE",
}

# The feature level at which each operation (float32 form) appeared.
OPERATION_LEVEL: Dict[int, int] = {
    ADD: 1, AVERAGE_POOL_2D: 1, CONCATENATION: 1, CONV_2D: 1, DEPTHWISE_CONV_2D: 1,
    DEQUANTIZE: 1, FULLY_CONNECTED: 1, LOGISTIC: 1, MAX_POOL_2D: 1, MUL: 1, RELU: 1, RELU1: 1,
    RELU6: 1, RESHAPE: 1, SOFTMAX: 1, TANH: 1, DIV: 2, MEAN: 2, SUB: 2, TRANSPOSE: 2,
    QUANTIZE: 3,
}
# Operand types that need more than feature level 1.
OPERAND_LEVEL: Dict[int, int] = {TENSOR_FLOAT16: 3, TENSOR_QUANT8_SYMM_PER_CHANNEL: 3,
                                 TENSOR_QUANT8_ASYMM_SIGNED: 4, BOOL: 3}

# ------------------------------------------------------------------------ fuse codes
FUSED_NONE = 0
FUSED_RELU = 1
FUSED_RELU1 = 2
FUSED_RELU6 = 3
FUSE_NAMES = {FUSED_NONE: "NONE", FUSED_RELU: "RELU", FUSED_RELU1: "RELU1", FUSED_RELU6: "RELU6"}

# ------------------------------------------------------------------------ runtime constants
PREFER_LOW_POWER = 0
PREFER_FAST_SINGLE_ANSWER = 1
PREFER_SUSTAINED_SPEED = 2

NO_ERROR = 0
RESULT_NAMES = {0: "NO_ERROR", 1: "OUT_OF_MEMORY", 2: "INCOMPLETE", 3: "UNEXPECTED_NULL",
                4: "BAD_DATA", 5: "OP_FAILED", 6: "BAD_STATE", 7: "UNMAPPABLE",
                8: "OUTPUT_INSUFFICIENT_SIZE", 9: "UNAVAILABLE_DEVICE",
                10: "MISSED_DEADLINE_TRANSIENT", 11: "MISSED_DEADLINE_PERSISTENT",
                12: "RESOURCE_EXHAUSTED_TRANSIENT", 13: "RESOURCE_EXHAUSTED_PERSISTENT",
                14: "DEAD_OBJECT"}

# Android API level of each feature level (for the runtime's check of the device).
API_LEVEL = {1: 27, 2: 28, 3: 29, 4: 30, 5: 31, 6: 31, 7: 33, 8: 34}
MAX_FEATURE_LEVEL = 8
