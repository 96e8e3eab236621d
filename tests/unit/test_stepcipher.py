"""srun's sealed I/O stream: what a peer without the step key, or a meddler on the wire, gets."""

from __future__ import annotations

import os

import pytest
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from corral import stepcipher, stepio

KEY = os.urandom(stepio.KEY_BYTES)


def opened(key: bytes = KEY) -> tuple[stepcipher.Session, stepcipher.SrunEnd, bytes]:
    """A runner's session, srun's end, and the runner's opening bytes (not yet fed)."""
    runner, opening = stepcipher.runner_session(key, 3, 2)
    return runner, stepcipher.SrunEnd(KEY), opening


def test_frames_cross_both_ways_and_the_hello_names_the_node() -> None:
    runner, srun, opening = opened()
    wire = opening + runner.seal(stepio.frame(stepio.OUT, 5, b"task output"))
    frames = []
    for i in range(len(wire)):  # byte by byte: records are reassembled
        frames += srun.feed(wire[i : i + 1])
    assert frames[0][0] == stepio.HELLO and stepio.read_hello(frames[0][2]) == (3, 2)
    assert frames[1] == (stepio.OUT, 5, b"task output")
    back = srun.seal(stepio.frame(stepio.IN, 0, b"stdin bytes"))
    assert runner.feed(back) == [(stepio.IN, 0, b"stdin bytes")]


def test_the_wire_shows_neither_the_key_nor_the_bytes() -> None:
    runner, _, opening = opened()
    wire = opening + runner.seal(stepio.frame(stepio.OUT, 0, b"secret task output"))
    assert KEY not in wire and b"secret task output" not in wire


def test_a_runner_without_the_key_is_refused_at_its_hello() -> None:
    _, srun, opening = opened(key=os.urandom(stepio.KEY_BYTES))
    with pytest.raises(stepcipher.CipherError):
        srun.feed(opening)


def test_a_tampered_record_is_refused() -> None:
    runner, srun, opening = opened()
    srun.feed(opening)
    record = bytearray(runner.seal(stepio.frame(stepio.OUT, 0, b"ls -l\n")))
    record[-20] ^= 1  # one bit of the ciphertext
    with pytest.raises(stepcipher.CipherError):
        srun.feed(bytes(record))


def test_a_replayed_record_is_refused() -> None:
    runner, srun, opening = opened()
    srun.feed(opening)
    record = runner.seal(stepio.frame(stepio.OUT, 0, b"once"))
    assert srun.feed(record) == [(stepio.OUT, 0, b"once")]
    with pytest.raises(stepcipher.CipherError):
        srun.feed(record)


def test_reordered_records_are_refused() -> None:
    runner, srun, opening = opened()
    srun.feed(opening)
    first = runner.seal(stepio.frame(stepio.OUT, 0, b"first"))
    second = runner.seal(stepio.frame(stepio.OUT, 0, b"second"))
    with pytest.raises(stepcipher.CipherError):
        srun.feed(second + first)


def test_a_record_from_the_other_direction_is_refused() -> None:
    """srun's own records reflected back to it do not open: each direction has its key."""
    _, srun, opening = opened()
    srun.feed(opening)
    reflected = srun.seal(stepio.frame(stepio.OUT, 0, b"echo"))
    with pytest.raises(stepcipher.CipherError):
        srun.feed(reflected)


def test_a_record_spliced_from_another_connection_is_refused() -> None:
    """Two runners of one step (or a runner started again): fresh keys per connection."""
    first, srun, opening = opened()
    srun.feed(opening)
    other, _ = stepcipher.runner_session(KEY, 3, 2)
    other.seal(b"")  # the other connection's HELLO took its sequence number 0
    with pytest.raises(stepcipher.CipherError):
        srun.feed(other.seal(stepio.frame(stepio.OUT, 0, b"spliced")))
    assert first.seal(b"") != other.seal(b"")


def test_an_oversized_length_is_refused_before_anything_is_buffered() -> None:
    _, srun, opening = opened()
    srun.feed(opening)
    with pytest.raises(stepcipher.CipherError):
        srun.feed(stepcipher.LENGTH.pack(stepcipher.MAX_RECORD + 1))


def test_a_connection_that_does_not_open_with_a_salt_is_refused() -> None:
    srun = stepcipher.SrunEnd(KEY)
    with pytest.raises(stepio.ProtocolError):
        srun.feed(stepio.frame(stepio.OUT, 0, b"x" * stepcipher.SALT_BYTES))


def test_the_rust_binding_class_is_cryptographys_public_aesgcm() -> None:
    """The import that keeps srun fast names the very class of the public API."""
    assert stepcipher.AESGCM is AESGCM
