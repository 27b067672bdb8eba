"""bench.sweep.grid.native_test_size: the size `bench data shift` builds at
when no --size is given, the one a run at the dataset's default size tests at."""
from bench.sweep.grid import load_bundle, native_test_size


def test_digits_tests_at_its_own_32_px():
    # scikit-learn's 8 px digits, which the adapter serves at 32 px (its description)
    assert native_test_size("digits", None, ()) == 32
    assert load_bundle("digits", 32, None, ()).test.images.shape[1] == 32
