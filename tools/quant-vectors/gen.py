#!/usr/bin/python3
"""Writes the quantization reference vectors of tests/data/quant/.

Inputs are deterministic rows of floats (a xorshift generator, no library
randomness); for each quantized type ggml's reference quantizer
(quantize_row_<t>_ref) and dequantizer (dequantize_row_<t>) from llama.cpp's
libggml-base.so give the expected bytes and floats.

  /usr/bin/python3 tools/quant-vectors/gen.py [LIBGGML_BASE] [OUT_DIR]

Files (all little-endian):
  input.f32      uint32 rows, uint32 cols, then rows*cols float32
  <type>.q       rows * RowBytes(type, cols) bytes, ggml's blocks
  <type>.deq     rows*cols float32, ggml's dequantization of <type>.q
"""
import ctypes
import math
import os
import struct
import sys

TYPES = ["q4_0", "q4_1", "q5_0", "q5_1", "q8_0", "q4_K", "q5_K", "q6_K",
         "q2_K", "q3_K", "iq4_nl", "iq4_xs"]
BLOCK = {"q4_0": (32, 18), "q4_1": (32, 20), "q5_0": (32, 22), "q5_1": (32, 24),
         "q8_0": (32, 34), "q4_K": (256, 144), "q5_K": (256, 176), "q6_K": (256, 210),
         "q2_K": (256, 84), "q3_K": (256, 110), "iq4_nl": (32, 18), "iq4_xs": (256, 136)}
COLS = 512


class XorShift:
    def __init__(self, seed):
        self.s = seed & 0xFFFFFFFFFFFFFFFF or 1

    def next_u64(self):
        s = self.s
        s ^= (s << 13) & 0xFFFFFFFFFFFFFFFF
        s ^= s >> 7
        s ^= (s << 17) & 0xFFFFFFFFFFFFFFFF
        self.s = s
        return s

    def uniform(self):  # [0, 1)
        return (self.next_u64() >> 11) / float(1 << 53)

    def gauss(self):  # Box-Muller
        u1 = max(self.uniform(), 1e-12)
        u2 = self.uniform()
        return math.sqrt(-2.0 * math.log(u1)) * math.cos(2.0 * math.pi * u2)


def make_rows():
    r = XorShift(0x5DEECE66D)
    rows = []
    rows.append([r.gauss() for _ in range(COLS)])                      # unit gaussian
    rows.append([0.02 * r.gauss() for _ in range(COLS)])               # weight-like
    row = [0.05 * r.gauss() for _ in range(COLS)]                      # outliers
    for i in range(0, COLS, 37):
        row[i] = (20.0 if i % 2 else -20.0) * (1.0 + r.uniform())
    rows.append(row)
    rows.append([0.0] * COLS)                                          # all zero
    rows.append([1e-6 * r.gauss() for _ in range(COLS)])               # tiny
    rows.append([1e-30 * r.gauss() for _ in range(COLS)])              # subnormal-scale
    rows.append([-r.uniform() for _ in range(COLS)])                   # negative only
    rows.append([r.uniform() + 0.5 for _ in range(COLS)])              # positive only
    rows.append([3000.0 * r.gauss() for _ in range(COLS)])             # large
    rows.append([0.5] * COLS)                                          # constant
    row = [r.gauss() for _ in range(COLS)]                             # zero blocks
    for i in range(COLS):
        if (i // 32) % 3 == 1 or (i // 16) % 5 == 2:
            row[i] = 0.0
    rows.append(row)
    rows.append([float(int(r.uniform() * 16) - 8) for _ in range(COLS)])   # integers
    rows.append([(r.gauss() if i % 32 == 5 else 0.0) for i in range(COLS)])  # sparse
    rows.append([r.gauss() * (1.0 + 10.0 * (i // 64)) for i in range(COLS)])  # scale ramp
    rows.append([2.0 * r.uniform() - 1.0 for _ in range(COLS)])        # uniform
    rows.append([math.sin(i * 0.1) + 0.01 * r.gauss() for i in range(COLS)])  # smooth
    # Round to float32 once, so the committed input is exactly what was quantized.
    return [list(struct.unpack(f"<{COLS}f", struct.pack(f"<{COLS}f", *row))) for row in rows]


def main():
    lib_path = sys.argv[1] if len(sys.argv) > 1 else "/work/shared/tools/llama.cpp/lib/libggml-base.so"
    out_dir = sys.argv[2] if len(sys.argv) > 2 else os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests", "data", "quant")
    lib = ctypes.CDLL(lib_path)
    rows = make_rows()
    with open(os.path.join(out_dir, "input.f32"), "wb") as f:
        f.write(struct.pack("<II", len(rows), COLS))
        for row in rows:
            f.write(struct.pack(f"<{COLS}f", *row))
    FloatRow = ctypes.c_float * COLS
    for t in TYPES:
        quantize = getattr(lib, f"quantize_row_{t}_ref")
        dequantize = getattr(lib, f"dequantize_row_{t}")
        quantize.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64]
        dequantize.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64]
        quantize.restype = dequantize.restype = None
        elems, nbytes = BLOCK[t]
        row_bytes = COLS // elems * nbytes
        qdata, ddata = bytearray(), bytearray()
        for row in rows:
            src = FloatRow(*row)
            blocks = (ctypes.c_uint8 * row_bytes)()
            quantize(src, blocks, COLS)
            dst = FloatRow()
            dequantize(blocks, dst, COLS)
            qdata += bytes(blocks)
            ddata += bytes(dst)
        with open(os.path.join(out_dir, f"{t}.q"), "wb") as f:
            f.write(qdata)
        with open(os.path.join(out_dir, f"{t}.deq"), "wb") as f:
            f.write(ddata)
        print(f"{t}: {len(qdata)} bytes quantized, {len(ddata)} bytes dequantized")


if __name__ == "__main__":
    main()
