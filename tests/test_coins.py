"""Exact coins near the randomness floor: lazy bytes, coin tables, constant-time packs, Knuth–Yao.

Every sampler here must realize exactly its stated dyadic probabilities. The tests drive
the rare paths (ties with a threshold's first byte or 16 bits, continuation past the
first Knuth–Yao level, the constant-time pool overflowing) with sources that force them,
so those paths are tested with full statistical power; each statistical test rejects at
``FALSE_ALARM`` and has a validity twin that fails for a wrong probability.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from fractions import Fraction
from typing import Any

import numpy as np
import pytest
from numpy.typing import NDArray
from scipy import stats

from dpframe import _coins, _random
from dpframe._coins import Coin, CoinTable, DyadicSampler
from tests._stats import FALSE_ALARM, chi_square_pvalue

N = 400_000


def _binomial_pvalue(hits: int, n: int, p: Fraction) -> float:
    return float(stats.binomtest(hits, n, float(p)).pvalue)


class ForcingSource:
    """Cryptographic words, except that the first ``forced`` calls are rewritten by ``rewrite``.

    Used to drive a sampler into a rare branch: the rewritten words must still be
    uniform on the branch's event (the tests check the *conditional* distribution).
    """

    private = True

    def __init__(
        self, rewrite: Callable[[NDArray[np.uint64]], NDArray[np.uint64]], forced: int = 1
    ) -> None:
        self._inner = _random.bit_source(None)
        self._rewrite = rewrite
        self._forced = forced
        self.words_drawn = 0

    def words(self, n: int) -> NDArray[np.uint64]:
        self.words_drawn += n
        out = self._inner.words(n)
        if self._forced:
            self._forced -= 1
            return self._rewrite(out.copy())
        return out


def _odd_coin(p: Fraction, nwords: int = 2) -> Coin:
    return Coin(int(p * 2 ** (64 * nwords)), nwords)


# ---------------------------------------------------------------- lazy coins


@pytest.mark.parametrize("p", [Fraction(1, 3), Fraction(1, 1000), Fraction(999, 1000)])
def test_lazy_bernoulli_matches_its_probability(p: Fraction) -> None:
    coin = _odd_coin(p)
    hits = int(_coins.lazy_bernoulli(_random.bit_source(None), coin, N).sum())
    assert _binomial_pvalue(hits, N, coin.probability) > FALSE_ALARM


def test_lazy_bernoulli_after_a_tie_uses_the_rest_of_the_threshold() -> None:
    """Force every first byte to tie: the outcome is then Bernoulli(rest / 2**(B - 8))."""
    coin = _odd_coin(Fraction(3, 10))  # 0.3 * 256 = 76.8: the rest is 0.8, far from 0.3
    top, _ = coin.lazy_split

    def tie(words: NDArray[np.uint64]) -> NDArray[np.uint64]:
        words.view(np.uint8)[:] = top
        return words

    hits = int(_coins.lazy_bernoulli(ForcingSource(tie), coin, N).sum())
    bits = 64 * coin.nwords - 8
    rest = Fraction(coin.numerator % 2**bits, 2**bits)
    assert _binomial_pvalue(hits, N, rest) > FALSE_ALARM
    # validity twin: against the coin's own probability this is far off
    assert _binomial_pvalue(hits, N, coin.probability) < FALSE_ALARM


def test_bernoulli_keeps_its_constant_time_contract() -> None:
    coin = _odd_coin(Fraction(1, 3), nwords=2)
    source = _random.bit_source(None)
    before = source.words_drawn
    _coins.bernoulli(source, coin, 1000, True)
    assert source.words_drawn - before == 2000  # every word of the threshold, every element


def test_coin_table_draws_each_index_with_its_coin() -> None:
    coins: list[Coin | bool] = [
        _odd_coin(Fraction(1, 3)),
        True,
        False,
        _odd_coin(Fraction(7, 9), 1),
    ]
    table = CoinTable(coins)
    index = np.arange(N) % 4
    drawn = _coins.lazy_bernoulli_indexed(_random.bit_source(None), table, index)
    assert drawn[index == 1].all()
    assert not drawn[index == 2].any()
    for k in (0, 3):
        coin = coins[k]
        assert isinstance(coin, Coin)
        hits = int(drawn[index == k].sum())
        assert _binomial_pvalue(hits, int((index == k).sum()), coin.probability) > FALSE_ALARM


def test_coin_table_after_a_tie_uses_the_rest() -> None:
    coin = _odd_coin(Fraction(2, 7))
    table = CoinTable([coin, _odd_coin(Fraction(1, 5), 1)])
    top = int(table.top[0])

    def tie(words: NDArray[np.uint64]) -> NDArray[np.uint64]:
        words.view(np.uint8)[:] = top
        return words

    index = np.zeros(N, dtype=np.intp)
    hits = int(_coins.lazy_bernoulli_indexed(ForcingSource(tie), table, index).sum())
    bits = 64 * coin.nwords - 8
    rest = Fraction(coin.numerator % 2**bits, 2**bits)
    assert _binomial_pvalue(hits, N, rest) > FALSE_ALARM


# ---------------------------------------------------------------- constant-time packs


COINS = [
    _odd_coin(Fraction(1, 3)),
    _odd_coin(Fraction(1, 10**9)),  # first 16 bits are 0
    _odd_coin(Fraction(2, 3), 1),
    _odd_coin(Fraction(1, 2) - Fraction(1, 10**12), 3),
    *[_odd_coin(Fraction(k, 17)) for k in range(1, 8)],
]


def _check_pack(packed: NDArray[np.unsignedinteger], coins: list[Coin], n: int) -> None:
    bits = packed.astype(np.uint64)
    for i, coin in enumerate(coins):
        hits = int(((bits >> np.uint64(i)) & np.uint64(1)).sum())
        assert _binomial_pvalue(hits, n, coin.probability) > FALSE_ALARM, i
    # independence of two coins: a 2x2 table
    a = ((bits >> np.uint64(0)) & np.uint64(1)).astype(bool)
    b = ((bits >> np.uint64(2)) & np.uint64(1)).astype(bool)
    table = [[int((a & b).sum()), int((a & ~b).sum())], [int((~a & b).sum()), int((~a & ~b).sum())]]
    assert stats.chi2_contingency(table).pvalue > FALSE_ALARM


def test_packed_bernoulli_draws_every_coin_independently() -> None:
    _check_pack(_coins.packed_bernoulli(_random.bit_source(None), COINS, N), COINS, N)


def test_packed_bernoulli_resolves_ties_from_the_pool() -> None:
    """Force 16-bit ties for coin 0 on a few elements per block: the pool decides them."""
    coin = COINS[0]
    top, _ = coin.constant_time_split
    n = 1 << 16

    def tie_some(words: NDArray[np.uint64]) -> NDArray[np.uint64]:
        lanes = words.view(np.uint16)[:n]  # coin 0's 16-bit draws come first
        lanes[::4096] = top  # 16 elements, far below the pool size
        return words

    landed = []
    for _ in range(400):
        packed = _coins.packed_bernoulli(ForcingSource(tie_some), [coin], n)
        landed.append(packed[::4096] & 1)
    hits = int(np.concatenate(landed).sum())
    bits = 64 * coin.nwords - 16
    rest = Fraction(coin.numerator % 2**bits, 2**bits)
    total = 400 * 16
    assert _binomial_pvalue(hits, total, rest) > FALSE_ALARM
    assert _binomial_pvalue(hits, total, Fraction(1, 2)) < FALSE_ALARM  # validity twin


def test_packed_bernoulli_stays_exact_when_the_pool_overflows() -> None:
    """Every element ties (probability far below 2**-80 in reality): still exact."""
    coin = COINS[0]
    top, _ = coin.constant_time_split
    n = 1 << 12

    def tie_all(words: NDArray[np.uint64]) -> NDArray[np.uint64]:
        words.view(np.uint16)[:] = top
        return words

    hits = 0
    for _ in range(30):
        hits += int(_coins.packed_bernoulli(ForcingSource(tie_all), [coin], n).sum())
    bits = 64 * coin.nwords - 16
    rest = Fraction(coin.numerator % 2**bits, 2**bits)
    assert _binomial_pvalue(hits, 30 * n, rest) > FALSE_ALARM


@pytest.mark.parametrize("n", [1, 7, 1000, 1 << 16])
def test_packed_bernoulli_draws_a_fixed_number_of_words(n: int) -> None:
    counts = set()
    for _ in range(5):
        source = _random.bit_source(None)
        _coins.packed_bernoulli(source, COINS, n)
        counts.add(source.words_drawn)
    tables, rows = _coins._joint_tables(tuple(COINS))
    assert len(tables) == -(-len(COINS) // 4)  # four coins per 16-bit digit
    pairs = _coins.tie_pool_size(n, sum(t.ties for t in tables))
    assert counts == {-(-(len(tables) * n) // 4) + pairs * rows.width}


def _table_law(table: Any, rows: Any, group: int) -> dict[int, Fraction]:
    """The exact law of one coin group's outcome that its table realizes, in rationals.

    An untied digit gives its verdict with probability 2**-16; a tied digit splits its
    2**-16 between the outcomes at the ends it holds, by the fractions ``rests`` encode.
    """
    law: dict[int, Fraction] = {}
    digit = Fraction(1, 1 << 16)
    mask = (1 << table.coins) - 1
    for u in range(1 << 16):
        number = int(table.tie_number[u])
        if not number:
            pattern = (int(table.verdict[u]) >> table.shift) & mask
            law[pattern] = law.get(pattern, Fraction(0)) + digit
            continue
        row = int(rows.offset[group]) + number
        width = rows.width
        ends = [
            Fraction(
                sum(int(w) << (64 * (width - 1 - i)) for i, w in enumerate(words)),
                2 ** (64 * width),
            )
            for words, ok in zip(rows.rests[row], rows.valid[row], strict=True)
            if ok
        ]
        start = Fraction(0)
        for k, end in enumerate([*ends, Fraction(1)]):
            pattern = mask - (int(rows.first[row]) + k)
            law[pattern] = law.get(pattern, Fraction(0)) + (end - start) * digit
            start = end
    return law


def _product_law(coins: list[Coin]) -> dict[int, Fraction]:
    law = {}
    for pattern in range(1 << len(coins)):
        p = Fraction(1)
        for i, coin in enumerate(coins):
            p *= coin.probability if pattern >> i & 1 else 1 - coin.probability
        law[pattern] = p
    return law


# Coin sets with interval ends exactly on a digit's start, beside ends inside that digit.
_ON_A_DIGIT_START = [
    [Coin(3, 1), Coin(1 << 63, 1)],
    [_odd_coin(Fraction(1, 70_000)), Coin(1 << 62, 1), Coin(5 << 60, 1)],
]


@pytest.mark.parametrize("coin_set", [COINS, *_ON_A_DIGIT_START])
def test_joint_tables_realize_the_product_of_the_coins_exactly(coin_set: list[Coin]) -> None:
    """Each group's table, read in rationals, gives every outcome exactly its probability."""
    tables, rows = _coins._joint_tables(tuple(coin_set))
    for group, table in enumerate(tables):
        coins = coin_set[table.shift : table.shift + table.coins]
        law = {k: v for k, v in _table_law(table, rows, group).items() if v}
        assert law == {k: v for k, v in _product_law(coins).items() if v}, group
    if coin_set is not COINS:
        return
    # validity twin: the same check fails for a table whose ends are read one word short
    table = tables[0]
    short = dataclasses.replace(rows, rests=rows.rests.copy())
    short.rests[:, :, -1] = 0
    assert _table_law(table, short, 0) != _product_law(COINS[:4])


