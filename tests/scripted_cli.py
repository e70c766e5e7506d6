"""Run the real ``pragma`` CLI in this process with the scripted chat model installed.

Usage: python tests/scripted_cli.py SCRIPT.json pragma-args...
"""

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

import scripted  # noqa: E402

import pragma.nodes.llm as llm  # noqa: E402
from pragma.graph.cli import main  # noqa: E402

if __name__ == "__main__":
    llm.load_chat_model = scripted.loader_for(json.loads(Path(sys.argv[1]).read_text()))
    sys.argv = ["pragma", *sys.argv[2:]]
    main()
