#!/usr/bin/python3
"""h2_upstream_seeds.py DIR — the seed corpus of tests/fuzz/fuzz_h2_upstream.c:
what typical HTTP/2 backends send the proxy, written with Debian's
python3-h2 (a server connection answering the proxy's streams 1, 3, 5, 7;
the proxy opens them in that order). Each file is the target's input: a
control byte and a cut (see the target's header), then the backend's
bytes, its SETTINGS first.

  python3 tests/fuzz/h2_upstream_seeds.py tests/fuzz/corpus/h2_upstream
"""
import os
import sys

import h2.config
import h2.connection
import h2.errors
import h2.settings

REQ = [(":method", "POST"), (":scheme", "http"), (":path", "/"), (":authority", "h")]


def backend(settings=None, streams=(1, 3, 5, 7)):
    """A server connection that saw the proxy's preface and requests."""
    cl = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True))
    cl.initiate_connection()
    for sid in streams:
        cl.send_headers(sid, REQ)
    sv = h2.connection.H2Connection(h2.config.H2Configuration(client_side=False))
    sv.initiate_connection()
    if settings:
        sv.update_settings(settings)
    sv.receive_data(cl.data_to_send())
    return sv


def ok(sv, sid, body=b"hello", length=True, status="200"):
    hdrs = [(":status", status), ("content-type", "text/plain")]
    if length:
        hdrs.append(("content-length", str(len(body))))
    sv.send_headers(sid, hdrs, end_stream=not body)
    while body:
        sv.send_data(sid, body[:16384], end_stream=len(body) <= 16384)
        body = body[16384:]


def main(out):
    os.makedirs(out, exist_ok=True)
    seeds = []

    # HEADERS + DATA: with a length, without one (chunked to the stream
    # layer), headers only (204), a larger body in two frames
    sv = backend()
    first = sv.data_to_send()
    ok(sv, 1)
    sv.send_headers(3, [(":status", "200")])
    sv.send_data(3, b"a" * 100)
    sv.send_data(3, b"b" * 100, end_stream=True)
    ok(sv, 5, b"", status="204")
    ok(sv, 7, b"x" * 20000, length=False)
    seeds.append(("headers-data", 0x03, first, sv.data_to_send()))

    # gRPC: a message and trailers; trailers-only UNAVAILABLE; a 100
    # before the answer; an answer then RST_STREAM(NO_ERROR) (nginx's early
    # answer to a request whose body it did not read)
    sv = backend()
    first = sv.data_to_send()
    sv.send_headers(1, [(":status", "200"), ("content-type", "application/grpc")])
    sv.send_data(1, b"\x00\x00\x00\x00\x03abc")
    sv.send_headers(1, [("grpc-status", "0"), ("grpc-message", "ok")], end_stream=True)
    sv.send_headers(3, [(":status", "200"), ("content-type", "application/grpc"),
                        ("grpc-status", "14"), ("grpc-message", "unavailable")],
                    end_stream=True)
    sv.send_headers(5, [(":status", "100")])
    ok(sv, 5, b"after continue")
    ok(sv, 7, b"early")
    sv.reset_stream(7, h2.errors.ErrorCodes.NO_ERROR)
    seeds.append(("grpc-trailers", 0x03, first, sv.data_to_send()))

    # RST_STREAM: refused, cancelled in the middle of a body; the stand-in
    # also releases its tries at their first report (bit 5)
    sv = backend()
    first = sv.data_to_send()
    sv.reset_stream(1, h2.errors.ErrorCodes.REFUSED_STREAM)
    sv.send_headers(3, [(":status", "200"), ("content-length", "1000")])
    sv.send_data(3, b"c" * 10)
    sv.reset_stream(3, h2.errors.ErrorCodes.CANCEL)
    ok(sv, 5)
    seeds.append(("rst-stream", 0x03, first, sv.data_to_send()))
    seeds.append(("rst-stream-cancel", 0x23, first, seeds[-1][3]))

    # fields but :status alone: a headers-only 204 and a 200 whose body
    # follows (the first input the target found: NULL + 0 in px_h2us_head)
    sv = backend()
    first = sv.data_to_send()
    sv.send_headers(1, [(":status", "204")], end_stream=True)
    sv.send_headers(3, [(":status", "200")])
    sv.send_data(3, b"body", end_stream=True)
    seeds.append(("status-only", 0x01, first, sv.data_to_send()))

    # GOAWAY after the first stream; tries opened between the pieces
    sv = backend()
    first = sv.data_to_send()
    ok(sv, 1)
    sv.close_connection(h2.errors.ErrorCodes.NO_ERROR, last_stream_id=1)
    seeds.append(("goaway", 0x1f, first, sv.data_to_send()))

    # SETTINGS MAX_CONCURRENT_STREAMS 1 and a small window: the tries
    # opened between the pieces go to a second connection (bit 4), which
    # gets its own SETTINGS and answers; PING and WINDOW_UPDATEs on the first
    sv = backend({h2.settings.SettingCodes.MAX_CONCURRENT_STREAMS: 1,
                  h2.settings.SettingCodes.INITIAL_WINDOW_SIZE: 16384}, streams=(1,))
    sv.ping(b"12345678")
    sv.increment_flow_control_window(1 << 20)
    sv.increment_flow_control_window(1 << 16, stream_id=1)
    ok(sv, 1)
    first = sv.data_to_send()
    sv2 = backend(streams=(1,))
    second = sv2.data_to_send()
    ok(sv2, 1, b"second connection")
    seeds.append(("settings-mcs1", 0x1c, first, second + sv2.data_to_send()))

    # WINDOW_UPDATE for the 100 KB upload (stream 1 with four tries),
    # answered while it still uploads; then the backend closes (bit 7)
    sv = backend()
    sv.increment_flow_control_window(1 << 20)
    sv.increment_flow_control_window(1 << 20, stream_id=1)
    first = sv.data_to_send()
    ok(sv, 3)
    ok(sv, 1, b"uploaded enough")
    seeds.append(("window-update-close", 0x83, first, sv.data_to_send()))

    for name, ctl, first, rest in seeds:
        assert len(first) <= 255, (name, len(first))
        with open(os.path.join(out, name), "wb") as f:
            f.write(bytes([ctl, min(len(first), 255)]) + first + rest)


if __name__ == "__main__":
    main(sys.argv[1])