def _joint_tie_samples(step: int, runs: int) -> tuple[NDArray[np.int64], dict[int, Fraction]]:
    """Outcomes of a four-coin group at elements whose digit is forced onto a tied value."""
    coins = [
        _odd_coin(Fraction(1, 3)),
        _odd_coin(Fraction(2, 5)),
        _odd_coin(Fraction(3, 7)),
        _odd_coin(Fraction(1, 2) + Fraction(1, 10**6)),
    ]
    tables, rows = _coins._joint_tables(tuple(coins))
    (table,) = tables
    u = int(np.flatnonzero(table.tie_number)[3])  # a digit holding an end
    n = 1 << 12

    def tie_some(words: NDArray[np.uint64]) -> NDArray[np.uint64]:
        words.view(np.uint16)[:n:step] = u
        return words

    samples = [
        _coins.packed_bernoulli(ForcingSource(tie_some), coins, n)[::step] for _ in range(runs)
    ]
    return np.concatenate(samples).astype(np.int64), _table_law_of_digit(table, rows, u)


@pytest.mark.parametrize(
    ("step", "runs"),
    [(1024, 1000), (64, 100)],  # 4 ties per call (the pools) or 64 (they overflow)
)
def test_packed_bernoulli_resolves_a_joint_tie_with_the_right_law(step: int, runs: int) -> None:
    """The outcome after a tied digit follows the exact conditional law of its range."""
    samples, conditional = _joint_tie_samples(step, runs)
    support = np.array(sorted(k for k, p in conditional.items() if p))
    assert support.size >= 2
    assert np.isin(samples, support).all()  # nothing outside the digit's range
    pmf = np.array([float(conditional[k]) for k in support])
    assert chi_square_pvalue(samples, support, pmf) > FALSE_ALARM


