"""The package keeps the datasheet table where every chapter imports it from."""

import aiinfra.hardware
import pytest
from aiinfra.hardware import specs


def test_package_reexports_the_one_table_of_specs():
    assert aiinfra.hardware.GPUS is specs.GPUS
    assert aiinfra.hardware.Gpu is specs.Gpu


def test_h100_ridge_point_is_295_flop_per_byte():
    # Williams, Waterman & Patterson 2009 roofline; H100 SXM datasheet: 989 TFLOP/s
    # dense BF16 over 3.35 TB/s is about 295 FLOP/byte.
    assert aiinfra.hardware.GPUS["H100"].ridge == pytest.approx(295, abs=0.5)
