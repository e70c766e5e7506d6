"""pragma.graph"""
