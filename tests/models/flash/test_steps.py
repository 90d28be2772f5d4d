"""Step-by-step frames replay the package's online softmax and tiled attention."""

import math
import re

import pytest
import torch
import torch.nn.functional as F
from aiinfra.book.models import flash_attention as flash
from aiinfra.book.models import questions
from aiinfra.models.flash.steps import softmax_steps, tile_steps
from matplotlib.text import Text

X = (1.0, 3.0, 2.0, 0.5, 4.0, 2.5, 1.5, 5.0, -1.0, 4.5)


@pytest.mark.parametrize("block_size", [1, 3, 4, 10])
def test_softmax_step_k_holds_the_max_and_logsumexp_of_the_scores_read(block_size):
    x = torch.tensor(X, dtype=torch.float64)
    steps = softmax_steps(X, block_size)
    assert len(steps) == 1 + math.ceil(len(X) / block_size)
    assert (steps[0].j, steps[0].m, steps[0].d) == (0, -math.inf, 0.0)
    for k, step in enumerate(steps[1:], start=1):
        seen = x[: min(k * block_size, len(X))]
        assert step.j == len(seen)
        assert step.m == seen.max().item()
        assert step.m + math.log(step.d) == pytest.approx(torch.logsumexp(seen, 0))
    last = steps[-1]
    torch.testing.assert_close(
        torch.exp(x - last.m) / last.d, torch.softmax(x, dim=0), rtol=1e-12, atol=0
    )


def test_softmax_steps_mark_a_rescale_exactly_where_the_max_grows():
    running_max = torch.tensor(X).cummax(dim=0).values.tolist()
    steps = softmax_steps(X)
    for j in range(2, len(X) + 1):
        grew = running_max[j - 1] > running_max[j - 2]
        assert steps[j].m_prev == (running_max[j - 2] if grew else None)
    assert [s.j for s in steps if s.m_prev is not None] == [2, 5, 8]


def needed_tiles(n, block_q, block_k, causal):
    """Tiles holding a query-key pair that attention uses, row-major: brute force."""
    tiles = []
    for i, i0 in enumerate(range(0, n, block_q)):
        for j, j0 in enumerate(range(0, n, block_k)):
            pairs = [
                (a, b)
                for a in range(i0, min(i0 + block_q, n))
                for b in range(j0, min(j0 + block_k, n))
            ]
            if not causal or any(b <= a for a, b in pairs):
                tiles.append(((i, j), causal and any(b > a for a, b in pairs)))
    return tiles


@pytest.mark.parametrize(
    "n, block_q, block_k, causal",
    [(8, 2, 2, True), (8, 2, 2, False), (10, 4, 3, True), (7, 3, 2, True)],
)
def test_tile_steps_are_the_needed_tiles_row_by_row_with_masks_and_final_rows(
    n, block_q, block_k, causal
):
    steps = tile_steps(n, block_q, block_k, causal)
    expected = needed_tiles(n, block_q, block_k, causal)
    assert steps[0].tile is None and not steps[0].final
    assert [s.tile for s in steps[1:]] == [tile for tile, _ in expected]
    assert list(steps[-1].masked) == [tile for tile, masked in expected if masked]
    for t, step in enumerate(steps[1:], start=1):
        assert list(step.done) == [tile for tile, _ in expected[: t - 1]]
        # a row block of O is final once its last needed tile has been visited
        rows_left = {tile[0] for tile, _ in expected[t:]}
        assert set(step.final) == {tile[0] for tile, _ in expected[:t]} - rows_left
    every = -(-n // block_q) * -(-n // block_k)
    assert len(steps[0].skipped) == every - len(expected)


def test_attention_over_the_visited_tiles_alone_equals_sdpa():
    n, block = 8, 2
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(n, 4, generator=g, dtype=torch.float64) for _ in range(3))
    s = torch.full((n, n), -math.inf, dtype=torch.float64)
    for i, j in [step.tile for step in tile_steps(n, block, block, causal=True)[1:]]:
        rows, cols = (
            slice(i * block, (i + 1) * block),
            slice(j * block, (j + 1) * block),
        )
        s[rows, cols] = q[rows] @ k[cols].T / 2  # 1 / sqrt(d), d = 4
    s = s.masked_fill(torch.ones(n, n, dtype=torch.bool).triu(1), -math.inf)
    expected = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    torch.testing.assert_close(torch.softmax(s, dim=-1) @ v, expected)


