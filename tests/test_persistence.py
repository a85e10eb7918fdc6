"""dpframe._persistence: pickle and parquet round trips never refund spent budget."""

from __future__ import annotations

import copy
import dataclasses
import gc
import json
import pickle
import subprocess
import sys
import threading
from fractions import Fraction
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from dpframe import _attrs, _ledger, _persistence
from dpframe._attrs import ledger_of
from dpframe._budget import Budget
from dpframe._ledger import Ledger
from dpframe.errors import (
    BudgetExceededError,
    BudgetNotSetError,
    InvalidParameterError,
    InvalidParameterTypeError,
    LedgerConflictError,
)
from tests._ledgers import F, budgeted_frame, charge, plain_frame


def test_pickle_bytes_round_trip_reconnects_to_the_live_ledger() -> None:
    frame, ledger = budgeted_frame()
    charge(ledger, F(1, 3))
    restored = pickle.loads(pickle.dumps(frame))
    assert ledger_of(restored) is ledger
    assert ledger.total == Budget(F(1), F(0))
    assert ledger.spent == Budget(F(1, 3), F(0))
    charge(ledger_of(restored), F(1, 3))
    assert ledger.spent.epsilon == F(2, 3)


def test_pickle_file_round_trip_reconnects_to_the_live_ledger(tmp_path: Path) -> None:
    frame, ledger = budgeted_frame()
    charge(ledger, F(1, 3))
    frame.to_pickle(tmp_path / "frame.pkl")
    charge(ledger, F(1, 3))  # spent after the save
    restored = pd.read_pickle(tmp_path / "frame.pkl")
    assert ledger_of(restored) is ledger
    assert ledger.spent.epsilon == F(2, 3)  # the older copy did not reset anything
    assert ledger.total.epsilon == 1


def _pickle_round_trip_keeps_spending() -> bool:
    """Save, spend more, let every frame of the ledger die, load: is the spending kept?"""
    frame, ledger = budgeted_frame()
    charge(ledger, F(3, 10))
    saved = pickle.dumps(frame)
    charge(ledger, F(2, 10))
    ledger_id = ledger.id
    del frame, ledger
    gc.collect()
    assert ledger_id not in _persistence._LIVE
    restored = ledger_of(pickle.loads(saved))
    assert restored is not None
    history = restored.to_dict()["history"]
    return (
        restored.id == ledger_id
        and restored.spent == Budget(F(1, 2), F(0))
        and restored.total == Budget(F(1), F(0))
        and sum((F(row["epsilon"]) for row in history), F(0)) == F(1, 2)
    )


def test_pickle_after_the_ledger_died_never_refunds() -> None:
    assert _pickle_round_trip_keeps_spending()


