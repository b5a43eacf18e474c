"""The campaign's time split: start-up, busy and tail add up to the wall time per worker."""

from replayssm.fuzz.campaign_times import PARTS, time_split


def test_each_worker_s_parts_add_up_to_the_wall_time() -> None:
    results = {0: {"clock": {"entered": 103.0, "ready": 105.0, "first_launch": 106.5, "end": 150.0},
                   "combinations": [[0, 20.0], [5, 25.0]]},
               1: {"clock": {"entered": 104.0, "ready": 107.0, "end": 130.0}, "combinations": [[1, 23.0]]}}
    split = time_split(100.0, 160.0, {0: 100.5, 1: 101.0, 2: 101.5}, results)
    w0, w1 = split["workers"]
    assert w0 == {"worker": 0, "before_start": 0.5, "spawn": 2.5, "load": 2.0, "start_up": 5.0,
                  "first_launch": 1.5, "busy": 45.0, "tail": 10.0, "combinations": [[0, 20.0], [5, 25.0]]}
    assert (w1["start_up"], w1["busy"], w1["tail"], w1["first_launch"]) == (7.0, 23.0, 30.0, None)
    for w in (w0, w1):
        assert w["start_up"] + w["busy"] + w["tail"] == split["wall"] == 60.0
        assert w["before_start"] + w["spawn"] + w["load"] == w["start_up"]
    assert split["mean"] == {"before_start": 0.75, "spawn": 2.75, "load": 2.5, "start_up": 6.0,
                             "first_launch": 1.5, "busy": 34.0, "tail": 20.0}
    assert set(split["mean"]) == set(PARTS) and split["busy_fraction"] == round(34 / 60, 4)
    assert split["workers_without_result"] == [2]  # stopped before it returned: not split


def test_no_worker_returned() -> None:
    split = time_split(0.0, 1.0, {0: 0.1}, {})
    assert split["workers"] == [] and split["busy_fraction"] is None and split["mean"]["busy"] is None
