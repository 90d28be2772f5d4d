"""The engine traced one iteration at a time, and the batching page's frames.

Ground truth: the scheduler's rules applied by hand to the page's example (blocks of
2 tokens, a pool of 7, 6 tokens and 3 sequences per iteration; requests 0 and 1
of 3 and 2 prompt tokens and 4 outputs arrive first, request 2 of 2 tokens and 3
outputs before iteration 1, request 3 of 7 tokens and 2 outputs before iteration 2):

- 0: admit 0 (3 tokens, 2 blocks) and 1 (2 tokens, 1 block): 4 blocks free.
- 1: decode 0 (its 4th token fits its 2nd block) and 1 (a 2nd block); admit 2
  (1 block): 2 free.
- 2: decode 0 and 2 (a new block each) and 1: 0 free; request 3 waits.
- 3: 0 decodes in place; 1 needs a block: preempt the latest admitted, 2 (2 blocks
  back); 1 takes one. Nothing is admitted after a preemption. 0 and 1 have their 4
  outputs and finish: 7 free.
- 4: 2 comes back first and recomputes its 2 prompt and 2 generated tokens
  (2 blocks), makes its 3rd output and finishes; 3 gets the 2 tokens left of the
  budget (1 block): 6 free.
- 5: 3's last 5 prompt tokens (4 blocks in all): its first token; 3 free.
- 6: 3 decodes into its 4th block's free slot and finishes: 7 free.
"""

import pytest
import torch
from aiinfra.book.inference import batching
from aiinfra.infer.engine.core import Engine, SamplingParams
from aiinfra.infer.engine.steps import trace_iterations
from aiinfra.infer.serve_cli import tiny_model
from matplotlib.text import Text

HAND = [  # (ran, first token, finished, preempted, waiting, free blocks)
    ((("0", "prefill", 3), ("1", "prefill", 2)), ("0", "1"), (), (), (), 4),
    (
        (("0", "decode", 1), ("1", "decode", 1), ("2", "prefill", 2)),
        ("2",),
        (),
        (),
        (),
        2,
    ),
    (
        (("0", "decode", 1), ("1", "decode", 1), ("2", "decode", 1)),
        (),
        (),
        (),
        ("3",),
        0,
    ),
    ((("0", "decode", 1), ("1", "decode", 1)), (), ("0", "1"), ("2",), ("2", "3"), 7),
    ((("2", "recompute", 4), ("3", "prefill", 2)), (), ("2",), (), (), 6),
    ((("3", "prefill", 5),), ("3",), (), (), (), 3),
    ((("3", "decode", 1),), (), ("3",), (), (), 7),
]


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def test_the_pages_example_traces_as_worked_out_by_hand():
    trace = batching._iterations()
    got = [
        (it.ran, it.first_token, it.finished, it.preempted, it.waiting, it.free_blocks)
        for it in trace
    ]
    assert got == HAND
    assert [it.arrived for it in trace][:3] == [("0", "1"), ("2",), ("3",)]
    assert batching.iteration_count() == len(HAND)
    assert (batching.preempted_request(), batching.preempted_at()) == (2, 3)


def test_tokens_per_iteration_equal_the_engines_own_count():
    eng = Engine(tiny_model(0), num_blocks=8, block_size=2, max_num_batched_tokens=5)
    p = SamplingParams(max_tokens=3)
    trace = trace_iterations(eng, {0: [([1, 2, 3], p)], 2: [(list(range(9)), p)]})
    assert [sum(n for _, _, n in it.ran) for it in trace] == eng.batch_tokens
    assert trace[-1].free_blocks == 8 and not trace[-1].blocks


def cells(fig) -> set[str]:
    return {p.get_gid() for p in fig.axes[0].patches if p.get_gid()}


def hand_cells(shown: int) -> set[str]:
    """What the first ``shown`` iterations of HAND draw: a cell per live request."""
    out = set()
    for step, (ran, _, _, preempted, waiting, _) in enumerate(HAND[:shown]):
        for r, kind, _ in ran:
            out.add(f"{kind}:{r}:{step}")
        for r in preempted:
            out.add(f"preempted:{r}:{step}")
        for r in waiting:
            if r not in preempted:
                out.add(f"waiting:{r}:{step}")
    return out


def test_frames_draw_each_iteration_as_the_engine_ran_it():
    frames = batching.iteration_frames()
    assert len(frames) == len(HAND)
    for shown, fig in enumerate(frames, start=1):
        assert cells(fig) == hand_cells(shown)
    assert cells(batching.iteration_figure()) == hand_cells(len(HAND))
    for fig in frames:
        assert fig.get_size_inches()[0] == 10
        sizes = [t.get_fontsize() for t in fig.findobj(Text) if t.get_text()]
        assert min(sizes) >= 14


def test_bad_trace_arguments():
    eng = Engine(tiny_model(0), num_blocks=8, block_size=2)
    with pytest.raises(ValueError, match="max_steps"):
        trace_iterations(eng, {}, max_steps=0)
    with pytest.raises(ValueError, match="arrivals"):
        trace_iterations(eng, {-1: []})
    eng.add_request([1, 2], SamplingParams(max_tokens=2))
    with pytest.raises(ValueError, match="engine"):
        trace_iterations(eng, {})
