"""The gang scheduling simulation: partial placement deadlocks, gangs do not."""

import pytest
from aiinfra.cloud.gang import Job, finished_at, schedule

TWO = [Job("a", 2, 3), Job("b", 2, 3)]


def test_pod_by_pod_placement_deadlocks_two_jobs_that_each_need_the_cluster():
    steps = schedule(nodes=2, jobs=TWO, gang=False, horizon=10)
    assert all(held == {"a": 1, "b": 1} for held in steps)  # each holds half, forever
    assert finished_at(steps, TWO) == {"a": None, "b": None}


def test_a_gang_scheduler_runs_them_one_after_the_other():
    steps = schedule(nodes=2, jobs=TWO, gang=True, horizon=10)
    assert steps[0] == {"a": 2, "b": 0} and steps[3] == {"a": 0, "b": 2}
    assert finished_at(steps, TWO) == {"a": 3, "b": 6}


def test_both_policies_agree_when_everything_fits():
    jobs = [Job("a", 1, 2), Job("b", 2, 1)]
    for gang in (False, True):
        assert finished_at(schedule(3, jobs, gang, 5), jobs) == {"a": 2, "b": 1}


def test_nodes_held_never_exceed_the_cluster():
    jobs = [Job("a", 3, 2), Job("b", 2, 2), Job("c", 4, 1)]
    for gang in (False, True):
        assert all(sum(h.values()) <= 4 for h in schedule(4, jobs, gang, 12))


@pytest.mark.parametrize(
    ("nodes", "jobs", "match"),
    [
        (0, TWO, "nodes and horizon must be >= 1"),
        (2, [Job("a", 3, 1)], r"pods must be in 1..nodes \(2\)"),
        (2, [Job("a", 1, 0)], "steps >= 1"),
        (2, [Job("a", 1, 1), Job("a", 1, 1)], "distinct names"),
    ],
)
def test_bad_input_is_named(nodes, jobs, match):
    with pytest.raises(ValueError, match=match):
        schedule(nodes, jobs, gang=True, horizon=3)


def test_the_book_frames_draw_each_step_of_both_schedules():
    from aiinfra.book.cloud import kubernetes as book

    frames = book.gang_frames()
    assert len(frames) == book.GANG_HORIZON  # one step more on each frame
    jobs = list(book.GANG_JOBS)
    for upto, fig in enumerate(frames, start=1):
        for ax, is_gang in zip(fig.axes, (False, True), strict=True):
            steps = schedule(book.GANG_NODES, jobs, is_gang, book.GANG_HORIZON)
            expected = []  # (step, opaque: the job runs) per node held
            for t, held in enumerate(steps[:upto]):
                for j in jobs:
                    running = held[j.name] == j.pods
                    expected += [(t, running)] * held[j.name]
            drawn = [(round(p.get_x()), p.get_alpha() == 1.0) for p in ax.patches]
            assert drawn == expected, (upto, is_gang)
    # The last frame shows what the book figure shows: pod by pod, nothing runs.
    book_axes = book.gang_figure().axes
    for ax_frame, ax_book in zip(frames[-1].axes, book_axes, strict=True):
        assert len(ax_frame.patches) == len(ax_book.patches)
    assert not any(p.get_alpha() == 1.0 for p in frames[-1].axes[0].patches)
