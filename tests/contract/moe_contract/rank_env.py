"""Imported first by the ranks' fork server (launcher.PRELOAD), never by the test process itself.

vLLM reads its logging level when it is imported, and the server imports vLLM once for every rank
it forks: the ranks' setting has to be in place before that import, and only in the server (the
test process and the subprocesses other tests start keep the environment they were given).
"""

import os

os.environ.setdefault("VLLM_LOGGING_LEVEL", "ERROR")
