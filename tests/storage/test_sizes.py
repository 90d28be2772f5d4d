import pytest
from aiinfra.models.presets import preset
from aiinfra.storage import (
    inference_checkpoint_bytes,
    optimizer_state_bytes,
    training_checkpoint_bytes,
    write_seconds,
)

LLAMA_3_8B = 8_030_261_248  # parameters, the Hub checkpoint (tests/models/test_params)


# "total_size" of model.safetensors.index.json on the Hugging Face Hub: the bytes of
# the bf16 weights as shipped (meta-llama/Meta-Llama-3-8B; meta-llama/Llama-3.1-70B,
# whose tensors have the shapes of Llama 3 70B).
@pytest.mark.parametrize(
    "name, total_size",
    [("llama-3-8b", 16_060_522_496), ("llama-3-70b", 141_107_412_992)],
)
def test_inference_checkpoint_equals_the_hub_safetensors_size(name, total_size):
    size = inference_checkpoint_bytes(preset(name))
    assert size.total == size.weights == total_size
    assert size.optimizer == 0


def test_mixed_precision_adam_keeps_zero_papers_k_12():
    # Rajbhandari et al. 2020, Sec. 3.1: fp32 parameter, momentum and variance.
    assert optimizer_state_bytes("adam", "bf16-mixed") == 12


def test_llama_3_8b_training_checkpoint_is_14_bytes_per_parameter():
    size = training_checkpoint_bytes(preset("llama-3-8b"))
    assert size.n_params == LLAMA_3_8B
    assert size.weights == 2 * LLAMA_3_8B  # bf16 weights
    assert size.optimizer == 12 * LLAMA_3_8B  # fp32 master, m, v
    assert size.total == 14 * LLAMA_3_8B


def test_llama_3_70b_training_checkpoint_counted_by_hand():
    # Llama 3 70B's shapes (Llama 3 paper, Table 3; the Hub's config.json): 80 layers,
    # h = 8192, 64 query and 8 KV heads of 128, an MLP of 28672, a vocabulary of
    # 128256, input and output embeddings untied.
    h, kv, ffn, vocab = 8192, 8 * 128, 28672, 128_256
    layer = 2 * h * h + 2 * h * kv + 3 * h * ffn + 2 * h  # attention, MLP, norms
    n = 80 * layer + 2 * vocab * h + h
    assert n == 141_107_412_992 // 2  # the Hub's bf16 total_size, above
    size = training_checkpoint_bytes(preset("llama-3-70b"))
    assert size.n_params == n
    assert size.weights == 2 * n  # bf16 weights
    assert size.optimizer == 12 * n  # fp32 master, m, v: no gradients stored


@pytest.mark.parametrize(
    "optimizer, precision, per_param",
    [
        ("adam", "fp32", 12),  # fp32 weights, m, v; no master copy
        ("sgd-momentum", "bf16-mixed", 2 + 4 + 4),  # bf16, master, momentum
        ("sgd", "fp32", 4),  # the weights alone
    ],
)
def test_bytes_per_parameter_by_optimizer_and_precision(
    optimizer, precision, per_param
):
    size = training_checkpoint_bytes(preset("llama-3-8b"), optimizer, precision)
    assert size.total == per_param * LLAMA_3_8B


def test_write_time_is_size_over_bandwidth():
    # 14 x 8.03e9 = 112.4 GB at 10 GB/s: 11.24 s.
    size = training_checkpoint_bytes(preset("llama-3-8b")).total
    assert write_seconds(size, 10e9) == pytest.approx(11.2424, abs=1e-4)


def test_bad_input_names_the_argument():
    cfg = preset("llama-3-8b")
    with pytest.raises(ValueError, match="optimizer"):
        training_checkpoint_bytes(cfg, optimizer="lion")
    with pytest.raises(ValueError, match="precision"):
        training_checkpoint_bytes(cfg, precision="fp8")
    with pytest.raises(TypeError, match="cfg"):
        training_checkpoint_bytes("llama-3-8b")
    with pytest.raises(ValueError, match="weight_bytes"):
        inference_checkpoint_bytes(cfg, weight_bytes=0)
    with pytest.raises(ValueError, match="bandwidth"):
        write_seconds(1e9, 0)
    with pytest.raises(ValueError, match="n_bytes"):
        write_seconds(-1, 1e9)
