"""Raspberry Pi deployment: `onnxedge package rpi MODEL... -o OUT/` makes an offline bundle (the
reduced aarch64 wheel with the NEON provider, the models as .oxe, dependency wheels, install.sh,
a systemd unit running `onnxedge serve`, a README) and OUT.tar.gz."""
