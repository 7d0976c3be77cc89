"""Real-model-shaped benchmark models, exported with torch.onnx as their authors' packages do.

The models people ship inside PyPI packages cannot be downloaded here, so these are the same
architectures at the same sizes, with seeded random weights (issue #17's rows):
- `vad_lstm`: a Silero-style voice activity detector: a learned STFT (1-D conv), four 1-D conv
  blocks, an LSTM whose state is fed in and returned, a 1-D conv head and Sigmoid.
- `yolo_silu`: a YOLOv8n-style detector at 256x256: Conv-BN-SiLU blocks, C2f (Split, Concat),
  SPPF (MaxPool, Concat), a nearest-Resize FPN neck and a detect head.
- `dbnet_hswish`: a DBNet-style OCR text detector at 256x256: a MobileNetV3-style backbone
  (HardSwish, squeeze-excite with HardSigmoid, depthwise convs), an FPN and a ConvTranspose
  probability head with Sigmoid.
- `crnn_lstm`: a CRNN text recognizer on a 32x128 line: a VGG-style conv stack, two
  bidirectional LSTM layers and a per-step LogSoftmax over 37 classes.
torch is imported only when a model is built (the benchmark venv has it).
"""
from __future__ import annotations

import io
import warnings
from typing import Any, Callable, Dict, Tuple

import numpy as np
import onnx

OPSET = 17


def _export(net: Any, feeds: Dict[str, np.ndarray], outputs: Tuple[str, ...]) -> onnx.ModelProto:
    """The TorchScript export of `net` (eval mode, seeded weights) with batch axes dynamic."""
    import torch
    net.eval()
    args = tuple(torch.from_numpy(v) for v in feeds.values())
    buf = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with torch.no_grad():
            torch.onnx.export(net, args, buf, input_names=list(feeds), output_names=list(outputs),
                              opset_version=OPSET, dynamo=False)
    return onnx.load_from_string(buf.getvalue())


def _seed(seed: int) -> None:
    import torch
    torch.manual_seed(seed)


# ----------------------------------------------------------------------------- VAD

def vad_inputs(seed: int = 0) -> Dict[str, np.ndarray]:
    """One 64 ms chunk at 16 kHz (1024 samples) and the LSTM's state."""
    rng = np.random.default_rng(seed)
    return {"input": (rng.standard_normal((1, 1024)) * 0.1).astype(np.float32),
            "h": np.zeros((1, 1, 64), np.float32), "c": np.zeros((1, 1, 64), np.float32)}


