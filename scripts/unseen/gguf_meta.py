"""Reads the metadata (key/value) section of a GGUF file with the standard
library only; tensors are not read."""
import struct

_SCALARS = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?",
            10: "<Q", 11: "<q", 12: "<d"}
_STRING, _ARRAY = 8, 9


class _Reader:
    def __init__(self, f):
        self.f = f

    def take(self, fmt):
        size = struct.calcsize(fmt)
        data = self.f.read(size)
        if len(data) != size:
            raise ValueError("truncated GGUF file")
        return struct.unpack(fmt, data)[0]

    def string(self):
        n = self.take("<Q")
        return self.f.read(n).decode("utf-8", errors="surrogateescape")

    def value(self, vtype):
        if vtype in _SCALARS:
            return self.take(_SCALARS[vtype])
        if vtype == _STRING:
            return self.string()
        if vtype == _ARRAY:
            item_type = self.take("<I")
            n = self.take("<Q")
            if item_type in _SCALARS:
                fmt = _SCALARS[item_type]
                size = struct.calcsize(fmt)
                data = self.f.read(size * n)
                return list(struct.unpack("<%d%s" % (n, fmt[1:]), data))
            return [self.value(item_type) for _ in range(n)]
        raise ValueError("unknown GGUF value type %d" % vtype)


def read_metadata(path):
    """Returns {key: value} of the file's metadata."""
    with open(path, "rb") as f:
        r = _Reader(f)
        if f.read(4) != b"GGUF":
            raise ValueError("%s is not a GGUF file" % path)
        version = r.take("<I")
        if version < 2:
            raise ValueError("GGUF version %d is not supported" % version)
        r.take("<Q")  # tensor count
        n_kv = r.take("<Q")
        meta = {}
        for _ in range(n_kv):
            key = r.string()
            meta[key] = r.value(r.take("<I"))
        return meta
