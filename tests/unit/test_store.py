"""What a process owes the store: kept in order, taken at once, put back ahead of what came since."""

from __future__ import annotations

from webhooks.store import Owed


def test_what_could_not_be_told_is_owed_again_ahead_of_what_came_since():
    owed: Owed[str] = Owed()
    assert not owed and owed.take() == []
    owed.add(["release a", "release b"])
    taken = owed.take()
    assert taken == ["release a", "release b"] and not owed
    owed.add(["back c"])  # owed meanwhile
    owed.put_back(taken[1:])  # "release a" was told, the store failed at "release b"
    assert owed.take() == ["release b", "back c"]
