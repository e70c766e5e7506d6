"""The wire: what crosses a process boundary, typed; neither judging nor candidate-side code.

``verification``: the verifier's request (launcher -> judge) and result (judge -> verifier ->
graph state). ``protocol``: the judge <-> runner messages. ``shm``: the shared-memory tensor
regions they point to. ``tensors``: the output helpers both sides use (``tensors_of``,
``bitwise_equal``). Neutral: both sides import these modules; they import no judging or inside code.
"""
