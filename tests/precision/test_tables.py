"""The book's mixed-precision tables: the scaler trace and the master-weight demo."""

from aiinfra.precision.tables import loss_scale_trace, master_weights_table


def test_trace_shows_our_scaler_and_gradscaler_in_lockstep():
    table = loss_scale_trace()
    for _, grad, ours, theirs, scale, ref_scale in table.rows:
        assert ours == theirs == ("skipped" if grad == "inf" else "yes")
        assert scale == ref_scale


def test_master_weights_table_loses_updates_only_without_masters():
    for _, _, without, with_master, exact in master_weights_table().rows:
        assert without == "1"
        assert with_master == exact
