"""tools/launch/startup.py: no collection while a process imports, the survivors frozen after."""

import gc

import pytest

from pragma.tools.launch import startup


@pytest.fixture
def restore_gc():
    enabled = gc.isenabled()
    yield
    gc.unfreeze()  # this test process's objects back in the scanned generations
    (gc.enable if enabled else gc.disable)()


class Node:
    def __init__(self):
        self.me = self  # a cycle: only the collector frees it


def test_objects_made_while_importing_are_frozen_and_collection_resumes(restore_gc):
    gc.enable()
    before = gc.get_freeze_count()
    with startup.imports():
        assert not gc.isenabled()
        made = [Node() for _ in range(1000)]
    assert gc.isenabled()
    assert gc.get_freeze_count() >= before + len(made)
    del made
    assert gc.collect() < 1000  # frozen: a full collection does not even look at them


def test_the_collector_comes_back_when_an_import_fails(restore_gc):
    gc.enable()
    with pytest.raises(ImportError), startup.imports():
        import pragma_no_such_module  # noqa: F401
    assert gc.isenabled()


def test_a_process_that_ran_without_collection_keeps_it_off(restore_gc):
    gc.disable()
    with startup.imports():
        pass
    assert not gc.isenabled()
