"""The untrusted side of the trust boundary: modules that run in a process holding candidate code.

The judge's runners: ``runner`` (the loop a forked runner process serves) and ``guards`` (runtime
checks inside that process; advisory, since the candidate owns it). The profiler's, the probe's and
the prebuild's one-process worker: ``worker``, ``region`` (the profiled region), ``gpu_worker`` and
``gpu_timing`` (Triton and CUDA). Shared by both: ``loading`` (importing the problem and an
implementation) and ``cext`` (the fast C++ path candidates import as ``pragma_cext``).

Nothing here decides a verdict: the judge (``pragma.tools.judging``) does. ``tests/test_boundary.py``
fails if a judging module reaches this package or a module here reaches judging code.
"""
