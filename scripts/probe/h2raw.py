"""A deliberately small HTTP/2 client for the hostile probe: it sends what
grpcio refuses to send (reserved or malformed headers, duplicate headers,
streams beyond the peer's SETTINGS_MAX_CONCURRENT_STREAMS, RST_STREAM or PING
floods) and reads back what the server answers (HEADERS with grpc-status,
RST_STREAM, GOAWAY, or a closed connection).

Headers are sent as HPACK literals without indexing and without Huffman
coding; received header blocks are decoded with the static and dynamic tables
and a Huffman decoder (RFC 7541).
"""
import socket
import struct
import time

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"

DATA, HEADERS, PRIORITY, RST_STREAM, SETTINGS, PUSH_PROMISE, PING, GOAWAY, WINDOW_UPDATE, \
    CONTINUATION = range(10)
END_STREAM, ACK, END_HEADERS, PADDED, PRIORITY_FLAG = 0x1, 0x1, 0x4, 0x8, 0x20

ERROR_NAMES = {0: "NO_ERROR", 1: "PROTOCOL_ERROR", 2: "INTERNAL_ERROR", 3: "FLOW_CONTROL_ERROR",
               4: "SETTINGS_TIMEOUT", 5: "STREAM_CLOSED", 6: "FRAME_SIZE_ERROR",
               7: "REFUSED_STREAM", 8: "CANCEL", 9: "COMPRESSION_ERROR", 10: "CONNECT_ERROR",
               11: "ENHANCE_YOUR_CALM", 12: "INADEQUATE_SECURITY", 13: "HTTP_1_1_REQUIRED"}

STATIC_TABLE = [
    (b":authority", b""), (b":method", b"GET"), (b":method", b"POST"), (b":path", b"/"),
    (b":path", b"/index.html"), (b":scheme", b"http"), (b":scheme", b"https"),
    (b":status", b"200"), (b":status", b"204"), (b":status", b"206"), (b":status", b"304"),
    (b":status", b"400"), (b":status", b"404"), (b":status", b"500"), (b"accept-charset", b""),
    (b"accept-encoding", b"gzip, deflate"), (b"accept-language", b""), (b"accept-ranges", b""),
    (b"accept", b""), (b"access-control-allow-origin", b""), (b"age", b""), (b"allow", b""),
    (b"authorization", b""), (b"cache-control", b""), (b"content-disposition", b""),
    (b"content-encoding", b""), (b"content-language", b""), (b"content-length", b""),
    (b"content-location", b""), (b"content-range", b""), (b"content-type", b""), (b"cookie", b""),
    (b"date", b""), (b"etag", b""), (b"expect", b""), (b"expires", b""), (b"from", b""),
    (b"host", b""), (b"if-match", b""), (b"if-modified-since", b""), (b"if-none-match", b""),
    (b"if-range", b""), (b"if-unmodified-since", b""), (b"last-modified", b""), (b"link", b""),
    (b"location", b""), (b"max-forwards", b""), (b"proxy-authenticate", b""),
    (b"proxy-authorization", b""), (b"range", b""), (b"referer", b""), (b"refresh", b""),
    (b"retry-after", b""), (b"server", b""), (b"set-cookie", b""),
    (b"strict-transport-security", b""), (b"transfer-encoding", b""), (b"user-agent", b""),
    (b"vary", b""), (b"via", b""), (b"www-authenticate", b""),
]

