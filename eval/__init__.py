"""pragma.eval"""
