import pytest
import torch


@pytest.fixture(autouse=True)
def _one_cpu_thread():
    """Unit tests use tiny models: one CPU thread is as fast for them and immune to a busy machine."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)