# RFC 7541 Appendix B: (code, bit length) of symbols 0..256 (256 is EOS).
HUFFMAN = [
    (0x1ff8, 13), (0x7fffd8, 23), (0xfffffe2, 28), (0xfffffe3, 28), (0xfffffe4, 28),
    (0xfffffe5, 28), (0xfffffe6, 28), (0xfffffe7, 28), (0xfffffe8, 28), (0xffffea, 24),
    (0x3ffffffc, 30), (0xfffffe9, 28), (0xfffffea, 28), (0x3ffffffd, 30), (0xfffffeb, 28),
    (0xfffffec, 28), (0xfffffed, 28), (0xfffffee, 28), (0xfffffef, 28), (0xffffff0, 28),
    (0xffffff1, 28), (0xffffff2, 28), (0x3ffffffe, 30), (0xffffff3, 28), (0xffffff4, 28),
    (0xffffff5, 28), (0xffffff6, 28), (0xffffff7, 28), (0xffffff8, 28), (0xffffff9, 28),
    (0xffffffa, 28), (0xffffffb, 28), (0x14, 6), (0x3f8, 10), (0x3f9, 10), (0xffa, 12),
    (0x1ff9, 13), (0x15, 6), (0xf8, 8), (0x7fa, 11), (0x3fa, 10), (0x3fb, 10), (0xf9, 8),
    (0x7fb, 11), (0xfa, 8), (0x16, 6), (0x17, 6), (0x18, 6), (0x0, 5), (0x1, 5), (0x2, 5),
    (0x19, 6), (0x1a, 6), (0x1b, 6), (0x1c, 6), (0x1d, 6), (0x1e, 6), (0x1f, 6), (0x5c, 7),
    (0xfb, 8), (0x7ffc, 15), (0x20, 6), (0xffb, 12), (0x3fc, 10), (0x1ffa, 13), (0x21, 6),
    (0x5d, 7), (0x5e, 7), (0x5f, 7), (0x60, 7), (0x61, 7), (0x62, 7), (0x63, 7), (0x64, 7),
    (0x65, 7), (0x66, 7), (0x67, 7), (0x68, 7), (0x69, 7), (0x6a, 7), (0x6b, 7), (0x6c, 7),
    (0x6d, 7), (0x6e, 7), (0x6f, 7), (0x70, 7), (0x71, 7), (0x72, 7), (0xfc, 8), (0x73, 7),
    (0xfd, 8), (0x1ffb, 13), (0x7fff0, 19), (0x1ffc, 13), (0x3ffc, 14), (0x22, 6),
    (0x7ffd, 15), (0x3, 5), (0x23, 6), (0x4, 5), (0x24, 6), (0x5, 5), (0x25, 6), (0x26, 6),
    (0x27, 6), (0x6, 5), (0x74, 7), (0x75, 7), (0x28, 6), (0x29, 6), (0x2a, 6), (0x7, 5),
    (0x2b, 6), (0x76, 7), (0x2c, 6), (0x8, 5), (0x9, 5), (0x2d, 6), (0x77, 7), (0x78, 7),
    (0x79, 7), (0x7a, 7), (0x7b, 7), (0x7ffe, 15), (0x7fc, 11), (0x3ffd, 14), (0x1ffd, 13),
    (0xffffffc, 28), (0xfffe6, 20), (0x3fffd2, 22), (0xfffe7, 20), (0xfffe8, 20),
    (0x3fffd3, 22), (0x3fffd4, 22), (0x3fffd5, 22), (0x7fffd9, 23), (0x3fffd6, 22),
    (0x7fffda, 23), (0x7fffdb, 23), (0x7fffdc, 23), (0x7fffdd, 23), (0x7fffde, 23),
    (0xffffeb, 24), (0x7fffdf, 23), (0xffffec, 24), (0xffffed, 24), (0x3fffd7, 22),
    (0x7fffe0, 23), (0xffffee, 24), (0x7fffe1, 23), (0x7fffe2, 23), (0x7fffe3, 23),
    (0x7fffe4, 23), (0x1fffdc, 21), (0x3fffd8, 22), (0x7fffe5, 23), (0x3fffd9, 22),
    (0x7fffe6, 23), (0x7fffe7, 23), (0xffffef, 24), (0x3fffda, 22), (0x1fffdd, 21),
    (0xfffe9, 20), (0x3fffdb, 22), (0x3fffdc, 22), (0x7fffe8, 23), (0x7fffe9, 23),
    (0x1fffde, 21), (0x7fffea, 23), (0x3fffdd, 22), (0x3fffde, 22), (0xfffff0, 24),
    (0x1fffdf, 21), (0x3fffdf, 22), (0x7fffeb, 23), (0x7fffec, 23), (0x1fffe0, 21),
    (0x1fffe1, 21), (0x3fffe0, 22), (0x1fffe2, 21), (0x7fffed, 23), (0x3fffe1, 22),
    (0x7fffee, 23), (0x7fffef, 23), (0xfffea, 20), (0x3fffe2, 22), (0x3fffe3, 22),
    (0x3fffe4, 22), (0x7ffff0, 23), (0x3fffe5, 22), (0x3fffe6, 22), (0x7ffff1, 23),
    (0x3ffffe0, 26), (0x3ffffe1, 26), (0xfffeb, 20), (0x7fff1, 19), (0x3fffe7, 22),
    (0x7ffff2, 23), (0x3fffe8, 22), (0x1ffffec, 25), (0x3ffffe2, 26), (0x3ffffe3, 26),
    (0x3ffffe4, 26), (0x7ffffde, 27), (0x7ffffdf, 27), (0x3ffffe5, 26), (0xfffff1, 24),
    (0x1ffffed, 25), (0x7fff2, 19), (0x1fffe3, 21), (0x3ffffe6, 26), (0x7ffffe0, 27),
    (0x7ffffe1, 27), (0x3ffffe7, 26), (0x7ffffe2, 27), (0xfffff2, 24), (0x1fffe4, 21),
    (0x1fffe5, 21), (0x3ffffe8, 26), (0x3ffffe9, 26), (0xffffffd, 28), (0x7ffffe3, 27),
    (0x7ffffe4, 27), (0x7ffffe5, 27), (0xfffec, 20), (0xfffff3, 24), (0xfffed, 20),
    (0x1fffe6, 21), (0x3fffe9, 22), (0x1fffe7, 21), (0x1fffe8, 21), (0x7ffff3, 23),
    (0x3fffea, 22), (0x3fffeb, 22), (0x1ffffee, 25), (0x1ffffef, 25), (0xfffff4, 24),
    (0xfffff5, 24), (0x3ffffea, 26), (0x7ffff4, 23), (0x3ffffeb, 26), (0x7ffffe6, 27),
    (0x3ffffec, 26), (0x3ffffed, 26), (0x7ffffe7, 27), (0x7ffffe8, 27), (0x7ffffe9, 27),
    (0x7ffffea, 27), (0x7ffffeb, 27), (0xffffffe, 28), (0x7ffffec, 27), (0x7ffffed, 27),
    (0x7ffffee, 27), (0x7ffffef, 27), (0x7fffff0, 27), (0x3ffffee, 26), (0x3fffffff, 30),
]
_HUFFMAN_LOOKUP = {(length, code): sym for sym, (code, length) in enumerate(HUFFMAN)}


