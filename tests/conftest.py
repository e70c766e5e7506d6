import json
import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).parent))
EXAMPLES = ROOT / "eval" / "suites" / "examples"
CANDIDATES = Path(__file__).parent / "data" / "candidates"
# Short timing keeps the suite fast; measurement precision is the benchmark's business.
FAST_SETTINGS = {
    "PRAGMA_TIMED_CALLS": "10",
    "PRAGMA_WARMUP_CALLS": "2",
    "PRAGMA_PROFILE_CALLS": "5",
    # Never start the embedded model by accident (it is installed on dev machines).
    "PRAGMA_LOCAL_MODEL": "off",
}


@pytest.fixture(autouse=True)
def isolated_data_dir(tmp_path_factory, monkeypatch):
    """Each test gets its own data dir (checkpoints, registry); builds are shared to save compiles."""
    data = tmp_path_factory.mktemp("pragma-data")
    monkeypatch.setenv("PRAGMA_DATA_DIR", str(data))
    for k, v in FAST_SETTINGS.items():
        monkeypatch.setenv(k, v)
    for k in ("PRAGMA_CODER_MODEL", "PRAGMA_CONDUCTOR_MODEL", "PRAGMA_LLM_BASE_URL", "OPENAI_API_KEY"):
        monkeypatch.delenv(k, raising=False)
    return data


def pragma_env(data_dir: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()}
    env.update(PRAGMA_DATA_DIR=str(data_dir), **FAST_SETTINGS, **extra)
    return env


def write_script(tmp_path: Path, script: dict) -> Path:
    path = tmp_path / "script.json"
    path.write_text(json.dumps(script))
    return path
