"""What judges: modules that decide verdicts and hold seeds and reference outputs.

They run in the judge's process (or the launcher's) and never import candidate-side code
(``pragma.tools.inside``): ``tests/test_boundary.py`` derives this folder's modules from its files
and fails on any import of the inside folder.
"""
