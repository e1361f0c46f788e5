"""The declared order of object keys, kept beside a value for databases that re-sort
them (PostgreSQL's jsonb), and put back for the people reading it."""

import json

from workflows.engine.values import in_key_order, key_order


def jsonb_sorted(value):
    """What PostgreSQL's jsonb gives back: object keys by length, then bytewise."""
    if isinstance(value, dict):
        keys = sorted(value, key=lambda k: (len(k.encode()), k.encode()))
        return {k: jsonb_sorted(value[k]) for k in keys}
    if isinstance(value, list):
        return [jsonb_sorted(v) for v in value]
    return value


DECLARED = {
    "requested_by": "Grace",
    "budget_eur": 4200,
    "dates": {"to": "2027-03-03", "from": "2027-03-01"},
    "attendees": [{"name": "Ada", "diet": "vegan"}, "Linus", []],
    "a": None,
}


def test_the_declared_order_comes_back_after_the_database_sorted_it():
    stored = jsonb_sorted(DECLARED)
    assert json.dumps(stored) != json.dumps(DECLARED)
    order = key_order(DECLARED)
    assert order == [
        [[], ["requested_by", "budget_eur", "dates", "attendees", "a"]],
        [["dates"], ["to", "from"]],
        [["attendees", 0], ["name", "diet"]],
    ]
    assert json.loads(json.dumps(order)) == order  # JSON that keeps its order anywhere
    restored = in_key_order(stored, order)
    assert json.dumps(restored) == json.dumps(DECLARED)
    assert json.dumps(stored) == json.dumps(jsonb_sorted(DECLARED)), "left as it was"


def test_an_order_that_does_not_fit_is_passed_over():
    value = {"b": 1, "a": {"y": 1, "x": 2}, "c": [1]}
    assert in_key_order(value, None) is value
    assert in_key_order(value, []) is value
    mismatched = [
        [["c", 5], ["q"]],  # no such item
        [["b"], ["q"]],  # not an object
        [["a", "x", "deeper"], ["q"]],
        [[0], ["q"]],  # an index into an object
        [["a"], ["x", "gone", ["not", "a", "key"]]],
        [[], ["c"]],  # the keys not named keep their place after it
    ]
    assert json.dumps(in_key_order(value, mismatched)) == json.dumps(
        {"c": [1], "b": 1, "a": {"x": 2, "y": 1}}
    )


def test_deep_and_wide_values_without_recursion():
    deep, stored = {"z": 1, "y": 2}, {"y": 2, "z": 1}
    for _ in range(1000):
        deep, stored = {"next": deep, "at": 0}, {"at": 0, "next": stored}
    order = key_order(deep)
    assert len(order) == 1001
    restored = in_key_order(stored, order)
    for _ in range(1000):
        assert list(restored) == ["next", "at"]
        restored = restored["next"]
    assert list(restored) == ["z", "y"]
    wide = {f"k{i}": i for i in range(10_000, 0, -1)}
    assert list(in_key_order(jsonb_sorted(wide), key_order(wide))) == list(wide)