def huffman_decode(data):
    out = bytearray()
    code, length = 0, 0
    for byte in data:
        for i in range(7, -1, -1):
            code = (code << 1) | ((byte >> i) & 1)
            length += 1
            sym = _HUFFMAN_LOOKUP.get((length, code))
            if sym is not None:
                if sym == 256:
                    raise ValueError("EOS in a Huffman string")
                out.append(sym)
                code, length = 0, 0
            elif length > 30:
                raise ValueError("bad Huffman code")
    return bytes(out)


def encode_int(value, prefix_bits, first_byte_flags=0):
    limit = (1 << prefix_bits) - 1
    if value < limit:
        return bytes([first_byte_flags | value])
    out = bytearray([first_byte_flags | limit])
    value -= limit
    while value >= 128:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def decode_int(data, pos, prefix_bits):
    limit = (1 << prefix_bits) - 1
    value = data[pos] & limit
    pos += 1
    if value < limit:
        return value, pos
    shift = 0
    while True:
        b = data[pos]
        pos += 1
        value += (b & 0x7F) << shift
        shift += 7
        if not b & 0x80:
            return value, pos


def encode_headers(headers):
    """Literal header fields without indexing, new names, no Huffman."""
    out = bytearray()
    for name, value in headers:
        name = name if isinstance(name, bytes) else name.encode()
        value = value if isinstance(value, bytes) else value.encode("latin-1")
        out += b"\x00" + encode_int(len(name), 7) + name + encode_int(len(value), 7) + value
    return bytes(out)


