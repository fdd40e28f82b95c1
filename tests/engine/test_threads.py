"""How many threads one forward pass may use on the CPU."""
import pytest
import torch

from engine import ModelLoadError
from engine.model import cpu_threads, load_model


def test_threads_default_to_half_the_cores(monkeypatch):
    monkeypatch.delenv("DECODESCOPE_THREADS", raising=False)
    for cores, threads in ((1, 1), (2, 1), (4, 2), (16, 8), (None, 1)):
        monkeypatch.setattr("os.cpu_count", lambda cores=cores: cores)
        assert cpu_threads() == threads


def test_threads_setting_wins_and_is_checked(monkeypatch):
    monkeypatch.setenv("DECODESCOPE_THREADS", "3")
    assert cpu_threads() == 3
    monkeypatch.setenv("DECODESCOPE_THREADS", "0")
    assert cpu_threads() == 1
    monkeypatch.setenv("DECODESCOPE_THREADS", "many")
    with pytest.raises(ModelLoadError, match="DECODESCOPE_THREADS"):
        cpu_threads()


@pytest.mark.bundled
def test_loading_a_model_sets_the_threads(monkeypatch):
    before = torch.get_num_threads()
    monkeypatch.setenv("DECODESCOPE_THREADS", "1")
    try:
        load_model()
        assert torch.get_num_threads() == 1
    finally:
        torch.set_num_threads(before)
