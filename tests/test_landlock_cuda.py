"""What a CUDA process may write under Landlock (tools/launch/landlock.py): its device nodes and its own
/proc/self (cuInit failed with error 304 without it on an H100, Landlock ABI 7), and how the judge's
layer, whose runners do the writing, widens /proc/self to /proc so each runner's own layer decides.
Pure functions here; the CUDA init itself was checked on a GPU machine (docs/gpu.md)."""

from pragma.tools.launch import landlock


def test_cuda_needs_its_own_proc_entries_and_nothing_on_cpu():
    assert landlock.device_writable("cpu") == []
    cuda = landlock.device_writable("cuda")
    assert cuda[-1] == "/proc/self" and "/proc" not in cuda
    assert all(p.startswith("/dev/") for p in cuda[:-1])


def test_a_layer_for_forked_writers_allows_proc_and_nothing_else_changes():
    runner = ["/tmp/work", "/dev/nvidia0", "/proc/self"]
    assert landlock.for_children(runner) == ["/tmp/work", "/dev/nvidia0", "/proc"]
    assert landlock.for_children(["/tmp/work"]) == ["/tmp/work"]  # CPU: the same list for both layers
