"""``aiinfra bench restart``: its checks, and the stamped file the book shows.

The runs themselves are tested in ``test_train_restart.py``; here the config's
checks and that the committed results say what ``docs/cloud/restarts.rst`` says.
"""

import pytest
from aiinfra import results
from aiinfra.cloud.restart_bench import RestartBenchConfig


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"ranks": 1}, "ranks and steps must be >= 2"),
        ({"every": 8}, r"every must be in 1..7"),
        ({"fail_at": 2}, r"fail_at must be in 3..8"),
        ({"fail_rank": 2}, r"fail_rank must be in 0..1"),
        ({"timeout": 0}, "timeout must be > 0"),
    ],
)
def test_bad_configs_are_named(kwargs, match):
    with pytest.raises(ValueError, match=match):
        RestartBenchConfig(**kwargs)


def test_the_stamped_run_resumed_from_the_last_checkpoint_and_matches_the_control():
    res = results.load("restart", "gloo")
    cfg = RestartBenchConfig(
        **{k: v for k, v in res["config"].items() if k != "timeout"}
    )
    recs = {(r["attempt"], r["rank"]): r for r in res["restarted"]["records"]}
    assert recs[0, cfg.fail_rank]["killed_at_step"] == cfg.fail_at
    assert all(recs[0, r]["final_step"] is None for r in range(cfg.ranks))
    last_commit = (cfg.fail_at - 1) // cfg.every * cfg.every
    for r in range(cfg.ranks):
        assert recs[1, r]["resumed_from"] == last_commit
        assert recs[1, r]["final_step"] == cfg.steps
    assert {a for a, _ in recs} == {0, 1}  # one restart
    assert res["same_weights"] is True
    assert any("failed (exitcode" in ln for ln in res["restarted"]["agent_lines"])
