"""pragma.tools"""