def test_validity_resetting_restore_fails_the_pickle_test(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def restore_from_scratch(state: Any, instance: str | None = None) -> Ledger:
        fresh = Ledger()
        fresh.set_budget(1)
        return fresh

    monkeypatch.setattr(_persistence, "restore", restore_from_scratch)
    assert not _pickle_round_trip_keeps_spending()


def test_a_copy_that_spent_more_is_absorbed_conservatively() -> None:
    # A copy of this ledger that went on elsewhere (another process) spent more and
    # lowered the total; reconnecting must keep the highest spent and the lowest total.
    _, ledger = budgeted_frame()
    charge(ledger, F(1, 10))
    elsewhere = ledger.to_dict()
    elsewhere["total"] = {"epsilon": "4/5", "delta": "0"}
    elsewhere["spent"] = {"epsilon": "3/10", "delta": "0"}
    elsewhere["history"].append({**elsewhere["history"][0], "epsilon": "1/5"})
    other = plain_frame()
    other.attrs["dpframe"] = json.loads(json.dumps(elsewhere))
    assert ledger_of(other) is ledger
    assert ledger.total == Budget(F(4, 5), F(0))
    assert ledger.spent == Budget(F(3, 10), F(0))
    history = ledger.history
    assert history["method"].tolist() == ["count", "count"]  # the other copy's release
    assert sum((F(row["epsilon"]) for row in ledger.to_dict()["history"]), F(0)) == F(3, 10)
    # an older copy (less spent, higher total) changes nothing
    older = plain_frame()
    older.attrs["dpframe"] = {
        **elsewhere,
        "total": {"epsilon": "1", "delta": "0"},
        "spent": {"epsilon": "0", "delta": "0"},
        "history": [],
    }
    before = ledger.to_dict()
    assert ledger_of(older) is ledger
    assert ledger.to_dict() == before


def _copies_that_parted_both_count() -> bool:
    """Two copies of one saved ledger each spent more (two processes reading one file)."""
    _, ledger = budgeted_frame()
    charge(ledger, F(1, 10))
    saved = ledger.to_dict()
    copies = []
    for epsilon, time in (
        ("1/5", "2026-01-01T00:00:01+00:00"),
        ("3/10", "2026-01-01T00:00:02+00:00"),
    ):
        record = json.loads(json.dumps(saved))
        record["history"].append({**record["history"][0], "epsilon": epsilon, "time": time})
        record["spent"] = {"epsilon": str(F(1, 10) + F(epsilon)), "delta": "0"}
        copies.append(record)
    for record in copies:
        other = plain_frame()
        other.attrs["dpframe"] = record
        assert ledger_of(other) is ledger
    return ledger.spent == Budget(F(6, 10), F(0)) and len(ledger.history) == 3


def _checkpoints_and_parted_copies_count_right(tmp_path: Path) -> bool:
    """After the ledger died: files saved before and after a release read back in order
    (the release counts once), and a copy spent by another process (it counts too)."""
    frame, ledger = budgeted_frame()
    frame.to_parquet(tmp_path / "before.parquet")
    saved = ledger.to_dict()
    charge(ledger, F(3, 10))
    frame.to_parquet(tmp_path / "after.parquet")
    del frame, ledger
    gc.collect()
    first = ledger_of(pd.read_parquet(tmp_path / "before.parquet"))
    again = ledger_of(pd.read_parquet(tmp_path / "after.parquet"))
    once = first is again and first is not None and first.spent == Budget(F(3, 10), F(0))
    # another process read the first file and spent 1/5 (a release of its own time)
    elsewhere = json.loads(json.dumps(saved))
    _, other_ledger = budgeted_frame()
    charge(other_ledger, F(1, 5))
    elsewhere["history"].append(other_ledger.to_dict()["history"][0])
    elsewhere["spent"] = {"epsilon": "1/5", "delta": "0"}
    copy = plain_frame()
    copy.attrs["dpframe"] = elsewhere
    both = ledger_of(copy) is first and first.spent == Budget(F(1, 2), F(0))
    return once and both


def test_checkpoints_and_parted_copies_count_each_release_once(tmp_path: Path) -> None:
    assert _checkpoints_and_parted_copies_count_right(tmp_path)


def test_validity_a_mark_of_sums_only_fails_the_checkpoint_test(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    changed = _persistence._Registry.changed

    def sums_only(self: Any, ledger: Ledger, added: Any) -> None:
        changed(self, ledger, added)
        mark = _persistence._HIGH_WATER[ledger.id]
        _persistence._HIGH_WATER[ledger.id] = dataclasses.replace(mark, releases=())

    monkeypatch.setattr(_persistence._Registry, "changed", sums_only)
    assert not _checkpoints_and_parted_copies_count_right(tmp_path)


def test_copies_that_parted_add_their_spending() -> None:
    assert _copies_that_parted_both_count()


def test_validity_copies_merged_by_their_largest_spending_fail_the_parting_test(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    absorb = Ledger._absorb

    def largest_only(self: Ledger, *args: Any, releases: Any = (), **kwargs: Any) -> None:
        absorb(self, *args, **kwargs)  # the other copy's history ignored: max of the sums

    monkeypatch.setattr(Ledger, "_absorb", largest_only)
    assert not _copies_that_parted_both_count()


def test_parquet_round_trip_restores_and_reconnects(tmp_path: Path) -> None:
    frame, ledger = budgeted_frame()
    ledger.set_budget(1)
    charge(ledger, F(1, 11), method="crosstab", columns=["age", "sex"], noise_scale=11.0)
    path = tmp_path / "frame.parquet"
    frame.to_parquet(path)
    loaded = pd.read_parquet(path)
    pd.testing.assert_frame_equal(loaded, frame)
    assert ledger_of(loaded) is ledger
    assert isinstance(loaded.attrs["dpframe"], _attrs._LedgerHandle)
    # a second write carries the spending done since
    charge(ledger, F(1, 11))
    loaded.to_parquet(path)
    assert json.loads(json.dumps(pd.read_parquet(path).attrs))["dpframe"]["spent"] == {
        "epsilon": "2/11",
        "delta": "0",
    }


def test_parquet_round_trip_rebuilds_when_the_ledger_is_gone(tmp_path: Path) -> None:
    frame, ledger = budgeted_frame()
    charge(ledger, F(1, 7))
    ledger_id = ledger.id
    frame.to_parquet(tmp_path / "frame.parquet")
    del frame, ledger
    gc.collect()
    restored = ledger_of(pd.read_parquet(tmp_path / "frame.parquet"))
    assert restored is not None
    assert restored.id == ledger_id
    assert restored.spent == Budget(F(1, 7), F(0))
    assert restored.total == Budget(F(1), F(0))
    assert restored.history["method"].tolist() == ["count"]


def _unit_kept_from_a_copy_saved_before_the_budget(tmp_path: Path) -> bool:
    """A file written before set_budget declared the unit, read after the ledger died."""
    panel = pd.DataFrame({"nr": [1, 1, 2, 2], "year": [1980, 1981, 1980, 1981]})
    panel.dp.ledger  # noqa: B018  (any .dp use attaches a ledger, with no budget yet)
    panel.to_parquet(tmp_path / "early.parquet")
    years = {"year": [1980, 1981]}
    panel.dp.set_budget(epsilon=4.0, privacy_unit="nr", domains=years)
    panel.dp.count(epsilon=1.0, by="year", max_rows=1, max_groups=2)
    del panel
    gc.collect()
    restored = pd.read_parquet(tmp_path / "early.parquet").dp.ledger
    return (
        restored.spent.epsilon == 1
        and restored.privacy_unit == ("nr",)
        and list(restored.domains) == ["year"]
        and restored.row_count == 4
    )


def test_a_copy_saved_before_the_budget_learns_the_unit_it_was_given(tmp_path: Path) -> None:
    # Without the unit, the next release would be charged per row, not per person.
    assert _unit_kept_from_a_copy_saved_before_the_budget(tmp_path)


def test_validity_a_high_water_mark_without_the_unit_fails_the_unit_test(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    changed = _persistence._Registry.changed

    def forgetful(self: Any, ledger: Ledger, added: Any) -> None:
        changed(self, ledger, added)
        mark = _persistence._HIGH_WATER[ledger.id]
        _persistence._HIGH_WATER[ledger.id] = dataclasses.replace(mark, privacy_unit=None)

    monkeypatch.setattr(_persistence._Registry, "changed", forgetful)
    assert not _unit_kept_from_a_copy_saved_before_the_budget(tmp_path)


def _panel_merged_with_a_copy_of_another_unit() -> tuple[pd.DataFrame, dict[str, Any]]:
    """A panel budgeted per person ("nr") whose ledger read back a copy of its early file
    that another process budgeted with one row per person and released from; and the
    early record (saved before either budget)."""
    panel = pd.DataFrame({"nr": [1, 1, 2, 2], "year": [1980, 1981, 1980, 1981]})
    early = panel.dp.ledger.to_dict()  # any .dp use attaches a ledger, with no budget yet
    panel.dp.set_budget(epsilon=4.0, privacy_unit="nr", domains={"year": [1980, 1981]})
    elsewhere = {**early, "budget_set": True, "total": {"epsilon": "4", "delta": "0"}}
    elsewhere["row_count"] = 4
    _, other_ledger = budgeted_frame()
    charge(other_ledger, F(1, 5))
    elsewhere["history"] = [other_ledger.to_dict()["history"][0]]
    elsewhere["spent"] = {"epsilon": "1/5", "delta": "0"}
    copy_of = plain_frame()
    copy_of.attrs["dpframe"] = json.loads(json.dumps(elsewhere))
    assert ledger_of(copy_of) is panel.dp.ledger
    return panel, early


def _in_a_new_process(script: str, *paths: Path) -> str:
    """What ``script`` prints, run by a new Python process with ``paths`` as arguments."""
    result = subprocess.run(
        [sys.executable, "-c", script, *map(str, paths)],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    return result.stdout


def _copies_with_other_units_are_refused() -> bool:
    """Two copies of a file saved before set_budget, budgeted with different units."""
    panel, _ = _panel_merged_with_a_copy_of_another_unit()
    try:
        panel.dp.count(epsilon=1.0, by="year", max_rows=1, max_groups=2)
    except LedgerConflictError as error:
        return "privacy units" in str(error) and panel.dp.ledger.spent.epsilon == F(1, 5)
    return False


def test_copies_budgeted_with_other_privacy_units_refuse_every_release() -> None:
    # Releases bounded per person and releases counted per row cannot be added up.
    assert _copies_with_other_units_are_refused()


def test_validity_merging_units_silently_fails_the_conflict_test(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(_ledger, "_unit_conflict", lambda ours, theirs: None)
    assert not _copies_with_other_units_are_refused()


def _conflict_outlives_the_process(tmp_path: Path, *, strip: bool) -> str:
    """Save a frame whose ledger holds a conflict (``strip``: without its mark, as before
    it was saved), read it in a new process and try a release there."""
    panel, _ = _panel_merged_with_a_copy_of_another_unit()
    with pytest.raises(LedgerConflictError):
        panel.dp.count(epsilon=1.0, max_rows=1)
    record = panel.dp.ledger.to_dict()
    assert "conflict" in record
    if strip:
        del record["conflict"]
    saved = panel.copy()
    saved.attrs = {"dpframe": record}
    saved.to_pickle(tmp_path / "merged.pkl")
    script = (
        "import sys, pandas as pd, dpframe\n"
        "frame = pd.read_pickle(sys.argv[1])\n"
        "try:\n"
        "    frame.dp.count(epsilon=1.0, max_rows=1)\n"
        "    print('released', frame.dp.ledger.spent.epsilon)\n"
        "except dpframe.errors.LedgerConflictError:\n"
        "    print('refused')\n"
    )
    return _in_a_new_process(script, tmp_path / "merged.pkl").strip()


def test_a_saved_conflict_is_refused_in_a_new_process(tmp_path: Path) -> None:
    # The conflict was kept in memory only: a pickle of the merged frame released in a
    # new process, accounted per person although one copy had counted per row.
    assert _conflict_outlives_the_process(tmp_path, strip=False) == "refused"


def test_validity_a_record_without_its_conflict_releases(tmp_path: Path) -> None:
    assert _conflict_outlives_the_process(tmp_path, strip=True).startswith("released")


def test_a_conflict_outlives_the_ledger_in_this_process() -> None:
    panel, early = _panel_merged_with_a_copy_of_another_unit()
    saved = pickle.dumps(panel)
    del panel
    gc.collect()
    # The high-water mark carries the conflict: a copy read back still refuses.
    back = pickle.loads(saved)
    with pytest.raises(LedgerConflictError):
        back.dp.count(epsilon=1.0, max_rows=1)
    # A copy saved before the merge (no conflict in its record) learns it from the mark.
    early_copy = plain_frame()
    early_copy.attrs["dpframe"] = early
    with pytest.raises(LedgerConflictError):
        ledger_of(early_copy).require_budget()


def test_a_conflict_in_a_record_must_be_a_text() -> None:
    record = {**ledger_of(plain_frame()).to_dict(), "id": "conflicted", "conflict": 3}
    copy_of = plain_frame()
    copy_of.attrs["dpframe"] = record
    with pytest.raises(InvalidParameterError, match="conflict"):
        ledger_of(copy_of)


def test_a_copy_without_a_unit_that_released_nothing_does_not_conflict(tmp_path: Path) -> None:
    # The unit may be declared after the budget while no release was made: reading back
    # a file saved in between refused every release of the data for the process.
    panel = pd.DataFrame({"nr": [1, 1, 2, 2], "year": [1980, 1981, 1980, 1981]})
    panel.dp.set_budget(epsilon=2.0)
    panel.to_parquet(tmp_path / "before_unit.parquet")
    panel.dp.set_budget(epsilon=2.0, privacy_unit="nr")
    read = pd.read_parquet(tmp_path / "before_unit.parquet")
    assert read.dp.ledger is panel.dp.ledger
    assert panel.dp.ledger.privacy_unit == ("nr",)
    panel.dp.count(epsilon=1.0, max_rows=1)  # released, per person
    assert panel.dp.ledger.spent.epsilon == 1


def test_of_two_row_counts_the_smaller_is_kept() -> None:
    frame = plain_frame()
    early = ledger_of(frame).to_dict()
    frame.dp.set_budget(epsilon=1.0)
    smaller = {**early, "budget_set": True, "total": {"epsilon": "1", "delta": "0"}}
    smaller["row_count"] = len(frame) - 1
    copy_of = plain_frame()
    copy_of.attrs["dpframe"] = smaller
    assert ledger_of(copy_of).row_count == len(frame) - 1


def test_the_row_count_is_saved_with_the_ledger() -> None:
    frame = plain_frame()
    frame.dp.set_budget(epsilon=1.0)
    record = frame.dp.ledger.to_dict()
    assert record["row_count"] == len(frame)
    for bad in (-1, True, 2.5, "3"):
        copy_of = plain_frame()
        copy_of.attrs["dpframe"] = {**record, "id": "another", "row_count": bad}
        with pytest.raises(InvalidParameterError, match="row_count"):
            ledger_of(copy_of)


def test_files_restore_the_ledger_in_a_new_process(tmp_path: Path) -> None:
    frame = plain_frame()
    ledger = ledger_of(frame)
    assert ledger is not None
    ledger.set_budget(2, 1e-6)
    charge(ledger, F(1, 3), F(1, 10**7), noise_scale=3.0)
    charge(ledger, F(1, 10))
    frame.to_pickle(tmp_path / "frame.pkl")
    frame.to_parquet(tmp_path / "frame.parquet")
    script = (
        "import json, sys, pandas as pd\n"
        "from dpframe._attrs import ledger_of\n"
        "out = {}\n"
        "for name, frame in [('pickle', pd.read_pickle(sys.argv[1])),\n"
        "                    ('parquet', pd.read_parquet(sys.argv[2]))]:\n"
        "    state = ledger_of(frame).to_dict()\n"
        "    out[name] = [state['id'], state['total'], state['spent'], len(state['history'])]\n"
        "print(json.dumps(out))\n"
    )
    printed = _in_a_new_process(script, tmp_path / "frame.pkl", tmp_path / "frame.parquet")
    expected = [
        ledger.id,
        {"epsilon": "2", "delta": "1/1000000"},
        {"epsilon": "13/30", "delta": "1/10000000"},
        2,
    ]
    assert json.loads(printed) == {"pickle": expected, "parquet": expected}


def _mirror_matches(frame: pd.DataFrame) -> bool:
    """Whether what to_parquet stores (the attrs mirror) is the ledger's own record."""
    stored = json.loads(json.dumps(frame.attrs["dpframe"]))
    return bool(stored == json.loads(json.dumps(frame.dp.ledger.to_dict())))


def test_parquet_keeps_the_privacy_unit_declared_after_the_ledger_was_attached(
    tmp_path: Path,
) -> None:
    # The mirror was copied when a frame first met .dp, and set_budget's unit, domains
    # and row count never reached it: read back in a new process, releases were charged
    # per row (a man of 8 rows lost 4 for a recorded 0.5).
    panel = pd.DataFrame({"nr": [1, 1, 2, 2], "year": [1980, 1981, 1980, 1981]})
    panel.dp.ledger  # noqa: B018  (any .dp use attaches a ledger, with no budget yet)
    assert _mirror_matches(panel)
    panel.dp.set_budget(epsilon=4.0, privacy_unit="nr", domains={"year": [1980, 1981]})
    assert _mirror_matches(panel)
    panel.dp.count(epsilon=1.0, by="year", max_rows=1, max_groups=2)
    assert _mirror_matches(panel)
    panel.to_parquet(tmp_path / "panel.parquet")
    script = (
        "import sys, pandas as pd, dpframe\n"
        "frame = pd.read_parquet(sys.argv[1])\n"
        "ledger = frame.dp.ledger\n"
        "print(ledger.privacy_unit, ledger.row_count, list(ledger.domains), ledger.spent.epsilon)\n"
        "try:\n"
        "    frame.dp.count(epsilon=0.5)\n"
        "except dpframe.errors.PrivacyUnitError:\n"
        "    print('refused')\n"
    )
    printed = _in_a_new_process(script, tmp_path / "panel.parquet")
    assert printed.split("\n")[:2] == ["('nr',) 4 ['year'] 1", "refused"]


def test_a_refused_set_budget_declares_nothing() -> None:
    panel = pd.DataFrame({"nr": [1, 1, 2, 2], "year": [1980, 1981, 1980, 1981]})
    panel.dp.set_budget(epsilon=1.0)
    with pytest.raises(InvalidParameterError, match="raise the budget"):
        panel.dp.set_budget(epsilon=5.0, privacy_unit="nr", domains={"year": [1980, 1999]})
    ledger = panel.dp.ledger
    assert ledger.privacy_unit is None
    assert dict(ledger.domains) == {}
    panel.dp.set_budget(epsilon=1.0, domains={"year": [1980, 1981]})  # the right code book
    assert list(ledger.domains["year"]) == [1980, 1981]


def test_to_csv_works_and_carries_no_ledger(tmp_path: Path) -> None:
    frame, ledger = budgeted_frame()
    text = frame.to_csv(index=False)
    assert text.splitlines()[0] == "key,age,sex"
    frame.to_csv(tmp_path / "frame.csv", index=False)
    loaded = pd.read_csv(tmp_path / "frame.csv")
    assert ledger_of(loaded, create=False) is None  # documented: CSV keeps no metadata
    assert ledger_of(frame) is ledger


def test_deepcopy_shares_the_ledger() -> None:
    frame, ledger = budgeted_frame()
    duplicate = copy.deepcopy(frame)
    assert duplicate.attrs["dpframe"] is frame.attrs["dpframe"]
    charge(ledger_of(duplicate), F(1, 2))
    assert ledger.spent.epsilon == F(1, 2)


@pytest.mark.parametrize(
    "record",
    [
        "not a ledger",
        {"format": "dpframe.ledger"},
        {"format": "dpframe.ledger", "version": 99, "id": "x"},
        {
            "format": "dpframe.ledger",
            "version": 1,
            "id": "x",
            "total": {"epsilon": "1", "delta": "0"},
            "spent": {"epsilon": "-1", "delta": "0"},
            "history": [],
        },
        {
            "format": "dpframe.ledger",
            "version": 1,
            "id": "x",
            "total": {"epsilon": "1", "delta": "0"},
            "spent": {"epsilon": "0", "delta": "0"},
            "history": [{"time": "2025-01-01T00:00:00+00:00", "epsilon": "1/2"}],
        },
    ],
)
def test_malformed_record_in_attrs_is_refused(record: Any) -> None:
    frame = plain_frame()
    frame.attrs["dpframe"] = record
    with pytest.raises(InvalidParameterError, match="not a valid dpframe ledger record"):
        ledger_of(frame)


# ---------------------------------------------------------------- zCDP: rho costs and budgets


def _zcdp_charge(ledger: Ledger | None, rho: Fraction) -> None:
    assert ledger is not None
    ledger.charge(
        method="crosstab",
        columns=["age", "sex"],
        mechanism="discrete_gaussian",
        rho=rho,
        noise_scale=10.0,
        private=True,
    )


def test_pickle_and_parquet_keep_rho_budgets_and_costs(tmp_path: Path) -> None:
    frame = plain_frame()
    ledger = ledger_of(frame)
    assert ledger is not None
    ledger.set_budget(rho=F(1, 50))
    _zcdp_charge(ledger, F(1, 200))
    charge(ledger, F(1, 10))  # pure: 1/200 in zCDP
    ledger_id = ledger.id
    frame.to_pickle(tmp_path / "frame.pkl")
    frame.to_parquet(tmp_path / "frame.parquet")
    state = json.loads(json.dumps(ledger.to_dict()))
    assert state["version"] == 3
    assert state["total"] == {"rho": "1/50"}
    assert state["spent"] == {"epsilon": "1/10", "delta": "0", "rho": "1/200"}
    assert [row.get("rho") for row in state["history"]] == ["1/200", None]
    del frame, ledger
    gc.collect()
    for restored in (
        ledger_of(pd.read_pickle(tmp_path / "frame.pkl")),
        ledger_of(pd.read_parquet(tmp_path / "frame.parquet")),
    ):
        assert restored is not None
        assert restored.id == ledger_id
        assert restored.total == Budget(rho=F(1, 50))
        assert restored.spent == Budget(rho=F(1, 100))
        assert restored.history["measure"].tolist() == ["zCDP", "pure"]


def _rho_spent_after_save_is_kept() -> bool:
    """Save, spend rho, let every frame of the ledger die, load: is the rho still spent?"""
    frame = plain_frame()
    ledger = ledger_of(frame)
    assert ledger is not None
    ledger.set_budget(1, 1e-6)
    charge(ledger, F(1, 10))
    saved = pickle.dumps(frame)
    _zcdp_charge(ledger, F(1, 100))
    ledger_id = ledger.id
    del frame, ledger
    gc.collect()
    restored = ledger_of(pickle.loads(saved))
    assert restored is not None
    return (
        restored.id == ledger_id
        and restored.spent.rho == F(1, 100)
        and restored.history["measure"].tolist() == ["pure", "zCDP"]
    )


def test_restoring_a_copy_never_refunds_rho() -> None:
    assert _rho_spent_after_save_is_kept()


def test_validity_a_high_water_mark_without_rho_fails_the_rho_test(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The mistake: a high-water mark that keeps epsilon and delta only (the version-2 mark).
    changed = _persistence._Registry.changed

    def forgetful(self: Any, ledger: Ledger, added: Any) -> None:
        changed(self, ledger, added)
        mark = _persistence._HIGH_WATER[ledger.id]
        spent = (mark.spent[0], mark.spent[1], F(0))
        pure = [release for release in mark.releases if release.rho is None]
        _persistence._HIGH_WATER[ledger.id] = dataclasses.replace(mark, spent=spent, releases=pure)

    monkeypatch.setattr(_persistence._Registry, "changed", forgetful)
    assert not _rho_spent_after_save_is_kept()


def test_restored_spending_is_counted_at_its_worst() -> None:
    # Another copy spent epsilon after this one opened its zCDP account: the ledger is then
    # exhausted, never refunded.
    ledger = ledger_of(plain_frame())
    assert ledger is not None
    ledger.set_budget(1, 1e-6)
    _zcdp_charge(ledger, F(1, 1000))
    elsewhere = ledger.to_dict()
    elsewhere["spent"] = {"epsilon": "1/10", "delta": "0", "rho": "1/1000"}
    other = plain_frame()
    other.attrs["dpframe"] = json.loads(json.dumps(elsewhere))
    assert ledger_of(other) is ledger
    assert ledger.history["method"].tolist() == ["crosstab", "(restored)"]
    assert ledger.remaining.rho == 0
    assert ledger.remaining_rho == 0
    with pytest.raises(BudgetExceededError, match="together spent more than its budget"):
        _zcdp_charge(ledger, F(1, 10**9))


def test_a_copy_lowered_to_a_rho_budget_lowers_this_one() -> None:
    ledger = ledger_of(plain_frame())
    assert ledger is not None
    ledger.set_budget(1, 1e-6)
    elsewhere = ledger.to_dict()
    elsewhere["total"] = {"rho": "1/100"}
    other = plain_frame()
    other.attrs["dpframe"] = elsewhere
    assert ledger_of(other) is ledger
    assert ledger.total == Budget(rho=F(1, 100))
    # and an (epsilon, delta) copy cannot raise it back
    older = plain_frame()
    older.attrs["dpframe"] = {**elsewhere, "total": {"epsilon": "1", "delta": "1/1000000"}}
    assert ledger_of(older) is ledger
    assert ledger.total == Budget(rho=F(1, 100))


def test_version_2_records_are_read_as_before() -> None:
    record = {
        "format": "dpframe.ledger",
        "version": 2,
        "id": "a-version-2-ledger",
        "budget_set": True,
        "total": {"epsilon": "1", "delta": "1/1000000"},
        "spent": {"epsilon": "1/3", "delta": "1/10000000"},
        "history": [
            {
                "time": "2025-01-01T00:00:00+00:00",
                "method": "count",
                "columns": ["age"],
                "where": None,
                "by": [],
                "bounds": None,
                "mechanism": "geometric",
                "epsilon": "1/3",
                "delta": "1/10000000",
                "sensitivity": 1.0,
                "noise_scale": 3.0,
                "alpha": 0.05,
                "noise_error_bound": 9.0,
                "private": True,
            }
        ],
        "domains": [],
        "row_labels": None,
    }
    frame = plain_frame()
    frame.attrs["dpframe"] = record
    ledger = ledger_of(frame)
    assert ledger is not None
    assert ledger.total == Budget(F(1), F(1, 10**6))
    assert ledger.spent == Budget(F(1, 3), F(1, 10**7))
    assert ledger.history["measure"].tolist() == ["approx"]
    assert ledger.to_dict()["version"] == 3


@pytest.mark.parametrize(
    ("total", "spent", "history_rho", "history_epsilon"),
    [
        ({"rho": "-1/2"}, {"epsilon": "0", "delta": "0"}, None, "0"),
        ({"rho": "0"}, {"epsilon": "0", "delta": "0"}, None, "0"),
        ({"rho": "1", "epsilon": "1", "delta": "0"}, {"epsilon": "0", "delta": "0"}, None, "0"),
        ({"epsilon": "1", "delta": "0"}, {"epsilon": "0", "delta": "0", "rho": "x"}, None, "0"),
        ({"epsilon": "1", "delta": "0"}, {"epsilon": "0", "delta": "0"}, "-1/100", "0"),
        ({"epsilon": "1", "delta": "0"}, {"epsilon": "0", "delta": "0"}, "1/100", "1/10"),
        ({"epsilon": "1", "delta": "inf"}, {"epsilon": "0", "delta": "0"}, None, "0"),
    ],
)
def test_malformed_zcdp_records_are_refused(
    total: Any, spent: Any, history_rho: Any, history_epsilon: str
) -> None:
    row: dict[str, Any] = {
        "time": "2025-01-01T00:00:00+00:00",
        "method": "count",
        "columns": ["age"],
        "mechanism": "discrete_gaussian",
        "epsilon": history_epsilon,
        "delta": "0",
        "noise_scale": None,
        "private": True,
    }
    if history_rho is not None:
        row["rho"] = history_rho
    frame = plain_frame()
    frame.attrs["dpframe"] = {
        "format": "dpframe.ledger",
        "version": 3,
        "id": "malformed",
        "total": total,
        "spent": spent,
        "history": [row],
    }
    with pytest.raises(InvalidParameterError, match="not a valid dpframe ledger record"):
        ledger_of(frame)


def test_a_restore_inside_a_held_ledger_does_not_deadlock() -> None:
    """A thread that holds its ledger (agg) may restore a copy of it while another thread's
    restore of that ledger waits: the waiting restore may hold no lock the first needs."""
    frame, ledger = budgeted_frame()
    saved = pickle.dumps(frame)
    record = ledger.to_dict()  # as read from a file: merged under the ledger's lock
    done: list[str] = []

    def waiting_restore() -> None:
        _persistence.restore(record)
        done.append("waiting")

    def holder() -> None:
        with ledger.held():
            waiting = threading.Thread(target=waiting_restore, daemon=True)
            waiting.start()
            waiting.join(timeout=0.5)  # it waits for the ledger, which this thread holds
            pickle.loads(saved)  # a restore of the same ledger, inside the hold
            done.append("holder")

    holding = threading.Thread(target=holder, daemon=True)
    holding.start()
    holding.join(timeout=20)
    assert "holder" in done, "the holder deadlocked with the waiting restore"
    for _ in range(200):
        if "waiting" in done:
            break
        threading.Event().wait(0.1)
    assert done == ["holder", "waiting"]


@pytest.mark.parametrize("alive", [True, False])
def test_spending_known_only_by_its_sum_stays_counted_beside_another_copys_release(
    alive: bool,
) -> None:
    """0.3 spent here, 0.2 learnt from a copy as a sum ("(restored)"), 0.2 spent by
    another process: 0.7, whether or not the ledger died before that copy is read."""
    ledger = Ledger()
    ledger.set_budget(1)
    first = json.loads(json.dumps(ledger.to_dict()))
    charge(ledger, F(3, 10))
    _persistence.restore({**first, "spent": {"epsilon": "1/2", "delta": "0"}})
    _, elsewhere_ledger = budgeted_frame()
    charge(elsewhere_ledger, F(1, 5))
    elsewhere = json.loads(json.dumps(first))
    elsewhere["history"].append(elsewhere_ledger.to_dict()["history"][0])
    elsewhere["spent"] = {"epsilon": "1/5", "delta": "0"}
    if not alive:
        del ledger
        gc.collect()
    restored = _persistence.restore(elsewhere)
    assert restored.spent == Budget(F(7, 10), F(0))
    assert sum((F(row["epsilon"]) for row in restored.to_dict()["history"]), F(0)) == F(7, 10)


def test_declarations_the_record_cannot_hold_are_refused_before_anything_is_set() -> None:
    # A tuple column name passed the column checks, was applied, and then the record
    # could not be written: set_budget raised with the budget set, and every release was
    # charged and then failed.
    wide = pd.DataFrame({("id", ""): [1, 1, 2], ("g", "k"): ["x", "y", "x"]})
    for declare in (
        lambda: wide.dp.set_budget(epsilon=1.0, privacy_unit=("id", "")),
        lambda: wide.dp.set_budget(epsilon=1.0, domains={("g", "k"): ["x", "y"]}),
    ):
        with pytest.raises(InvalidParameterTypeError, match="tuple"):
            declare()
        assert not wide.dp.ledger.budget_set
        assert dict(wide.dp.ledger.domains) == {}


def test_an_integer_domain_with_a_missing_key_survives_a_file(tmp_path: Path) -> None:
    # pd.NA could not be written (set_budget refused it), and a record read back gave
    # float keys, which the nullable column then refused as never equal.
    frame = pd.DataFrame({"n": pd.array([1, 2, None], dtype="Int64")})
    frame.dp.set_budget(epsilon=1.0, domains={"n": [1, 2, None]})
    record = json.loads(json.dumps(frame.dp.ledger.to_dict()))
    read = pd.DataFrame({"n": pd.array([1, 2, None], dtype="Int64")})
    read.attrs["dpframe"] = {**record, "id": "another ledger"}
    restored = read.dp.ledger
    pd.testing.assert_index_equal(restored.domains["n"], frame.dp.ledger.domains["n"])
    read.dp.set_budget(epsilon=1.0, domains={"n": [1, 2, None]})  # the same code book


def test_parts_saved_at_two_moments_concatenate_once_read(tmp_path: Path) -> None:
    # pandas drops attrs that differ: the saved records of two moments of one ledger.
    panel = pd.DataFrame({"nr": [1, 1, 2, 2], "year": [1980, 1981, 1980, 1981]})
    panel.dp.set_budget(epsilon=2.0, privacy_unit="nr", domains={"year": [1980, 1981]})
    panel[panel.year < 1981].to_parquet(tmp_path / "p1.parquet")
    panel.dp.count(epsilon=0.5, max_rows=2)
    panel[panel.year >= 1981].to_parquet(tmp_path / "p2.parquet")
    first, second = (pd.read_parquet(tmp_path / f"p{i}.parquet") for i in (1, 2))
    with pytest.raises(BudgetNotSetError, match="concat of parts read back"):
        pd.concat([first, second]).dp.count(epsilon=0.1, max_rows=2)
    # The fix the message names: read each part's ledger, then combine.
    first, second = (pd.read_parquet(tmp_path / f"p{i}.parquet") for i in (1, 2))
    assert first.dp.ledger is second.dp.ledger
    combined = pd.concat([first, second])
    assert combined.dp.ledger is panel.dp.ledger
    assert combined.dp.ledger.spent.epsilon == F(1, 2)


@pytest.mark.parametrize(
    ("field", "value"),
    [("noise_scale", 10**400), ("alpha", 10**400), ("sensitivity", 10**400), ("epsilon", "1e400")],
)
def test_numbers_beyond_float_range_in_a_record_are_refused(field: str, value: object) -> None:
    # They raised OverflowError (or restored, then broke the history display).
    _, ledger = budgeted_frame()
    charge(ledger, F(1, 5))
    record = json.loads(json.dumps(ledger.to_dict()))
    record["id"] = f"edited-{field}"
    record["history"][0][field] = value
    copy_of = plain_frame()
    copy_of.attrs["dpframe"] = record
    with pytest.raises(InvalidParameterError, match="not a valid dpframe ledger"):
        len(ledger_of(copy_of).history)
    record["history"][0][field] = ledger.to_dict()["history"][0][field]  # twin: as saved
    copy_of.attrs["dpframe"] = {**record, "id": f"as-saved-{field}"}
    assert len(ledger_of(copy_of).history) == 1


def test_a_pickle_of_a_held_ledger_in_this_process_does_not_wait() -> None:
    """Dask's distributed scheduler unpickles a graph in this process while agg holds the
    ledger for the whole compute: waiting for the ledger there hung forever."""
    frame, ledger = budgeted_frame()
    charge(ledger, F(1, 10))
    saved = pickle.dumps(frame)
    done: list[object] = []

    def unpickle() -> None:
        done.append(pickle.loads(saved).dp.ledger)

    with ledger.held():
        reader = threading.Thread(target=unpickle, daemon=True)
        reader.start()
        reader.join(timeout=10)
        assert done == [ledger], "a pickle of this very ledger waited for its lock"
    # twin: a record of this ledger from elsewhere (no instance) is merged under the lock
    other = plain_frame()
    other.attrs["dpframe"] = json.loads(json.dumps(ledger.to_dict()))
    with ledger.held():
        reader = threading.Thread(target=lambda: done.append(ledger_of(other)), daemon=True)
        reader.start()
        reader.join(timeout=0.5)
        assert len(done) == 1  # it waits for the holder
    reader.join(timeout=10)
    assert done == [ledger, ledger]


def test_pickling_a_frame_while_another_thread_holds_its_ledger_does_not_wait() -> None:
    """The distributed scheduler pickles graphs on its own thread during agg's compute."""
    frame, ledger = budgeted_frame()
    charge(ledger, F(1, 10))
    pickled: list[bytes] = []
    with ledger.held():
        writer = threading.Thread(target=lambda: pickled.append(pickle.dumps(frame)), daemon=True)
        writer.start()
        writer.join(timeout=10)
        assert len(pickled) == 1, "pickling waited for the ledger's holder"
    # what it saved is the ledger's state (read back as a record from elsewhere)
    record = pickle.loads(pickled[0]).dp.ledger.to_dict()
    assert record["spent"] == ledger.to_dict()["spent"]
    assert len(record["history"]) == 1
