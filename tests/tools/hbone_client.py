#!/usr/bin/python3
# hbone_client.py — an HBONE client from third-party parts (Python's ssl on
# OpenSSL, the h2 library): mutual TLS 1.3 with ALPN h2, one HTTP/2 CONNECT
# stream to AUTHORITY, PAYLOAD_BYTES sent then END_STREAM, everything read
# back until the stream ends. Prints one line:
#   STATUS <code> LEN <bytes received> SHA <sha256 of them> SENT <sha256 sent>
#   TLSERR <reason>        the handshake (or the first read) failed
#   ... PEER <the server's URI SAN>
#   (HB_LINGER=MS: the stream stays open and quiet that long before its
#   END_STREAM)
#   IDLE <ms>              HB_IDLE=1: after the handshake and the HTTP/2
#                          preface, no stream; how long until the server
#                          closed the connection (up to 20 s)
# usage: hbone_client.py HOST PORT CA CERT|- KEY|- AUTHORITY PAYLOAD_BYTES [SNI]
import hashlib, os, socket, ssl, sys, time
import h2.config, h2.connection, h2.events

host, port, ca, cert, key, authority, nbytes = sys.argv[1:8]
sni = sys.argv[8] if len(sys.argv) > 8 else "hbone"
# HB_PAYLOAD: send this text instead of random bytes (a marker to look for
# on the wire)
# HB_LINGER=MS: wait that long, stream open, before END_STREAM
# HB_FORWARDED: send it as the CONNECT's forwarded header ("for=IP": the
#   client the stream carries, as the node proxies' HBONE client does)
linger = int(os.environ.get("HB_LINGER", "0")) / 1000
payload = os.environ["HB_PAYLOAD"].encode() if os.environ.get("HB_PAYLOAD") else os.urandom(int(nbytes))
ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
ctx.minimum_version = ssl.TLSVersion.TLSv1_3
ctx.check_hostname = False          # SVIDs carry a SPIFFE URI, no DNS name
ctx.load_verify_locations(ca)
if cert != "-":
    ctx.load_cert_chain(cert, key)
ctx.set_alpn_protocols(["h2"])
try:
    t = ctx.wrap_socket(socket.create_connection((host, int(port)), timeout=10),
                        server_hostname=sni)
    peer = [v for k, v in t.getpeercert().get("subjectAltName", ()) if k == "URI"]
    c = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True, validate_outbound_headers=False))
    c.initiate_connection()
    if os.environ.get("HB_IDLE"):
        t.sendall(c.data_to_send())
        print("READY", flush=True)
        t0 = time.monotonic()
        t.settimeout(20)
        try:
            while t.recv(65536):
                pass
        except (ssl.SSLError, ConnectionError, OSError):
            pass
        print("IDLE %d" % ((time.monotonic() - t0) * 1000))
        sys.exit(0)
    sid = c.get_next_available_stream_id()
    hdrs = [(":method", "CONNECT"), (":authority", authority)]
    if os.environ.get("HB_FORWARDED"):  # the client the stream carries (RFC 7239)
        hdrs.append(("forwarded", os.environ["HB_FORWARDED"]))
    c.send_headers(sid, hdrs)
    t.sendall(c.data_to_send())
    status, got, sent, ended = None, bytearray(), 0, False
    done = False
    while not done:
        data = t.recv(65536)
        if not data:
            break
        for ev in c.receive_data(data):
            if isinstance(ev, h2.events.ResponseReceived):
                status = dict(ev.headers)[b":status"].decode()
            elif isinstance(ev, h2.events.DataReceived):
                got += ev.data
                c.acknowledge_received_data(ev.flow_controlled_length, sid)
            elif isinstance(ev, (h2.events.StreamEnded, h2.events.StreamReset)):
                done = True
        # send within the flow-control window; the rest after WINDOW_UPDATEs
        while status == "200" and not ended and not done:
            room = min(c.local_flow_control_window(sid), c.max_outbound_frame_size,
                       len(payload) - sent)
            if room > 0:
                c.send_data(sid, payload[sent:sent + room])
                sent += room
            if sent == len(payload):
                if linger:  # HB_LINGER: the stream stays open, quiet
                    t.sendall(c.data_to_send())
                    time.sleep(linger)
                    linger = 0
                c.end_stream(sid)
                ended = True
            if room <= 0:
                break
        t.sendall(c.data_to_send())
except (ssl.SSLError, ConnectionError, OSError) as e:
    print("TLSERR", getattr(e, "reason", None) or e)
    sys.exit(0)
print("STATUS", status, "LEN", len(got), "SHA", hashlib.sha256(got).hexdigest(),
      "SENT", hashlib.sha256(payload).hexdigest(), "PEER", peer[0] if peer else "-")
