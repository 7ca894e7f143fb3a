# Strict TensorBoard event-file reader: TFRecord framing and CRC32C checked here, payloads parsed by TensorBoard's protos.
"""Usage: tfevents_reader.py [--canonical] [--events] FILE

Reads every TFRecord of FILE, checks the masked CRC32C of each length and each payload, parses the payload as
tensorflow.Event and prints, tab-separated, one line per event of interest:
  file_version  WALL_TIME  VERSION
  scalar        TAG  STEP  VALUE  WALL_TIME      (simple_value, or a one-element DT_FLOAT/DT_DOUBLE tensor)
Numbers are Python repr()s (exact). --canonical also requires each payload to equal protobuf's own
serialization of the parsed Event. --events prints instead one line per event, whatever it holds:
  event  KIND  STEP  DETAIL   (KIND: the Event's `what` field; DETAIL: file_version, session_log status name,
                               or the summary's tags)
Any damage (CRC mismatch, truncation, bad proto) -> message on stderr, exit 1.
"""
import struct
import sys

DT_FLOAT, DT_DOUBLE = 1, 2


def make_crc32c_table():
    table = []
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
        table.append(c)
    return table


CRC32C_TABLE = make_crc32c_table()


def crc32c(data):
    c = 0xFFFFFFFF
    for b in data:
        c = CRC32C_TABLE[(c ^ b) & 0xFF] ^ (c >> 8)
    return c ^ 0xFFFFFFFF


def masked_crc32c(data):
    c = crc32c(data)
    return (((c >> 15) | (c << 17)) + 0xA282EAD8) & 0xFFFFFFFF


class ReadError(Exception):
    pass


def read_records(blob):
    """Yields (index, offset, payload) for each TFRecord, checking both CRCs."""
    pos, index = 0, 0
    while pos < len(blob):
        if pos + 12 > len(blob):
            raise ReadError("truncated record header of record %d at offset %d" % (index, pos))
        length_bytes = blob[pos:pos + 8]
        (length,) = struct.unpack("<Q", length_bytes)
        (length_crc,) = struct.unpack("<I", blob[pos + 8:pos + 12])
        if masked_crc32c(length_bytes) != length_crc:
            raise ReadError("length CRC mismatch in record %d at offset %d" % (index, pos))
        start = pos + 12
        if start + length + 4 > len(blob):
            raise ReadError("truncated data of record %d at offset %d" % (index, pos))
        payload = blob[start:start + length]
        (data_crc,) = struct.unpack("<I", blob[start + length:start + length + 4])
        if masked_crc32c(payload) != data_crc:
            raise ReadError("data CRC mismatch in record %d at offset %d" % (index, pos))
        yield index, pos, payload
        pos = start + length + 4
        index += 1


def load_protos():
    # PyPI tensorboard's compiled tensorflow.Event (tensorboard.compat.proto), the one TensorBoard itself parses with.
    from tensorboard.compat.proto import event_pb2
    return event_pb2


def tensor_scalar(tensor):
    """The single value of a scalar TensorProto (float or double)."""
    n = 1
    for d in tensor.tensor_shape.dim:
        n *= d.size
    if n != 1:
        raise ReadError("tensor summary with %d elements is not a scalar" % n)
    if tensor.dtype == DT_FLOAT:
        if tensor.tensor_content:
            return struct.unpack("<f", tensor.tensor_content[:4])[0]
        return tensor.float_val[0]
    if tensor.dtype == DT_DOUBLE:
        if tensor.tensor_content:
            return struct.unpack("<d", tensor.tensor_content[:8])[0]
        return tensor.double_val[0]
    raise ReadError("tensor summary of dtype %d is not a float scalar" % tensor.dtype)


def event_detail(event_pb2, event, kind):
    if kind == "file_version":
        return event.file_version
    if kind == "session_log":
        return event_pb2.SessionLog.SessionStatus.Name(event.session_log.status)
    if kind == "summary":
        return ",".join(value.tag for value in event.summary.value)
    return ""


def main(argv):
    canonical = "--canonical" in argv
    events = "--events" in argv
    paths = [a for a in argv if a not in ("--canonical", "--events")]
    if len(paths) != 1:
        print(__doc__, file=sys.stderr)
        return 2
    path = paths[0]
    with open(path, "rb") as f:
        blob = f.read()
    event_pb2 = load_protos()
    try:
        for index, offset, payload in read_records(blob):
            event = event_pb2.Event()
            try:
                event.ParseFromString(payload)
            except Exception as e:
                raise ReadError("record %d at offset %d is not an Event: %s" % (index, offset, e))
            if canonical and event.SerializeToString() != payload:
                raise ReadError("record %d at offset %d is not protobuf's serialization of its Event"
                                % (index, offset))
            kind = event.WhichOneof("what")
            if events:
                print("event\t%s\t%d\t%s" % (kind, event.step, event_detail(event_pb2, event, kind)))
            elif kind == "file_version":
                print("file_version\t%r\t%s" % (event.wall_time, event.file_version))
            elif kind == "summary":
                for value in event.summary.value:
                    which = value.WhichOneof("value")
                    if which == "simple_value":
                        v = value.simple_value
                    elif which == "tensor":
                        v = tensor_scalar(value.tensor)
                    else:
                        continue
                    print("scalar\t%s\t%d\t%r\t%r" % (value.tag, event.step, v, event.wall_time))
    except ReadError as e:
        print("tfevents_reader: %s: %s" % (path, e), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
