import os
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
CAPTURE = os.path.dirname(HERE)
sys.path.insert(0, CAPTURE)  # test the package in place, installed or not
sys.path.insert(0, HERE)

torch = pytest.importorskip("torch", reason="torch is not importable (on Debian: apt-get install python3-torch)")

from zflow_capture import hooks  # noqa: E402


@pytest.fixture(params=["hooks", "wrap"])
def hook_mode(request, monkeypatch):
    """Run a test with each way of seeing kwargs: torch>=2 hooks, and the forward wrapper."""
    if request.param == "hooks" and not hooks._hooks_take_kwargs():
        pytest.skip(f"torch {torch.__version__} hooks lack with_kwargs and always_call (torch >= 2.1 does)")
    monkeypatch.setattr(hooks, "KWARGS_HOOKS", request.param == "hooks")
    return request.param
