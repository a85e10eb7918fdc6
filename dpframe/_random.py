"""Where dpframe's random bits come from.

Every mechanism draws its randomness as 64-bit words from a :class:`BitSource`. The
default, :class:`CryptoBitSource`, is an AES-256-CTR keystream (OpenSSL through the
``cryptography`` package, AES-NI where the CPU has it) keyed with 32 fresh bytes from
``os.urandom`` for every mechanism call: it is cryptographically secure, unaffected by
``np.random.seed``, and safe across ``fork`` (a child process never reuses its parent's
key, because no key outlives a call).

A caller's ``rng`` (SPEC 7: a :class:`numpy.random.Generator`, or anything
:func:`numpy.random.default_rng` accepts) is wrapped in :class:`GeneratorBitSource`,
which marks the release as not private: its outputs are reproducible, and numpy's
generators are predictable from their outputs.
"""

from __future__ import annotations

import os
from typing import Any, Protocol

import numpy as np
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes
from numpy.typing import NDArray

from dpframe import _validation
from dpframe.errors import DPFrameError

__all__: list[str] = []

_UINT64_MAX = np.iinfo(np.uint64).max


class BitSource(Protocol):
    """A stream of independent, uniformly distributed 64-bit words."""

    private: bool
    words_drawn: int

    def words(self, n: int) -> NDArray[np.uint64]:
        """Return the next ``n`` words."""
        ...


class CryptoBitSource:
    """AES-256-CTR keystream keyed from ``os.urandom``; one instance per mechanism call."""

    private = True

    def __init__(self) -> None:
        key, nonce = os.urandom(32), os.urandom(16)
        self._encryptor = Cipher(algorithms.AES(key), modes.CTR(nonce)).encryptor()
        self._zeros = b""
        self.words_drawn = 0

    def words(self, n: int) -> NDArray[np.uint64]:
        if len(self._zeros) < 8 * n:
            self._zeros = bytes(8 * n)
        # Encrypting zeros yields the raw keystream, written straight into a new array
        # (update_into wants room for len(data) + 15 bytes): no bytes object in between.
        out = np.empty(n + 2, dtype=np.uint64)
        written = self._encryptor.update_into(
            memoryview(self._zeros)[: 8 * n], out.view(np.uint8).data
        )
        if written != 8 * n:  # a stream mode writes exactly what it reads
            raise DPFrameError("internal error: short keystream; please report")
        self.words_drawn += n
        return out[:n]


class GeneratorBitSource:
    """Words from a numpy Generator: reproducible, for teaching and tests, never private."""

    private = False

    def __init__(self, generator: np.random.Generator) -> None:
        self._generator = generator
        self.words_drawn = 0

    def words(self, n: int) -> NDArray[np.uint64]:
        self.words_drawn += n
        return self._generator.integers(0, _UINT64_MAX, size=n, dtype=np.uint64, endpoint=True)


def bit_source(rng: Any) -> BitSource:
    """The bit source for a mechanism call: cryptographic for ``rng=None``, else the caller's."""
    generator = _validation.rng(rng)  # SPEC 7, as the accessor reads it
    return CryptoBitSource() if generator is None else GeneratorBitSource(generator)


def uniform_bits(source: BitSource, n: int) -> NDArray[np.bool_]:
    """``n`` independent fair bits, 64 per word."""
    words = source.words((n + 63) // 64)
    return np.unpackbits(words.view(np.uint8))[:n].astype(np.bool_)
