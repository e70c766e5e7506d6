"""Inside the trust boundary's untrusted side: modules that run in a process holding candidate code.

``runner`` (the loop a forked runner process serves), ``guards`` (runtime checks inside that
process; advisory, since the candidate owns it). Nothing here decides a verdict: the judge
(``pragma.tools.judging.judge``) does, and ``tests/test_boundary.py`` fails if a judging module imports
anything from this package.
"""
