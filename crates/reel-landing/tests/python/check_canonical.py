"""Independent checks of a canonical Reel episode with the Python `mcap` library and the
ffmpeg CLI.

usage: check_canonical.py EPISODE.mcap EXPECTED.json

EXPECTED.json: {"counts": {topic: n}, "camera": topic, "frames": {index: "frame.rgb"},
"width": w, "height": h, "format_version": v}. Prints one JSON line of findings; exits non-zero on failure.
"""

import json
import math
import subprocess
import sys
import tempfile
import zlib

import zstandard
from mcap.reader import make_reader
from mcap.records import Chunk, MessageIndex
from mcap.stream_reader import StreamReader, breakup_chunk
from mcap_protobuf.decoder import DecoderFactory


def fail(msg):
    print(json.dumps({"ok": False, "error": msg}))
    sys.exit(1)


def main():
    path, expected_path = sys.argv[1], sys.argv[2]
    expected = json.load(open(expected_path))

    # 1. All messages through the indexed reader, in log-time order, decoded as protobuf.
    counts, last, decoded, depth_frames = {}, -1, 0, 0
    with open(path, "rb") as f:
        reader = make_reader(f, decoder_factories=[DecoderFactory()])
        summary = reader.get_summary()
        for schema, channel, message, proto in reader.iter_decoded_messages(log_time_order=True):
            counts[channel.topic] = counts.get(channel.topic, 0) + 1
            if message.log_time < last:
                fail(f"messages out of log-time order at {message.log_time}")
            last = message.log_time
            if schema.name == "foxglove.CompressedVideo" and proto.format != "h264":
                fail(f"{channel.topic}: format {proto.format!r}")
            if schema.name == "foxglove.RawImage":
                if proto.encoding != "16UC1" or len(proto.data) != proto.step * proto.height or proto.step != 2 * proto.width:
                    fail(f"{channel.topic}: depth frame {proto.width}x{proto.height} {proto.encoding} step {proto.step}")
                depth_frames += 1
            if schema.name == "reel.FloatArray":
                fields = channel.metadata["reel.fields"].split(",")
                if len(proto.values) != len(fields):
                    fail(f"{channel.topic}: {len(proto.values)} values for {len(fields)} fields")
            decoded += 1
        metadata = {m.name: dict(m.metadata) for m in reader.iter_metadata()}
    if counts != expected["counts"]:
        fail(f"counts differ: {counts} vs {expected['counts']}")
    if summary.statistics.message_count != sum(counts.values()):
        fail("statistics message count differs")
    if "episode" not in metadata or metadata["episode"].get("reel.format_version") != expected["format_version"]:
        fail(f"episode metadata missing: {list(metadata)}")

    # 2. Every chunk's CRC, and every MessageIndex entry points at a message with that log time.
    chunks = indexed = 0
    pending = None
    with open(path, "rb") as f:
        for record in StreamReader(f, emit_chunks=True, validate_crcs=True).records:
            if isinstance(record, Chunk):
                if record.compression != "zstd":
                    fail(f"chunk compression {record.compression}")
                data = zstandard.ZstdDecompressor().decompress(record.data, max_output_size=record.uncompressed_size)
                if zlib.crc32(data) != record.uncompressed_crc:
                    fail("chunk CRC mismatch")
                chunks += 1
                pending = {}
                offset = 0
                # breakup_chunk validates the CRC itself as it splits the chunk.
                sum(1 for _ in breakup_chunk(record, validate_crc=True))
                # Walk the uncompressed records by offset to check the index entries below.
                while offset < len(data):
                    opcode = data[offset]
                    length = int.from_bytes(data[offset + 1 : offset + 9], "little")
                    if opcode == 0x05:
                        body = data[offset + 9 : offset + 9 + length]
                        channel_id = int.from_bytes(body[0:2], "little")
                        log_time = int.from_bytes(body[6:14], "little")
                        pending[offset] = (channel_id, log_time)
                    offset += 9 + length
            elif isinstance(record, MessageIndex):
                for log_time, offset in record.records:
                    if pending.get(offset) != (record.channel_id, log_time):
                        fail(f"MessageIndex entry ({log_time}, {offset}) of channel {record.channel_id} is wrong")
                    indexed += 1
    if indexed != decoded:
        fail(f"{indexed} MessageIndex entries for {decoded} messages")
    if chunks != len(summary.chunk_indexes):
        fail("chunk count differs from the chunk indexes")

    # 3. The camera's H.264 stream decodes with the ffmpeg CLI, frame for frame.
    camera = expected["camera"]
    w, h = expected["width"], expected["height"]
    units = []
    with open(path, "rb") as f:
        reader = make_reader(f, decoder_factories=[DecoderFactory()])
        for _, _, _, proto in reader.iter_decoded_messages(topics=[camera], log_time_order=True):
            units.append(proto.data)
    with tempfile.NamedTemporaryFile(suffix=".h264") as es:
        es.write(b"".join(units))
        es.flush()
        out = subprocess.run(
            ["ffmpeg", "-v", "error", "-f", "h264", "-i", es.name, "-f", "rawvideo", "-pix_fmt", "rgb24", "-"],
            capture_output=True,
            check=False,
        )
    if out.returncode != 0 or out.stderr:
        fail(f"ffmpeg: {out.stderr.decode(errors='replace')}")
    frame_bytes = w * h * 3
    if len(out.stdout) != frame_bytes * len(units):
        fail(f"ffmpeg decoded {len(out.stdout) / frame_bytes} frames of {len(units)}")
    # The two decoders share no code path for colour conversion (chroma upsampling differs),
    # so compare with a tolerance, and require that Reel's picture is closest to ffmpeg's
    # picture of the same index, not a neighbour's.
    def psnr(a, b):
        mse = sum((x - y) ** 2 for x, y in zip(a, b)) / frame_bytes
        return 99.0 if mse == 0 else 10 * math.log10(255 * 255 / mse)

    worst = 99.0
    for index, rgb_path in expected["frames"].items():
        i = int(index)
        ours = open(rgb_path, "rb").read()
        scores = {j: psnr(ours, out.stdout[j * frame_bytes : (j + 1) * frame_bytes])
                  for j in (i - 1, i, i + 1) if 0 <= j < len(units)}
        worst = min(worst, scores[i])
        if scores[i] < 30 or max(scores, key=scores.get) != i:
            fail(f"frame {i}: ffmpeg and Reel disagree ({scores})")
    if depth_frames == 0:
        fail("no depth frame read")
    print(json.dumps({"ok": True, "messages": decoded, "depth_frames": depth_frames, "chunks": chunks, "index_entries": indexed,
                      "ffmpeg_frames": len(units), "worst_psnr_vs_ffmpeg": round(worst, 2)}))


if __name__ == "__main__":
    main()