def build_vad_lstm(seed: int = 0) -> onnx.ModelProto:
    """Silero-style VAD: STFT conv (258 filters, hop 64) -> magnitude -> 4 conv1d blocks -> LSTM(64)
    -> conv1d head -> Sigmoid; outputs speech probability and the new state."""
    import torch
    from torch import nn
    _seed(seed)

    class Block(nn.Module):
        def __init__(self, cin: int, cout: int, stride: int):
            super().__init__()
            self.dw = nn.Conv1d(cin, cin, 5, padding=2, groups=cin)
            self.pw = nn.Conv1d(cin, cout, 1)
            self.down = nn.Conv1d(cout, cout, 1, stride=stride)

        def forward(self, x: Any) -> Any:
            return torch.relu(self.down(torch.relu(self.pw(self.dw(x)))))

    class Vad(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.stft = nn.Conv1d(1, 258, 256, stride=64, padding=0, bias=False)
            self.enc = nn.Sequential(Block(129, 128, 2), Block(128, 64, 2), Block(64, 64, 2), Block(64, 64, 1))
            self.lstm = nn.LSTM(64, 64, batch_first=False)
            self.head = nn.Conv1d(64, 1, 1)

        def forward(self, x: Any, h: Any, c: Any) -> Any:
            spec = self.stft(nn.functional.pad(x.unsqueeze(1), (96, 96), mode="reflect"))
            re, im = spec[:, :129], spec[:, 129:]
            mag = torch.sqrt(re * re + im * im + 1e-9)
            feat = self.enc(mag)                        # [1, 64, T]
            seq, (h2, c2) = self.lstm(feat.permute(2, 0, 1), (h, c))
            out = torch.sigmoid(self.head(torch.relu(seq.permute(1, 2, 0))))
            return out.mean(dim=2), h2, c2

    return _export(Vad(), vad_inputs(seed), ("output", "hn", "cn"))


# ----------------------------------------------------------------------------- YOLO

def _yolo_net(width: int = 16) -> Any:
    import torch
    from torch import nn

    class ConvBnSiLU(nn.Module):
        def __init__(self, cin: int, cout: int, k: int = 3, s: int = 1):
            super().__init__()
            self.conv = nn.Conv2d(cin, cout, k, s, k // 2, bias=False)
            self.bn = nn.BatchNorm2d(cout)

        def forward(self, x: Any) -> Any:
            return nn.functional.silu(self.bn(self.conv(x)))

    class C2f(nn.Module):
        def __init__(self, cin: int, cout: int, n: int = 1):
            super().__init__()
            self.c = cout // 2
            self.cv1 = ConvBnSiLU(cin, 2 * self.c, 1)
            self.m = nn.ModuleList(nn.Sequential(ConvBnSiLU(self.c, self.c), ConvBnSiLU(self.c, self.c))
                                   for _ in range(n))
            self.cv2 = ConvBnSiLU((2 + n) * self.c, cout, 1)

        def forward(self, x: Any) -> Any:
            y = list(self.cv1(x).split((self.c, self.c), 1))
            for m in self.m:
                y.append(y[-1] + m(y[-1]))
            return self.cv2(torch.cat(y, 1))

    class SPPF(nn.Module):
        def __init__(self, c: int):
            super().__init__()
            self.cv1 = ConvBnSiLU(c, c // 2, 1)
            self.cv2 = ConvBnSiLU(c * 2, c, 1)
            self.pool = nn.MaxPool2d(5, 1, 2)

        def forward(self, x: Any) -> Any:
            x = self.cv1(x)
            y1 = self.pool(x)
            y2 = self.pool(y1)
            return self.cv2(torch.cat([x, y1, y2, self.pool(y2)], 1))

    class Yolo(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            w = width
            self.b1 = nn.Sequential(ConvBnSiLU(3, w, 3, 2), ConvBnSiLU(w, 2 * w, 3, 2), C2f(2 * w, 2 * w),
                                    ConvBnSiLU(2 * w, 4 * w, 3, 2), C2f(4 * w, 4 * w, 2))
            self.b2 = nn.Sequential(ConvBnSiLU(4 * w, 8 * w, 3, 2), C2f(8 * w, 8 * w, 2))
            self.b3 = nn.Sequential(ConvBnSiLU(8 * w, 16 * w, 3, 2), C2f(16 * w, 16 * w), SPPF(16 * w))
            self.up = nn.Upsample(scale_factor=2, mode="nearest")
            self.n1 = C2f(24 * w, 8 * w)
            self.n2 = C2f(12 * w, 4 * w)
            self.heads = nn.ModuleList(nn.Sequential(ConvBnSiLU(c, c), nn.Conv2d(c, 64 + 80, 1))
                                       for c in (4 * w, 8 * w))

        def forward(self, x: Any) -> Any:
            p3 = self.b1(x)
            p4 = self.b2(p3)
            p5 = self.b3(p4)
            n4 = self.n1(torch.cat([self.up(p5), p4], 1))
            n3 = self.n2(torch.cat([self.up(n4), p3], 1))
            outs = [h(f).flatten(2) for h, f in zip(self.heads, (n3, n4))]
            return torch.cat(outs, 2).sigmoid()

    net = Yolo()
    for m in net.modules():   # non-trivial BatchNorm statistics, folded into the convs on export
        if isinstance(m, nn.BatchNorm2d):
            m.running_mean.uniform_(-0.2, 0.2)
            m.running_var.uniform_(0.5, 1.5)
    return net


def build_yolo_silu(seed: int = 0) -> onnx.ModelProto:
    """YOLOv8n-style detector (width 16) at 256x256; output [1, 144, 1280] (two strides)."""
    _seed(seed)
    return _export(_yolo_net(), {"images": image_inputs(256, seed)["images"]}, ("output",))


def image_inputs(size: int, seed: int = 0, channels: int = 3) -> Dict[str, np.ndarray]:
    """One image in [0, 1), NCHW."""
    return {"images": np.random.default_rng(seed).random((1, channels, size, size)).astype(np.float32)}


# ----------------------------------------------------------------------------- DBNet

def build_dbnet_hswish(seed: int = 0) -> onnx.ModelProto:
    """DBNet-style OCR detector: MobileNetV3-small-style backbone (HardSwish, SE with HardSigmoid,
    depthwise 3x3/5x5), FPN (1x1 laterals, nearest upsampling, 3x3 smoothing), head: 3x3 conv,
    two stride-2 ConvTranspose, Sigmoid; 256x256 in, probability map 1x1x256x256 out."""
    import torch
    from torch import nn
    _seed(seed)

    class SE(nn.Module):
        def __init__(self, c: int):
            super().__init__()
            self.fc1 = nn.Conv2d(c, c // 4, 1)
            self.fc2 = nn.Conv2d(c // 4, c, 1)

        def forward(self, x: Any) -> Any:
            s = nn.functional.adaptive_avg_pool2d(x, 1)
            return x * nn.functional.hardsigmoid(self.fc2(torch.relu(self.fc1(s))))

    class IR(nn.Module):
        def __init__(self, cin: int, exp: int, cout: int, k: int, s: int, se: bool):
            super().__init__()
            self.expand = nn.Conv2d(cin, exp, 1)
            self.dw = nn.Conv2d(exp, exp, k, s, k // 2, groups=exp)
            self.se = SE(exp) if se else nn.Identity()
            self.project = nn.Conv2d(exp, cout, 1)
            self.res = s == 1 and cin == cout

        def forward(self, x: Any) -> Any:
            y = self.project(self.se(nn.functional.hardswish(self.dw(nn.functional.hardswish(self.expand(x))))))
            return x + y if self.res else y

    class DB(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.stem = nn.Conv2d(3, 16, 3, 2, 1)
            self.s1 = nn.Sequential(IR(16, 64, 24, 3, 2, False), IR(24, 72, 24, 3, 1, False))     # /4
            self.s2 = nn.Sequential(IR(24, 96, 40, 5, 2, True), IR(40, 120, 40, 5, 1, True))      # /8
            self.s3 = nn.Sequential(IR(40, 240, 80, 3, 2, False), IR(80, 200, 80, 3, 1, False))   # /16
            self.s4 = nn.Sequential(IR(80, 480, 112, 3, 2, True), IR(112, 672, 112, 5, 1, True))  # /32
            self.lat = nn.ModuleList(nn.Conv2d(c, 64, 1) for c in (24, 40, 80, 112))
            self.smooth = nn.ModuleList(nn.Conv2d(64, 16, 3, 1, 1) for _ in range(4))
            self.head = nn.Sequential(nn.Conv2d(64, 16, 3, 1, 1), nn.ReLU(),
                                      nn.ConvTranspose2d(16, 16, 2, 2), nn.ReLU(),
                                      nn.ConvTranspose2d(16, 1, 2, 2))

        def forward(self, x: Any) -> Any:
            c2 = self.s1(nn.functional.hardswish(self.stem(x)))
            c3 = self.s2(c2)
            c4 = self.s3(c3)
            c5 = self.s4(c4)
            p5 = self.lat[3](c5)
            p4 = self.lat[2](c4) + nn.functional.interpolate(p5, scale_factor=2.0, mode="nearest")
            p3 = self.lat[1](c3) + nn.functional.interpolate(p4, scale_factor=2.0, mode="nearest")
            p2 = self.lat[0](c2) + nn.functional.interpolate(p3, scale_factor=2.0, mode="nearest")
            fs = [self.smooth[0](p2)]
            for i, (p, f) in enumerate(((p3, 2.0), (p4, 4.0), (p5, 8.0)), 1):
                fs.append(nn.functional.interpolate(self.smooth[i](p), scale_factor=f, mode="nearest"))
            return torch.sigmoid(self.head(torch.cat(fs, 1)))

    return _export(DB(), {"images": image_inputs(256, seed)["images"]}, ("maps",))


# ----------------------------------------------------------------------------- CRNN

def build_crnn_lstm(seed: int = 0) -> onnx.ModelProto:
    """CRNN: VGG-style conv stack on a 1x32x128 text line -> 32 steps of 256 features -> two
    bidirectional LSTM(96) layers -> Linear(37) -> LogSoftmax; output [32, 1, 37]."""
    import torch
    from torch import nn
    _seed(seed)

    def cbr(cin: int, cout: int) -> Any:
        return [nn.Conv2d(cin, cout, 3, 1, 1), nn.BatchNorm2d(cout), nn.ReLU()]

    class Crnn(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.cnn = nn.Sequential(*cbr(1, 32), nn.MaxPool2d(2, 2), *cbr(32, 64), nn.MaxPool2d(2, 2),
                                     *cbr(64, 128), *cbr(128, 128), nn.MaxPool2d((2, 1), (2, 1)),
                                     *cbr(128, 128), nn.MaxPool2d((4, 1), (4, 1)))
            self.rnn1 = nn.LSTM(128, 96, bidirectional=True)
            self.rnn2 = nn.LSTM(192, 96, bidirectional=True)
            self.fc = nn.Linear(192, 37)

        def forward(self, x: Any) -> Any:
            f = self.cnn(x).squeeze(2).permute(2, 0, 1)   # [T, 1, 128]
            f, _ = self.rnn1(f)
            f, _ = self.rnn2(f)
            return torch.log_softmax(self.fc(f), dim=2)

    return _export(Crnn(), crnn_inputs(seed), ("logits",))


def crnn_inputs(seed: int = 0) -> Dict[str, np.ndarray]:
    """One 32x128 grey text line."""
    return {"image": np.random.default_rng(seed).random((1, 1, 32, 128)).astype(np.float32)}


BUILDERS: Dict[str, Callable[[int], onnx.ModelProto]] = {
    "vad_lstm": build_vad_lstm,
    "yolo_silu": build_yolo_silu,
    "dbnet_hswish": build_dbnet_hswish,
    "crnn_lstm": build_crnn_lstm,
}
INPUTS: Dict[str, Callable[[int], Dict[str, np.ndarray]]] = {
    "vad_lstm": vad_inputs,
    "yolo_silu": lambda seed: image_inputs(256, seed),
    "dbnet_hswish": lambda seed: image_inputs(256, seed),
    "crnn_lstm": crnn_inputs,
}

__all__ = ["BUILDERS", "INPUTS"]