class HpackDecoder:
    def __init__(self):
        self.dynamic = []  # newest first
        self.max_size = 4096

    def _size(self):
        return sum(len(n) + len(v) + 32 for n, v in self.dynamic)

    def _evict(self):
        while self.dynamic and self._size() > self.max_size:
            self.dynamic.pop()

    def _entry(self, index):
        if index <= 0:
            raise ValueError("index 0")
        if index <= len(STATIC_TABLE):
            return STATIC_TABLE[index - 1]
        return self.dynamic[index - len(STATIC_TABLE) - 1]

    def _string(self, data, pos):
        huff = data[pos] & 0x80
        length, pos = decode_int(data, pos, 7)
        raw = data[pos:pos + length]
        return (huffman_decode(raw) if huff else bytes(raw)), pos + length

    def decode(self, data):
        headers = []
        pos = 0
        while pos < len(data):
            b = data[pos]
            if b & 0x80:  # indexed
                index, pos = decode_int(data, pos, 7)
                headers.append(self._entry(index))
            elif b & 0xC0 == 0x40:  # literal, incremental indexing
                index, pos = decode_int(data, pos, 6)
                name = self._entry(index)[0] if index else None
                if name is None:
                    name, pos = self._string(data, pos)
                value, pos = self._string(data, pos)
                headers.append((name, value))
                self.dynamic.insert(0, (name, value))
                self._evict()
            elif b & 0xE0 == 0x20:  # table size update
                self.max_size, pos = decode_int(data, pos, 5)
                self._evict()
            else:  # literal without indexing / never indexed
                index, pos = decode_int(data, pos, 4)
                name = self._entry(index)[0] if index else None
                if name is None:
                    name, pos = self._string(data, pos)
                value, pos = self._string(data, pos)
                headers.append((name, value))
        return headers


def frame(ftype, flags, stream_id, payload=b""):
    return struct.pack(">I", len(payload))[1:] + bytes([ftype, flags]) + \
        struct.pack(">I", stream_id & 0x7FFFFFFF) + payload


def grpc_message(body):
    return b"\x00" + struct.pack(">I", len(body)) + body


