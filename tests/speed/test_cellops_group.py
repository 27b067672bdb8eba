"""The whole step of a cell group (graph-safe: augmentation, batched forward,
every member's loss, backward, SGD), counted on the meta device by
bench.speed.cellops --group: a method's seeds add no kernel (their losses are
one vmapped call, bench.train.seedloss), and a member of another method adds
at most 25 (its own loss forward and backward)."""
import pytest

from bench.speed.cellops import group_step_ops

MAX_PER_MEMBER = 25


@pytest.mark.parametrize("method", ["sl1h", "4hml", "mixup"])
def test_seeds_of_one_method_add_no_kernel(method):
    counts = [group_step_ops("smallcnn", n, 16, 2, (method,)) for n in (2, 5, 10)]
    assert counts[0] == counts[1] == counts[2]


def test_members_of_other_methods_add_at_most_their_losses():
    names = ("sl1h", "ls", "mbls", "mixup", "dca")
    two, five, ten = (group_step_ops("smallcnn", n, 16, 2, names, interleave=True)
                      for n in (2, 5, 10))
    assert two < five < ten  # every member's own loss is counted
    assert five - two <= 3 * MAX_PER_MEMBER and ten - five <= 5 * MAX_PER_MEMBER
