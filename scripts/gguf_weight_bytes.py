#!/usr/bin/python3
"""Bytes of weights one decode step reads from a GGUF file: every tensor
but token_embd.weight, of which a step reads one row (unless the output
head is tied to it, when it is read whole). Sizes come from the tensors'
offsets in the data section, so no table of types is needed.
  gguf_weight_bytes.py FILE   prints the byte count"""
import os
import struct
import sys

# Bytes of the scalar GGUF value types (uint8 .. float64, bool).
SCALAR = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}
STRING, ARRAY = 8, 9


def read(f, fmt):
    return struct.unpack("<" + fmt, f.read(struct.calcsize("<" + fmt)))


def skip_value(f, vtype):
    if vtype in SCALAR:
        f.seek(SCALAR[vtype], 1)
    elif vtype == STRING:
        (n,) = read(f, "Q")
        f.seek(n, 1)
    elif vtype == ARRAY:
        etype, count = read(f, "IQ")
        for _ in range(count):
            skip_value(f, etype)
    else:
        sys.exit(f"unknown GGUF value type {vtype}")


def main(path):
    with open(path, "rb") as f:
        magic, version, n_tensors, n_kv = read(f, "4sIQQ")
        if magic != b"GGUF" or version < 2:
            sys.exit(f"{path}: not a GGUF v2/v3 file")
        alignment = 32
        for _ in range(n_kv):
            (n,) = read(f, "Q")
            key = f.read(n).decode()
            (vtype,) = read(f, "I")
            if key == "general.alignment" and vtype == 4:
                (alignment,) = read(f, "I")
            else:
                skip_value(f, vtype)
        tensors = []
        for _ in range(n_tensors):
            (n,) = read(f, "Q")
            name = f.read(n).decode()
            (dims,) = read(f, "I")
            shape = read(f, f"{dims}Q")
            _, offset = read(f, "IQ")
            tensors.append((offset, name, shape))
        data_start = (f.tell() + alignment - 1) // alignment * alignment
    end = os.path.getsize(path) - data_start
    tensors.sort()
    names = {t[1] for t in tensors}
    total = 0
    for i, (offset, name, shape) in enumerate(tensors):
        size = (tensors[i + 1][0] if i + 1 < len(tensors) else end) - offset
        if name == "token_embd.weight" and "output.weight" in names:
            size //= shape[1]  # one row of [vocab] rows
        total += size
    print(total)


if __name__ == "__main__":
    main(sys.argv[1])
