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


def test_the_book_frames_walk_the_measured_restart_phase_by_phase():
    from aiinfra.book.cloud import restarts as book

    res = results.load("restart", "gloo")
    cfg = res["config"]
    last_commit = (cfg["fail_at"] - 1) // cfg["every"] * cfg["every"]
    frames = book.restart_frames()
    assert len(frames) == 4  # train, kill, rendezvous, resume
    for n, fig in enumerate(frames):
        (ax,) = fig.axes
        bars = sorted((p.get_x(), p.get_width()) for p in ax.patches)
        # Attempt 0 trains 1..fail_at-1; attempt 1 (last frame) last_commit+1..steps.
        expected = [(0.5, cfg["fail_at"] - 1)]
        if n == 3:
            expected.append((last_commit + 0.5, cfg["steps"] - last_commit))
        assert bars == sorted(expected)
        kills = [c for c in ax.collections if c.get_label() == "worker killed"]
        assert len(kills) == (n >= 1)
        if kills:
            assert kills[0].get_offsets()[0][0] == cfg["fail_at"] - 0.5
        commits = sorted(  # every other marker is a committed checkpoint
            x
            for c in ax.collections
            if c.get_label() != "worker killed"
            for x, _ in c.get_offsets()
        )
        every = cfg["every"]
        want = [s for s in range(every, cfg["fail_at"], every)]
        if n == 3:
            want += [
                s for s in range(last_commit + 1, cfg["steps"] + 1) if s % every == 0
            ]
        assert commits == sorted(want)
        texts = [t.get_text() for t in ax.texts]
        assert ("every worker stopped; the agents meet again" in texts) == (n >= 2)
    assert len(book.restart_figure().axes[0].patches) == len(frames[-1].axes[0].patches)
