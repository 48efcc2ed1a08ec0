"""Code that checks PyTorch warns or raises misbehaves on purpose: no rule reports inside it."""

from tests.helpers import findings

WARNING_TEST = """
class TestScheduler(TestCase):
    def test_scheduler_before_optimizer_warns(self):
        def call_sch_before_optim():
            scheduler = StepLR(self.optimizer, gamma=0.1, step_size=3)
            scheduler.step()
            self.optimizer.step()

        self.assertWarnsRegex(UserWarning, r"how-to-adjust", call_sch_before_optim)
"""

RAISES_TEST = """
import pytest

def test_second_backward_raises(model, data, optimizer):
    total = 0
    for x in data:
        optimizer.zero_grad()
        total = total + model(x)
        with pytest.raises(RuntimeError, match="second time"):
            total.backward()
        optimizer.step()
"""


def test_function_handed_to_assert_warns_is_not_reported():
    assert findings(WARNING_TEST, "TL011") == []
    # the same function, not handed to assertWarnsRegex, is
    assert findings(WARNING_TEST.replace("self.assertWarnsRegex(UserWarning, r\"how-to-adjust\", ",
                                         "run("), "TL011") == [(6, 13)]


def test_with_pytest_raises_is_not_reported():
    assert findings(RAISES_TEST, "TL001") == []
    assert findings(RAISES_TEST.replace("with pytest.raises(RuntimeError, match=\"second time\"):",
                                        "if True:"), "TL001") == [(10, 13)]
