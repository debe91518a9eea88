"""A small GGUF (version 3) writer and header reader, Python standard library only.

What: GGUF is llama.cpp's single-file model format: a header (magic "GGUF", version, tensor and key counts),
typed key/value metadata, one info record per tensor (name, dims innermost first, ggml type, offset into
the data section), padding to the alignment, then the tensor data, each tensor at an aligned offset.
The writer takes each tensor's bytes from a callback that writes them at the current file position, so
that gigabytes of weights are copied file to file (copy_file_range) and never held in memory.

How: imported by convert_olmoe.py (the writer) and by test_convert.py and peer_bench.py (the reader,
which parses the metadata and tensor records back, to check a written file).
"""

import struct

MAGIC = b"GGUF"
VERSION = 3
ALIGNMENT = 32  # llama.cpp's default; also written as general.alignment

# ggml tensor types this writer emits, and their element sizes in bytes.
GGML_F32, GGML_F16, GGML_BF16 = 0, 1, 30
GGML_TYPE_BYTES = {GGML_F32: 4, GGML_F16: 2, GGML_BF16: 2}

# GGUF metadata value types.
T_UINT8, T_INT8, T_UINT16, T_INT16, T_UINT32, T_INT32, T_FLOAT32, T_BOOL, T_STRING, T_ARRAY = range(10)
T_UINT64, T_INT64, T_FLOAT64 = 10, 11, 12
_SCALAR_FORMATS = {T_UINT8: "<B", T_INT8: "<b", T_UINT16: "<H", T_INT16: "<h", T_UINT32: "<I",
                   T_INT32: "<i", T_FLOAT32: "<f", T_BOOL: "<?", T_UINT64: "<Q", T_INT64: "<q",
                   T_FLOAT64: "<d"}


def _string(s):
    b = s.encode("utf-8")
    return struct.pack("<Q", len(b)) + b


def _value(vtype, value):
    if vtype == T_STRING:
        return _string(value)
    return struct.pack(_SCALAR_FORMATS[vtype], value)


def write_all(f, data):
    """Writes all of data to the unbuffered file f (a raw write may take less than it is given)."""
    view = memoryview(data)
    while view:
        view = view[f.write(view):]


def padding(n, alignment=ALIGNMENT):
    """Bytes that bring offset n to the next multiple of alignment."""
    return (-n) % alignment


class Writer:
    """Collects metadata and tensor records, then writes the file in one pass (write())."""

    def __init__(self):
        self.kv = []       # (key, encoded type + value bytes), in the order added
        self.tensors = []  # (name, dims innermost first, ggml type, byte size, fill(file) callback)

    def add(self, key, vtype, value):
        self.kv.append((key, struct.pack("<I", vtype) + _value(vtype, value)))

    def add_array(self, key, elem_type, values):
        body = b"".join(_value(elem_type, v) for v in values)
        self.kv.append((key, struct.pack("<IIQ", T_ARRAY, elem_type, len(values)) + body))

    def add_tensor(self, name, shape, ggml_type, fill):
        """shape: row-major (numpy order, outermost first), as safetensors gives it; GGUF stores it
        reversed (ne0 = the innermost, contiguous dimension). fill(f) must write exactly the tensor's
        bytes at the current position of f, an unbuffered file (write_all, or copies into f.fileno())."""
        count = 1
        for n in shape:
            count *= n
        self.tensors.append((name, list(reversed(shape)), ggml_type, count * GGML_TYPE_BYTES[ggml_type], fill))

    def write(self, path):
        if not any(key == "general.alignment" for key, _ in self.kv):
            self.add("general.alignment", T_UINT32, ALIGNMENT)
        head = bytearray(MAGIC + struct.pack("<IQQ", VERSION, len(self.tensors), len(self.kv)))
        for key, body in self.kv:
            head += _string(key) + body
        offset = 0
        for name, dims, ggml_type, nbytes, _ in self.tensors:
            head += _string(name) + struct.pack("<I", len(dims))
            head += b"".join(struct.pack("<Q", d) for d in dims)
            head += struct.pack("<IQ", ggml_type, offset)
            offset += nbytes + padding(nbytes)
        head += bytes(padding(len(head)))
        # Unbuffered, so that the fill callbacks may copy into the file descriptor directly.
        with open(path, "wb", buffering=0) as f:
            write_all(f, head)
            for name, _, _, nbytes, fill in self.tensors:
                start = f.tell()
                fill(f)
                f.seek(0, 2)
                written = f.tell() - start
                if written != nbytes:
                    raise RuntimeError(f"{name}: wrote {written} bytes, expected {nbytes}")
                write_all(f, bytes(padding(nbytes)))


def read_header(path):
    """Parses a GGUF file's metadata and tensor records: (metadata dict, [(name, dims, type, offset)],
    data section start). Arrays come back as Python lists."""
    with open(path, "rb") as f:
        def take(fmt):
            size = struct.calcsize(fmt)
            return struct.unpack(fmt, f.read(size))

        def string():
            (n,) = take("<Q")
            return f.read(n).decode("utf-8")

        def value(vtype):
            if vtype == T_STRING:
                return string()
            if vtype == T_ARRAY:
                elem, count = take("<IQ")
                return [value(elem) for _ in range(count)]
            return take(_SCALAR_FORMATS[vtype])[0]

        if f.read(4) != MAGIC:
            raise ValueError(f"{path}: not a GGUF file")
        version, n_tensors, n_kv = take("<IQQ")
        if version != VERSION:
            raise ValueError(f"{path}: GGUF version {version}, expected {VERSION}")
        meta = {}
        for _ in range(n_kv):
            key = string()
            (vtype,) = take("<I")
            meta[key] = value(vtype)
        tensors = []
        for _ in range(n_tensors):
            name = string()
            (n_dims,) = take("<I")
            dims = list(take(f"<{n_dims}Q"))
            ggml_type, offset = take("<IQ")
            tensors.append((name, dims, ggml_type, offset))
        start = f.tell()
        start += padding(start, meta.get("general.alignment", ALIGNMENT))
        return meta, tensors, start