def test_book_frame_counts_follow_the_step_rules():
    assert len(flash.online_softmax_frames()) == len(flash.SCORES) + 1
    blocks = 4  # 4 x 4 blocks, causal: T (T + 1) / 2 tiles, and the start
    assert len(flash.flash_tiles_frames()) == blocks * (blocks + 1) // 2 + 1


def texts(figure):
    figure.canvas.draw()  # tick labels exist once drawn
    return [t for t in figure.findobj(Text) if t.get_text() and t.get_visible()]


def test_frames_are_slides_with_large_text_and_words_apart_from_numbers():
    # one frame of each kind; the book's grids are drawn by the same functions
    frames = [flash.online_softmax_frames()[5], flash.flash_tiles_frames()[3]]
    for frame in frames:
        assert tuple(frame.get_size_inches()) == (10, 5.0)
        for text in texts(frame):
            assert text.get_fontsize() >= 14, text.get_text()
            plain = re.sub(r"\$[^$]*\$", "", text.get_text())
            assert not (re.search(r"\d", plain) and re.search(r"[A-Za-z]{3}", plain))
    assert flash.online_softmax_figure().get_size_inches()[0] == 7


def test_bad_input_is_rejected():
    with pytest.raises(ValueError, match="x must hold at least one score"):
        softmax_steps([])
    with pytest.raises(ValueError, match="block_size must be an int >= 1"):
        softmax_steps([1.0], block_size=0)
    with pytest.raises(ValueError, match="n must be an int >= 1"):
        tile_steps(0, 2, 2, causal=True)
    with pytest.raises(ValueError, match="block_k must be an int >= 1"):
        tile_steps(8, 2, 2.0, causal=False)


# Llama 3 8B's published config.json (meta-llama/Meta-Llama-3-8B): hidden 4096,
# 32 layers, 32 heads of 128, 8 key/value heads, MLP 14336, vocabulary 128256,
# untied head, 8,030,261,248 parameters.
D, LAYERS, HEADS, KV_HEADS, HEAD_DIM, FF, VOCAB = 4096, 32, 32, 8, 128, 14336, 128256
PARAMETERS, T = 8_030_261_248, 8192


def test_question_answers_match_a_hand_count_from_the_published_config():
    attention = D * HEADS * HEAD_DIM * 2 + 2 * D * KV_HEADS * HEAD_DIM  # q, o; k, v
    matmul = LAYERS * (attention + 3 * D * FF) + VOCAB * D
    assert questions.llama_matmul_parameters() == matmul
    parity = 6 * matmul / (12 * LAYERS * HEADS * HEAD_DIM)
    assert questions.llama_attention_parity_tokens() == pytest.approx(parity)
    free = 80 * 10**9 - 2 * PARAMETERS  # H100 SXM datasheet: 80 GB of HBM3
    per_token = 2 * KV_HEADS * HEAD_DIM * LAYERS * 2  # bytes, bf16
    assert questions.llama_kv_tokens_fitting() == free // per_token
    assert questions.llama_mha_kv_tokens_fitting() == free // (
        per_token * HEADS // KV_HEADS
    )
    assert questions.llama_sequences_fitting() == free // per_token // T
    assert questions.llama_mha_sequences_fitting() == free // (4 * per_token) // T
    assert questions.llama_probabilities_gib_per_layer() == HEADS * T * T * 2 / 2**30
    assert questions.llama_probabilities_gib() == LAYERS * HEADS * T * T * 2 / 2**30
    assert questions.llama_lse_mib_per_layer() == HEADS * T * 4 / 2**20


def test_tile_counts_of_the_question_follow_the_triangle_rule():
    blocks = questions.TILES_N // questions.TILES_BLOCK
    assert questions.tile_blocks() == blocks
    assert questions.causal_tiles_computed() == blocks * (blocks + 1) // 2
    assert questions.full_tiles_computed() == blocks**2
    assert questions.causal_tiles_masked() == blocks
