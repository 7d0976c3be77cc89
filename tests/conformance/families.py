"""Op families for the conformance tables: every ONNX op type the node suite tests, by category."""
from __future__ import annotations

from typing import Dict

FAMILIES = {
    "elementwise math": """
        Abs Acos Acosh Add Asin Asinh Atan Atanh BitShift BitwiseAnd BitwiseNot BitwiseOr
        BitwiseXor Ceil Clip Cos Cosh Div Erf Exp Floor IsInf IsNaN Log Max Mean Min Mod Mul Neg
        Pow Reciprocal Round Sign Sin Sinh Sqrt Sub Sum Tan Tanh
    """,
    "logic & comparison": "And Equal Greater GreaterOrEqual Less LessOrEqual Not Or Where Xor",
    "activation": """
        Celu Elu Gelu Hardmax HardSigmoid HardSwish LeakyRelu LogSoftmax Mish PRelu Relu Selu
        Shrink Sigmoid Softmax Softplus Softsign Swish SwiGLU ThresholdedRelu
    """,
    "nn (conv, pool, norm)": """
        AveragePool BatchNormalization CausalConvWithState Col2Im Conv ConvTranspose DeformConv
        Dropout GlobalAveragePool GlobalMaxPool GlobalLpPool GroupNormalization
        InstanceNormalization LayerNormalization LpNormalization LpPool LRN MaxPool MaxRoiPool
        MaxUnpool MeanVarianceNormalization RMSNormalization
    """,
    "linear algebra": "Det Einsum Gemm MatMul",
    "attention & recurrent": """
        Attention FlexAttention GRU LinearAttention LSTM RNN RotaryEmbedding
    """,
    "reduction & scan": """
        ArgMax ArgMin CumProd CumSum ReduceL1 ReduceL2 ReduceLogSum ReduceLogSumExp ReduceMax
        ReduceMean ReduceMin ReduceProd ReduceSum ReduceSumSquare TopK
    """,
    "shape & layout": """
        CenterCropPad Concat DepthToSpace Expand Flatten Identity Pad Reshape ReverseSequence
        Shape Size Slice SpaceToDepth Split Squeeze Tile Transpose Trilu Unsqueeze
    """,
    "gather & scatter": """
        Compress Gather GatherElements GatherND NonZero OneHot Scatter ScatterElements ScatterND
        TensorScatter Unique
    """,
    "cast & creation": """
        BitCast Cast CastLike Constant ConstantOfShape EyeLike Range
    """,
    "image & detection": """
        AffineGrid GridSample ImageDecoder NonMaxSuppression Resize RoiAlign Upsample
    """,
    "signal": "BlackmanWindow DFT HammingWindow HannWindow MelWeightMatrix STFT",
    "quantization": """
        ConvInteger DequantizeLinear DynamicQuantizeLinear MatMulInteger QLinearConv
        QLinearMatMul QuantizeLinear
    """,
    "control flow": "If Loop Scan",
    "sequence & optional": """
        ConcatFromSequence Optional OptionalGetElement OptionalHasElement SequenceAt
        SequenceConstruct SequenceEmpty SequenceErase SequenceInsert SequenceLength SequenceMap
        SplitToSequence
    """,
    "random": "Bernoulli Multinomial RandomNormal RandomNormalLike RandomUniform RandomUniformLike",
    "loss": "NegativeLogLikelihoodLoss SoftmaxCrossEntropyLoss",
    "text": "RegexFullMatch StringConcat StringNormalizer StringSplit TfIdfVectorizer",
    "training (preview)": "Adagrad Adam Gradient Momentum",
    "ml (ai.onnx.ml)": """
        ArrayFeatureExtractor Binarizer CastMap CategoryMapper DictVectorizer FeatureVectorizer
        Imputer LabelEncoder LinearClassifier LinearRegressor Normalizer OneHotEncoder
        SVMClassifier SVMRegressor Scaler TreeEnsemble TreeEnsembleClassifier
        TreeEnsembleRegressor ZipMap
    """,
}
OTHER = "other"

OP_FAMILY: Dict[str, str] = {op: fam for fam, ops in FAMILIES.items() for op in ops.split()}


def family_of(op_type: str, domain: str = "") -> str:
    """The table family of an op type (domain decides for ai.onnx.ml / training ops)."""
    if domain == "ai.onnx.ml":
        return "ml (ai.onnx.ml)"
    if domain == "ai.onnx.preview.training":
        return "training (preview)"
    return OP_FAMILY.get(op_type, OTHER)


def family_order() -> list:
    """Families in table order (the order of FAMILIES, then `other`)."""
    return list(FAMILIES) + [OTHER]
