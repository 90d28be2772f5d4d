"""Step-by-step figures of data parallelism, and the training chapter's answers.

Ground truths: timelines worked out by hand on the stated cost model (a layer's
backward takes ``backward_time`` per parameter, a bucket's all-reduce ``latency`` +
``all_reduce_time`` per element, one at a time, in bucket order); the order in which
real autograd fires ``register_post_accumulate_grad_hook``; ZeRO's per-rank bytes from
Rajbhandari et al. 2020, Fig. 1: (2 + 2 + K) Psi, 2 Psi + 2 Psi + K Psi / N_d,
2 Psi + (2 + K) Psi / N_d and (2 + 2 + K) Psi / N_d; IEEE 754 binary16's largest
value, (2 - 2^-10) 2^15 = 65504; ``torch.amp.GradScaler``'s initial scale; Llama 3
8B's 8,030,261,248 parameters (Meta's model card: 8.03 B).
"""

import pytest
import torch
from aiinfra.book.training import ddp, memory, questions, zero
from aiinfra.parallel.data import figures
from aiinfra.parallel.data.bucketed import assign_buckets
from aiinfra.parallel.data.naive import trainable_parameters
from aiinfra.parallel.toy import mlp
from aiinfra.parallel.zero import figures as zero_figures
from matplotlib.figure import Figure
from matplotlib.text import Text

# mlp((2, 3, 1)): layer 0 has 2*3 + 3 = 9 parameters, layer 1 has 3*1 + 1 = 4.
# A 16-byte cap takes, in reverse: 2.bias (4 B) + 2.weight (12 B) = 16 B; then
# 0.bias (12 B); then 0.weight (24 B, alone). With backward_time 1, latency 2 and
# all_reduce_time 1: backward of layer 1 over [0, 4], of layer 0 over [4, 13];
# bucket 0 (4 elements) ready at 4: [4, 10]; bucket 1 (3) ready at 13: [13, 18];
# bucket 2 (6) ready at 13, network busy until 18: [18, 26]. Without overlap:
# 13 + 6 + 5 + 8 = 32, so overlap saves 6.
TINY = {"backward_time": 1.0, "latency": 2.0, "all_reduce_time": 1.0}
TINY_BUCKETS = [["2.bias", "2.weight"], ["0.bias"], ["0.weight"]]
TINY_BACKWARD = [(1, 0, 4), (0, 4, 13)]
TINY_ALL_REDUCE = [(0, 4, 10), (1, 13, 18), (2, 18, 26)]

# The book's MLP (32, 64, 64, 64, 64, 32): layers of 2112, 4160, 4160, 4160 and
# 2080 parameters. A 20,000-byte cap is 5000 fp32 elements; in reverse: 32 + 2048
# + 64 = 2144 (the 4096 of 6.weight would overflow), 4096 + 64, 4096 + 64,
# 4096 + 64, 2048. Backward ends layers 4..0 at 2080, 6240, 10400, 14560, 16672;
# all-reduce of n elements: 500 + n / 2. Bucket 0 ready at 6240 -> 7812; 1 at
# 10400 -> 12980; 2 at 14560 -> 17140; 3 ready at 16672, starts at 17140 -> 19720;
# 4 -> 19720 + 500 + 1024 = 21244. One bucket: 16672 + 500 + 16672 / 2 = 25508.
BOOK_BUCKETS = [
    ["8.bias", "8.weight", "6.bias"],
    ["6.weight", "4.bias"],
    ["4.weight", "2.bias"],
    ["2.weight", "0.bias"],
    ["0.weight"],
]
BOOK_ALL_REDUCE = [(6240, 7812), (10400, 12980), (14560, 17140), (17140, 19720)]
BOOK_ALL_REDUCE += [(19720, 21244)]
BOOK_SEQUENTIAL = 16672 + 5 * 500 + 16672 / 2  # every bucket after backward
LLAMA_3_8B = 8_030_261_248
GIB = 2**30


def tiny_timeline() -> figures.OverlapTimeline:
    return figures.simulate_overlap(mlp((2, 3, 1)), 16, **TINY)


def spans(patches, prefix: str) -> dict[int, tuple[float, float]]:
    """Drawn boxes whose gid starts with ``prefix``: index -> (x0, x1)."""
    found = {}
    for p in patches:
        if (p.get_gid() or "").startswith(prefix + ":"):
            index = p.get_gid().split(":")[1]
            found[index] = (p.get_x(), p.get_x() + p.get_width())
    return found


def test_overlap_timeline_equals_hand_computation():
    t = tiny_timeline()
    assert t.buckets == TINY_BUCKETS
    assert [(s.index, s.start, s.end) for s in t.backward] == TINY_BACKWARD
    assert [(s.index, s.start, s.end) for s in t.all_reduce] == TINY_ALL_REDUCE
    assert (t.step, t.sequential, t.saved) == (26, 32, 6)


