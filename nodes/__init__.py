"""pragma.nodes"""
