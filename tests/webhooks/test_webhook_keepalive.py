"""Kept-alive webhook connections: reused per thread and destination, never across a pinned address
or a TLS host name, and a receiver that hung up on a kept connection costs no failed attempt."""
import ipaddress
import threading

from support.receiver import Reply

from app.webhooks.transport import new_session, post, send

BODY = b'{"type":"payment.completed","data":{"metadata":{"orderRef":"A-1"}}}'
HEADERS = {"webhook-id": "evt_1", "webhook-timestamp": "1700000000",
           "webhook-signature": "v1,AAAA", "Content-Type": "application/json"}
LOOPBACK = ipaddress.ip_address("127.0.0.1")
OTHER_LOOPBACK = ipaddress.ip_address("127.0.0.2")  # nothing listens on the receiver's port there


def outcome(result):
    return (result.ok, result.status_code, result.error)


def test_one_connection_carries_successive_attempts(receiver):
    receiver.default = Reply(keep_alive=True)
    session = new_session()
    results = [post(session, receiver.url(), BODY, HEADERS, timeout=5, livemode=False,
                    allow_loopback=True)
               for _ in range(3)]
    assert [outcome(r) for r in results] == [(True, 200, None)] * 3
    ports = {r.peer_port for r in receiver.wait_for(3)}
    assert len(ports) == 1
    session.close()


def test_a_receiver_that_closes_gets_a_new_connection_each_time(receiver):
    session = new_session()  # the receiver's default reply says "Connection: close"
    for _ in range(2):
        assert outcome(post(session, receiver.url(), BODY, HEADERS, timeout=5, livemode=False,
                            allow_loopback=True)) == (True, 200, None)
    assert len({r.peer_port for r in receiver.wait_for(2)}) == 2


def test_failure_statuses_keep_the_connection_too(receiver):
    receiver.reply(Reply(status=503, keep_alive=True, headers={"Retry-After": "7"}))
    receiver.default = Reply(keep_alive=True)
    session = new_session()
    first = post(session, receiver.url(), BODY, HEADERS, timeout=5, livemode=False,
                 allow_loopback=True)
    second = post(session, receiver.url(), BODY, HEADERS, timeout=5, livemode=False,
                  allow_loopback=True)
    assert (outcome(first), first.retry_after) == ((False, 503, "HTTP 503"), 7)
    assert outcome(second) == (True, 200, None)
    assert len({r.peer_port for r in receiver.wait_for(2)}) == 1


def test_kept_connection_closed_by_the_receiver_is_not_a_failed_attempt(receiver):
    # Keep-alive advertised, then the connection is dropped: the next attempt must still succeed.
    receiver.reply(Reply(keep_alive=True, drop=True), Reply(keep_alive=True, drop=True))
    session = new_session()
    for _ in range(3):
        assert outcome(post(session, receiver.url(), BODY, HEADERS, timeout=5, livemode=False,
                            allow_loopback=True)) == (True, 200, None)
    assert len(receiver.wait_for(3)) == 3


def test_threads_never_share_a_connection(receiver):
    receiver.default = Reply(keep_alive=True, delay=0.05)
    session = new_session()
    results, lock = [], threading.Lock()

    def deliver():
        for _ in range(3):
            r = post(session, receiver.url(), BODY, HEADERS, timeout=5, livemode=False,
                     allow_loopback=True)
            with lock:
                results.append(outcome(r))

    threads = [threading.Thread(target=deliver) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results == [(True, 200, None)] * 12
    ports = [r.peer_port for r in receiver.wait_for(12)]
    assert sorted(ports.count(p) for p in set(ports)) == [3, 3, 3, 3]  # one connection per thread


def test_pinned_attempt_never_reuses_a_connection_to_another_address(receiver):
    receiver.default = Reply(keep_alive=True)
    session = new_session()
    url = receiver.url("/hook", host="hooks.example")
    first = send(session, url, BODY, HEADERS, timeout=5, address=LOOPBACK)
    # Vetted to another address now (say DNS changed): the kept connection to 127.0.0.1 must
    # not carry it; nothing listens at 127.0.0.2, so the attempt fails.
    moved = send(session, url, BODY, HEADERS, timeout=5, address=OTHER_LOOPBACK)
    back = send(session, url, BODY, HEADERS, timeout=5, address=LOOPBACK)
    assert [outcome(r) for r in (first, moved, back)] == [
        (True, 200, None), (False, None, "connection refused"), (True, 200, None)]
    got = receiver.wait_for(2)
    assert len(got) == 2
    assert {r.headers["host"] for r in got} == {f"hooks.example:{receiver.port}"}


def test_tls_connection_is_reused_for_the_same_pinned_host(tls):
    server, session = tls
    server.default = Reply(keep_alive=True)
    url = server.url("/hook", host="hooks.example")
    results = [send(session, url, BODY, HEADERS, timeout=5, address=LOOPBACK) for _ in range(2)]
    assert [outcome(r) for r in results] == [(True, 200, None)] * 2
    assert len({r.peer_port for r in server.wait_for(2)}) == 1
    assert server.server_names == ["hooks.example"]  # one handshake


def test_tls_connection_verified_for_one_name_is_not_reused_for_another(tls):
    server, session = tls
    server.default = Reply(keep_alive=True)
    good = send(session, server.url("/hook", host="hooks.example"), BODY, HEADERS, timeout=5,
                address=LOOPBACK)
    other = send(session, server.url("/hook", host="other.example"), BODY, HEADERS, timeout=5,
                 address=LOOPBACK)
    assert outcome(good) == (True, 200, None)
    assert outcome(other) == (False, None, "TLS error (certificate or handshake)")
    assert len(server.wait_for(1)) == 1
    assert server.server_names == ["hooks.example", "other.example"]
