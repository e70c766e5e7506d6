"""pragma.knowledge"""
