"""dpframe._persistence: pickle and parquet round trips never refund spent budget."""

from __future__ import annotations

import copy
import gc
import json
import pickle
import subprocess
import sys
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from dpframe import _attrs, _persistence
from dpframe._attrs import ledger_of
from dpframe._budget import Budget
from dpframe._ledger import Ledger
from dpframe.errors import (
    InvalidParameterError,
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
    def restore_from_scratch(state: Any) -> Ledger:
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
    assert history["method"].tolist() == ["count", "(restored)"]
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
    result = subprocess.run(
        [
            sys.executable,
            "-c",
            script,
            str(tmp_path / "frame.pkl"),
            str(tmp_path / "frame.parquet"),
        ],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    expected = [
        ledger.id,
        {"epsilon": "2", "delta": "1/1000000"},
        {"epsilon": "13/30", "delta": "1/10000000"},
        2,
    ]
    assert json.loads(result.stdout) == {"pickle": expected, "parquet": expected}


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
