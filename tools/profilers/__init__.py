"""Profilers: each is collect (run a tool) -> parse (text to metrics) -> render (metrics to prompt text).

Every metric is ``{"value": float, "unit": str, "source": str}``; a tool that cannot run yields
``{"status": "unavailable", "reason": ...}`` instead of zeros.
"""
