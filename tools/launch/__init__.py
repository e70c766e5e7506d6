"""What launches and confines processes: the sandbox (namespaces, rlimits, environment), the
pre-started judge (zygote), the runners' fork (spawn), Landlock and seccomp, and the machine's
timing slot. The launcher imports the inside folder only where a forked child becomes a runner
(``spawn``); ``tests/test_boundary.py`` names that edge."""