def test_book_timeline_equals_hand_computation_and_assign_buckets():
    model = mlp(ddp.OVERLAP_WIDTHS)
    t = figures.simulate_overlap(model, ddp.OVERLAP_BUCKET_BYTES)
    names = {p: n for n, p in model.named_parameters()}
    real = assign_buckets(trainable_parameters(model), ddp.OVERLAP_BUCKET_BYTES)
    assert t.buckets == [[names[p] for p in ps] for ps in real] == BOOK_BUCKETS
    assert [(s.start, s.end) for s in t.all_reduce] == BOOK_ALL_REDUCE
    assert t.sequential == BOOK_SEQUENTIAL
    assert questions.overlap_step() == 21244
    assert questions.overlap_step(25 * 2**20) == 25508  # DDP's default: one bucket
    assert ddp.overlap_parameters() == 2112 + 3 * 4160 + 2080
    assert figures.BACKWARD_TIME == 1  # the caption's time unit: one parameter's
    saved = 100 * (BOOK_SEQUENTIAL - 21244) / BOOK_SEQUENTIAL
    assert ddp.overlap_saved_percent() == pytest.approx(saved)


@pytest.mark.parametrize("cap", [16, 100, 20_000, 10**9])
def test_buckets_fill_in_the_order_real_backward_produces_gradients(cap):
    # Autograd's own order of post-accumulate-grad hooks decides when a bucket is
    # full; the timeline must launch the buckets in that order, each at the end of
    # the backward of the layer whose gradient completed it.
    model = mlp((5, 7, 6, 4, 3))
    arrived = []
    for name, p in model.named_parameters():
        p.register_post_accumulate_grad_hook(lambda p, name=name: arrived.append(name))
    model(torch.ones(2, 5)).sum().backward()
    t = figures.simulate_overlap(model, cap)
    last = [max(arrived.index(n) for n in bucket) for bucket in t.buckets]
    assert last == sorted(last)  # full in bucket order: no bucket waits for a later
    layer_end = {s.index: s.end for s in t.backward}
    for bucket, span, i in zip(t.buckets, t.all_reduce, last, strict=True):
        completing = int(arrived[i].split(".")[0]) // 2  # Sequential: Linear, Tanh
        assert span.start >= layer_end[completing] > 0
        assert completing == min(int(n.split(".")[0]) // 2 for n in bucket)


def test_overlap_frames_show_each_bucket_after_its_all_reduce():
    t = tiny_timeline()
    for k in range(len(TINY_ALL_REDUCE) + 1):
        fig = Figure()
        figures.draw_overlap_step(fig.add_subplot(), t, k, 14)
        patches = fig.axes[0].patches
        now = TINY_ALL_REDUCE[k - 1][2] if k else 0
        expected = {str(b): (s, e) for b, s, e in TINY_ALL_REDUCE[:k]}
        assert spans(patches, "all-reduce") == expected
        backward = {str(i): (s, min(e, now)) for i, s, e in TINY_BACKWARD if s < now}
        assert spans(patches, "backward") == backward
        sequential = spans(patches, "sequential")  # only the last frame has it
        after = {"backward": (0, 13), "0": (13, 19), "1": (19, 24), "2": (24, 32)}
        assert sequential == (after if k == 3 else {})


def test_overlap_frames_count_is_buckets_plus_one_and_slide_sized():
    frames = ddp.overlap_frames()
    assert len(frames) == len(BOOK_BUCKETS) + 1
    last = spans(frames[-1].axes[0].patches, "all-reduce")
    assert sorted(last.values()) == BOOK_ALL_REDUCE
    book = spans(ddp.overlap_figure().axes[0].patches, "all-reduce")
    assert book == last
    check_fonts(frames, smallest=14, width=10)
    check_fonts([ddp.overlap_figure()], smallest=8, width=7, largest=10)


def check_fonts(figs, smallest: float, width: float, largest: float = 99) -> None:
    for fig in figs:
        assert fig.get_size_inches()[0] == width
        texts = [t for t in fig.findobj(Text) if t.get_text() and t.get_visible()]
        for t in texts:
            assert smallest <= t.get_fontsize() <= largest, t.get_text()
            has_word = any(w.isalpha() and len(w) >= 3 for w in t.get_text().split())
            names = {name for name, _ in zero_figures.STAGES.values()}
            if t.get_text() not in names:  # words and numbers are separate texts
                assert not (has_word and any(c.isdigit() for c in t.get_text()))


# ZeRO, K = 12, N_d = 4, in bytes per parameter (Psi = 1): (params, grads, optimizer).
PAPER = {
    0: (2, 2, 12),  # (2 + 2 + K) Psi = 16
    1: (2, 2, 12 / 4),  # 2 Psi + 2 Psi + K Psi / N_d = 7
    2: (2, (2 + 12) / 4 - 12 / 4, 12 / 4),  # 2 Psi + (2 + K) Psi / N_d = 5.5
    3: (2 / 4, 2 / 4, 12 / 4),  # (2 + 2 + K) Psi / N_d = 4
}


def drawn_bytes(ax, rank: int) -> tuple[float, ...]:
    boxes = {p.get_gid(): p.get_width() for p in ax.patches if p.get_gid()}
    return tuple(boxes[f"{kind}:{rank}"] for kind in ("params", "grads", "optimizer"))


def test_zero_frames_draw_the_papers_bytes_per_rank():
    frames = zero.zero_stages_frames()
    assert len(frames) == 4  # DDP, then stages 1, 2 and 3
    book = zero.zero_stages_figure().axes
    for stage, (frame, ax) in enumerate(zip(frames, book, strict=True)):
        for rank in range(zero.ZERO_FIGURE_RANKS):
            assert drawn_bytes(frame.axes[0], rank) == pytest.approx(PAPER[stage])
            assert drawn_bytes(ax, rank) == pytest.approx(PAPER[stage])
    assert [sum(PAPER[s]) for s in PAPER] == [16, 7, 5.5, 4]
    check_fonts(frames, smallest=14, width=10)
    check_fonts([zero.zero_stages_figure()], smallest=8, width=7, largest=10)


def test_bad_input_is_rejected_with_named_errors():
    t = tiny_timeline()
    ax = Figure().add_subplot()
    with pytest.raises(ValueError, match="bucket_bytes"):
        figures.simulate_overlap(mlp((2, 3)), 0)
    with pytest.raises(ValueError, match="latency"):
        figures.simulate_overlap(mlp((2, 3)), 16, latency=-1.0)
    with pytest.raises(ValueError, match="k must"):
        figures.draw_overlap_step(ax, t, 4, 14)
    with pytest.raises(ValueError, match="stage"):
        zero_figures.draw_zero_stage(ax, 4, 4)
    with pytest.raises(ValueError, match="n_ranks"):
        zero_figures.draw_zero_stage(ax, 1, 0)


def test_question_answers_equal_independent_computations():
    assert memory.llama_parameters() == LLAMA_3_8B
    # ZeRO-3 holds 16 Psi / N bytes per rank: 128.5 GB over 24 GiB needs 5 ranks.
    assert 16 * LLAMA_3_8B / 4 > 24 * GIB >= 16 * LLAMA_3_8B / 5
    assert questions.llama_zero3_min_ranks(24) == 5
    per_rank = {1: 4 + 12 / 8, 2: 2 + 14 / 8, 3: 16 / 8}  # bytes per parameter, N = 8
    for stage, b in per_rank.items():
        assert questions.llama_zero_gib(stage, 8) == pytest.approx(b * LLAMA_3_8B / GIB)
    assert questions.loss_scale() == torch.amp.GradScaler("cpu").get_scale() == 2**16
    assert questions.largest_scaled_fp16_gradient() == (2 - 2**-10) * 2**15 / 2**16


def test_second_edition_values_equal_hand_computations():
    # Llama 3 8B at 8192 tokens: s b h L = 2^30, so with Llama's own layer (issue 28
    # item 6: SwiGLU at f = 3.5h, K/V at G/H = 1/4, no dropout) 169 GiB eager
    # (41 sbh + 2 a s^2 b: 41 + 128) and 34 GiB + 32 MiB fused (34 sbh + 4 asb), no
    # longer GPT's 354 (34 + 320) and 32; DDP's torch 2.13 defaults 25 MiB and 1 MiB;
    # T* = 7/8 x 989e12 / 450e9 on NVLink; a token of 100 among T = 2500 tokens on
    # 2 ranks x 2 micro-batches weighs 2500 / (2 x 2 x 100) times 1/T.
    assert memory.llama_activations_gib_8k() == 41 + 2 * 32 * 8192 / 4096
    assert memory.llama_flash_ratio() == pytest.approx(169 / (34 + 1 / 32))
    assert ddp.ddp_bucket_cap_mib() == 25
    assert ddp.ddp_first_bucket_mib() == 1
    assert ddp.overlap_tokens("nvlink") == pytest.approx(7 / 8 * 989e12 / 450e9)
    assert ddp.token_weight(0, 0) == 2500 / 400
    assert memory.llama_model_states_gib("fp32") == pytest.approx(18 * LLAMA_3_8B / GIB)