def test_joint_tie_law_check_catches_a_resolver_that_ignores_the_words(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Validity twin: a resolver that always takes the digit's first interval fails."""
    real = _coins._resolve

    def first_interval(source: Any, rows: Any, row: NDArray[np.intp]) -> Any:
        weak = dataclasses.replace(rows, valid=np.zeros_like(rows.valid))
        return real(source, weak, row)

    monkeypatch.setattr(_coins, "_resolve", first_interval)
    samples, conditional = _joint_tie_samples(64, 100)
    support = np.array(sorted(k for k, p in conditional.items() if p))
    pmf = np.array([float(conditional[k]) for k in support])
    assert chi_square_pvalue(samples, support, pmf) < FALSE_ALARM


def _table_law_of_digit(table: Any, rows: Any, u: int) -> dict[int, Fraction]:
    """The conditional law of a group's outcome given that its digit is the tied ``u``."""
    single = dataclasses.replace(
        table, tie_number=np.where(np.arange(1 << 16) == u, table.tie_number, 0)
    )
    law = _table_law(single, rows, 0)
    # drop the untied digits' mass: 65535 digits of 2**-16 each, all on their verdicts
    for v in range(1 << 16):
        if v != u:
            pattern = (int(table.verdict[v]) >> table.shift) & ((1 << table.coins) - 1)
            law[pattern] -= Fraction(1, 1 << 16)
    return {k: p * (1 << 16) for k, p in law.items() if p}


def test_tie_pool_overflow_bound() -> None:
    """The pool size meets its 2**-80 bound, checked against the exact binomial tail."""
    for groups, coins in [(8192, 8 * 8), (8192, 8 * 16), (1, 8 * 8), (125, 8 * 15)]:
        slots = _coins.tie_pool_size(groups, coins)
        p_group = 1 - (1 - 2.0**-16) ** coins
        assert stats.binom.sf(slots - 1, groups, p_group) < 2.0**-80


# ---------------------------------------------------------------- Knuth–Yao


def _distribution(count: int, bits: int, seed: int) -> list[int]:
    """``count`` numerators over 2**bits (adding up to it) with long binary expansions."""
    gen = np.random.default_rng(seed)
    weights = [int(x) for x in gen.integers(1, 2**62, size=count)]
    total = sum(weights)
    numerators = [w * 2**bits // total for w in weights]
    numerators[0] += 2**bits - sum(numerators)
    return numerators


def test_knuth_yao_levels_add_up_to_every_probability_exactly() -> None:
    numerators = _distribution(300, 180, 1)
    sampler = DyadicSampler(numerators, 180, np.arange(300, dtype=np.int64))
    # level 1: slots per outcome; deeper levels: the digits; together the exact numerator
    first = np.bincount(sampler.table[: sampler.fill], minlength=300)
    order = sampler.values.tolist()
    total = {k: Fraction(int(first[k]), 2**16) for k in range(300)}
    previous = 0
    for level in range(2, sampler._levels + 1):
        cumulative, fill = sampler._level(level)
        digits = np.diff(np.concatenate([[previous * 0], cumulative]))
        for position, k in enumerate(order):
            total[k] += Fraction(int(digits[position]), 2 ** (16 * level))
        assert fill == int(cumulative[-1])
    pad = sampler._levels * 16 - 180
    for k in range(300):
        assert total[k] == Fraction(numerators[k] << pad, 2 ** (180 + pad))


def test_knuth_yao_draws_its_distribution() -> None:
    numerators = _distribution(50, 140, 2)
    sampler = DyadicSampler(numerators, 140, np.arange(50, dtype=np.int64))
    drawn, special = sampler.sample(_random.bit_source(None), N)
    assert special.size == 0
    pmf = np.array([x / 2**140 for x in numerators])
    assert chi_square_pvalue(drawn, np.arange(50), pmf) > FALSE_ALARM


def test_knuth_yao_continuation_draws_the_conditional_distribution() -> None:
    """Force every level-1 draw into the leftover slots: the continuation alone must give
    P(k | continue) = (2**16 P(k) - first digit) / leftover, exactly."""
    numerators = _distribution(400, 200, 3)
    sampler = DyadicSampler(numerators, 200, np.arange(400, dtype=np.int64))
    leftover = 2**16 - sampler.fill
    assert leftover > 50

    def continuing(words: NDArray[np.uint64]) -> NDArray[np.uint64]:
        lanes = words.view(np.uint16)
        lanes[:] = sampler.fill + (lanes % leftover)  # uniform enough: leftover << 2**16
        return words

    drawn, _ = sampler.sample(ForcingSource(continuing), N)
    pad = sampler._levels * 16 - 200
    residual = np.array(
        [((a << pad) % 2 ** (sampler._levels * 16 - 16)) for a in numerators], dtype=object
    )
    pmf = np.array([float(Fraction(int(r), 2 ** (sampler._levels * 16 - 16))) for r in residual])
    pmf /= pmf.sum()
    # lanes % leftover is not exactly uniform: its bias (below leftover / 2**16) is far
    # below what 4e5 draws can see against the differences a wrong mapping would make.
    assert chi_square_pvalue(drawn, np.arange(400), pmf) > FALSE_ALARM
    ideal = np.array([x / 2**200 for x in numerators])
    assert chi_square_pvalue(drawn, np.arange(400), ideal) < FALSE_ALARM  # validity twin


def test_knuth_yao_reports_special_outcomes() -> None:
    numerators = [2**20 - 3, 1, 1, 1]
    special = np.array([False, False, True, True])
    sampler = DyadicSampler(numerators, 20, np.array([0, 1, 2, 3]), special)
    drawn, flagged = sampler.sample(_random.bit_source(None), 2**20)
    assert set(np.flatnonzero(np.isin(drawn, [2, 3])).tolist()) == set(flagged.tolist())


def test_knuth_yao_refuses_probabilities_that_do_not_add_up() -> None:
    with pytest.raises(_coins.DPFrameError, match="add up"):
        DyadicSampler([1, 2], 2, np.array([0, 1]))