class Conn:
    """One HTTP/2 connection. `sock` may be a TLS socket (ALPN h2)."""

    def __init__(self, host, port, sock=None, timeout=10.0, settings=b""):
        self.sock = sock or socket.create_connection((host, port), timeout=timeout)
        self.sock.settimeout(timeout)
        self.host, self.port = host, port
        self.buf = b""
        self.decoder = HpackDecoder()
        self.next_id = 1
        self.streams = {}  # id -> {"headers": [...], "data": b"", "rst": code, "ended": bool}
        self.goaway = None
        self.closed = False
        self.peer_settings = {}
        self._header_frag = None
        self.sock.sendall(PREFACE + frame(SETTINGS, 0, 0, settings) +
                          frame(WINDOW_UPDATE, 0, 0, struct.pack(">I", 1 << 24)))

    def send(self, data):
        try:
            self.sock.sendall(data)
            return True
        except OSError:
            self.closed = True
            return False

    def new_stream_id(self):
        sid = self.next_id
        self.next_id += 2
        return sid

    def request_frames(self, path, body=b"", extra_headers=(), authority=None, end=True,
                       stream_id=None, base_headers=None):
        sid = stream_id or self.new_stream_id()
        headers = base_headers if base_headers is not None else [
            (":method", "POST"), (":scheme", "http"), (":path", path),
            (":authority", authority or "%s:%d" % (self.host, self.port)),
            ("content-type", "application/grpc"), ("te", "trailers")]
        headers = list(headers) + list(extra_headers)
        block = encode_headers(headers)
        self.streams[sid] = {"headers": [], "data": b"", "rst": None, "ended": False}
        out = bytearray()
        max_frame = 16384
        first, rest = block[:max_frame], block[max_frame:]
        out += frame(HEADERS, END_HEADERS if not rest else 0, sid, first)
        while rest:
            chunk, rest = rest[:max_frame], rest[max_frame:]
            out += frame(CONTINUATION, END_HEADERS if not rest else 0, sid, chunk)
        if body is not None:
            msg = grpc_message(body)
            while len(msg) > max_frame:
                out += frame(DATA, 0, sid, msg[:max_frame])
                msg = msg[max_frame:]
            out += frame(DATA, END_STREAM if end else 0, sid, msg)
        return sid, bytes(out)

    def send_message(self, sid, message, compressed=False, end=True):
        """One gRPC message (already compressed when `compressed`) on stream
        sid, split into DATA frames of at most 16 KiB."""
        msg = bytes([1 if compressed else 0]) + struct.pack(">I", len(message)) + message
        out = bytearray()
        while len(msg) > 16384:
            out += frame(DATA, 0, sid, msg[:16384])
            msg = msg[16384:]
        out += frame(DATA, END_STREAM if end else 0, sid, msg)
        return self.send(bytes(out))

    def request(self, path, body=b"", extra_headers=(), **kw):
        sid, data = self.request_frames(path, body, extra_headers, **kw)
        self.send(data)
        return sid

    def rst(self, sid, code=8):
        return frame(RST_STREAM, 0, sid, struct.pack(">I", code))

    def _read_some(self, deadline):
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return False
        self.sock.settimeout(min(remaining, 1.0))
        try:
            chunk = self.sock.recv(65536)
        except socket.timeout:
            return True
        except OSError:
            self.closed = True
            return False
        if not chunk:
            self.closed = True
            return False
        self.buf += chunk
        return True

    def _handle(self, ftype, flags, sid, payload):
        st = self.streams.get(sid)
        if ftype == SETTINGS:
            if not flags & ACK:
                for i in range(0, len(payload) - 5, 6):
                    key, val = struct.unpack(">HI", payload[i:i + 6])
                    self.peer_settings[key] = val
                self.send(frame(SETTINGS, ACK, 0))
        elif ftype == PING:
            if not flags & ACK:
                self.send(frame(PING, ACK, 0, payload))
        elif ftype == GOAWAY:
            last, code = struct.unpack(">II", payload[:8])
            self.goaway = (last & 0x7FFFFFFF, ERROR_NAMES.get(code, str(code)), payload[8:])
        elif ftype == RST_STREAM:
            if st is not None:
                st["rst"] = ERROR_NAMES.get(struct.unpack(">I", payload[:4])[0], "?")
                st["ended"] = True
        elif ftype in (HEADERS, CONTINUATION):
            if ftype == HEADERS:
                if flags & PADDED:
                    pad = payload[0]
                    payload = payload[1:len(payload) - pad]
                if flags & PRIORITY_FLAG:
                    payload = payload[5:]
                self._header_frag = (sid, payload, flags & END_STREAM)
            else:
                s0, frag, es = self._header_frag
                self._header_frag = (s0, frag + payload, es)
            if flags & END_HEADERS:
                s0, block, es = self._header_frag
                self._header_frag = None
                headers = self.decoder.decode(block)
                st = self.streams.get(s0)
                if st is not None:
                    st["headers"].extend(headers)
                    if es:
                        st["ended"] = True
        elif ftype == DATA:
            if flags & PADDED:
                pad = payload[0]
                payload = payload[1:len(payload) - pad]
            if st is not None:
                st["data"] += payload
                if flags & END_STREAM:
                    st["ended"] = True
            if payload:
                inc = struct.pack(">I", len(payload))
                self.send(frame(WINDOW_UPDATE, 0, 0, inc) +
                          (frame(WINDOW_UPDATE, 0, sid, inc) if st and not st["ended"] else b""))

    def pump(self, until, timeout=10.0):
        """Reads frames until until(self) is true, the connection closes or the
        timeout passes. Returns until(self)."""
        deadline = time.monotonic() + timeout
        while True:
            while len(self.buf) >= 9:
                length = int.from_bytes(self.buf[:3], "big")
                if len(self.buf) < 9 + length:
                    break
                ftype, flags = self.buf[3], self.buf[4]
                sid = struct.unpack(">I", self.buf[5:9])[0] & 0x7FFFFFFF
                payload = self.buf[9:9 + length]
                self.buf = self.buf[9 + length:]
                self._handle(ftype, flags, sid, payload)
            if until(self):
                return True
            if self.closed or not self._read_some(deadline):
                return until(self)

    def wait_stream(self, sid, timeout=10.0):
        self.pump(lambda c: c.streams[sid]["ended"] or c.goaway is not None, timeout)
        return self.result(sid)

    def result(self, sid):
        """'grpc-status NAME', 'RST_STREAM CODE', 'GOAWAY CODE', 'closed' or 'no answer'."""
        st = self.streams[sid]
        status = None
        for name, value in st["headers"]:
            if name == b"grpc-status":
                status = int(value)
        if status is not None:
            return "grpc-status %d" % status
        if st["rst"] is not None:
            return "RST_STREAM " + st["rst"]
        if self.goaway is not None:
            return "GOAWAY " + self.goaway[1]
        for name, value in st["headers"]:
            if name == b":status" and value != b"200":
                return "http-status " + value.decode()
        return "closed" if self.closed else "no answer"

    def close(self):
        try:
            self.sock.close()
        except OSError:
            pass
